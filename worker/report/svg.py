"""Small inline-SVG charts drawn in Python (the report page needs no JavaScript library and no network)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from html import escape

__all__ = ["PALETTE", "Band", "Bar", "Line", "Mark", "band_chart", "bar_rows", "fmt_width", "histogram", "line_chart"]

PALETTE = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777", "#4b5563")


@dataclass(frozen=True)
class Line:
    label: str
    points: Sequence[tuple[datetime, float]]


@dataclass(frozen=True)
class Bar:
    label: str
    value: float
    color: str
    note: str = ""


@dataclass(frozen=True)
class Mark:
    """An alert on a chart: shaded from ``start`` (the change it names) to ``end``; ``text`` its sentence."""

    start: datetime
    end: datetime
    firing: bool
    text: str


@dataclass(frozen=True)
class Band:
    """One bucket of a monitor's chart: its start, mean and 95% interval (None: too few scores for one)."""

    time: datetime
    mean: float
    low: float | None
    high: float | None
    turns: int


def _fmt_time(t: datetime, span_s: float) -> str:
    return t.strftime("%H:%M" if span_s <= 2 * 86400 else "%m-%d %H:%M" if span_s <= 14 * 86400 else "%Y-%m-%d")


def _fmt_value(v: float, top: float) -> str:
    """A tick value short enough for the margin: 0.25, 12, 1.2k, 3.4M."""
    if top >= 1e6:
        return f"{v / 1e6:.1f}M"
    if top >= 1e4:
        return f"{v / 1e3:.0f}k"
    if top >= 10:
        return f"{v:.0f}"
    return f"{v:.2f}"


def _anchor(i: int, last: int) -> str:
    """The first and last tick labels hang inward, so neither is clipped at the plot's edge."""
    return "start" if i == 0 else "end" if i == last else "middle"


def band_chart(name: str, points: Sequence[Band], *, start: datetime, end: datetime, interval_s: int,
               alerts: Sequence[Mark] = (), color: str = "#2563eb", width: int = 440, height: int = 210) -> str:
    """A monitor's mean score per bucket (0..1) with its 95% interval as a shaded band, and each alert shaded red
    from the change it names to now (or its resolution) with a mark at the change. Buckets further apart than 1.5
    widths are not joined. Axes: mean score, time (UTC)."""
    left, right, top, bottom = 44, 12, 10, 40
    plot_w, plot_h = width - left - right, height - top - bottom
    span = max((end - start).total_seconds(), 1.0)
    half = timedelta(seconds=interval_s / 2)

    def x(t: datetime) -> float:
        return left + plot_w * min(max((t - start).total_seconds() / span, 0.0), 1.0)

    def y(v: float) -> float:
        return top + plot_h * (1 - min(max(v, 0.0), 1.0))

    out = [f'<svg class="chart monitor-chart" data-chart="{escape(name)}" viewBox="0 0 {width} {height}" '
           f'width="{width}" height="{height}" role="img">']
    for i in range(5):
        v = i / 4
        out.append(f'<line class="grid" x1="{left}" x2="{width - right}" y1="{y(v):.1f}" y2="{y(v):.1f}"/>'
                   f'<text class="tick" x="{left - 5}" y="{y(v) + 4:.1f}" text-anchor="end">{v:.2f}</text>')
    for i in range(4):
        t = start + (end - start) * (i / 3)
        out.append(f'<text class="tick" x="{x(t):.1f}" y="{top + plot_h + 14}" text-anchor="{_anchor(i, 3)}">'
                   f'{_fmt_time(t, span)}</text>')
    out.append(f'<text class="axis-label" x="{left + plot_w / 2:.0f}" y="{height - 4}" text-anchor="middle">'
               f'time (UTC), buckets of {fmt_width(interval_s)}</text>'
               f'<text class="axis-label" x="11" y="{top + plot_h / 2:.0f}" '
               f'transform="rotate(-90 11 {top + plot_h / 2:.0f})" text-anchor="middle">mean score</text>')
    ordered = sorted(points, key=lambda p: p.time)
    runs: list[list[Band]] = []
    for point in ordered:
        joined = runs and (point.time - runs[-1][-1].time).total_seconds() <= 1.5 * interval_s
        if joined:
            runs[-1].append(point)
        else:
            runs.append([point])
    for run in runs:
        with_ci = [p for p in run if p.low is not None and p.high is not None]
        if with_ci:
            upper = [f"{x(p.time + half):.1f},{y(p.high):.1f}" for p in with_ci]  # type: ignore[arg-type]
            lower = [f"{x(p.time + half):.1f},{y(p.low):.1f}" for p in reversed(with_ci)]  # type: ignore[arg-type]
            if len(with_ci) == 1:  # a lone bucket: its interval as a bar the bucket wide
                p = with_ci[0]
                out.append(f'<rect class="band" x="{x(p.time):.1f}" y="{y(p.high):.1f}" '  # type: ignore[arg-type]
                           f'width="{max(x(p.time + 2 * half) - x(p.time), 2):.1f}" '
                           f'height="{max(y(p.low) - y(p.high), 1):.1f}" fill="{color}"/>')  # type: ignore[arg-type]
            else:
                out.append(f'<path class="band" d="M{" L".join(upper + lower)} Z" fill="{color}"/>')
        d = " ".join(f"{'M' if i == 0 else 'L'}{x(p.time + half):.1f},{y(p.mean):.1f}" for i, p in enumerate(run))
        out.append(f'<path class="series" d="{d}" stroke="{color}"/>')
    for p in ordered:
        interval = "" if p.low is None or p.high is None else f", 95% interval {p.low:.2f}–{p.high:.2f}"
        out.append(f'<circle class="dot" cx="{x(p.time + half):.1f}" cy="{y(p.mean):.1f}" r="2.5" fill="{color}">'
                   f'<title>{p.time:%Y-%m-%d %H:%M}: mean {p.mean:.2f} of {p.turns} turns{interval}</title></circle>')
    for mark in sorted(alerts, key=lambda m: m.start):
        if mark.end < start or mark.start > end:
            continue
        ax, bx = x(mark.start), x(mark.end)
        state = "firing" if mark.firing else "resolved"
        out.append(f'<g class="alert-mark {state}" data-start="{mark.start.isoformat()}">'
                   f'<rect class="alert-span" x="{ax:.1f}" y="{top}" width="{max(bx - ax, 2):.1f}" height="{plot_h}"/>'
                   f'<line x1="{ax:.1f}" x2="{ax:.1f}" y1="{top}" y2="{top + plot_h}"/>'
                   f'<path d="M{ax - 5:.1f},{top} L{ax + 5:.1f},{top} L{ax:.1f},{top + 8} Z"/>'
                   f'<title>{escape(mark.text)}</title></g>')
    if not points:
        out.append(f'<text class="empty" x="{width / 2}" y="{height / 2}" text-anchor="middle">no scores</text>')
    out.append("</svg>")
    return "".join(out)


