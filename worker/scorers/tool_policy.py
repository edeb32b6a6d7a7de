"""Agent actions: ``kind: tool_policy``, rules over a turn's tool calls in call order. No judge call.

Rules (tool names are globs, as in ``fnmatch``):

- ``{require: NAME}``: a call of NAME happened;
- ``{forbid: GLOB}``: no call matches GLOB;
- ``{order: [A, B, ...]}``: whenever B is called, A was called before it (and C after a B, and so on);
- ``{max_calls: N}``: at most N calls (of ``tool: GLOB`` only, when given);
- ``{no_repeat: true}``: never the same tool with the same arguments twice;
- ``{no_errors: true}``: no call ended in an error.

Score 1.0 (``pass``) when every rule holds, else 0.0 (``fail``); the reason names each broken rule and the calls
that broke it (``#2 delete_account``, numbered from 1 in call order), and each rule is a step of its own. A turn with
no tool calls is scored too: ``require`` fails and the other rules hold. ``check`` is a pure function.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from fnmatch import fnmatchcase

from vigil.schemas import ScoreResult, ToolCall, Turn
from vigil.schemas.user_scorers import ToolPolicySpec, ToolRule
from vigil.worker.scorers.base import ScoreRun
from vigil.worker.scorers.user import FAIL, PASS, UserScorer

__all__ = ["Outcome", "ToolPolicy", "check"]


@dataclass(frozen=True)
class Outcome:
    rule: str  # as the config says it: "forbid delete_*"
    holds: bool
    calls: tuple[int, ...] = ()  # 0-based indices of the calls that broke it
    why: str = ""


def _named(calls: list[ToolCall], indices: list[int]) -> str:
    return ", ".join(f"#{i + 1} {calls[i].name}" for i in indices)


def _check_one(rule: ToolRule, calls: list[ToolCall]) -> Outcome:
    said, kind = rule.describe(), rule.kind
    if kind == "require":
        ok = any(fnmatchcase(c.name, rule.require or "") for c in calls)
        return Outcome(said, ok, why="" if ok else f"no call of {rule.require}")
    if kind == "forbid":
        bad = [i for i, c in enumerate(calls) if fnmatchcase(c.name, rule.forbid or "")]
        return Outcome(said, not bad, tuple(bad), f"called {_named(calls, bad)}" if bad else "")
    if kind == "order":
        bad = []
        for before, after in zip(rule.order or (), (rule.order or ())[1:], strict=False):
            seen = False
            for i, c in enumerate(calls):
                if fnmatchcase(c.name, after) and not seen:
                    bad.append(i)
                seen = seen or fnmatchcase(c.name, before)
        bad = sorted(set(bad))
        return Outcome(said, not bad, tuple(bad),
                       f"{_named(calls, bad)} came before any call it must follow" if bad else "")
    if kind == "max_calls":
        counted = [i for i, c in enumerate(calls) if rule.tool is None or fnmatchcase(c.name, rule.tool)]
        over = counted[rule.max_calls or 0:]
        return Outcome(said, not over, tuple(over), f"{len(counted)} calls, over the limit from {_named(calls, over[:1])}"
                       if over else "")
    if kind == "no_repeat":
        seen: dict[tuple[str, str], int] = {}
        bad = []
        for i, c in enumerate(calls):
            key = (c.name, json.dumps(c.arguments, sort_keys=True, default=str))
            if key in seen:
                bad.append(i)
            seen.setdefault(key, i)
        return Outcome(said, not bad, tuple(bad), f"{_named(calls, bad)} repeated an earlier call" if bad else "")
    bad = [i for i, c in enumerate(calls) if c.error is not None]  # no_errors
    return Outcome(said, not bad, tuple(bad), "; ".join(f"#{i + 1} {calls[i].name} failed: {calls[i].error}"[:200]
                                                        for i in bad))


def check(rules: list[ToolRule], calls: list[ToolCall]) -> list[Outcome]:
    """Each rule's outcome over the calls, in the rules' order."""
    return [_check_one(rule, calls) for rule in rules]


class ToolPolicy(UserScorer):
    spec: ToolPolicySpec

    async def _score(self, turn: Turn, run: ScoreRun) -> ScoreResult:
        outcomes = check(self.spec.rules, turn.tool_calls)
        for outcome in outcomes:
            run.note(outcome.rule, {"holds": outcome.holds, "calls": [i + 1 for i in outcome.calls],
                                    "why": outcome.why or None})
        broken = [o for o in outcomes if not o.holds]
        calls = len(turn.tool_calls)
        if not broken:
            return run.scored(1.0, f"all {len(outcomes)} rules hold over {calls} tool calls", label=PASS)
        reason = "; ".join(f"{o.rule}: {o.why}" for o in broken)
        return run.scored(0.0, f"{len(broken)} of {len(outcomes)} rules broken over {calls} tool calls: {reason}",
                          label=FAIL)
