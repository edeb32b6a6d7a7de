"""The trajectory judge: is the agent's answer backed by what its tools returned, and did the run do the task?

A reply-only judge reads the question and the answer; an agent that tells a customer "refunded" when the refund
call failed, or names an order status no tool returned, reads well. This scorer judges the run: one judge call over
a compact, fenced, size-budgeted rendering of it (``prompts.trajectory.render_run``: question, contexts, every tool
call as a numbered step with its arguments, result and error, the answer), asking whether every claim of the answer
is supported by the steps and contexts, whether the tools fit the request, and whether the task got done. The
reason names the step.

**Pre-check, no judge.** What needs no judge is checked first, and a finding scores without a call (score 0, the
reason naming the step). The evidence is the run's question, contexts, and its steps' arguments, results and errors.

- *An id* the answer names (letters and digits joined by a hyphen with at least three digits, ``40-123456``,
  ``BK-7781``, or a bare run of six or more digits) that the evidence does not hold, while a step holds an id of
  the same shape (each digit a 9, each letter an A): a contradiction by that step.
- *An amount* (a number with a currency sign or name, ``€42.50``, ``42.50 EUR``) that equals no number of the
  evidence, nor the sum or difference of two of its amounts, while a step's result holds an amount: a
  contradiction by that step.
- *A status* (a word of ``STATUSES``, by meaning: ``shipped`` and ``dispatched`` are one) the answer asserts, not
  negated or hedged nearby ("will be delivered"), when a step's result has a ``status`` or ``state`` field whose
  meaning differs and no step says the asserted one (the question does not count: it is what the user believed):
  a contradiction by that step.
- *An action* the answer says was done (``I've refunded``, ``has been cancelled``, ``your refund has been issued``;
  ``ACTIONS``) that no step did without error (a step's name holding the action's stem, ``refund`` for a refund)
  and that no result's status already says: a step that tried and failed contradicts it; no step at all leaves it
  unsupported.
- With no tool called at all, an id, amount or status the answer gives that neither the question nor the contexts
  hold: unsupported (a required lookup was skipped).

Its limits: it reads English surface forms (other languages go to the judge), it cannot check arithmetic beyond one
sum or difference, and a status or action phrased in words outside its lists goes to the judge.

**Score** (0-1 × ``scale``): 0 when a claim is contradicted or unsupported (the answer says what the run does not
back); otherwise ``(1 + tools_fit + task_done) / 3``. Labels: ``faithful run`` (1), ``grounded, one fault``,
``grounded, tools and task off``, ``unfaithful`` (0). A turn with an empty answer scores 0 without a call.

**Offline** (the baseline judge, no LLM): a claim is each sentence of the answer that states something (not a
question, greeting, apology or offer); it is supported when at least half of its content words are in the evidence; the tools
fit when a step ran or nothing needed one (no unsupported claim); the task is done unless the answer abstains.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from vigil.schemas import ScoreResult, Turn
from vigil.worker.judge import baseline
from vigil.worker.judge.base import JudgeRequest
from vigil.worker.scorers import base
from vigil.worker.scorers.base import ReasonedScorer, ScoreRun
from vigil.worker.scorers.formulas import Bands
from vigil.worker.scorers.prompts import trajectory as prompts

__all__ = ["ACTIONS", "STATUSES", "Finding", "Trajectory", "offline_verdict", "pre_check", "trajectory_score"]

# Status words by meaning: the first of each group names it.
STATUSES: tuple[tuple[str, ...], ...] = (
    ("shipped", "dispatched", "sent out", "in transit", "on its way", "on the way"), ("delivered",),
    ("cancelled", "canceled"), ("refunded",), ("pending", "processing", "being processed"), ("returned",),
    ("confirmed", "booked"), ("declined", "denied", "rejected"), ("approved",), ("delayed",), ("on hold",),
    ("out of stock", "sold out", "unavailable"), ("in stock", "available"), ("locked", "suspended"),
    ("failed",), ("paid",), ("unpaid", "overdue"), ("active",),
)
# Actions an answer can claim done: (name, the stems of tools that do it, the phrases that claim it).
ACTIONS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("refund", ("refund",), (r"refunded|issued (?:a |the |your |you a )?(?:full |partial )?refund|"
                            r"refund(?: of \S{1,12})? (?:has been|was|is) (?:issued|processed|on its way|made|sent)|processed (?:a |the |your )?refund")),
    ("cancellation", ("cancel",), r"cancel+ed|cancellation (?:has been|was|is) (?:done|processed|confirmed)"),
    ("booking", ("book", "reserve"), r"booked|reserved|booking (?:has been|was|is) (?:made|confirmed)"),
    ("message", ("send", "email", "notify", "message"), r"sent|emailed|e-mailed"),
    ("password reset", ("reset", "password"), r"reset (?:your |the )?password|password (?:has been|was) reset"),
    ("change", ("update", "change", "set", "modify", "edit"), r"updated|changed"),
    ("escalation", ("escalat", "ticket", "handoff", "transfer"), (r"escalated|opened (?:a |an )?(?:ticket|case)|"
                                                                 r"created (?:a |an )?(?:ticket|case)")),
)
# "I've refunded", "has been refunded", or a phrase of more than one word ("your refund has been issued")
_DONE = (r"(?i)\b(?:i|we)(?:'ve| have)?(?: just| now| already| successfully| gone ahead and)? (?P<a>{a})\b"
         r"|\b(?:has|have) been (?:successfully )?(?P<b>{a})\b|\b(?P<c>{a})\b")
_CLAIMS = {name: re.compile(_DONE.format(a=phrases)) for name, _, phrases in ACTIONS}
_ID = re.compile(r"(?<![\w.])(?:[A-Za-z]{1,6}-?\d[\w-]*\d|\d{2,}-\d{3,}(?:-\d+)*|\d{6,})(?![\w])")
_AMOUNT = re.compile(r"(?i)(?:[€$£]\s?(?P<a>\d[\d,]*(?:\.\d+)?))|(?:(?P<b>\d[\d,]*(?:\.\d+)?)\s?(?:eur|euros?|usd|"
                     r"dollars?|gbp|pounds?)\b)")
_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
_NEGATION = re.compile(r"(?i)\b(?:not|no|never|isn't|wasn't|hasn't|haven't|hasn't|didn't|couldn't|cannot|can't|"
                       r"won't|unable|yet to|failed to)\b")
_HEDGE = re.compile(r"(?i)\b(?:will|should|would|could|may|might|expected|expect|once|when|until|after|before|if|"
                    r"to be|estimated|usually|typically)\b")
_STATUS_KEYS = ("status", "state", "order_status", "booking_status")
_MONEY_KEYS = ("amount", "total", "price", "refund_amount", "balance", "fare", "cost", "fee")


@dataclass(frozen=True)
class Finding:
    """What the pre-check found: ``verdict`` ``contradicted`` or ``unsupported``, the step (1-based, or None) and
    what is wrong, in words for people."""

    verdict: str
    step: int | None
    what: str


def _evidence(turn: Turn) -> list[tuple[int | None, str]]:
    """The run's texts with the step they come from (None: the question or a context)."""
    texts: list[tuple[int | None, str]] = [(None, turn.question)]
    texts += [(None, d.text) for d in turn.contexts]
    for n, call in enumerate(turn.tool_calls, 1):
        texts += [(n, json.dumps(call.arguments, ensure_ascii=False)), (n, call.result or ""), (n, call.error or "")]
    return texts


