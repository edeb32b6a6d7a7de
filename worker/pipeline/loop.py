"""One asyncio event loop per worker process, on its own thread: every judge call of the process runs there.

Celery's thread pool hands each task to a thread; the thread submits its scorer coroutine here and waits. So the
async ``openai`` client and its connection pool are shared, and hundreds of judge calls can be in flight at once.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["run"]

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_pid: int | None = None


def _ensure_loop() -> asyncio.AbstractEventLoop:
    global _loop, _pid
    with _lock:
        if _loop is None or _pid != os.getpid():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="vigil-judge-loop", daemon=True).start()
            _loop, _pid = loop, os.getpid()
        return _loop


def run(coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Run a coroutine on the process's judge loop and wait for its result from this thread."""
    return asyncio.run_coroutine_threadsafe(coro, _ensure_loop()).result(timeout)
