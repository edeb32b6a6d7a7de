"""``vigil show TRACE_ID``: one turn as vigil saw it: the question, the answer, every score with its steps and reason.

Reads the store as ``vigil report`` does (also while ``vigil worker`` runs). A unique prefix of the trace id will do.
"""

from __future__ import annotations

import json
from typing import Any

import click
from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text
from vigil.worker.cli.options import read_store
from vigil.worker.report.turn import MIN_PREFIX, TurnNotFound, tree
from vigil.worker.report.turn import load_turn as turn_data
from vigil.worker.store.clickhouse import require_tables

__all__ = ["load_turn", "show_command"]


def load_turn(client, trace_id: str) -> dict[str, Any]:
    """``report.turn.load_turn``, its mistakes as one line."""
    try:
        return turn_data(client, trace_id)
    except TurnNotFound as exc:
        raise click.ClickException(str(exc)) from None


def _score_panel(score: dict[str, Any], verbose: bool) -> Panel:
    value = "—" if score["score"] is None else f"{score['score']:.3g} / {score['scale']:g}"
    head = Text.assemble((f"{score['monitor']}", "bold"), f"  {score['scorer']} v{score['scorer_version']}  ",
                         (score["status"], {"scored": "green", "unscored": "yellow"}.get(score["status"], "red")),
                         f"  score {value}", f"  label {score['label']}" if score["label"] else "",
                         f"  error {score['error_type']}" if score["error_type"] else "")
    parts: list = [head, Text(f"reason: {score['reason'] or '—'}")]
    steps = Table("step", "result", box=None, show_header=True, pad_edge=False)
    for step in score["steps"]:
        result = step.get("result")
        steps.add_row(str(step.get("name", "")), Text(json.dumps(result, ensure_ascii=False)[:1000]
                                                       if not isinstance(result, str) else result[:1000]))
        if verbose and step.get("prompt"):
            steps.add_row("", Text(f"prompt: {step['prompt']}", style="dim"))
    if score["steps"]:
        parts.append(steps)
    parts.append(Text(f"judge {score['judge']} ({score['judge_model']}): {score['judge_calls']} calls, "
                      f"{score['prompt_tokens'] + score['completion_tokens']} tokens, ${score['cost_usd']:.4f}, "
                      f"{score['latency_ms']:.0f} ms; scored {score['scored_at']:%Y-%m-%d %H:%M:%S}", style="dim"))
    return Panel(Group(*parts), expand=True)


def _render(turn: dict[str, Any], verbose: bool) -> Group:
    parts: list = []
    for span in turn["spans"]:
        # The header is the panel's first line, not its title: a title is cut at the terminal's width, a line wraps.
        header = (f"turn {span['trace_id']}{' span ' + span['span_id'] if span['span_id'] else ''}: "
                  f"{span['project']}/{span['agent']}{' (' + span['environment'] + ')' if span['environment'] else ''}"
                  f", {span['started_at']:%Y-%m-%d %H:%M:%S} UTC")
        body = [Text(header, style="bold"), Text.assemble(("question: ", "bold"), span["question"] or "—"),
                Text.assemble(("answer: ", "bold"), span["output"] or "—")]
        if span["reference"]:
            body.append(Text.assemble(("reference: ", "bold"), span["reference"]))
        for number, doc in enumerate(span["contexts"] or [], 1):
            text = doc.get("text", "") if isinstance(doc, dict) else str(doc)
            doc_id = doc.get("id") if isinstance(doc, dict) else None
            body.append(Text(f"context {number}{f' ({doc_id})' if doc_id else ''}: {text[:300]}", style="dim"))
        for number, call in enumerate(span.get("tool_calls") or [], 1):
            call = call if isinstance(call, dict) else {"name": str(call)}
            line = Text.assemble((f"tool call {number}: ", "bold"), str(call.get("name", "")),
                                 f"({json.dumps(call.get('arguments'), ensure_ascii=False)[:300]})")
            if call.get("result") not in (None, ""):
                line.append(f" → {str(call['result'])[:300]}")
            if call.get("error"):
                line.append(f" ✗ {call['error']}", style="red")
            body.append(line)
        if span.get("span_tree"):
            body.append(Text("spans:", style="bold"))
        for depth, node in tree(span.get("span_tree") or []):
            line = Text(f"{'  ' * (depth + 1)}{node.get('name', '')} ({node.get('kind', '')}) "
                        f"+{node['start_ms']:.0f} ms, took {node.get('duration_ms', 0):.0f} ms")
            if node.get("error"):
                line.append(f" ✗ {node['error']}", style="red")
            body.append(line)
        if span["metadata"]:
            body.append(Text(f"metadata: {dict(span['metadata'])}", style="dim"))
        if span["truncated"]:
            body.append(Text(f"truncated: {', '.join(span['truncated'])}", style="yellow"))
        parts.append(Panel(Group(*body)))
    if not turn["spans"]:
        parts.append(Text(f"turn {turn['trace_id']}: not in the traces table (scored or dead-lettered only)"))
    if turn["scores"]:
        parts += [_score_panel(s, verbose) for s in turn["scores"]]
    else:
        parts.append(Text("no scores: " + (", ".join(f"{s['monitor'] or 'ingest'} {s['stage']}"
                                                     for s in turn["stages"]) or "no monitor sampled it")))
    for f in turn.get("feedback", []):
        parts.append(Text(f"feedback ({f['source']} {f['author']}): {f['name']} {f['value']:g} / {f['scale']:g}"
                          + (f": {f['comment']}" if f["comment"] else "")))
    for dead in turn["dead_letters"]:
        parts.append(Text(f"dead letter ({dead['queue']}, {dead['error_type']}): {dead['reason']}", style="red"))
    return Group(*parts)


@click.command("show")
@click.argument("trace_id")
@click.option("--dsn", default=None, help="ClickHouse DSN (default: CLICKHOUSE_DSN, else the embedded chDB store).")
@click.option("--json", "as_json", is_flag=True, help="Print the turn and its scores as JSON.")
@click.option("--prompts", is_flag=True, help="Also print the prompt each step sent to the judge.")
def show_command(trace_id: str, dsn: str | None, as_json: bool, prompts: bool) -> None:
    """One turn with all its scores, their steps and reasons, and its way through the pipeline.

    \b
    Examples:
      vigil show 4bf92f3577b34da6a3ce929d0e0e4736
      vigil show 4bf92f35 --prompts
      vigil show 4bf92f35 --json | jq '.scores[] | {monitor, score, reason}'
    """
    trace_id = trace_id.strip()
    if len(trace_id) < MIN_PREFIX:
        raise click.BadParameter(f"give at least {MIN_PREFIX} characters of the trace id", param_hint="TRACE_ID")
    client = read_store(dsn)
    require_tables(client, "traces", "scores", "pipeline_events", "dead_letters")
    turn = load_turn(client, trace_id)
    if as_json:
        click.echo(json.dumps(turn, default=str, ensure_ascii=False, indent=2))
        return
    Console().print(_render(turn, prompts))

