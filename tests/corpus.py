"""The framework conformance corpus (``tests/fixtures/otlp/frameworks``): its recordings, their manifests, and what a
stored turn must hold to match a manifest entry. One comparison for both test levels: the assembled ``Turn`` (fast,
points at the rule) and the row in ``traces`` (the real pipeline).

A manifest entry is the turn one agent run must make, stated by the client that ran it (never read back from vigil):
- the question matches exactly (each recording's questions are distinct: the match is by question); a run whose
  question the framework never exports (``"question": null``, e.g. a run that failed before its model call could
  be recorded) is matched to a turn left over, and checked for the rest;
- ``ok``: the stored answer is the answer the framework handed back (JSON compared as JSON: a structured answer);
  ``failed``: a failed run (``metadata["vigil.run"] == "failed"``) with its error text;
- the tool calls are the ones the tool functions received, by name and arguments (compared as a multiset: parallel
  calls have no order), the result as the tool returned it (compared as a value when it reads as JSON or a Python
  literal: the same list may travel in either notation), an error text when the tool raised (the text the framework
  reported: some redact the message); a framework's answer tool (smolagents' ``final_answer``) is not one;
- the contexts are the retrieved documents' texts (as a set); the usage, when the manifest states one (the prompt
  and completion tokens of the run's model calls, summed by the application from what its client returned), is the
  turn's; the session, when the manifest names one, is the turn's; runs the manifest puts in one ``conversation`` (a framework that groups them without naming the group)
  share one session, and runs of different conversations do not;
- the recording makes exactly as many turns as its manifest lists: an index build, an embedding batch or any other
  trace listed under ``non_runs`` makes none.
"""

from __future__ import annotations

import ast
import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vigil.schemas.spans import ERROR_METADATA, RUN_METADATA

CORPUS = Path(__file__).parent / "fixtures" / "otlp" / "frameworks"
MANIFEST_SUFFIX = ".expected.json"


@dataclass(frozen=True)
class Recording:
    """One recording (``<framework>/<scenario>.json``) with its manifest (``<scenario>.expected.json``)."""

    path: Path

    @property
    def name(self) -> str:
        return f"{self.path.parent.name}/{self.path.stem}"

    @property
    def requests(self) -> list[dict[str, Any]]:
        return json.loads(self.path.read_text())["requests"]

    @property
    def manifest(self) -> dict[str, Any]:
        return json.loads(self.path.with_name(self.path.stem + MANIFEST_SUFFIX).read_text())

    def trace_ids(self) -> set[str]:
        ids = set()
        for request in self.requests:
            for resource in request["body"].get("resourceSpans", []):
                for scope in resource.get("scopeSpans", []):
                    ids.update(span["traceId"] for span in scope.get("spans", []))
        return ids


def recordings() -> list[Recording]:
    return [Recording(p) for p in sorted(CORPUS.glob("*/*.json")) if not p.name.endswith(MANIFEST_SUFFIX)]


@dataclass
class Seen:
    """What vigil made of one run, in the manifest's terms (from a ``Turn`` or a ``traces`` row)."""

    question: str
    answer: str | None
    status: str
    error: str | None
    session: str | None
    tools: list[dict[str, Any]] = field(default_factory=list)
    contexts: list[str] = field(default_factory=list)
    usage: dict[str, int] | None = None


def _value(value: Any) -> Any:
    """A string as the value it spells in JSON or Python notation, else the stripped text."""
    if isinstance(value, str):
        for parse in (json.loads, ast.literal_eval):
            try:
                return parse(value)
            except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
                pass
        return value.strip()
    return value


def _answer(text: str | None) -> Any:
    value = _value(text or "")
    return value if isinstance(value, (dict, list)) else (text or "").strip()


def _key(call: dict[str, Any]) -> str:
    return json.dumps([call["name"], call["arguments"]], sort_keys=True)


def differences(expected: dict[str, Any], seen: list[Seen]) -> list[str]:
    """Each way the turns seen differ from the manifest (empty: they match), in plain words."""
    out = []
    turns = expected["turns"]
    if len(seen) != len(turns):
        out.append(f"{len(seen)} turns, the manifest has {len(turns)}: seen questions "
                   f"{[s.question[:60] for s in seen]}")
    by_question = defaultdict(list)
    for s in seen:
        by_question[(s.question or "").strip()].append(s)
    for want in turns:
        if want["question"] is None:
            continue
        q = want["question"].strip()
        got = by_question.pop(q, [])
        if len(got) != 1:
            out.append(f"{q[:50]!r}: {len(got)} turns with this question")
            continue
        out += [f"{q[:40]!r}: {d}" for d in _turn_differences(want, got[0])]
    left = [s for group in by_question.values() for s in group]
    unstated = [t for t in turns if t["question"] is None]
    for want, got in zip(unstated, left, strict=False):
        out += [f"a run whose question is not exported: {d}" for d in _turn_differences(want, got)]
    out += [f"a turn whose question is {s.question[:70]!r} is no run of the manifest" for s in left[len(unstated):]]
    return out + _conversation_differences(turns, seen)


