"""The report as rich tables: one per monitor (counts per status, mean score, coverage, worst turns with reasons)."""

from __future__ import annotations

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text
from vigil.worker.report.model import Report

__all__ = ["print_report", "render_tables"]

_WORST_PER_MONITOR = 5


def _num(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def _monitor_table(report: Report, monitor: str) -> Table:
    summaries = [m for m in report.monitors if m.monitor == monitor]
    funnel = {(f.project, f.agent): f for f in report.funnel if f.monitor == monitor}
    scorers = ", ".join(sorted({f"{m.scorer} v{m.scorer_versions}" for m in summaries})) or "no scores yet"
    heuristic = " [yellow]scored by the baseline heuristic (word overlap, no LLM)[/]" if any(
        m.heuristic for m in summaries) else ""
    table = Table(title=f"monitor [bold]{monitor}[/] ({scorers}){heuristic}", title_justify="left", expand=False)
    keys = sorted({(m.project, m.agent) for m in summaries} | set(funnel))
    agents = [agent for _, agent in keys]
    for header in ("agent", "sampled", "shed", "budget", "scored", "abstained", "unscored", "n/a", "failed", "lost",
                   "coverage", "mean"):
        table.add_column(header, justify="left" if header == "agent" else "right",
                         overflow="fold" if header == "agent" else "ellipsis")
    by_key = {(m.project, m.agent): m for m in summaries}
    for key in keys:
        m, f = by_key.get(key), funnel.get(key)
        if m is None and (f is None or not (f.sampled or f.shed or f.budget)):
            continue  # the monitor's filters leave this agent out
        table.add_row(
            f"{key[0]}/{key[1]}" if agents.count(key[1]) > 1 else key[1],  # project only when it disambiguates
            str(f.sampled) if f else "—",
            str(f.shed) if f else "—",
            str(f.budget) if f else "—",
            str(m.scored if m else 0), str(m.abstained if m else 0), str(m.unscored if m else 0),
            str(m.not_applicable if m else 0), str(m.failed if m else 0),
            str(f.lost) if f else "—",
            _pct(f.coverage) if f else "—",
            _num(m.mean_score if m else None),
        )
    return table


def _worst_table(report: Report, monitor: str) -> Table | None:
    worst = [w for w in report.worst_turns if w.monitor == monitor][:_WORST_PER_MONITOR]
    if not worst:
        return None
    table = Table(title=f"worst turns: {monitor}", title_justify="left", show_lines=False)
    for header in ("score", "agent", "trace_id", "reason"):
        table.add_column(header, overflow="fold", no_wrap=header == "trace_id")
    for w in worst:
        table.add_row(_num(w.score), w.agent, w.trace_id, Text(w.reason))  # Text: judge output is not markup
    return table


def _judges_table(report: Report) -> Table:
    table = Table(title="judges", title_justify="left")
    for header in ("judge", "models", "calls", "errors", "cache hits", "tokens", "prefix-cached", "cost $", "p50 ms",
                   "p95 ms"):
        table.add_column(header, justify="left" if header in ("judge", "models") else "right",
                         overflow="fold" if header in ("judge", "models") else "ellipsis")
    paused = {p.judge for p in report.paused_judges}
    for j in report.judges:
        name = f"{j.judge} [red](paused)[/]" if j.judge in paused else j.judge
        table.add_row(name, j.models, str(j.calls), str(j.errors), str(j.cache_hits),
                      str(j.prompt_tokens + j.completion_tokens), _pct(j.cached_share), f"{j.cost_usd:.4f}",
                      _num(j.p50_ms, 0),
                      _num(j.p95_ms, 0))
    return table


def _agreement_table(report: Report) -> Table | None:
    if not report.agreement:
        return None
    table = Table(title="judge-human agreement (score and feedback on the same side of the pass line; 95% Wilson "
                        "interval)",
                  title_justify="left")
    for header in ("monitor", "agent", "pairs", "negative feedback", "agreement", "interval"):
        table.add_column(header, justify="left" if header in ("monitor", "agent") else "right",
                         overflow="fold" if header in ("monitor", "agent") else "ellipsis")
    for a in report.agreement:
        table.add_row(a.monitor, a.agent, str(a.pairs), str(a.negative_feedback), _pct(a.agreement),
                      f"{_pct(a.agreement_low)}–{_pct(a.agreement_high)}")
    return table


def _alerts_table(report: Report) -> Table | None:
    if not report.alerts:
        return None
    table = Table(title="alerts", title_justify="left")
    for header in ("updated", "state", "rule", "message"):  # the message names the monitor or judge
        table.add_column(header, overflow="fold", ratio=4 if header == "message" else None)
    for a in report.alerts:
        table.add_row(f"{a.updated_at:%m-%d %H:%M}", a.state, a.rule, Text(a.message))
    return table


def _interval(value: float | None, low: float | None, high: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.2f}" if low is None or high is None else f"{value:.2f} [{low:.2f}, {high:.2f}]"


def _evals_table(report: Report) -> Table | None:
    if not report.judge_evals:
        return None
    table = Table(title="judge evaluations (vigil eval): agreement with people", title_justify="left")
    for header in ("when", "scorer", "judge (model)", "dataset", "pairs", "pairwise acc. [95%]", "word recall",
                   "spearman"):
        table.add_column(header, justify="right" if header in ("pairs", "word recall", "spearman") else "left",
                         overflow="fold")
    for e in report.judge_evals:
        table.add_row(f"{e.started_at:%Y-%m-%d %H:%M}", f"{e.scorer} v{e.scorer_version}",
                      f"{e.judge} ({e.judge_model})", e.dataset, str(e.pairs),
                      _interval(e.pairwise_accuracy, e.pairwise_accuracy_low, e.pairwise_accuracy_high),
                      _num(e.reference_pairwise_accuracy), _num(e.spearman))
    return table


def _reasons_table(report: Report, monitor: str) -> Table | None:
    reasons = [r for r in report.unscored_reasons if r.monitor == monitor]
    if not reasons:
        return None
    table = Table(title=f"why not scored: {monitor}", title_justify="left")
    for header in ("status", "turns", "error", "reason"):
        table.add_column(header, overflow="fold", justify="right" if header == "turns" else "left")
    for r in reasons:
        table.add_row(r.status, str(r.turns), r.error_type or "—", Text(r.reason or "—"))
    return table


def _dead_letters_table(report: Report) -> Table | None:
    if not report.dead_letters:
        return None
    total = sum(d.letters for d in report.dead_letters)
    table = Table(title=f"dead letters: {total} message(s) vigil could not process", title_justify="left")
    for header in ("letters", "queue", "error", "agent", "reason (latest)"):
        table.add_column(header, overflow="fold", justify="right" if header == "letters" else "left")
    for d in report.dead_letters:
        agent = "/".join(p for p in (d.project, d.agent) if p) or "—"
        table.add_row(str(d.letters), d.queue, d.error_type, agent, Text(d.reason))
    return table


def _status_lines(report: Report) -> list[Text]:
    """The status first: the headline, each firing alert's sentence, what waits, judges, coverage, heuristics."""
    said = report.status
    lines = [Text(said.headline(), style="bold red" if said.firing else "bold green")]
    lines += [Text.assemble(("  FIRING ", "bold red"), alert.message) for alert in said.firing]
    if said.fine:
        lines.append(Text(f"  fine: {', '.join(said.fine)}"))
    lines += [Text(f"  waiting: {monitor}: {why}") for monitor, why in said.waiting.items()]
    lines += [Text(f"  {said.judges_line()}"), Text(f"  {said.coverage_line()}")]
    if said.heuristic:
        lines.append(Text(f"  {said.heuristic_line()}", style="yellow"))
    lines += [Text(f"  changed on {c.agent}: {c.sentence()}") for c in report.comparisons if c.verdict == "worse"]
    return lines


def render_tables(report: Report) -> Group:
    """Everything ``vigil report`` prints, as one renderable."""
    parts: list = [Text(f"vigil report {report.start:%Y-%m-%d %H:%M} → {report.end:%Y-%m-%d %H:%M} UTC"),
                   *_status_lines(report)]
    for d in report.delivery:
        if d.lost > 0:  # the broker dropped batches: say so before anything that counts from what arrived
            parts.append(Text(f"{d.project}/{d.agent}: {d.lost} turn(s) shipped but never received ({d.shipped} "
                              f"shipped, {d.received} received): the broker lost them (Redis without AOF?)",
                              style="bold red"))
    assembled = {(f.project, f.agent): (f.steps, f.superseded, f.conflicts, f.joined) for f in report.funnel
                 if f.steps or f.superseded or f.conflicts or f.joined}
    for (project, agent), (steps, superseded, conflicts, joined) in sorted(assembled.items()):
        parts.append(Text(f"{project}/{agent}: {steps} tool step(s) whose answer was in another trace (counted, not "
                          f"turns); {superseded} turn(s) superseded by a late root (removed with their scores)"
                          + (f"; {conflicts} resend(s) with other content refused (the stored turn kept)"
                             if conflicts else "")
                          + (f"; {joined} trace(s) joined another trace's run (work that run handed on and waited "
                             "for: scored as part of its turn, not turns of their own)" if joined else "")))
    unanswered = {(f.project, f.agent): (f.failed_runs, f.no_turn) for f in report.funnel if f.failed_runs or f.no_turn}
    for (project, agent), (failed, none) in sorted(unanswered.items()):
        parts.append(Text(f"{project}/{agent}: {failed} run(s) failed without an answer (recorded with their error, "
                          f"never scored); {none} trace(s) made no turn (the worker's log says why)",
                          style="bold" if failed else ""))
    if not report.monitor_names():
        parts.append(Text("no scores in this range"))
    for monitor in report.monitor_names():
        parts.append(_monitor_table(report, monitor))
        if worst := _worst_table(report, monitor):
            parts.append(worst)
        if reasons := _reasons_table(report, monitor):
            parts.append(reasons)
    if agreement := _agreement_table(report):
        parts.append(agreement)
    if dead := _dead_letters_table(report):
        parts.append(dead)
    if report.judges:
        parts.append(_judges_table(report))
    if alerts := _alerts_table(report):
        parts.append(alerts)
    if evals := _evals_table(report):
        parts.append(evals)
    return Group(*parts)


def print_report(report: Report, console: Console | None = None) -> None:
    (console or Console()).print(render_tables(report))
