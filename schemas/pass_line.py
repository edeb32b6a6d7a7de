"""A monitor's pass line: where on its scale a verdict passes. The one definition of "positive".

A monitor says ``pass_at`` on its scorer's own scale: a number on ``0..scale`` for a built-in scorer (its
``scale`` param, 1 unless set), a check, a tool policy or a Python function; a number on ``min..max`` for a numeric
rubric (``pass_at: 4`` on a 1-5 rubric); for a categorical rubric, a number on its labels' scores or its *pass
set*, a list of labels, which must be its best-scoring ones (every label scoring at least as high as one in the set
is in it). Unset, the line is the middle of 0..1: 0.5.

``resolve`` turns ``pass_at`` into the *line*: a share of the scale in (0, 1], the form every score row stores
(``scores.pass_line``, the line in force when the turn was scored). A score passes when ``score / scale >= line``
(``passes``; ``sql_passes`` is the same expression for ClickHouse, so the review page, agreement, kappa, the
report and the alerts cut at the same place in Python and in SQL).

A person's value is cut by the line of what it judges: a reviewer's label of a monitor's verdict is on that
monitor's scale and cut by its line; feedback on the whole turn (a user's thumbs or stars, no monitor) is on its
own scale and cut at the middle, ``DEFAULT_LINE`` (``human_line``, ``sql_human_line``).
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["DEFAULT_LINE", "PassAt", "human_line", "passes", "resolve", "sql_human_line", "sql_passes"]

DEFAULT_LINE = 0.5
PassAt = float | list[str]


def resolve(pass_at: PassAt | None, *, low: float = 0.0, high: float = 1.0,
            labels: Mapping[str, float | None] | None = None) -> float:
    """The line (a share of the scale in (0, 1]) of ``pass_at`` on a scale from ``low`` to ``high``, or over a
    categorical rubric's ``labels`` (label -> score on 0..1; a label without a score is not a verdict). A
    ValueError says what is wrong: off the scale, at its bottom (everything would pass), labels on a scale that has
    none, an unknown label, or a pass set that leaves out a label scoring as high."""
    if pass_at is None:
        return DEFAULT_LINE
    if isinstance(pass_at, list):
        if labels is None:
            raise ValueError("a list of labels is a pass set, for a categorical rubric; this scale is numeric: "
                             "give a number")
        return _pass_set(pass_at, {k: v for k, v in labels.items() if v is not None})
    if not low < pass_at <= high:
        raise ValueError(f"{pass_at:g} is off the scale: give a number above {low:g} (everything would pass) "
                         f"and at most {high:g}")
    return (pass_at - low) / (high - low)


def _pass_set(chosen: list[str], scores: dict[str, float]) -> float:
    if not chosen:
        raise ValueError("the pass set is empty: name the labels that pass")
    if unknown := [label for label in chosen if label not in scores]:
        raise ValueError(f"unknown label {unknown[0]!r} (the rubric's scored labels: {', '.join(scores)})")
    line = min(scores[label] for label in chosen)
    if left := [label for label, score in scores.items() if score >= line and label not in chosen]:
        raise ValueError(f"the pass set must be the best-scoring labels: {left[0]!r} scores "
                         f"{scores[left[0]]:g}, as high as one in the set, and is not in it")
    if line <= 0.0:
        raise ValueError("the pass set holds a label scoring 0: everything would pass")
    return line


def passes(value: float, scale: float, line: float = DEFAULT_LINE) -> bool:
    """Whether ``value`` on ``0..scale`` is at or above the line."""
    return value / (scale if scale > 0 else 1.0) >= line


def sql_passes(value: str, scale: str, line: str) -> str:
    """``passes`` as a ClickHouse expression over three column expressions (a UInt8: 1 passes)."""
    return f"(({value}) / if(({scale}) > 0, {scale}, 1) >= ({line}))"


def human_line(monitor: str, line: float) -> float:
    """The line a person's value is cut by: the monitor's ``line`` for a label of that monitor's verdict, the
    middle for feedback on the whole turn (``monitor`` empty)."""
    return line if monitor else DEFAULT_LINE


def sql_human_line(monitor: str, line: str) -> str:
    """``human_line`` as a ClickHouse expression."""
    return f"if(({monitor}) != '', {line}, {DEFAULT_LINE!r})"
