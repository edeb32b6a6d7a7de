"""What installing vigil's agent-side SDK adds to an agent's environment, against the Langfuse and Opik SDKs.

Each SDK is installed with plain ``pip install`` (its dependencies resolved from the package index or pip's cache)
into a throwaway virtualenv of its own; the table reports the on-disk size of everything the install added
(the venv's site-packages minus an empty venv's) and how many distributions came with it. vigil-sdk is built from
this repository (``producers/sdk-dist``). Needs the package index, or a pip cache that already holds the wheels.

    .venv/bin/python bench/sdk_size.py [--json] [vigil-sdk langfuse opik ...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
TARGETS = {"vigil-sdk": str(ROOT / "producers" / "sdk-dist"), "langfuse": "langfuse", "opik": "opik"}


def _site_packages(venv: Path) -> Path:
    return next((venv / "lib").glob("python3*/site-packages"))


def _bytes(path: Path) -> int:
    """Disk usage in bytes (``du``: allocated blocks, what the install costs on disk)."""
    return int(subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True, check=True).stdout.split()[0]) * 1024


def _distributions(venv: Path) -> list[str]:
    out = subprocess.run([str(venv / "bin" / "pip"), "list", "--format=json", "--disable-pip-version-check"],
                         capture_output=True, text=True, check=True).stdout
    return sorted(p["name"] for p in json.loads(out))


def measure(name: str, spec: str | None, root: Path) -> dict:
    venv = root / name
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    if spec is not None:
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", spec],
                       check=True, env={**os.environ, "PIP_NO_INPUT": "1"})
    return {"name": name, "bytes": _bytes(_site_packages(venv)), "distributions": _distributions(venv)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("targets", nargs="*", default=list(TARGETS))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="vigil-sdk-size-") as tmp:
        empty = measure("empty", None, Path(tmp))
        rows = [measure(name, TARGETS.get(name, name), Path(tmp)) for name in args.targets]
    base = set(empty["distributions"])
    results = [{"sdk": r["name"], "added_mb": round((r["bytes"] - empty["bytes"]) / 2**20, 1),
                "distributions": len(set(r["distributions"]) - base),
                "largest": r["distributions"]} for r in rows]
    if args.json:
        print(json.dumps([{k: v for k, v in r.items() if k != "largest"} for r in results], indent=2))
        return
    table = Table(title="Installed size of each SDK in a fresh virtualenv (site-packages minus an empty venv's)")
    for column in ("SDK", "added on disk", "distributions added", "× vigil-sdk"):
        table.add_column(column, justify="left" if column == "SDK" else "right")
    reference = next((r["added_mb"] for r in results if r["sdk"] == "vigil-sdk"), None)
    for r in results:
        ratio = f"{r['added_mb'] / reference:.1f}" if reference else "—"
        table.add_row(r["sdk"], f"{r['added_mb']:.1f} MB", str(r["distributions"]), ratio)
    Console().print(table)
    print(f"python {sys.version.split()[0]}; empty venv site-packages {empty['bytes'] / 2**20:.1f} MB")


if __name__ == "__main__":
    main()