def fmt_width(seconds: int) -> str:
    if seconds % 86400 == 0:
        return f"{seconds // 86400} d"
    if seconds % 3600 == 0:
        return f"{seconds // 3600} h"
    return f"{seconds // 60} min"


def line_chart(name: str, lines: Sequence[Line], *, start: datetime, end: datetime, y_max: float | None = None,
               y_label: str = "", gap_s: float | None = None, width: int = 920, height: int = 300) -> str:
    """Lines over time on a shared axis; ``y_max`` None scales to the data. Legend under the plot.
    Points further apart than ``gap_s`` are not joined: a gap in the data shows as a gap."""
    left, right, top, bottom = 64, 16, 12, 34
    plot_w, plot_h = width - left - right, height - top - bottom
    span = max((end - start).total_seconds(), 1.0)
    values = [v for line in lines for _, v in line.points]
    top_value = y_max if y_max is not None else (max(values) * 1.1 if values and max(values) > 0 else 1.0)

    def x(t: datetime) -> float:
        return left + plot_w * min(max((t - start).total_seconds() / span, 0.0), 1.0)

    def y(v: float) -> float:
        return top + plot_h * (1 - min(max(v / top_value, 0.0), 1.0))

    out = [f'<svg class="chart" data-chart="{escape(name)}" viewBox="0 0 {width} {height + 22 * len(lines)}" '
           f'width="{width}" height="{height + 22 * len(lines)}" role="img">']
    for i in range(5):
        v = top_value * i / 4
        out.append(f'<line class="grid" x1="{left}" x2="{width - right}" y1="{y(v):.1f}" y2="{y(v):.1f}"/>'
                   f'<text class="tick" x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end">'
                   f'{_fmt_value(v, top_value)}</text>')
    for i in range(6):
        t = start + (end - start) * (i / 5)
        out.append(f'<text class="tick" x="{x(t):.1f}" y="{height - 12}" text-anchor="{_anchor(i, 5)}">'
                   f'{_fmt_time(t, span)}</text>')
    if y_label:
        out.append(f'<text class="tick" x="12" y="{top + plot_h / 2:.0f}" '
                   f'transform="rotate(-90 12 {top + plot_h / 2:.0f})" text-anchor="middle">{escape(y_label)}</text>')
    for index, line in enumerate(lines):
        color = PALETTE[index % len(PALETTE)]
        points = sorted(line.points)
        if points:
            d = " ".join(
                f"{'M' if i == 0 or (gap_s and (t - points[i - 1][0]).total_seconds() > gap_s) else 'L'}"
                f"{x(t):.1f},{y(v):.1f}" for i, (t, v) in enumerate(points))
            out.append(f'<path class="series" data-series="{escape(line.label)}" d="{d}" stroke="{color}"/>')
            if len(points) <= 60:
                out.extend(f'<circle class="dot" cx="{x(t):.1f}" cy="{y(v):.1f}" r="2.5" fill="{color}"/>'
                           for t, v in points)
        legend_y = height + 22 * index + 8
        out.append(f'<rect class="key" x="{left}" y="{legend_y}" width="12" height="12" fill="{color}"/>'
                   f'<text class="legend" x="{left + 18}" y="{legend_y + 11}">{escape(line.label)}</text>')
    if not lines:
        out.append(f'<text class="empty" x="{width / 2}" y="{height / 2}" text-anchor="middle">no data</text>')
    out.append("</svg>")
    return "".join(out)


