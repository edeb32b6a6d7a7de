"""One turn as vigil saw it, read back from the store (``load_turn``: what ``vigil show`` prints and ``--json``
gives) and as a page of ``vigil report --serve`` (``render_turn``, at ``/turn/TRACE_ID``): the conversation, the
tool calls with their arguments, results and errors, the retrieved documents, every monitor's score with its reason,
steps and judge cost, the feedback and reviewers' labels, and the turn's way through the pipeline (sampled,
scored, superseded, dead letters).

A turn assembled from OpenTelemetry spans keeps their skeleton (``traces.spans_json``: id, parent, name, kind, start
offset, duration, error), drawn as a waterfall; a turn from the SDK hook has none. Everything from a trace or a
judge is escaped: it is data, never markup.
"""

from __future__ import annotations

import json
from html import escape
from typing import Any

from clickhouse_connect.driver.client import Client
from vigil.worker.store.queries import TURN_QUERIES

__all__ = ["MIN_PREFIX", "TurnNotFound", "load_turn", "render_turn", "tree"]

MIN_PREFIX = 6


class TurnNotFound(LookupError):
    """No turn, or more than one, answers to the trace id (prefix): the message says which."""


def _rows(client: Client, name: str, trace_id: str) -> list[dict[str, Any]]:
    query = TURN_QUERIES[name]
    result = client.query(query.sql, parameters={"trace_id": trace_id})
    return [dict(zip(query.columns, row, strict=True)) for row in result.result_rows]


def _json(text: str) -> Any:
    try:
        return json.loads(text) if text else None
    except ValueError:
        return text


def load_turn(client: Client, trace_id: str) -> dict[str, Any]:
    """The turn's rows, scores, feedback, pipeline stages and dead letters, as plain data."""
    spans = _rows(client, "turn", trace_id)
    scores = _rows(client, "scores", trace_id)
    dead = _rows(client, "dead_letters", trace_id)
    ids = sorted({r["trace_id"] for r in spans + scores})
    if len(ids) > 1:
        raise TurnNotFound(f"trace id prefix {trace_id!r} matches {len(ids)} traces "
                           f"({', '.join(ids[:3])}{', …' if len(ids) > 3 else ''}): give more of it")
    if not spans and not scores and not dead:
        raise TurnNotFound(f"no turn with trace id {trace_id!r} in the store (`vigil report` lists the worst turns "
                           "with their trace ids)")
    for span in spans:
        for key in ("input_json", "contexts_json", "tool_calls_json"):
            span[key.removesuffix("_json")] = _json(span.pop(key))
        span["span_tree"] = _json(span.pop("spans_json")) or []
    for score in scores:
        score["steps"] = _json(score.pop("steps_json")) or []
        score["details"] = _json(score.pop("details_json")) or {}
    found = ids[0] if ids else trace_id
    return {"trace_id": found, "spans": spans, "scores": scores, "feedback": _rows(client, "feedback", found),
            "stages": _rows(client, "stages", found), "dead_letters": dead}


def _text(value: Any, limit: int = 4000) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return escape(text if len(text) <= limit else text[:limit] + "…")


def _message(message: Any) -> str:
    if not isinstance(message, dict):
        return f'<div class="msg">{_text(message)}</div>'
    role = str(message.get("role", ""))
    calls = "".join(f'<div class="call">→ {_text(c.get("name", ""))}({_text(c.get("arguments", ""))})</div>'
                    for c in message.get("tool_calls") or [] if isinstance(c, dict))
    return (f'<div class="msg {escape(role)}"><span class="role">{escape(role)}</span> '
            f'{_text(message.get("content") or "")}{calls}</div>')


def _tool_calls(calls: list[Any]) -> str:
    if not calls:
        return '<p class="muted">no tool calls</p>'
    rows = []
    for i, call in enumerate(calls, 1):
        call = call if isinstance(call, dict) else {"name": str(call)}
        error = call.get("error")
        rows.append(f'<tr class="{"error" if error else ""}"><td class="num">{i}</td><td><b>'
                    f'{_text(call.get("name", ""))}</b></td><td><code>{_text(call.get("arguments", ""), 1500)}</code>'
                    f'</td><td>{_text(call.get("result", "") or "", 1500)}</td>'
                    f'<td class="bad">{_text(error) if error else ""}</td></tr>')
    return ("<table><thead><tr><th>#</th><th>tool</th><th>arguments</th><th>result</th><th>error</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table>")


