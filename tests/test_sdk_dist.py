"""vigil-sdk, the agent-side distribution (producers/sdk-dist): it builds from this repository, installs into a fresh
virtualenv with its dependencies resolved by pip (from the package index or pip's cache: no ``--no-deps``), imports
as ``vigil.sdk`` next to an application that has its own ``schemas`` and ``producers`` modules, and ships turns into
a real Redis. Installing needs the package index (or a warm pip cache); without either this test fails."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from vigil.schemas import Turn

from tests.test_sdk import turns

ROOT = Path(__file__).resolve().parent.parent
DIST = ROOT / "producers" / "sdk-dist"

APP = '''
"""A user's agent: its own schemas.py and producers.py sit on sys.path first, as in a FastAPI project."""
import sys

import schemas, producers
from vigil.sdk import DropReason, Monitor

assert schemas.APP_OWNED and producers.APP_OWNED  # the application's modules, untouched by the SDK

monitor = Monitor(sys.argv[1], agent="toy-agent", project="toy", flush_interval=3600, home=sys.argv[2])

@monitor.trace()
def answer(question: str) -> dict:
    return {"content": f"echo: {question}"}

answer("first question")
monitor.capture(input="second question", output="second answer", metadata={"release": 2})
monitor.capture(output="no input")  # refused here, not dead-lettered by the worker
ok = monitor.flush(timeout=30)
counters = monitor.counters()
print(ok, counters.shipped, dict(counters.dropped))
'''


def pip(venv: Path, *args: str, timeout: float) -> subprocess.CompletedProcess:
    """``pip ARGS`` acting on ``venv``: this environment's pip told which Python to install for (``pip --python``).
    The venv is made without a pip of its own: bootstrapping one (ensurepip) cost ~4 CPU-s of the test's ~14 and
    gave an older pip than this one, which the SDK's users would not run either."""
    return subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"),
                           "--disable-pip-version-check", *args], check=False, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def sdk_venv(tmp_path_factory) -> Path:
    venv = tmp_path_factory.mktemp("sdk-venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    install = pip(venv, "install", str(DIST), timeout=900)
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    return venv


def test_the_wheel_holds_only_the_namespaced_sdk(sdk_venv):
    """The wheel ``pip install ./producers/sdk-dist`` built and installed: its files are the installed distribution's
    RECORD (one build for the module, not a second ``pip wheel`` of the same source: ~2.9 CPU-s)."""
    [dist_info] = next((sdk_venv / "lib").glob("python3*/site-packages")).glob("vigil_sdk-*.dist-info")
    site = dist_info.parent
    names = [line.rsplit(",", 2)[0] for line in (dist_info / "RECORD").read_text().splitlines() if line]
    packages = {name.rsplit("/", 1)[0] for name in names if name.endswith(".py")}
    assert packages == {"vigil/sdk", "vigil/schemas", "vigil/schemas/conventions"}
    assert "vigil/__init__.py" not in names  # a namespace: other vigil.* distributions can share it
    for name in (n for n in names if n.endswith(".py")):
        source = (site / name).read_text()
        assert not any(line.lstrip().startswith(("from producers", "import producers", "from schemas",
                                                 "import schemas")) for line in source.splitlines()), name


def test_the_sdk_installs_alone_without_the_worker_store_or_scorers(sdk_venv):
    listed = pip(sdk_venv, "list", "--format=json", timeout=120)
    assert listed.returncode == 0, listed.stderr[-3000:]
    installed = {p["name"].lower() for p in json.loads(listed.stdout)}

    assert "vigil-sdk" in installed
    assert not installed & {"chdb", "clickhouse-connect", "scipy", "numpy", "openai", "bm25s", "vigil", "aiohttp",
                             "celery", "billiard"}
    site = next((sdk_venv / "lib").glob("python3*/site-packages"))
    assert not (site / "worker").exists() and not (site / "schemas").exists() and not (site / "producers").exists()


def test_an_app_with_its_own_schemas_and_producers_ships_turns_through_the_installed_sdk(sdk_venv, redis_url,
                                                                                         tmp_path):
    app = tmp_path / "app"
    app.mkdir()
    (app / "schemas.py").write_text("APP_OWNED = True  # e.g. the FastAPI models\n")
    (app / "producers.py").write_text("APP_OWNED = True\n")
    (app / "agent.py").write_text(textwrap.dedent(APP))

    run = subprocess.run([str(sdk_venv / "bin" / "python"), "agent.py", redis_url, str(tmp_path / "home")],
                         cwd=app, capture_output=True, text=True, timeout=120)

    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split("\n")[0] == "True 2 {<DropReason.INVALID: 'invalid'>: 1}"
    shipped = [Turn.model_validate(turn) for turn in turns(redis_url)]
    assert [(t.agent, t.question, t.output) for t in shipped] == [
        ("toy-agent", "first question", "echo: first question"), ("toy-agent", "second question", "second answer")]
    assert shipped[1].metadata == {"release": "2"}
