"""Small inline-SVG charts drawn in Python (the report page needs no JavaScript library and no network)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from html import escape

__all__ = ["PALETTE", "Bar", "Line", "bar_rows", "histogram", "line_chart"]

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


def _fmt_time(t: datetime, span_s: float) -> str:
    return t.strftime("%H:%M" if span_s <= 2 * 86400 else "%m-%d %H:%M" if span_s <= 14 * 86400 else "%Y-%m-%d")


def line_chart(name: str, lines: Sequence[Line], *, start: datetime, end: datetime, y_max: float | None = None,
               y_label: str = "", gap_s: float | None = None, width: int = 920, height: int = 300) -> str:
    """Lines over time on a shared axis; ``y_max`` None scales to the data. Legend under the plot.
    Points further apart than ``gap_s`` are not joined: a gap in the data shows as a gap."""
    left, right, top, bottom = 56, 16, 12, 34
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
                   f'<text class="tick" x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:.2f}</text>')
    for i in range(6):
        t = start + (end - start) * (i / 5)
        out.append(f'<text class="tick" x="{x(t):.1f}" y="{height - 12}" text-anchor="middle">'
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


def histogram(name: str, counts: Sequence[int], *, color: str, width: int = 300, height: int = 150) -> str:
    """Ten bins of a 0..1 score, lowest on the left."""
    left, bottom, top = 8, 20, 8
    plot_w, plot_h = width - 2 * left, height - top - bottom
    top_count = max(counts, default=0) or 1
    bin_w = plot_w / max(len(counts), 1)
    out = [f'<svg class="chart" data-chart="{escape(name)}" viewBox="0 0 {width} {height}" width="{width}" '
           f'height="{height}" role="img">']
    for i, count in enumerate(counts):
        h = plot_h * count / top_count
        out.append(f'<rect class="bar" x="{left + i * bin_w + 1:.1f}" y="{top + plot_h - h:.1f}" '
                   f'width="{bin_w - 2:.1f}" height="{h:.1f}" fill="{color}"><title>{i / 10:.1f}–{(i + 1) / 10:.1f}: '
                   f'{count}</title></rect>')
    for i in range(0, len(counts) + 1, 5):
        out.append(f'<text class="tick" x="{left + i * bin_w:.1f}" y="{height - 5}" text-anchor="middle">'
                   f'{i / 10:.1f}</text>')
    out.append(f'<line class="axis" x1="{left}" x2="{width - left}" y1="{top + plot_h}" y2="{top + plot_h}"/>')
    out.append("</svg>")
    return "".join(out)
