"""An eval report as rich tables: agreement beside plain word recall, led by accuracy and kappa where people's
labels are good / bad; the items the judge got wrong, each with its reason and the people's comment; the pairs it
ordered against people, where the dataset has pairs; cost. A figure of pairs is shown only where pairs exist."""

from __future__ import annotations

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text
from vigil.worker.eval.runner import EvalReport
from vigil.worker.eval.stats import Agreement, Estimate

__all__ = ["print_eval", "render_eval"]

_FIGURES = ("binary_accuracy", "cohen_kappa", "pairwise_accuracy", "spearman", "kendall_tau_b", "pearson")


def _estimate(value: Estimate | None) -> str:
    if value is None:
        return "—"
    if value.low is None or value.high is None:
        return f"{value.value:.3f}"
    return f"{value.value:.3f} [{value.low:.3f}, {value.high:.3f}]"


def _agreement_table(report: EvalReport) -> Table:
    table = Table(title=f"agreement with people: {report.scorer} v{report.scorer_version} by "
                        f"{report.judge} ({report.judge_model})", title_justify="left")
    table.add_column("figure (95% interval)")
    table.add_column("judge", justify="right")
    reference: Agreement | None = report.reference
    if reference is not None:
        table.add_column("word recall of the reference", justify="right")
    a = report.agreement
    rows: list[tuple[str, str, str]] = [
        ("items", str(a.n), str(reference.n) if reference else ""),
        ("scored / unscored / failed / abstained", f"{a.scored} / {a.unscored} / {a.failed} / {a.abstained}",
         ""),
    ]
    if a.pairs or (reference and reference.pairs):
        rows += [("pairs (same group, different human value)", str(a.pairs), str(reference.pairs) if reference else ""),
                 ("tied pairs (counted wrong)", str(a.ties), str(reference.ties) if reference else "")]
    for name in _FIGURES:
        mine, theirs = getattr(a, name), getattr(reference, name) if reference else None
        if mine is None and theirs is None:
            continue
        label = name.replace("_", " ")
        if name in ("cohen_kappa", "binary_accuracy") and a.kappa_threshold is not None:
            label += f" (judge good at score ≥ {a.kappa_threshold:g} of scale)"
        rows.append((label, _estimate(mine), _estimate(theirs)))
    for row in rows:
        table.add_row(*(row if reference is not None else row[:2]))
    return table


def _cost_table(report: EvalReport) -> Table:
    c = report.cost
    table = Table(title="cost", title_justify="left")
    for header in ("turns scored", "judge calls", "cache hits", "prompt tokens", "completion tokens", "cost $",
                   "p50 ms / turn", "p95 ms / turn"):
        table.add_column(header, justify="right")
    table.add_row(str(c.scored_turns), str(c.judge_calls), str(c.cache_hits), str(c.prompt_tokens),
                  str(c.completion_tokens), f"{c.cost_usd:.4f}",
                  "—" if c.p50_latency_ms is None else f"{c.p50_latency_ms:.1f}",
                  "—" if c.p95_latency_ms is None else f"{c.p95_latency_ms:.1f}")
    return table


def _score(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def _worst_table(report: EvalReport, limit: int) -> Table | None:
    wrong = report.disagreements(limit)
    if not wrong:
        return None
    reasons = {row.id: row.reason or row.status for row in report.items}
    table = Table(title=f"worst disagreements ({len(wrong)} shown): pairs the judge ordered against people",
                  title_justify="left", show_lines=True)
    for header in ("preferred (human)", "judge", "other (human)", "judge ", "judge's reason for the preferred",
                   "for the other"):
        table.add_column(header, overflow="fold", ratio=3 if header.startswith(("judge's", "for")) else 1)
    for pair in wrong:
        table.add_row(f"{pair.better.id} ({pair.better.human:g})", _score(pair.better.score),
                      f"{pair.worse.id} ({pair.worse.human:g})", _score(pair.worse.score),
                      Text(reasons.get(pair.better.id, "")[:400]), Text(reasons.get(pair.worse.id, "")[:400]))
    return table


def _misjudged_table(report: EvalReport, limit: int) -> Table | None:
    wrong = report.misjudged()
    if not wrong:
        return None
    line = report.agreement.kappa_threshold
    scored = sum(row.score is not None for row in report.items)
    table = Table(title=f"judge and people disagree on {len(wrong)} of {scored} scored items ({min(limit, len(wrong))} "
                        f"shown, the judge's surest first; its verdict: pass at score ≥ {line:g} of scale)",
                  title_justify="left", show_lines=True)
    for header, ratio in (("item", 1), ("judge", 1), ("judge's reason", 3), ("people", 1), ("their comment", 3)):
        table.add_column(header, overflow="fold", ratio=ratio)
    good = max(row.human for row in report.items)
    for row in wrong[:limit]:
        verdict = "pass" if row.human != good else "fail"  # the judge's side is the other one
        table.add_row(row.id, f"{verdict} {_score(row.score)}", Text((row.reason or row.status)[:400]),
                      f"{'good' if row.human == good else 'bad'} ({row.human:g})", Text((row.comment or "")[:400]))
    return table


def render_eval(report: EvalReport, *, worst: int = 8) -> Group:
    parts: list = [Text(f"vigil eval {report.dataset} ({report.format}, sha256 {report.dataset_sha256[:12]}) "
                        f"run {report.run_id}"),
                   _agreement_table(report)]
    for table in (_misjudged_table(report, max(worst, 20)), _worst_table(report, worst)):
        if table is not None:
            parts.append(table)
    parts.append(_cost_table(report))
    if report.bad_lines:
        parts.append(Text(f"{len(report.bad_lines)} bad line(s) left out: " + "; ".join(report.bad_lines[:5])))
    return Group(*parts)


def print_eval(report: EvalReport, console: Console | None = None, *, worst: int = 8) -> None:
    (console or Console()).print(render_eval(report, worst=worst))
