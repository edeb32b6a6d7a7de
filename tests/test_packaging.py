"""Building the distribution: a clean `pip install -e .` prints no setuptools warning, and the data folders ship.

setuptools warns ("Package 'vigil.schemas.ddl' is absent from the `packages` configuration") for every folder that
holds package data and could be imported but is not listed as a package; setup.py lists every such folder. The
build here is setuptools' own ``build_py`` on the repository (the step of a wheel or editable build that collects
packages and data), with the setuptools the dev extra pins (what pip's isolated build would fetch is as new)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_build_warns_of_nothing_and_ships_every_data_folder(tmp_path):
    run = subprocess.run([sys.executable, "-W", "always", "setup.py", "build_py", "--build-lib", str(tmp_path)],
                         cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-3000:]
    assert "absent from" not in output, output[output.find("absent from") - 300:][:1500]
    assert "Warning" not in output, output[-3000:]
    built = tmp_path / "vigil"
    for data in ("schemas/ddl/0001_init.sql", "worker/review/static/review.js", "worker/demo/data/vigil.yaml",
                 "worker/demo/data/turns.jsonl", "worker/demo/data/docs/kb.jsonl"):
        assert (built / data).is_file(), f"{data} missing from the build"
    assert not (built / "producers" / "sdk-dist").exists(), "the SDK's own build folder is no package"
