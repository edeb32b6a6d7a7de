"""Where users' code runs, and what bounds it: a time limit per call that starts when the call starts, a queue when
every place is taken, and (in a process) a memory limit and a kill.

Two lanes, both awaited from the worker's event loop, which they never block:

- ``ThreadLane``: ``size`` daemon threads. A call waits in the lane's queue while every thread is running another
  call; its time limit starts when a thread takes it. A thread cannot be killed, so a call past its limit keeps its
  thread until it returns, and that call is *hung*. Only hung calls make the lane refuse: while every thread is held
  by one, a call fails at once with ``Busy``, whose reason names the hung calls (they would never let it start).
  The thread times each call too: native code that keeps the GIL keeps the loop from timing it, and a call that
  returns after its limit is ``Overrun`` all the same.
- ``ProcessLane``: ``size`` processes (spawned, one call at a time each), each under an address-space limit
  (``RLIMIT_AS``). A call past its time limit has its process killed (``Overrun``); one that runs out of memory, or
  whose process dies, is ``OverMemory`` / ``Died``; in every case the process is replaced before the next call, so
  code that holds the GIL or allocates without end costs its own call and nothing else.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Busy", "CallFailed", "Died", "OverMemory", "Overrun", "ProcessLane", "ThreadLane"]


class Overrun(Exception):
    """The call did not return within its time limit."""


class Busy(Exception):
    """Every thread is held by a call past its limit: the message names them."""


class OverMemory(Exception):
    """The call ran out of the memory its process may have."""


class Died(Exception):
    """The call's process ended without an answer (killed from outside, a crash in native code)."""


class CallFailed(Exception):
    """The function raised in its process: the message is its exception's type and text."""


def _settle(future: asyncio.Future, outcome: Any, failed: bool) -> None:
    if future.done():  # its caller stopped waiting (its time limit, a cancellation)
        return
    if failed:
        future.set_exception(outcome)
    else:
        future.set_result(outcome)


@dataclass(eq=False)
class _Job:
    loop: asyncio.AbstractEventLoop
    label: str
    call: Callable[[], Any]
    started: asyncio.Future
    done: asyncio.Future
    finished: bool = False
    hung: bool = False
    elapsed: float = 0.0  # seconds the call ran, measured on its thread