def bar_rows(name: str, bars: Sequence[Bar], *, width: int = 440, row_h: int = 26) -> str:
    """Horizontal bars scaled to the largest value: a funnel reads top to bottom."""
    label_w, value_w = 90, 120
    plot_w = width - label_w - value_w
    top_value = max((b.value for b in bars), default=0) or 1
    height = row_h * len(bars) + 8
    out = [f'<svg class="chart" data-chart="{escape(name)}" viewBox="0 0 {width} {height}" width="{width}" '
           f'height="{height}" role="img">']
    for i, bar in enumerate(bars):
        y = 4 + i * row_h
        w = max(plot_w * bar.value / top_value, 1 if bar.value else 0)
        out.append(f'<text class="label" x="{label_w - 8}" y="{y + row_h / 2 + 4:.0f}" text-anchor="end">'
                   f'{escape(bar.label)}</text>'
                   f'<rect class="bar" data-label="{escape(bar.label)}" x="{label_w}" y="{y + 3}" width="{w:.1f}" '
                   f'height="{row_h - 8}" fill="{bar.color}"/>'
                   f'<text class="value" x="{label_w + w + 6:.1f}" y="{y + row_h / 2 + 4:.0f}">'
                   f'{bar.value:g}{escape(bar.note)}</text>')
    out.append("</svg>")
    return "".join(out)


def histogram(name: str, counts: Sequence[int], *, color: str, width: int = 320, height: int = 170) -> str:
    """Ten bins of a 0..1 score, lowest on the left; the y axis counts turns."""
    left, right, bottom, top = 44, 8, 34, 8
    plot_w, plot_h = width - left - right, height - top - bottom
    top_count = max(2, (max(counts, default=0) + 1) // 2 * 2)  # even, so the middle tick is a whole number
    bin_w = plot_w / max(len(counts), 1)
    out = [f'<svg class="chart" data-chart="{escape(name)}" viewBox="0 0 {width} {height}" width="{width}" '
           f'height="{height}" role="img">']
    for i in range(3):
        v = top_count * i / 2
        ty = top + plot_h * (1 - i / 2)
        out.append(f'<line class="grid" x1="{left}" x2="{width - right}" y1="{ty:.1f}" y2="{ty:.1f}"/>'
                   f'<text class="tick" x="{left - 5}" y="{ty + 4:.1f}" text-anchor="end">{v:g}</text>')
    out.append(f'<text class="axis-label" x="11" y="{top + plot_h / 2:.0f}" '
               f'transform="rotate(-90 11 {top + plot_h / 2:.0f})" text-anchor="middle">turns</text>'
               f'<text class="axis-label" x="{left + plot_w / 2:.0f}" y="{height - 3}" text-anchor="middle">'
               f'score (0..1)</text>')
    for i, count in enumerate(counts):
        h = plot_h * count / top_count
        out.append(f'<rect class="bar" x="{left + i * bin_w + 1:.1f}" y="{top + plot_h - h:.1f}" '
                   f'width="{bin_w - 2:.1f}" height="{h:.1f}" fill="{color}"><title>{i / 10:.1f}–{(i + 1) / 10:.1f}: '
                   f'{count}</title></rect>')
    for i in range(0, len(counts) + 1, 5):
        out.append(f'<text class="tick" x="{left + i * bin_w:.1f}" y="{top + plot_h + 14}" text-anchor="middle">'
                   f'{i / 10:.1f}</text>')
    out.append(f'<line class="axis" x1="{left}" x2="{width - right}" y1="{top + plot_h}" y2="{top + plot_h}"/>')
    out.append("</svg>")
    return "".join(out)
