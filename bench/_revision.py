"""vigil's code as it was at a git revision, for a benchmark that compares it with this checkout in the same run."""

from __future__ import annotations

import subprocess
from pathlib import Path


def tree_at(revision: str, into: Path) -> Path:
    """The ``schemas``, ``worker`` and ``producers`` folders as they were at git ``revision``, laid out as the
    ``vigil`` package under ``into`` (what a process with ``into`` first on its path imports as vigil)."""
    package = into / "vigil"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    archive = subprocess.run(["git", "archive", revision, "schemas", "worker", "producers"],
                             cwd=Path(__file__).resolve().parent.parent, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(package)], input=archive, check=True)
    return into