def _ids(text: str) -> list[str]:
    return [t for t in _ID.findall(text) if sum(c.isdigit() for c in t) >= 3]


def _shape(token: str) -> str:
    return re.sub(r"[A-Za-z]", "A", re.sub(r"\d", "9", token)).upper()


def _amounts(text: str) -> list[float]:
    return [float((m.group("a") or m.group("b")).replace(",", "")) for m in _AMOUNT.finditer(text)]


def _numbers(text: str) -> set[float]:
    out = set()
    for n in _NUMBER.findall(text):
        try:
            out.add(float(n.replace(",", "")))
        except ValueError:
            pass
    return out


def _status_group(word: str) -> str | None:
    word = word.lower()
    return next((group[0] for group in STATUSES if word in group), None)


_STATUS_WORD = re.compile(r"(?i)\b(" + "|".join(sorted((w for g in STATUSES for w in g), key=len, reverse=True))
                          + r")\b")


def _negated(text: str, start: int) -> bool:
    return bool(_NEGATION.search(text[max(0, start - 30):start]))


def _asserted_statuses(answer: str) -> list[str]:
    """The statuses ``answer`` says hold now: not negated, not hedged or future ("will be delivered") nearby."""
    return [g for m in _STATUS_WORD.finditer(answer) if not _negated(answer, m.start())
            and not _HEDGE.search(answer[max(0, m.start() - 25):m.start()])
            and (g := _status_group(m.group(1))) is not None]


def _result_statuses(turn: Turn) -> list[tuple[int, str]]:
    """(step, status meaning) of each ``status``/``state`` field in the steps' JSON results."""
    found = []
    for n, call in enumerate(turn.tool_calls, 1):
        for value in _fields(_json(call.result), _STATUS_KEYS):
            group = _status_group(str(value).replace("_", " "))
            if group is not None:
                found.append((n, group))
    return found


def _json(text: str | None) -> Any:
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