@dataclass(eq=False)
class ThreadLane:
    """``size`` daemon threads (started on first use) for one scorer's calls; see the module's docstring."""

    size: int
    name: str
    _lock: threading.Condition = field(default_factory=threading.Condition)
    _pending: deque[_Job] = field(default_factory=deque)
    _threads: int = 0
    _idle: int = 0
    _hung: list[_Job] = field(default_factory=list)

    @property
    def hung(self) -> int:
        return len(self._hung)

    async def call(self, limit: float, fn: Callable[..., Any], *args: Any, label: str = "", **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` on a thread, within ``limit`` seconds of starting: ``Overrun`` past it, ``Busy``
        while every thread is held by a hung call. ``label`` names the call in ``Busy`` (a trace id)."""
        loop = asyncio.get_running_loop()
        job = _Job(loop, label, lambda: fn(*args, **kwargs), loop.create_future(), loop.create_future())
        with self._lock:
            if len(self._hung) >= self.size:
                raise Busy(self._busy_reason(limit))
            self._pending.append(job)
            if self._idle < len(self._pending) and self._threads < self.size:
                self._threads += 1
                threading.Thread(target=self._serve, name=f"{self.name}-{self._threads}", daemon=True).start()
            self._lock.notify()
        try:
            await job.started  # waiting for a thread costs no part of the limit
        except asyncio.CancelledError:
            with self._lock:
                if job in self._pending:
                    self._pending.remove(job)
            raise
        try:
            outcome = await asyncio.wait_for(job.done, limit)
        except TimeoutError:
            self._hang(job, limit)
            raise Overrun(f"did not return within {limit:g} s") from None
        if job.elapsed > limit:  # native code that kept the GIL kept the loop from timing it: the thread did
            raise Overrun(f"did not return within {limit:g} s")
        return outcome

    def _hang(self, job: _Job, limit: float) -> None:
        with self._lock:
            if job.finished:
                return
            job.hung = True
            self._hung.append(job)
            stranded = list(self._pending) if len(self._hung) >= self.size else []
            if stranded:
                self._pending.clear()
            reason = self._busy_reason(limit)
        for waiting in stranded:  # nothing will ever start them
            waiting.loop.call_soon_threadsafe(_settle, waiting.started, Busy(reason), True)

    def _busy_reason(self, limit: float) -> str:
        hung = ", ".join(job.label or "?" for job in self._hung)
        return (f"all {self.size} of its threads are held by calls still running past their {limit:g} s limit "
                f"({hung}); this call was not started")

    def _serve(self) -> None:
        while True:
            with self._lock:
                while not self._pending:
                    self._idle += 1
                    self._lock.wait()
                    self._idle -= 1
                job = self._pending.popleft()
            job.loop.call_soon_threadsafe(_settle, job.started, None, False)
            started = time.monotonic()
            try:
                outcome, failed = job.call(), False
            except BaseException as exc:  # noqa: BLE001 (handed to the awaiting scorer)
                outcome, failed = exc, True
            with self._lock:
                job.elapsed = time.monotonic() - started
                job.finished = True
                if job.hung:
                    self._hung.remove(job)
            try:
                job.loop.call_soon_threadsafe(_settle, job.done, outcome, failed)
            except RuntimeError:  # the loop has closed: nobody waits for this answer any more
                pass


# -- processes --------------------------------------------------------------------------------------------------

Setup = Callable[[], Callable[[Any], Any]]  # run once in each new process: returns the function calls go to
START_S = 120.0  # how long a new process may take to import the function before the call fails


def _child(conn: Any, setup: Setup, memory_bytes: int) -> None:
    """A lane's process: build the function, limit the address space, say ``("ready", None)``, then answer calls
    until the pipe closes. Each answer is ``("ok", value)``, ``("error", text)`` or ``("memory", "")``."""
    import resource

    try:
        fn = setup()
    except BaseException as exc:  # noqa: BLE001 (said to the lane, which fails the call with it)
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    conn.send(("ready", None))
    while True:
        try:
            argument = conn.recv()
        except (EOFError, OSError):
            return
        try:
            answer: tuple[str, Any] = ("ok", fn(argument))
        except MemoryError:
            answer = ("memory", "")
        except BaseException as exc:  # noqa: BLE001 (the user's code: its failure is its answer)
            answer = ("error", f"{type(exc).__name__}: {exc}")
        try:
            conn.send(answer)
        except MemoryError:
            conn.send(("memory", ""))
        except Exception as exc:  # noqa: BLE001 (an answer that cannot be pickled)
            conn.send(("error", f"the value returned cannot be sent back: {type(exc).__name__}: {exc}"))
        if answer[0] == "memory":
            return  # after a MemoryError nothing in this process is to be trusted: the lane starts another


@dataclass(eq=False)
class _Process:
    process: Any
    conn: Any

    def kill(self) -> None:
        self.process.kill()
        self.conn.close()
        threading.Thread(target=self.process.join, daemon=True).start()  # reaped off the loop


@dataclass(eq=False)
class ProcessLane:
    """``size`` processes, each made by ``setup`` and limited to ``memory_bytes``; see the module's docstring."""

    size: int
    setup: Setup
    memory_bytes: int
    _idle: list[_Process] = field(default_factory=list)
    _running: int = 0
    _waiters: deque[asyncio.Future] = field(default_factory=deque)

    async def call(self, limit: float, argument: Any) -> Any:
        """The function applied to ``argument`` (pickled across), within ``limit`` seconds of starting; raises
        ``Overrun``, ``OverMemory``, ``Died``, or ``CallFailed`` with the function's own error."""
        child = await self._acquire()
        try:
            kind, value = await asyncio.wait_for(self._ask(child, argument), limit)
        except TimeoutError:
            child.kill()
            raise Overrun(f"did not return within {limit:g} s: its process was killed") from None
        except (EOFError, OSError):
            child.kill()
            raise Died(f"its process ended without an answer (exit code {child.process.exitcode})") from None
        except BaseException:
            child.kill()
            raise
        finally:
            self._running -= 1
            self._wake()
        if kind == "memory":
            child.kill()
            raise OverMemory(f"ran out of memory: over its {self.memory_bytes // 2**20} MB (memory_mb)")
        self._idle.append(child)
        self._wake()
        if kind == "error":
            raise CallFailed(value)
        return value

    async def _acquire(self) -> _Process:
        while self._running >= self.size:  # every process is busy: wait in line
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
        self._running += 1
        if self._idle:
            return self._idle.pop()
        try:
            return await asyncio.to_thread(self._spawn)
        except BaseException:
            self._running -= 1
            self._wake()
            raise

    def _wake(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _spawn(self) -> _Process:
        context = multiprocessing.get_context("spawn")  # never fork a process full of threads
        ours, theirs = context.Pipe()
        process = context.Process(target=_child, args=(theirs, self.setup, self.memory_bytes), daemon=True,
                                  name="vigil-scorer")
        process.start()
        theirs.close()
        child = _Process(process, ours)
        try:  # a new process imports the function before its first call: that is no part of the call's limit
            said, text = ours.recv() if ours.poll(START_S) else ("error", f"did not start within {START_S:g} s")
        except (EOFError, OSError):
            said, text = "error", f"its process ended while starting (exit code {process.exitcode})"
        if said != "ready":
            child.kill()
            raise CallFailed(text)
        return child

    @staticmethod
    async def _ask(child: _Process, argument: Any) -> tuple[str, Any]:
        loop = asyncio.get_running_loop()
        child.conn.send(argument)
        readable = loop.create_future()
        fd = child.conn.fileno()
        loop.add_reader(fd, lambda: readable.done() or readable.set_result(None))
        try:
            await readable
        finally:
            loop.remove_reader(fd)
        return child.conn.recv()

    def close(self) -> None:
        for child in self._idle:
            child.kill()
        self._idle.clear()