def tree(spans: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    """(depth, span) in tree order: each span after its parent, siblings by start; a span whose parent is not
    among them is a root."""
    ids = {s["span_id"] for s in spans}
    children: dict[str | None, list[dict[str, Any]]] = {}
    for span in spans:
        parent = span.get("parent_id") if span.get("parent_id") in ids else None
        children.setdefault(parent, []).append(span)
    out: list[tuple[int, dict[str, Any]]] = []
    stack = [(0, s) for s in sorted(children.get(None, []), key=lambda s: s["start_ms"], reverse=True)]
    while stack:
        depth, span = stack.pop()
        out.append((depth, span))
        stack += [(depth + 1, c) for c in sorted(children.get(span["span_id"], []), key=lambda s: s["start_ms"],
                                                  reverse=True)]
    return out


def _waterfall(spans: list[dict[str, Any]]) -> str:
    """The span tree as a waterfall: each span a row, indented under its parent, its bar placed by its start and
    length within the run, its kind, duration and error."""
    if not spans:
        return ('<p class="muted">no spans: this turn came through the SDK hook (one call per turn), not '
                "OpenTelemetry</p>")
    total = max((s["start_ms"] + s.get("duration_ms", 0) for s in spans), default=0) or 1
    rows = []
    for depth, span in tree(spans):
        left = 100 * span["start_ms"] / total
        width = max(100 * span.get("duration_ms", 0) / total, 0.4)
        error = span.get("error")
        rows.append(f'<tr class="span {escape(span.get("kind", ""))}{" error" if error else ""}">'
                    f'<td style="padding-left:{8 + 16 * depth}px">{escape(span.get("name", ""))} '
                    f'<span class="kind">{escape(span.get("kind", ""))}</span></td>'
                    f'<td class="bar-cell"><div class="bar" style="margin-left:{left:.2f}%;width:{width:.2f}%">'
                    f'</div></td><td class="num">{span.get("duration_ms", 0):.0f} ms</td>'
                    f'<td class="bad">{_text(error) if error else ""}</td></tr>')
    return ('<table class="waterfall"><thead><tr><th>span</th><th>time</th><th>took</th><th>error</th></tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table>")


def _score(score: dict[str, Any]) -> str:
    value = "—" if score["score"] is None else f"{score['score']:.3g} / {score['scale']:g}"
    steps = "".join(f"<li><b>{_text(s.get('name', ''))}</b>: {_text(s.get('result'), 600)}</li>"
                    for s in score["steps"] if isinstance(s, dict))
    cost = (f"judge {escape(score['judge'])} ({escape(score['judge_model'])}): {score['judge_calls']} calls, "
            f"{score['prompt_tokens'] + score['completion_tokens']} tokens, ${score['cost_usd']:.4f}, "
            f"{score['latency_ms']:.0f} ms")
    return (f'<div class="score" data-monitor="{escape(score["monitor"])}"><h3>{escape(score["monitor"])} '
            f'<span class="muted">{escape(score["scorer"])} v{escape(score["scorer_version"])} · '
            f'{escape(score["status"])}</span> <span class="value">{value}</span>'
            f'{" · " + escape(score["label"]) if score["label"] else ""}</h3>'
            f'<p>{_text(score["reason"] or "—")}</p>{"<ol>" + steps + "</ol>" if steps else ""}'
            f'<p class="muted">{cost}</p></div>')


_CSS = """
body { font: 14px/1.45 system-ui, sans-serif; color: #111827; margin: 24px 32px; background: #f9fafb; }
section { background: #fff; border: 1px solid #e5e7eb; border-radius: 8px; padding: 12px 16px; margin-bottom: 16px; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 4px 0 8px; } h3 { font-size: 14px; margin: 6px 0; }
.muted { color: #6b7280; font-size: 12px; } .bad { color: #b91c1c; } tr.error td { background: #fef2f2; }
table { border-collapse: collapse; width: 100%; font-size: 13px; } th, td { text-align: left; padding: 4px 8px;
border-bottom: 1px solid #f3f4f6; vertical-align: top; } code { font-size: 12px; }
.msg { margin: 4px 0; padding: 6px 8px; border-radius: 6px; background: #f3f4f6; white-space: pre-wrap; }
.msg.user { background: #eff6ff; } .msg.assistant { background: #f0fdf4; } .msg.tool { background: #fefce8; }
.role { font-weight: 600; color: #374151; } .call { color: #92400e; font-family: monospace; font-size: 12px; }
table.waterfall td.bar-cell { width: 45%; } .bar { height: 10px; border-radius: 2px; background: #6b7280; }
tr.llm .bar { background: #2563eb; } tr.tool .bar { background: #ca8a04; } tr.retriever .bar { background: #16a34a; }
tr.agent .bar, tr.chain .bar { background: #7c3aed; } tr.error .bar { background: #dc2626; }
.kind { font-size: 11px; color: #6b7280; } .score .value { font-weight: 700; } .score { border-top: 1px solid #f3f4f6; padding-top: 4px; }
"""


def render_turn(turn: dict[str, Any]) -> str:
    """The turn's page."""
    parts = []
    for span in turn["spans"]:
        where = f"{span['project']}/{span['agent']}" + (f" ({span['environment']})" if span["environment"] else "")
        usage = f"{span['model'] or 'model unknown'} · {span['prompt_tokens']} + {span['completion_tokens']} tokens"
        took = ""
        if span.get("ended_at") and span.get("started_at"):
            took = f" · {(span['ended_at'] - span['started_at']).total_seconds():.2f} s"
        messages = "".join(_message(m) for m in span["input"] or [])
        contexts = "".join(f"<li>{_text(d.get('text', '') if isinstance(d, dict) else d, 600)}</li>"
                           for d in span["contexts"] or [])
        metadata = ", ".join(f"{escape(str(k))} = {escape(str(v))}" for k, v in dict(span["metadata"]).items())
        when = f"{span['started_at']:%Y-%m-%d %H:%M:%S}"
        parts.append(
            f'<section class="turn-span"><h2>{escape(where)}</h2><div class="muted">{when} UTC{took} · '
            f"{escape(usage)}{' · span ' + escape(span['span_id']) if span['span_id'] else ''}"
            f'</div><h3>Conversation</h3>{messages or "<p class=muted>no input messages</p>"}'
            f'<div class="msg assistant"><span class="role">answer</span> {_text(span["output"] or "—")}</div>'
            f'<h3>Tool calls</h3>{_tool_calls(span["tool_calls"] or [])}'
            f'{"<h3>Retrieved documents</h3><ol>" + contexts + "</ol>" if contexts else ""}'
            f'{"<h3>Reference</h3><p>" + _text(span["reference"]) + "</p>" if span["reference"] else ""}'
            f'<p class="muted">metadata: {metadata or "—"}</p>'
            f'<h3>Spans</h3>{_waterfall(span.get("span_tree") or [])}</section>')
    if not turn["spans"]:
        parts.append("<section><p>not in the traces table (scored or dead-lettered only)</p></section>")
    scores = "".join(_score(s) for s in turn["scores"]) or '<p class="muted">no monitor scored it</p>'
    parts.append(f'<section id="scores"><h2>Scores</h2>{scores}</section>')
    feedback = "".join(f"<tr><td>{escape(f['source'])}</td><td>{escape(f['author'])}</td><td>{escape(f['name'])}</td>"
                       f"<td class=num>{f['value']:g} / {f['scale']:g}</td><td>{_text(f['comment'])}</td>"
                       f"<td>{f['created_at']:%Y-%m-%d %H:%M}</td></tr>" for f in turn["feedback"])
    parts.append('<section id="feedback"><h2>Feedback and labels</h2>'
                 + (f"<table><thead><tr><th>source</th><th>who</th><th>name</th><th>value</th><th>comment</th>"
                    f"<th>when</th></tr></thead><tbody>{feedback}</tbody></table>" if feedback
                    else '<p class="muted">none</p>') + "</section>")
    stages = "".join(f"<li>{s['at']:%Y-%m-%d %H:%M:%S} {escape(s['monitor'] or 'ingest')}: {escape(s['stage'])}</li>"
                     for s in turn["stages"])
    dead = "".join(f"<li class=bad>dead letter ({escape(d['queue'])}, {escape(d['error_type'])}): "
                   f"{_text(d['reason'])}</li>" for d in turn["dead_letters"])
    parts.append(f'<section id="history"><h2>History</h2><ul>{stages}{dead}</ul></section>')
    return ("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
            f"<title>turn {escape(turn['trace_id'])}</title><style>{_CSS}</style></head><body>"
            f'<p><a href="../">← report</a></p><h1>turn <code>{escape(turn["trace_id"])}</code></h1>'
            + "".join(parts) + "</body></html>")