def _fields(value: Any, keys: Iterable[str]) -> Iterable[Any]:
    keys = tuple(keys)
    if isinstance(value, dict):
        for k, v in value.items():
            if k.lower() in keys and isinstance(v, str):
                yield v
            else:
                yield from _fields(v, keys)
    elif isinstance(value, list):
        for v in value:
            yield from _fields(v, keys)


def _check_ids(answer: str, evidence: list[tuple[int | None, str]]) -> list[Finding]:
    held = " ".join(text for _, text in evidence)
    step_ids = [(step, token) for step, text in evidence if step is not None for token in _ids(text)]
    findings = []
    for token in dict.fromkeys(_ids(answer)):
        if token in held:
            continue
        same = [(step, t) for step, t in step_ids if _shape(t) == _shape(token)]
        if same:
            step, t = same[0]
            findings.append(Finding("contradicted", step, f"the answer names {token}, but step {step} has {t}"))
    return findings


def _money(text: str) -> list[float]:
    """The amounts a step's text holds: numbers with a currency, and numeric fields named like money (``amount``)."""
    found = _amounts(text)
    stack = [_json(text)]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            for key, v in value.items():
                if key.lower() in _MONEY_KEYS and (isinstance(v, int | float) and not isinstance(v, bool)
                                                   or isinstance(v, str) and _NUMBER.fullmatch(v)):
                    found.append(float(str(v).replace(",", "")))
                else:
                    stack.append(v)
        elif isinstance(value, list):
            stack.extend(value)
    return found


def _check_amounts(answer: str, evidence: list[tuple[int | None, str]]) -> list[Finding]:
    step_amounts = [(step, a) for step, text in evidence if step is not None for a in _money(text)]
    if not step_amounts:
        return []
    values = [a for _, a in step_amounts]
    known = set().union(*(_numbers(text) for _, text in evidence)) | set(values)
    known |= {a + b for a in values for b in values} | {abs(a - b) for a in values for b in values}
    findings = []
    for amount in dict.fromkeys(_amounts(answer)):
        if not any(abs(amount - n) < 0.005 for n in known):
            step, held = step_amounts[0]
            findings.append(Finding("contradicted", step,
                                    f"the answer gives the amount {amount:g}, but step {step} has {held:g}"))
    return findings


def _check_statuses(turn: Turn, answer: str, evidence: list[tuple[int | None, str]]) -> list[Finding]:
    results = _result_statuses(turn)
    if not results:
        return []
    said = {g for step, text in evidence if step is not None for w in _STATUS_WORD.findall(text.replace("_", " "))
            if (g := _status_group(w))}  # what the steps say, not what the user believed
    said |= {g for _, g in results}
    findings = []
    for group in dict.fromkeys(_asserted_statuses(answer)):
        if group not in said:
            step, held = results[0]
            findings.append(Finding("contradicted", step,
                                    f"the answer says {group!r}, but step {step} returned status {held!r}"))
    return findings


def _check_actions(turn: Turn, answer: str) -> list[Finding]:
    states = {g for _, g in _result_statuses(turn)}
    findings = []
    for name, stems, _ in ACTIONS:
        claims = [m for m in _CLAIMS[name].finditer(answer) if not _negated(answer, m.start())
                  and not _HEDGE.search(answer[max(0, m.start() - 25):m.start()])]
        claims = [m for m in claims if m.group("a") or m.group("b") or " " in (m.group("c") or "")]
        if not claims:
            continue
        tried = [(n, c) for n, c in enumerate(turn.tool_calls, 1) if any(s in c.name.lower() for s in stems)]
        if any(c.error is None for _, c in tried):
            continue
        if name == "refund" and "refunded" in states or name == "cancellation" and "cancelled" in states:
            continue
        if tried:
            n, call = tried[-1]
            findings.append(Finding("contradicted", n, f"the answer says the {name} was done, but step {n} "
                                                       f"({call.name}) failed: {call.error}"))
        else:
            findings.append(Finding("unsupported", None, f"the answer says the {name} was done, but no step did it"))
    return findings


def _check_skipped_lookup(turn: Turn, answer: str) -> list[Finding]:
    if turn.tool_calls:
        return []
    given = " ".join([turn.question, *(d.text for d in turn.contexts)])
    specifics = [t for t in _ids(answer) if t not in given]
    specifics += [f"{a:g}" for a in _amounts(answer) if a not in _numbers(given)]
    given_statuses = {g for w in _STATUS_WORD.findall(given) if (g := _status_group(w))}
    specifics += [g for g in _asserted_statuses(answer) if g not in given_statuses]
    if not specifics:
        return []
    return [Finding("unsupported", None, f"the answer gives {', '.join(repr(s) for s in dict.fromkeys(specifics))}, "
                                         "but no tool was called to look it up")]


