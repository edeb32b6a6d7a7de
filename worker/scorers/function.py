"""``kind: python``: a user's function as a scorer, with a time limit and its failures kept to its own score.

The callable comes from ``function: "package.module:callable"`` or from ``entry_point: NAME`` in the entry-point
group ``vigil.scorers`` (a team ships its scorers as a package: ``[project.entry-points."vigil.scorers"]``). It is
imported when the scorer is built (``vigil config check`` builds it: an import error names the scorer). It is called
as ``fn(turn, **params)`` with the validated ``Turn`` and returns a float in [0, 1], a bool, ``(score, reason)``, or
a ``ScoreResult``. An ``async def`` is awaited on the worker's loop (it must not block); any other callable runs on a
small thread pool of the scorer's own, so it never blocks the judge calls around it.

Whatever the function does, only its own score pays: an exception is *failed* ``function_error`` with the exception's
message as the reason; no answer within ``timeout_s`` is *failed* ``timeout``; a value outside [0, 1] (or of another
type) is *failed* ``invalid_score``. A thread cannot be killed: a call past its limit keeps its pool thread until it
returns, and while every thread of the pool is held that way the scorer fails at once (``busy``), never queueing.
The pool's threads are daemons, so a call that never returns cannot hold up the worker's exit.
For an entry point, the version adds its distribution's version, so upgrading the package starts a new series.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import math
import queue
import threading
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

from pydantic import PrivateAttr
from vigil.schemas import ScoreResult, ScoreStatus, Turn
from vigil.schemas.user_scorers import PythonSpec
from vigil.worker.redact import redact
from vigil.worker.scorers.base import ScorerFailed, ScoreRun
from vigil.worker.scorers.user import FAIL, PASS, UserScorer

__all__ = ["ENTRY_POINT_GROUP", "POOL_THREADS", "DaemonPool", "FunctionScorer", "load_function"]

ENTRY_POINT_GROUP = "vigil.scorers"
POOL_THREADS = 4  # per python scorer: calls in flight at once, and hung calls tolerated before failing fast


def load_function(spec: PythonSpec) -> tuple[Any, tuple[str, ...]]:
    """The callable and what it adds to the version; a ValueError says why it cannot be had."""
    if spec.entry_point is not None:
        found = entry_points(group=ENTRY_POINT_GROUP, name=spec.entry_point)
        if not found:
            known = sorted(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))
            raise ValueError(f"no entry point {spec.entry_point!r} in group {ENTRY_POINT_GROUP} "
                             f"(installed: {', '.join(known) or 'none'})")
        point = next(iter(found))
        try:
            fn = point.load()
        except Exception as exc:  # noqa: BLE001 (whatever the import raises is the config's problem to name)
            raise ValueError(f"entry point {spec.entry_point!r} ({point.value}) cannot be imported: "
                             f"{type(exc).__name__}: {exc}") from None
        dist = point.dist
        extra = (point.value, f"{dist.name}=={dist.version}" if dist is not None else "")
    else:
        module, _, attr = (spec.function or "").partition(":")
        try:
            fn = importlib.import_module(module)
            for part in attr.split("."):
                fn = getattr(fn, part)
        except Exception as exc:  # noqa: BLE001
            raise ValueError(f"function {spec.function!r} cannot be imported: {type(exc).__name__}: {exc}") from None
        extra = ()
    if not callable(fn):
        raise ValueError(f"{spec.function or spec.entry_point!r} is not callable")  # noqa: TRY004 (a config error)
    return fn, extra


class DaemonPool:
    """``size`` daemon threads running calls for an event loop; ``submit`` refuses (None) when every thread is busy,
    so calls stuck past their time limit never make later calls queue behind them. Threads start on first use."""

    def __init__(self, size: int, name: str) -> None:
        self.size, self.name = size, name
        self.busy = 0
        self._lock = threading.Lock()
        self._work: queue.SimpleQueue = queue.SimpleQueue()
        self._threads = 0

    def submit(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> asyncio.Future | None:
        loop = asyncio.get_running_loop()
        with self._lock:
            if self.busy >= self.size:
                return None
            self.busy += 1
            if self._threads < self.busy:
                self._threads += 1
                threading.Thread(target=self._serve, name=f"{self.name}-{self._threads}", daemon=True).start()
        future = loop.create_future()
        self._work.put((loop, future, fn, args, kwargs))
        return future

    def _serve(self) -> None:
        while True:
            loop, future, fn, args, kwargs = self._work.get()
            try:
                outcome, failed = fn(*args, **kwargs), False
            except BaseException as exc:  # noqa: BLE001 (handed to the awaiting scorer)
                outcome, failed = exc, True
            with self._lock:
                self.busy -= 1
            try:
                loop.call_soon_threadsafe(_settle, future, outcome, failed)
            except RuntimeError:  # the loop has closed: nobody waits for this answer any more
                pass


def _settle(future: asyncio.Future, outcome: Any, failed: bool) -> None:
    if future.done():  # the scorer stopped waiting (its time limit)
        return
    if failed:
        future.set_exception(outcome)
    else:
        future.set_result(outcome)


class FunctionScorer(UserScorer):
    spec: PythonSpec
    _fn: Any = PrivateAttr()
    _extra: tuple[str, ...] = PrivateAttr(default=())
    _pool: DaemonPool | None = PrivateAttr(default=None)

    def model_post_init(self, context: Any, /) -> None:
        self._fn, self._extra = load_function(self.spec)
        super().model_post_init(context)

    def _version_extra(self) -> tuple[str, ...]:
        return self._extra

    async def _score(self, turn: Turn, run: ScoreRun) -> ScoreResult:
        limit = self.spec.timeout_s
        try:
            value = await asyncio.wait_for(self._call(turn), limit)
        except TimeoutError:
            raise ScorerFailed("timeout", f"{self._source} did not return within {limit:g} s") from None
        except ScorerFailed:
            raise
        except Exception as exc:  # noqa: BLE001 (the user's code: any exception fails this score only)
            raise ScorerFailed("function_error", redact(f"{type(exc).__name__}: {exc}")[:2000]) from None
        return self._result(run, value)

    @property
    def _source(self) -> str:
        return self.spec.function or f"entry point {self.spec.entry_point}"

    async def _call(self, turn: Turn) -> Any:
        if inspect.iscoroutinefunction(self._fn):
            return await self._fn(turn, **self.spec.params)
        if self._pool is None:
            self._pool = DaemonPool(POOL_THREADS, f"vigil-scorer-{self.name}")
        future = self._pool.submit(self._fn, turn, **self.spec.params)
        if future is None:
            raise ScorerFailed("busy", f"{self._source}: all {POOL_THREADS} of its threads are still running "
                                       "earlier calls past their time limit")
        return await future

    def _result(self, run: ScoreRun, value: Any) -> ScoreResult:
        """What the function returned, as this scorer's result."""
        if isinstance(value, ScoreResult):
            if value.status is ScoreStatus.SCORED and value.score is not None:
                _unit(value.score, self._source)
            return value.model_copy(update={"run_id": run.run_id, "scorer": self.name, "scale": 1.0,
                                            "scorer_version": self.version, "judge_model": None})
        reason = None
        if isinstance(value, tuple) and len(value) == 2 and (value[1] is None or isinstance(value[1], str)):
            value, reason = value
        label = (PASS if value else FAIL) if isinstance(value, bool) else ""  # a number speaks for itself
        score = _unit(value, self._source)
        run.note("function", {"returned": score})
        return run.scored(score, reason, label=label)


def _unit(value: Any, source: str) -> float:
    """``value`` as a score in [0, 1] (a bool is 1 or 0); ``ScorerFailed`` ``invalid_score`` otherwise."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float) and math.isfinite(value) and 0.0 <= value <= 1.0:
        return float(value)
    shown = repr(value)[:80]
    if isinstance(value, int | float):
        raise ScorerFailed("invalid_score", f"{source} returned {shown}, outside [0, 1]")
    raise ScorerFailed("invalid_score", f"{source} returned {shown}: expected a float in [0, 1], a bool, "
                                        "(score, reason) or a ScoreResult")
