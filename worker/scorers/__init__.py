"""The scorers, by name. ``build_scorer(monitor, config)`` makes the one a monitor names: a built-in scorer
configured from the monitor's params, or one of the config's own ``scorers:`` (``worker.scorers.user``).

``SCORERS`` maps a scorer name to its class or to ``"module:Class"`` (imported on first use, so building one
scorer never imports the others). A scorer class is called as ``cls(**monitor.params)``, plus
``reason_mode=monitor.reason`` when its signature takes ``reason_mode``, and ``conversation=True`` for a monitor whose
target is a session.
"""

from __future__ import annotations

import importlib
import inspect
from typing import TYPE_CHECKING

from vigil.schemas import MonitorConfig, VigilConfig

if TYPE_CHECKING:  # a scorer process imports this package's light modules without the judge behind base
    from vigil.worker.scorers.base import Scorer

__all__ = ["SCORERS", "build_scorer", "scorer_class"]

SCORERS: dict[str, str | type[Scorer]] = {
    "answer_relevancy": "vigil.worker.scorers.answer_relevancy:AnswerRelevancy",
    "context_relevance": "vigil.worker.scorers.context_relevance:ContextRelevance",
    "prompt_alignment": "vigil.worker.scorers.prompt_alignment:PromptAlignment",
    "rag_correctness": "vigil.worker.scorers.rag_correctness:RagCorrectness",
    "multi_turn": "vigil.worker.scorers.multi_turn:MultiTurn",
    "trajectory": "vigil.worker.scorers.trajectory:Trajectory",
}


def scorer_class(name: str) -> type[Scorer]:
    """The class registered as ``name``, imported if need be."""
    try:
        entry = SCORERS[name]
    except KeyError:
        raise ValueError(f"unknown scorer {name!r} (known: {', '.join(sorted(SCORERS))})") from None
    if isinstance(entry, str):
        module, _, attr = entry.partition(":")
        entry = SCORERS[name] = getattr(importlib.import_module(module), attr)
    return entry


def build_scorer(monitor: MonitorConfig, config: VigilConfig | None = None) -> Scorer:
    """The scorer ``monitor`` names, its params as config (a user scorer: its definition in ``config``); a
    ValueError names the monitor and the bad param, or the user scorer and what is wrong with it."""
    spec = config.user_scorer(monitor.scorer) if config is not None and monitor.scorer not in SCORERS else None
    if spec is not None:
        from vigil.worker.scorers.user import build_user_scorer

        return build_user_scorer(spec, reason_mode=monitor.reason)
    cls = scorer_class(monitor.scorer)
    params = dict(monitor.params)
    if "reason_mode" in params:
        raise ValueError(f"monitor {monitor.name!r}: set the reason mode with the monitor's `reason`, "
                         "not params.reason_mode")
    if "reason_mode" in inspect.signature(cls).parameters:
        params["reason_mode"] = monitor.reason
    if monitor.target == "session":  # the scorer reads a whole conversation (config allows session scorers only)
        params["conversation"] = True
    try:
        return cls(**params)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"monitor {monitor.name!r} ({monitor.scorer}): {exc}") from exc