def _conversation_differences(turns: list[dict[str, Any]], seen: list[Seen]) -> list[str]:
    sessions = defaultdict(set)
    by_question = {s.question.strip(): s for s in seen}
    for want in turns:
        got = by_question.get((want["question"] or "").strip())
        if want.get("conversation") and got is not None:
            sessions[want["conversation"]].add(got.session)
    out = [f"conversation {c}: sessions {sorted(map(str, ids))}, want one" for c, ids in sessions.items()
           if len(ids) != 1 or None in ids]
    shared = Counter(next(iter(ids)) for ids in sessions.values() if len(ids) == 1)
    return out + [f"{n} conversations share the session {sid!r}" for sid, n in shared.items() if n > 1]


def _turn_differences(want: dict[str, Any], got: Seen) -> list[str]:
    out = []
    if got.status != want["status"]:
        out.append(f"status {got.status!r}, want {want['status']!r}")
    if want["status"] == "ok" and _answer(got.answer) != _answer(want["answer"]):
        out.append(f"answer {(got.answer or '')[:80]!r}, want {(want['answer'] or '')[:80]!r}")
    if want["status"] == "failed" and not got.error:
        out.append("no error text on the failed turn")
    if want.get("session") and got.session != want["session"]:
        out.append(f"session {got.session!r}, want {want['session']!r}")
    calls = Counter(_key(c) for c in got.tools)
    wanted = Counter(_key(c) for c in want["tools"])
    if calls != wanted:
        out.append(f"tool calls {sorted(calls.elements())}, want {sorted(wanted.elements())}")
    else:
        by_call = defaultdict(list)
        for c in got.tools:
            by_call[_key(c)].append(c)
        for w in want["tools"]:
            c = by_call[_key(w)].pop(0)
            if w["error"]:
                if not c.get("error"):
                    out.append(f"{w['name']} has no error, want one like {w['error']!r}")
            elif c.get("error"):
                out.append(f"{w['name']} error {c['error']!r}, want none")
            elif _value(c.get("result")) != _value(w["result"]):
                out.append(f"{w['name']} result {str(c.get('result'))[:80]!r}, want {str(w['result'])[:80]!r}")
    if want.get("usage") and got.usage != want["usage"]:
        out.append(f"usage {got.usage}, want {want['usage']}")
    if set(got.contexts) != set(want["contexts"]):
        out.append(f"contexts {[t[:30] for t in got.contexts]}, want {[t[:30] for t in want['contexts']]}")
    return out


def _status(metadata: dict[str, str]) -> str:
    return "failed" if metadata.get(RUN_METADATA) == "failed" else "ok"


def seen_from_turn(turn: Any) -> Seen:
    """A ``vigil.schemas.Turn`` in the manifest's terms."""
    return Seen(question=turn.question, answer=turn.output, status=_status(turn.metadata),
                error=turn.metadata.get(ERROR_METADATA), session=turn.session_id,
                tools=[{"name": c.name, "arguments": c.arguments, "result": c.result, "error": c.error}
                       for c in turn.tool_calls],
                contexts=[d.text for d in turn.contexts],
                usage=turn.usage and {"prompt_tokens": turn.usage.prompt_tokens,
                                      "completion_tokens": turn.usage.completion_tokens})


def seen_from_row(row: dict[str, Any]) -> Seen:
    """A ``traces`` row in the manifest's terms."""
    metadata = dict(row["metadata"])
    return Seen(question=row["question"], answer=row["output"], status=_status(metadata),
                error=metadata.get(ERROR_METADATA), session=row["session_id"] or None,
                tools=[{"name": c["name"], "arguments": c.get("arguments") or {}, "result": c.get("result"),
                        "error": c.get("error")} for c in json.loads(row["tool_calls_json"] or "[]")],
                contexts=[d["text"] for d in json.loads(row["contexts_json"] or "[]")],
                usage={"prompt_tokens": row["prompt_tokens"], "completion_tokens": row["completion_tokens"]})
