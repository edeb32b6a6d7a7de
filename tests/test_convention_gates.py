"""The key gates say no only where the reader behind them says nothing.

``conventions.gates`` lets assembly skip a reader for a span with none of the keys the reader reads (a convention's
``WHO_KEYS``, ``DOCUMENT_KEYS``, ``IO_KEYS``, ``TOOL_KEYS``, openlit's ``CLAIM_KEYS``; the GenAI conventions' message reader also reads events):
a key a reader reads but its list forgets would lose what the span says, silently. So every span of every recording (the older
libraries' and the framework corpus, with their log records attached as assembly attaches them) is handed to each
reader its gate keeps shut, and each must say nothing of it."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from vigil.schemas import conventions
from vigil.schemas.spans import _Trace
from vigil.worker.intake.otlp import decode_logs, decode_traces

FIXTURES = Path(__file__).parent / "fixtures" / "otlp"
RECORDINGS = [p for p in sorted(FIXTURES.glob("*.json")) + sorted(FIXTURES.glob("frameworks/*/*.json"))
              if not p.name.endswith(".expected.json")]
IO_READERS = {"genai": conventions.genai.io, "pydantic_ai": conventions.pydantic_ai.io,
              "openinference": conventions.openinference.io, "logfire": conventions.logfire.io}


def spans_of(path: Path) -> list[dict[str, Any]]:
    """The recording's spans as assembly reads them: decoded by the intake, log records attached."""
    by_trace: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for request in json.loads(path.read_text())["requests"]:
        decode = decode_traces if request["path"].endswith("/v1/traces") else decode_logs
        for record in decode(json.dumps(request["body"]).encode(), json_body=True).spans:
            by_trace[record["trace_id"]].append(record)
    return [span for spans in by_trace.values() for span in _Trace(spans).by_id.values()]


def test_the_gates_are_asked_of_every_keyed_message_reader() -> None:
    keyed = {name: reader for name, reader, _system, _gate in conventions._OPENLIT if name in conventions._IO}
    assert keyed == {**IO_READERS, "openlit": conventions.openlit.io}  # openlit's asked only where it claims


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_a_reader_its_gate_keeps_shut_says_nothing_of_the_span(path: Path) -> None:
    for span in spans_of(path):  # (a recording of a run whose instrumentation exported nothing has none)
        attrs = span["attributes"]
        who, documents, keyed, tools = conventions.gates(attrs)
        for convention in conventions._WHO:
            if convention not in who:
                said = convention.identity(attrs)
                assert not said.get("agent") and not said.get("session_id") and not said.get("metadata"), (
                    convention.__name__, span["name"], said)
        for convention in conventions._DOCUMENTS:
            if convention not in documents:
                assert convention.documents(attrs) == [], (convention.__name__, span["name"])
        for name, reader in IO_READERS.items():
            if name not in keyed and not (span.get("events") and name in conventions._READ_EVENTS):
                assert reader(span) == ([], [], ""), (name, span["name"])
        if "openlit" not in keyed:
            assert not conventions.openlit.claims(span), span["name"]
        asked = {reader for reader, _gate in tools}
        for convention, _gate in conventions._TOOL_READERS:
            if convention.tool not in asked:
                assert convention.tool(span) is None, (convention.__name__, span["name"])


def test_long_keys_are_gated_and_not_remembered() -> None:
    """Whoever sends spans sets their keys: what ``gates`` remembers stays within a bound whatever they send."""
    conventions._OPENED.clear()
    for n in range(50):
        attrs = {f"gen_ai.prompt.{n}.content{'x' * 100_000}": "hi", "gen_ai.tool.name": "t"}
        assert conventions.gates(attrs)[2] == {"genai"}  # its key still opens the GenAI message reader
    assert conventions._OPENED == {}
    conventions.gates({"gen_ai.tool.name": "t"})
    assert list(conventions._OPENED) == [("gen_ai.tool.name",)]
