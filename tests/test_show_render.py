"""`vigil show` prints a turn as a person reads it: no `None`, no empty span id, and a header that wraps rather
than being cut at the terminal's width (``vigil.worker.cli.show._render``)."""

from __future__ import annotations

from datetime import UTC, datetime

from rich.console import Console
from vigil.worker.cli.show import _render

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def _turn(**span) -> dict:
    base = {"trace_id": TRACE, "span_id": "", "project": "a-long-project-name", "agent": "a-long-agent-name",
            "environment": "staging", "started_at": datetime(2026, 3, 2, 12, 0, tzinfo=UTC), "question": "Q?",
            "output": "A.", "reference": "", "contexts": [{"text": "The refund window is 30 days.", "id": None},
                                                           {"text": "Shipping is free.", "id": "kb-7"}],
            "metadata": {}, "truncated": []}
    return {"trace_id": TRACE, "spans": [base | span], "scores": [], "stages": [], "dead_letters": []}


def _printed(turn: dict, width: int = 60) -> str:
    console = Console(width=width, record=True, file=open("/dev/null", "w"))  # noqa: SIM115 (closed with the test)
    console.print(_render(turn, verbose=False))
    return console.export_text()


def test_a_context_without_an_id_is_numbered_not_called_none():
    text = _printed(_turn())

    assert "None" not in text
    assert "context 1: The refund window is 30 days." in text and "context 2 (kb-7): Shipping is free." in text


def test_an_empty_span_id_is_left_out_of_the_header():
    assert f"turn {TRACE}: " in " ".join(_printed(_turn(), width=200).split())
    assert f"turn {TRACE} span 00f067aa0ba902b7: " in " ".join(_printed(_turn(span_id="00f067aa0ba902b7"),
                                                                          width=200).split())


def test_a_header_wider_than_the_terminal_wraps_and_keeps_every_character():
    printed = "".join(_printed(_turn(), width=40).replace("│", " ").split())  # the wrapped lines, borders and all

    assert f"turn{TRACE}:a-long-project-name/a-long-agent-name(staging),2026-03-0212:00:00UTC" in printed
