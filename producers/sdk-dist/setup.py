"""Build vigil-sdk from the repository's own producers/ and schemas/ (see pyproject.toml).

``producers`` becomes ``vigil.sdk`` and ``schemas`` becomes ``vigil.sdk.schemas``; while the modules are copied
into the build, their absolute imports of either package are rewritten to the namespaced names. Nothing else of
the repository (worker/, the DDL) is in the wheel.
"""

from __future__ import annotations

import re
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
PACKAGES = {"vigil.sdk": "..", "vigil.sdk.schemas": "../../schemas"}
RENAMES = {"producers": "vigil.sdk", "schemas": "vigil.sdk.schemas"}
_IMPORT = re.compile(r"^(\s*)(from|import)\s+(producers|schemas)\b", re.MULTILINE)


def namespaced(source: str) -> str:
    """``from producers.x import y`` -> ``from vigil.sdk.x import y``; ``import schemas`` likewise."""
    return _IMPORT.sub(lambda m: f"{m.group(1)}{m.group(2)} {RENAMES[m.group(3)]}", source)


class NamespacedBuild(build_py):
    def build_module(self, module, module_file, package):  # setuptools' signature
        outfile, copied = super().build_module(module, module_file, package)
        path = Path(outfile)
        path.write_text(namespaced(path.read_text(encoding="utf-8")), encoding="utf-8")
        return outfile, copied


setup(packages=list(PACKAGES), package_dir=PACKAGES, cmdclass={"build_py": NamespacedBuild})
