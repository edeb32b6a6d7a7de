"""Python scorers for the tests (``kind: python``, ``function: tests.user_scorer_functions:NAME``): each behaves
as its name says."""

from __future__ import annotations

import time

from vigil.schemas import NotApplicable, Turn


def cites_a_document(turn: Turn, *, marker: str = "[") -> tuple[float, str]:
    """1 when the output cites a document (``[kb-…]``), with the reason."""
    cited = marker in turn.output
    return (1.0 if cited else 0.0), ("cites a document" if cited else "cites nothing")


def is_short(turn: Turn) -> bool:
    return len(turn.output) < 80


def raises(turn: Turn) -> float:
    raise RuntimeError(f"the scorer broke on {turn.trace_id[:4]}")


def hangs(turn: Turn, *, seconds: float = 30.0) -> float:
    time.sleep(seconds)
    return 1.0


def returns_seven(turn: Turn) -> float:
    return 7


async def answers_later(turn: Turn) -> float:
    return 0.25


def holds_the_gil(turn: Turn) -> float:
    """On an answer saying HOLD: a backtracking match that keeps the GIL for longer than anyone waits."""
    if "HOLD" in turn.output:
        import re

        re.match(r"(a+)+$", "a" * 40 + "b")
    return 1.0


def eats_memory(turn: Turn) -> float:
    """On an answer saying EAT: allocates without end."""
    hoard = []
    while "EAT" in turn.output:
        hoard.append(bytearray(2**20))
    return 1.0


def cites_the_order(turn: Turn) -> NotApplicable | tuple[float, str]:
    """Whether the answer names the turn's order id; not applicable to a turn about no order."""
    order = turn.metadata.get("order_id")
    if order is None:
        return NotApplicable("the turn is about no order (no metadata.order_id)")
    return (1.0, f"names order {order}") if order in turn.output else (0.0, f"does not name order {order}")