def pre_check(turn: Turn) -> list[Finding]:
    """What the run contradicts or does not back in the answer, found without a judge (rules: module docstring)."""
    answer, evidence = turn.output, _evidence(turn)
    return [*_check_actions(turn, answer), *_check_ids(answer, evidence), *_check_amounts(answer, evidence),
            *_check_statuses(turn, answer, evidence), *_check_skipped_lookup(turn, answer)]


def trajectory_score(verdict: prompts.TrajectoryVerdict) -> float:
    """0 when a claim is contradicted or unsupported, else (1 + tools_fit + task_done) / 3."""
    if any(c.verdict != "supported" for c in verdict.claims):
        return 0.0
    return (1 + verdict.tools_fit + verdict.task_done) / 3


# --- the offline judge ------------------------------------------------------------------------------------------

_NO_CLAIM = re.compile(r"(?i)^(?:hi|hello|thanks|thank you|(?:i'm |i am |we're |we are )?sorry|let me know|"
                       r"is there anything|feel free|have a (?:good|nice|great)|happy to help|you're welcome|glad)\b")


def offline_verdict(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The baseline judge's verdict on a rendered run (rules: the module docstring's *Offline*)."""
    steps, contexts = inputs["steps"], inputs["contexts"]
    evidence = " ".join([*(json.dumps(s, ensure_ascii=False) for s in steps), *(c["text"] for c in contexts)])
    known = baseline.content_words(evidence)
    question = baseline.content_words(inputs["question"])
    claims = []
    for sentence in baseline.sentences(inputs["answer"]):
        if sentence.rstrip().endswith("?") or _NO_CLAIM.match(sentence.strip()):
            continue
        words = baseline.content_words(sentence) - question
        if not words:
            continue
        share = len(words & known) / len(words)
        claims.append({"claim": sentence[:200], "verdict": "supported" if share >= 0.5 else "unsupported",
                       "step": None})
    unsupported = [c for c in claims if c["verdict"] != "supported"]
    tools_fit = bool(steps) or not unsupported
    task_done = bool(inputs["answer"].strip()) and not baseline.is_abstention(inputs["answer"], inputs["question"])
    reason = (f"Nothing in the steps or contexts backs: {unsupported[0]['claim']!r}." if unsupported
              else "Every claim of the answer shares its words with the steps or contexts.")
    return {"claims": claims, "tools_fit": tools_fit, "task_done": task_done, "step": None, "reason": reason}


class Details(base.Details):
    pre_check: list[dict[str, Any]] | None = None
    claims: list[dict[str, Any]] | None = None
    tools_fit: bool | None = None
    task_done: bool | None = None
    step: int | None = None
    rendered_chars: int | None = None


class Trajectory(ReasonedScorer):
    """One judge call over the whole run, after a judge-free pre-check (the module docstring says how)."""

    name: ClassVar[str] = "trajectory"
    version: ClassVar[str] = "1"
    bands: ClassVar[Bands] = ((0.99, "faithful run"), (0.5, "grounded, one fault"),
                              (0.3, "grounded, tools and task off"), (0.0, "unfaithful"))
    Details: ClassVar[type[base.Details]] = Details

    budget_chars: int = prompts.BUDGET_CHARS
    pre_check_only: bool = False  # score with the pre-check alone: no finding is a pass, no judge call

    async def _score(self, turn: Turn, run: ScoreRun) -> ScoreResult:
        if not turn.output.strip():
            return run.empty_answer("The answer is empty: it completes nothing of the task.")
        findings = pre_check(turn)
        if findings:
            run.details.pre_check = [f.__dict__ for f in findings]
            run.details.step = findings[0].step
            run.note("pre_check", run.details.pre_check)
            first = findings[0]
            where = f"Step {first.step}" if first.step is not None else "No step"
            return run.scored(0.0, f"{where}: {first.what}." + (f" ({len(findings) - 1} more finding(s).)"
                                                                  if len(findings) > 1 else ""), label="unfaithful")
        if self.pre_check_only:
            run.note("pre_check", [])
            return run.scored(self.scale, "The pre-check found nothing the run contradicts.")
        rendered = prompts.render_run(turn, budget_chars=self.budget_chars)
        run.details.rendered_chars = len(rendered.prompt)
        verdict = await run.ask("judge", JudgeRequest(
            step=f"{self.name}.judge", instructions=prompts.SYSTEM, prompt=rendered.prompt,
            output_type=prompts.TrajectoryVerdict,
            inputs=rendered.model_dump(exclude={"prompt"}), offline=offline_verdict,
        ))
        steps = len(turn.tool_calls)
        step = verdict.step if verdict.step is not None and 1 <= verdict.step <= steps else None
        run.details.set(claims=[c.model_dump() for c in verdict.claims], tools_fit=verdict.tools_fit,
                        task_done=verdict.task_done, step=step)
        score = trajectory_score(verdict) * self.scale
        reason = verdict.reason if self.reason_mode != "none" else None
        return run.scored(score, reason)
