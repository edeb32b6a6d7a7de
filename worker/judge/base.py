"""What a scorer asks of a judge, and what it gets back.

A scorer never holds a prompt string or talks HTTP: it builds a ``JudgeRequest`` (the rendered prompt, the pydantic
model the answer must fit, and the structured inputs the prompt was rendered from) and awaits ``Judge.ask``.
An LLM judge sends the prompt; the offline baseline judge computes the same output model from ``inputs``.

Every request carries a ``CallContext``: who the call is for (monitor, scorer and version, trace id, origin). It is
built once where a score starts (the score task, ``vigil score``, the probe) and travels unchanged down to the
transport, where the limiter shares the judge fairly between monitors and the reply cache keys on the scorer
version, so a new prompt version is never answered from the old one's cache.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from pydantic import BaseModel
from vigil.schemas import JudgeCall, Origin

__all__ = ["NO_JUDGE", "CallContext", "Judge", "JudgeFailed", "JudgePaused", "JudgeReply", "JudgeRequest", "NoJudge",
           "OfflineHandler"]

OfflineHandler = Callable[[Mapping[str, Any]], dict[str, Any]]  # a step's inputs -> its output, without an LLM

T = TypeVar("T", bound=BaseModel)


@dataclass(frozen=True)
class CallContext:
    """Who a judge call is for. ``monitor`` is the limiter's fairness queue ("" shares one queue), ``scorer`` and
    ``scorer_version`` key the reply cache, ``trace_id`` is logged, ``origin`` says whose traffic the scored turn
    is (``live``; ``probe`` for the golden-set probe); a scorer that talks to the agent under test tags those calls
    with it (``follow_up`` for a live turn's follow-ups)."""

    monitor: str = ""
    scorer: str = ""
    scorer_version: str = ""
    trace_id: str = ""
    origin: Origin = "live"
    fresh_run: str = ""  # an anchor run's id: its calls key the reply cache apart, so a cached reply never hides a
    # judge that changed (``vigil.worker.alerts.anchors``)

    @property
    def cache_tag(self) -> str:
        """What the reply cache adds to its key: the scorer and its version ("" without a scorer), and the anchor
        run it is for."""
        tag = f"{self.scorer}@{self.scorer_version}" if self.scorer else ""
        return f"{tag}#{self.fresh_run}" if self.fresh_run else tag

    @property
    def agent_origin(self) -> Origin:
        """The origin a scorer's own calls to the agent carry: ``probe`` under the probe, else ``follow_up``."""
        return "probe" if self.origin == "probe" else "follow_up"


@dataclass(frozen=True)
class JudgeRequest(Generic[T]):
    step: str  # "<scorer>.<step>", e.g. "answer_relevancy.analyze"
    instructions: str  # the judge's system prompt
    prompt: str  # the rendered user prompt, trace text fenced inside it
    output_type: type[T]
    inputs: dict[str, Any] = field(default_factory=dict)  # what the prompt was rendered from
    context: CallContext = field(default_factory=CallContext)  # stamped by the scorer run (``ScoreRun.ask``)
    # How the offline baseline judge answers this step: the scorer's own heuristic over ``inputs`` (None: it has none).
    # The scorer that builds the request says it, so the judge layer knows no scorer's steps.
    offline: OfflineHandler | None = None


@dataclass
class JudgeReply(Generic[T]):
    """``output`` is None when the reply could not be parsed into ``output_type`` (then the score is unscored)."""

    output: T | None
    raw: str
    calls: list[JudgeCall] = field(default_factory=list)
    error: str | None = None  # why output is None


class JudgeFailed(Exception):
    """The judge could not answer (retries ran out, timeout, bad request): the score is *failed*."""

    def __init__(self, error_type: str, message: str = "", calls: list[JudgeCall] | None = None) -> None:
        super().__init__(message or error_type)
        self.error_type = error_type
        self.calls = calls or []


class JudgePaused(Exception):
    """The judge is paused (401/402/404): the work waits and is retried later, it does not fail."""

    def __init__(self, judge: str, reason: str) -> None:
        super().__init__(f"judge {judge!r} is paused: {reason}")
        self.judge = judge
        self.reason = reason


class Judge(Protocol):
    name: str
    model: str

    async def ask(self, request: JudgeRequest[T]) -> JudgeReply[T]: ...


class NoJudge:
    """The judge of a monitor whose scorer calls none (a regex, a JSON schema, a tool policy, a Python function):
    nameless, and a request to it is a bug in the scorer, which fails that score."""

    name = ""
    model = ""

    async def ask(self, request: JudgeRequest[T]) -> JudgeReply[T]:
        raise JudgeFailed("no_judge", f"step {request.step} asked for a judge, but its monitor names none")


NO_JUDGE = NoJudge()
