"""``write_html``: the report as one static page (inline SVG charts, inline CSS, nothing fetched from anywhere).

Everything that came from a trace or a judge (questions, reasons, labels) is escaped: it is data, never markup.
"""

from __future__ import annotations

from collections import defaultdict
from html import escape
from pathlib import Path

from vigil.worker.report.model import MonitorChart, Report
from vigil.worker.report.svg import (
    PALETTE,
    Band,
    Bar,
    Line,
    Mark,
    band_chart,
    bar_rows,
    fmt_width,
    histogram,
    line_chart,
)

__all__ = ["render_html", "write_html"]

_CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #111827; margin: 24px 32px;
       background: #f9fafb; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 28px 0 8px; }
.sub { color: #6b7280; margin-bottom: 16px; }
section { background: #fff; border: 1px solid #e5e7eb; border-radius: 8px; padding: 12px 16px; margin-bottom: 16px; }
.grid-2 { display: flex; flex-wrap: wrap; gap: 16px; }
.grid-2 > div { flex: 0 0 auto; }
h3 { font-size: 14px; margin: 4px 0; color: #374151; }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid #f3f4f6; vertical-align: top; }
th { color: #6b7280; font-weight: 600; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.reason { max-width: 520px; } code { font-size: 12px; color: #374151; }
td.agent, td.monitor, td.when, td.judge { white-space: nowrap; }
.bad { color: #b91c1c; font-weight: 600; } .firing { color: #b91c1c; font-weight: 600; } .resolved { color: #15803d; }
svg.chart { display: block; } svg .grid { stroke: #e5e7eb; } svg .axis { stroke: #9ca3af; }
svg .series { fill: none; stroke-width: 2; } svg text { font-size: 11px; fill: #4b5563; }
svg .legend { font-size: 12px; fill: #111827; } svg .label { font-size: 12px; fill: #111827; }
svg .band { fill-opacity: 0.18; stroke: none; } svg .axis-label { font-size: 11px; fill: #6b7280; }
svg .alert-mark line { stroke: #dc2626; stroke-width: 1.5; stroke-dasharray: 4 3; } svg .alert-mark path { fill: #dc2626; }
.chart-head { font-size: 13px; margin: 4px 0 0; color: #374151; } .chart-head b { color: #111827; }
.muted { color: #6b7280; font-size: 12px; } td.answer, td.question { max-width: 320px; }
.monitor-block { width: 448px; } .monitor-block .chart-head { min-height: 36px; }
svg .alert-mark .alert-span { fill: #dc2626; fill-opacity: 0.10; stroke: none; }
svg .alert-mark.resolved line { stroke: #9ca3af; } svg .alert-mark.resolved path { fill: #9ca3af; }
svg .alert-mark.resolved .alert-span { fill: #9ca3af; fill-opacity: 0.08; }
section.status { border-width: 2px; } section.status-firing { border-color: #dc2626; background: #fef2f2; }
section.status-calm { border-color: #16a34a; } h2.headline { margin: 4px 0 8px; }
ul.firing-list { margin: 4px 0 10px; padding-left: 20px; } li.alert-line { font-size: 15px; margin: 4px 0; }
li.alert-line a { color: #991b1b; text-decoration: none; } a.worst-turn { font-size: 13px; color: #1d4ed8 !important; } li.alert-line a:hover { text-decoration: underline; }
ul.waiting { margin: 2px 0; padding-left: 20px; font-size: 13px; }
.heuristic { font-size: 11px; color: #92400e; background: #fef3c7; border-radius: 4px; padding: 0 4px; }
.heuristic-note { color: #92400e; }
"""

# After layout, each chart records the size it was drawn at: a headless browser's DOM dump shows it was rendered.
_DRAWN = """
document.querySelectorAll('svg.chart').forEach(function (svg) {
  var box = svg.getBBox();
  svg.setAttribute('data-drawn-width', Math.round(box.width));
  svg.setAttribute('data-drawn-height', Math.round(box.height));
});
"""

_FUNNEL_COLORS = {"received": "#6b7280", "sampled": "#2563eb", "scored": "#16a34a", "abstained": "#7c3aed",
                  "unscored": "#ca8a04", "not_applicable": "#94a3b8", "failed": "#dc2626", "shed": "#ea580c", "lost": "#7f1d1d"}


def _num(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _table(headers: list[str], rows: list[list[str]], numeric: set[str] = frozenset()) -> str:
    """Cells are pre-escaped HTML; headers are plain text."""
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f'<td class="{"num" if h in numeric else h}">{cell}</td>'
                         for h, cell in zip(headers, row, strict=True)) + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body or ''}</tbody></table>"


def _chart_block(report: Report, chart: MonitorChart, color: str, *, anchor: str = "") -> str:
    """One chart with its head: monitor, agent, the overall mean (labelled when a heuristic scored it), its bucket
    width, and the alerts about it."""
    summary = next((m for m in report.monitors if (m.agent, m.monitor) == (chart.agent, chart.monitor)), None)
    overall = ""
    if summary is not None and summary.mean_score is not None:
        ci = summary.mean_ci
        overall = (f" · mean {summary.mean_score:.2f}"
                   + (f" (95% interval {ci[0]:.2f}–{ci[1]:.2f})" if ci else "") + f" of {summary.scored} scored")
    heuristic = (' <span class="heuristic" title="the offline baseline judge: word overlap, no LLM">baseline '
                 "heuristic</span>" if summary is not None and summary.heuristic else "")
    firing = [m for m in chart.alerts if m.firing]
    fired = f' · <span class="firing">{len(firing)} alert(s) firing</span>' if firing else ""
    svg = band_chart(f"{'firing' if anchor else 'monitor'}-{chart.monitor}-{chart.agent}",
                     [Band(p.time, p.mean, p.ci_low, p.ci_high, p.turns) for p in chart.points],
                     start=chart.start, end=chart.end, interval_s=chart.interval_s,
                     alerts=[Mark(m.start, m.end, m.firing, m.sentence) for m in chart.alerts], color=color)
    ident = f' id="{escape(anchor)}"' if anchor else ""
    return (f'<div class="monitor-block"{ident} data-monitor="{escape(chart.monitor)}" '
            f'data-agent="{escape(chart.agent)}" data-bucket-s="{chart.interval_s}"><div class="chart-head">'
            f'<b>{escape(chart.monitor)}</b> on {escape(chart.agent)}{heuristic}<span class="muted">{escape(overall)} · '
            f"buckets of {fmt_width(chart.interval_s)}</span>{fired}</div>{svg}</div>")


def _anchor(monitor: str, agent: str) -> str:
    return f"firing-{monitor}-{agent}"


def _worst_turn(report: Report, monitor: str, agents: list[str]) -> str | None:
    """The lowest-scored turn of ``monitor`` on ``agents`` (any agent when empty) among the report's worst turns."""
    found = [w for w in report.worst_turns if w.monitor == monitor and (not agents or w.agent in agents)]
    return min(found, key=lambda w: w.score).trace_id if found else None


def _status_section(report: Report, links: bool = False) -> str:
    """The strip at the top: the firing alerts (each its sentence, linked to its chart), monitors fine or waiting,
    judge health, coverage, and which monitors a heuristic scored."""
    said = report.status
    lines = []
    for alert in said.firing:
        about = alert.about() or [c.agent for c in report.firing_charts if c.monitor == alert.monitor][:1]
        target = f' href="#{escape(_anchor(alert.monitor, about[0]))}"' if about else ""
        worst = _worst_turn(report, alert.monitor, alert.about()) if links else None
        turn = (f' <a class="worst-turn" href="turn/{escape(worst)}">its worst turn →</a>' if worst else "")
        lines.append(f'<li class="alert-line"><a{target}>{escape(alert.message)}</a>{turn}</li>')
    alerts = f'<ul class="firing-list">{"".join(lines)}</ul>' if lines else ""
    waiting = "".join(f"<li><b>{escape(m)}</b>: {escape(why)}</li>" for m, why in said.waiting.items())
    fine = f'<div class="muted">fine: {escape(", ".join(said.fine))}</div>' if said.fine else ""
    rows = [fine, f'<ul class="waiting">{waiting}</ul>' if waiting else "",
            f"<div>{escape(said.judges_line())}</div>", f"<div>{escape(said.coverage_line())}</div>"]
    if said.heuristic:
        rows.append(f'<div class="heuristic-note">{escape(said.heuristic_line())}: read their numbers as a '
                    "heuristic's, not an LLM judge's</div>")
    state = "status-firing" if said.firing else "status-calm"
    return (f'<section id="status" class="status {state}"><h2 class="headline">{escape(said.headline())}</h2>'
            f'{alerts}{"".join(rows)}</section>')


def _firing_section(report: Report) -> str:
    if not report.firing_charts:
        return ""
    blocks = "".join(_chart_block(report, chart, "#dc2626", anchor=_anchor(chart.monitor, chart.agent))
                     for chart in report.firing_charts)
    note = ('<p class="muted">Each chart spans the change and the time before it; the red shade runs from the '
            "change the alert names to now.</p>")
    return f'<section id="firing"><h2>What is firing</h2>{note}<div class="grid-2">{blocks}</div></section>'


def _scores_section(report: Report) -> str:
    """One small chart per monitor and agent: the mean, its 95% interval as a band, the alerts about it."""
    body = "".join(_chart_block(report, chart, PALETTE[i % len(PALETTE)]) for i, chart in enumerate(report.charts))
    note = ('<p class="muted">The scores are a sample of the turns: the shaded band is the 95% interval of each '
            "bucket's mean (wide: few turns). Red shade: an alert about that agent, from the change it names. Each "
            "chart's bucket width is chosen from how its scores spread.</p>")
    body = body or "<p>no scored turns in this range</p>"
    return f'<section><h2>Scores over time, per monitor</h2>{note}<div class="grid-2">{body}</div></section>'


def _compare_section(report: Report) -> str:
    """Each agent's newest release (or model) against the one before, per monitor: is it worse?"""
    if not report.comparisons:
        return ""
    rows = []
    for c in report.comparisons:
        interval = "—" if c.low is None or c.high is None else f"{c.low:+.2f} to {c.high:+.2f}"
        verdict = (f'<span class="bad">{escape(c.b.value)} is worse</span>' if c.verdict == "worse" else
                   f"{escape(c.b.value)} is better" if c.verdict == "better" else
                   escape(c.verdict + (f": about {c.more_turns} more turns" if c.more_turns else "")))
        rows.append([escape(c.agent), escape(c.monitor), f"{_num(c.a.mean)} ({c.a.n})", f"{_num(c.b.mean)} ({c.b.n})",
                     "—" if c.difference is None else f"{c.difference:+.2f}", interval, verdict])
    first = report.comparisons[0]
    headers = ["agent", "monitor", "before: mean (turns)", "after: mean (turns)", "difference", "95% interval",
               "sequential test"]
    note = (f'<p class="muted">Each agent\'s newest {escape(first.key)} against the one before it '
            f"({escape(first.a.value)} → {escape(first.b.value)} on {escape(first.agent)}…); the sequential test "
            "holds at every look, so it can be read while a canary runs. <code>vigil compare --by KEY A B</code> "
            "compares any two.</p>")
    return (f'<section id="compare"><h2>What changed: newest {escape(first.key)} against the one before</h2>{note}'
            f"{_table(headers, rows, {'difference'})}</section>")


def _funnel_section(report: Report) -> str:
    totals: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for row in report.funnel:
        for stage in _FUNNEL_COLORS:
            totals[row.monitor][stage] += getattr(row, stage)
    blocks = []
    for monitor in sorted(totals):
        t = totals[monitor]
        coverage = f" ({t['scored'] / t['sampled']:.0%} of sampled)" if t["sampled"] else ""
        bars = [Bar(stage, t[stage], color, coverage if stage == "scored" else "")
                for stage, color in _FUNNEL_COLORS.items()]
        blocks.append(f"<div><h3>{escape(monitor)}</h3>{bar_rows(f'funnel-{monitor}', bars)}</div>")
    body = "".join(blocks) or "<p>no pipeline events in this range</p>"
    return f'<section><h2>Coverage funnel</h2><div class="grid-2">{body}</div></section>'


def _distribution_section(report: Report) -> str:
    counts: dict[str, list[int]] = defaultdict(lambda: [0] * 10)
    for b in report.distribution:
        counts[b.monitor][min(max(int(round(b.bin * 10)), 0), 9)] += b.turns
    blocks = [f"<div><h3>{escape(m)}</h3>{histogram(f'distribution-{m}', counts[m], color=PALETTE[i % 9])}</div>"
              for i, m in enumerate(sorted(counts))]
    body = "".join(blocks) or "<p>no scored turns in this range</p>"
    return f'<section><h2>Score distribution</h2><div class="grid-2">{body}</div></section>'


def _lag_section(report: Report) -> str:
    by_monitor: dict[str, list] = defaultdict(list)
    for p in report.queue_lag:
        if p.p95_s is not None:
            by_monitor[p.monitor].append((p.time, p.p95_s))
    lines = [Line(f"{m} p95", pts) for m, pts in sorted(by_monitor.items())]
    chart = line_chart("queue-lag", lines, start=report.start, end=report.end, y_label="seconds",
                       gap_s=3 * report.interval_s, height=220)
    return f"<section><h2>Queue lag (received → scored)</h2>{chart}</section>"


def _monitors_section(report: Report) -> str:
    coverage = {(f.project, f.agent, f.monitor): f.coverage for f in report.funnel}
    headers = ["monitor", "agent", "scorer", "turns", "scored", "abstained", "unscored", "n/a", "failed", "coverage",
               "mean", "p50"]
    rows = [[escape(m.monitor), escape(m.agent), escape(f"{m.scorer} v{m.scorer_versions}"), str(m.turns),
             str(m.scored), str(m.abstained), str(m.unscored), str(m.not_applicable), f'<span class="{"bad" if m.failed else ""}">{m.failed}</span>',
             _num(coverage.get((m.project, m.agent, m.monitor))), _num(m.mean_score), _num(m.p50_score)]
            for m in report.monitors]
    numeric = {"turns", "scored", "abstained", "unscored", "n/a", "failed", "coverage", "mean", "p50"}
    return f"<section><h2>Monitors</h2>{_table(headers, rows, numeric)}</section>"


def _clip(text: str | None, limit: int = 400) -> str:
    text = text or ""
    return escape(text if len(text) <= limit else text[:limit] + "…")


def _turn_link(trace_id: str, text: str, links: bool) -> str:
    """A trace id as a link to its turn's page where the page is served (``report --serve``), else as code."""
    code = f"<code>{escape(text)}</code>"
    return f'<a class="turn-link" href="turn/{escape(trace_id)}">{code}</a>' if links else code


def _worst_section(report: Report, links: bool = False) -> str:
    by_monitor: dict[str, list] = defaultdict(list)
    for w in report.worst_turns:
        by_monitor[w.monitor].append(w)
    headers = ["score", "agent", "when", "question", "answer", "reason", "trace_id"]
    blocks = []
    for monitor in sorted(by_monitor):
        rows = [[f'<span class="bad">{w.score:.2f}</span>', escape(w.agent), f"{w.trace_time:%Y-%m-%d %H:%M}",
                 _clip(w.question), _clip(w.answer), _clip(w.reason, 600), _turn_link(w.trace_id, w.trace_id, links)]
                for w in by_monitor[monitor]]
        blocks.append(f'<h3 class="worst" data-monitor="{escape(monitor)}">{escape(monitor)}</h3>'
                      f"{_table(headers, rows, {'score'})}")
    body = "".join(blocks) or "<p>no scored turns in this range</p>"
    return f"<section><h2>Worst turns per monitor</h2>{body}</section>"


def _agreement_section(report: Report) -> str:
    title = "<h2>Judge-human agreement</h2>"
    if not report.agreement:
        return f"<section>{title}<p>no scored turn with human feedback in this range</p></section>"
    headers = ["monitor", "agent", "pairs", "negative feedback", "agreement", "95% interval"]
    rows = [[escape(a.monitor), escape(a.agent), str(a.pairs), str(a.negative_feedback), _num(a.agreement),
             f"{_num(a.agreement_low)}–{_num(a.agreement_high)}"] for a in report.agreement]
    note = ("<p class=\"sub\">A pair is a scored turn and a piece of human feedback on it; it agrees when the "
            "judge's score and the feedback's value fall on the same side of the monitor's pass line (pass_at; "
            "0.5 of the scale unless set).</p>")
    return f"<section>{title}{note}{_table(headers, rows, {'pairs', 'negative feedback', 'agreement'})}</section>"


def _judges_section(report: Report) -> str:
    paused = {p.judge: p for p in report.paused_judges}
    headers = ["judge", "models", "calls", "errors", "cache hits", "tokens", "prefix-cached", "cost $", "p50 ms",
               "p95 ms", "state"]
    rows = [[escape(j.judge), escape(j.models), str(j.calls), str(j.errors), str(j.cache_hits),
             str(j.prompt_tokens + j.completion_tokens),
             "—" if j.cached_share is None else f"{j.cached_share:.0%}", f"{j.cost_usd:.4f}", _num(j.p50_ms, 0),
             _num(j.p95_ms, 0),
             f'<span class="firing">paused ({escape(paused[j.judge].status)})</span>' if j.judge in paused else "ok"]
            for j in report.judges]
    numeric = {"calls", "errors", "cache hits", "tokens", "prefix-cached", "cost $", "p50 ms", "p95 ms"}
    return f"<section><h2>Judges</h2>{_table(headers, rows, numeric)}</section>"


def _alerts_section(report: Report) -> str:
    if not report.alerts:
        return "<section><h2>Alerts</h2><p>none in this range</p></section>"
    headers = ["updated", "state", "rule", "subject", "message"]
    rows = [[f"{a.updated_at:%Y-%m-%d %H:%M}", f'<span class="{escape(a.state)}">{escape(a.state)}</span>',
             escape(a.rule), escape(a.judge or "/".join(p for p in (a.project, a.agent, a.monitor) if p)),
             escape(a.message)] for a in report.alerts]
    return f"<section><h2>Alerts</h2>{_table(headers, rows)}</section>"


def _evals_section(report: Report) -> str:
    if not report.judge_evals:
        return ""
    headers = ["when", "scorer", "judge", "model", "dataset", "pairs", "pairwise accuracy", "95% interval",
               "word recall", "spearman"]
    rows = [[f"{e.started_at:%Y-%m-%d %H:%M}", escape(f"{e.scorer} v{e.scorer_version}"), escape(e.judge),
             escape(e.judge_model), escape(e.dataset), str(e.pairs), _num(e.pairwise_accuracy),
             "—" if e.pairwise_accuracy_low is None else f"{e.pairwise_accuracy_low:.2f}–{e.pairwise_accuracy_high:.2f}",
             _num(e.reference_pairwise_accuracy), _num(e.spearman)] for e in report.judge_evals]
    numeric = {"pairs", "pairwise accuracy", "word recall", "spearman"}
    return (f"<section><h2>Judge evaluations (vigil eval): agreement with people</h2>"
            f"{_table(headers, rows, numeric)}</section>")


def _losses_section(report: Report) -> str:
    """Dead letters and each monitor's top reasons for unscored or failed turns: where turns went without a score."""
    parts = []
    if report.dead_letters:
        rows = [[str(d.letters), escape(d.queue), escape(d.error_type),
                 escape("/".join(p for p in (d.project, d.agent) if p) or "—"), escape(d.reason)]
                for d in report.dead_letters]
        total = sum(d.letters for d in report.dead_letters)
        parts.append(f"<h3>Dead letters: {total} message(s) vigil could not process</h3>"
                     + _table(["letters", "queue", "error", "agent", "reason (latest)"], rows, {"letters"}))
    if report.unscored_reasons:
        rows = [[escape(r.monitor), escape(r.status), str(r.turns), escape(r.error_type or "—"), escape(r.reason)]
                for r in report.unscored_reasons]
        parts.append("<h3>Why turns were not scored (top reasons per monitor)</h3>"
                     + _table(["monitor", "status", "turns", "error", "reason"], rows, {"turns"}))
    body = "".join(parts) or "<p>no dead letters, no unscored or failed turns in this range</p>"
    return f'<section id="losses"><h2>Dead letters and unscored turns</h2>{body}</section>'


def render_html(report: Report, *, turn_links: bool = False) -> str:
    """The whole page as a string; ``turn_links``: trace ids link to their turn's page (served pages only)."""
    sections = [_status_section(report, turn_links), _firing_section(report), _compare_section(report),
                _scores_section(report),
                _funnel_section(report), _distribution_section(report),
                _worst_section(report, turn_links), _monitors_section(report), _agreement_section(report),
                _judges_section(report), _lag_section(report),
                _alerts_section(report), _losses_section(report), _evals_section(report)]
    return (
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
        "script-src 'unsafe-inline'; img-src data:\">"
        f"<title>vigil report</title><style>{_CSS}</style></head><body>"
        f"<h1>vigil report</h1><div class=\"sub\">{report.start:%Y-%m-%d %H:%M} → {report.end:%Y-%m-%d %H:%M} UTC · "
        f"generated {report.generated_at:%Y-%m-%d %H:%M:%S} UTC</div>"
        + "".join(sections)
        + f"<script>{_DRAWN}</script></body></html>"
    )


def write_html(report: Report, path: str | Path) -> Path:
    """Write the page; return its absolute path."""
    target = Path(path).resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render_html(report), encoding="utf-8")
    return target
