"""``kind: python``: a user's function as a scorer, with a time limit and its failures kept to its own score.

The callable comes from ``function: "package.module:callable"`` or from ``entry_point: NAME`` in the entry-point
group ``vigil.scorers`` (a team ships its scorers as a package: ``[project.entry-points."vigil.scorers"]``). It is
imported when the scorer is built (``vigil config check`` builds it: an import error names the scorer). It is called
as ``fn(turn, **params)`` with the validated ``Turn`` and returns a float in [0, 1], a bool, ``(score, reason)``,
``NotApplicable("reason")`` (``vigil.schemas``: the scorer does not apply to this turn; *unscored*, labelled
``not_applicable``), or a ``ScoreResult``. An ``async def`` is awaited on the worker's loop (it must not block);
any other callable runs on a small thread pool of the scorer's own, so it never blocks the judge calls around it.

Whatever the function does, only its own score pays: an exception is *failed* ``function_error`` with the exception's
message as the reason; no answer within ``timeout_s`` of starting is *failed* ``timeout``; a value outside [0, 1]
(or of another type) is *failed* ``invalid_score``. Calls run ``concurrency`` at once (``vigil.worker.scorers.
isolation``); more wait in line, their limit starting when they start. On threads (the default) a call past its limit
cannot be killed: it keeps its thread until it returns, and only while every thread is held that way does a call fail
at once (``busy``, naming the hung calls). With ``isolation: process`` each call runs in one of ``concurrency``
spawned processes, each limited to ``memory_mb`` of address space: a call past its limit is killed (``timeout``), one
over its memory is *failed* ``memory``, and either way its process is replaced, so a function that holds the GIL or
allocates without end costs its own score and nothing else. There the function, its params and its return value
cross a process boundary: they must import and pickle.
For an entry point, the version adds its distribution's version, so upgrading the package starts a new series.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import math
from typing import Any

from pydantic import PrivateAttr
from vigil.schemas import NotApplicable, ScoreResult, ScoreStatus, Turn
from vigil.schemas.user_scorers import PythonSpec
from vigil.worker.redact import redact
from vigil.worker.scorers.base import DoesNotApply, ScorerFailed, ScoreRun
from vigil.worker.scorers.isolation import (
    Busy,
    CallFailed,
    Died,
    OverMemory,
    Overrun,
    ProcessLane,
    ThreadLane,
)
from vigil.worker.scorers.user import FAIL, PASS, UserScorer
from vigil.worker.scorers.user_function import in_process, load_function

__all__ = ["FunctionScorer"]


class FunctionScorer(UserScorer):
    spec: PythonSpec
    _fn: Any = PrivateAttr()
    _extra: tuple[str, ...] = PrivateAttr(default=())
    _lane: ThreadLane | ProcessLane | None = PrivateAttr(default=None)

    def model_post_init(self, context: Any, /) -> None:
        self._fn, self._extra = load_function(self.spec)
        super().model_post_init(context)

    def _version_extra(self) -> tuple[str, ...]:
        return self._extra

    async def _score(self, turn: Turn, run: ScoreRun) -> ScoreResult:
        limit = self.spec.timeout_s
        try:
            value = await self._call(turn, limit)
        except (TimeoutError, Overrun) as exc:
            said = str(exc) or f"did not return within {limit:g} s"
            raise ScorerFailed("timeout", f"{self._source} {said} (timeout_s)") from None
        except Busy as exc:
            raise ScorerFailed("busy", f"{self._source}: {exc}") from None
        except OverMemory as exc:
            raise ScorerFailed("memory", f"{self._source} {exc}") from None
        except Died as exc:
            raise ScorerFailed("died", f"{self._source}: {exc}") from None
        except CallFailed as exc:
            raise ScorerFailed("function_error", redact(str(exc))[:2000]) from None
        except ScorerFailed:
            raise
        except Exception as exc:  # noqa: BLE001 (the user's code: any exception fails this score only)
            raise ScorerFailed("function_error", redact(f"{type(exc).__name__}: {exc}")[:2000]) from None
        return self._result(run, value)

    @property
    def _source(self) -> str:
        return self.spec.function or f"entry point {self.spec.entry_point}"

    async def _call(self, turn: Turn, limit: float) -> Any:
        spec = self.spec
        if spec.isolation == "process":
            if self._lane is None:
                self._lane = ProcessLane(spec.concurrency, functools.partial(in_process, spec.model_dump_json()),
                                         spec.memory_mb * 2**20)
            return await self._lane.call(limit, turn.model_dump_json())
        if inspect.iscoroutinefunction(self._fn):
            return await asyncio.wait_for(self._fn(turn, **spec.params), limit)
        if self._lane is None:
            self._lane = ThreadLane(spec.concurrency, f"vigil-scorer-{self.name}")
        return await self._lane.call(limit, self._fn, turn, label=f"trace {turn.trace_id}", **spec.params)

    def _result(self, run: ScoreRun, value: Any) -> ScoreResult:
        """What the function returned, as this scorer's result."""
        if isinstance(value, NotApplicable):
            run.note("function", {"not_applicable": value.reason})
            raise DoesNotApply(str(value.reason))
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
                                        "(score, reason), NotApplicable(reason) or a ScoreResult")
