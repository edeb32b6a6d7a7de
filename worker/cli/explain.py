"""``vigil explain-trace SOURCE``: how vigil reads one trace's spans as turns, for when a framework looks wrong.

SOURCE is a file of OTLP (an export request as OTLP/JSON or protobuf, or a file of such requests as
``tests/fixtures/otlp/record.py`` writes them) or the id of a trace the intake holds in Redis (``REDIS_URL``: spans
still settling, or what an assembly kept of them). For each trace: every span with the kind its convention gave it
(which mapper decided, on which attribute, ``fallback`` when none claimed it), then each turn: which span became the
run and why, where the question, answer and tool calls were read (span and convention module), and what they are;
why its session is not the conversation id its spans state, when a run continues another by response id (the
file's earlier traces, or the worker's links for a stored trace: ``vigil.schemas.chains``); which traces' work
joined a run by a span link, and that a joined trace makes no turn of its own (``vigil.schemas.links``: over a file
the file's traces are joined as the worker joins them, and a trace whose linked span ended before its work says so; a
stored trace says what the worker joined); which traces'
open steps a turn continues, their usage added to the run's (``vigil.schemas.steps``: over a file the file's open
steps, for a stored trace the worker's); or why the trace
made no turn. It decodes exactly as ``vigil intake`` does and assembles with the worker's own code.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path
from typing import Any

import click

__all__ = ["explain_command", "explain_lines", "read_source"]

_SHORT = 160


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = text.replace("\n", "\\n")
    return text if len(text) <= _SHORT else text[:_SHORT] + "…"


def read_source(source: str, redis_url: str | None, project: str = "default") -> dict[str, list[dict[str, Any]]]:
    """The span records of each trace in SOURCE (a file of OTLP, or a trace id the intake holds for ``project``)."""
    from vigil.worker.intake.otlp import UndecodableBody, decode_logs, decode_traces

    path = Path(source)
    if not path.is_file():
        return {source: _stored(source, redis_url, project)}
    body = path.read_bytes()
    requests: list[tuple[str, bytes, bool]] = []
    try:
        parsed = json.loads(body)
    except ValueError:
        requests.append(("/v1/traces", body, False))  # protobuf
    else:
        if isinstance(parsed, dict) and isinstance(parsed.get("requests"), list):
            requests += [(r.get("path", "/v1/traces"), json.dumps(r.get("body")).encode(), True)
                         for r in parsed["requests"] if isinstance(r, dict)]
        else:
            requests.append(("/v1/logs" if "resourceLogs" in parsed else "/v1/traces", body, True))
    by_trace: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for where, data, json_body in requests:
        decode = decode_logs if where.endswith("/v1/logs") else decode_traces
        try:
            decoded = decode(data, json_body=json_body)
        except UndecodableBody as exc:
            raise click.ClickException(f"{source}: not OTLP ({exc})") from None
        for record in decoded.spans:
            by_trace[record["trace_id"]].append(record)
    if not by_trace:
        raise click.ClickException(f"{source}: no spans in it")
    return dict(by_trace)


def _stored(trace_id: str, redis_url: str | None, project: str) -> list[dict[str, Any]]:
    """A stored trace's spans (``traces.Spans``: with what the worker joined it to, if it did)."""
    import redis
    from vigil.worker.assembly.traces import trace_name, trace_spans

    if len(trace_id) != 32 or any(c not in "0123456789abcdef" for c in trace_id.lower()):
        raise click.ClickException(f"{trace_id!r} is neither a file nor a trace id (32 hex digits)")
    if not redis_url:
        raise click.ClickException("REDIS_URL is not set: the intake keeps a trace's spans in the workers' Redis")
    client = redis.Redis.from_url(redis_url, socket_connect_timeout=5, socket_timeout=10)
    try:
        spans = trace_spans(client, trace_name(project, trace_id.lower()))  # trace ids are a project's own
    finally:
        client.close()
    if not spans:
        raise click.ClickException(f"no spans of trace {trace_id} in Redis (they are kept VIGIL_INTAKE_KEEP_S after "
                                   "the trace's last span)")
    return spans


def explain_lines(trace_id: str, spans: list[dict[str, Any]], links: dict[str, str] | None = None,
                  joined_to: tuple[str, str] | None = None, steps: dict[str, list[dict[str, Any]]] | None = None,
                  left_by: tuple[str, str] | None = None) -> list[str]:
    """What ``vigil explain-trace`` prints for one trace; ``links``: the conversation links of the runs before it (a
    run's last response id -> its session), which its runs' links are added to; ``joined_to``: the trace (and span)
    whose run this trace's work joined, when it did; ``steps``: the open steps of the file's traces
    (``vigil.schemas.steps.keep``) its turns may continue; ``left_by``: the trace (and span) its link names, when that
    span ended before this work did (``vigil.schemas.links.waits``)."""
    from vigil.schemas import conventions
    from vigil.schemas import steps as run_steps
    from vigil.schemas.chains import join
    from vigil.schemas.spans import assembly

    real = [s for s in spans if not s.get("log")]
    lines = [f"trace {trace_id}: {len(real)} span(s), {len(spans) - len(real)} log record(s)"]
    ids = {s["span_id"] for s in real}
    children: dict[str | None, list[dict[str, Any]]] = defaultdict(list)
    for span in real:
        parent = span.get("parent_id")
        if parent not in ids:  # a joined trace's top spans hang under the span its link names
            parent = span["joined"]["under"] if span.get("joined") and span["joined"]["under"] in ids else None
        children[parent].append(span)

    def walk(parent: str | None, depth: int) -> None:
        for span in sorted(children.get(parent, []), key=lambda s: s["start"]):
            kind, mapper, key = conventions.explain_kind(span)
            said = f"{mapper}: {key}" if key else mapper
            error = conventions.error(span)
            came = f" (joined from trace {span['joined']['trace_id']})" if span.get("joined") and (
                span.get("parent_id") not in ids) else ""
            lines.append(f"{'  ' * (depth + 1)}- {span['name']!r} ({span['span_id']}): {kind} [{said}]{came}"
                         + (f" error: {_short(error)}" if error else ""))
            walk(span["span_id"], depth + 1)

    walk(None, 0)
    if joined_to is not None:
        lines.append(f"no turn of its own: its runs state no user words and its root is linked to span {joined_to[1]} "
                     f"of trace {joined_to[0]}, which waited for it, so its work joined that trace's run")
        return lines
    if left_by is not None:
        lines.append(f"linked to span {left_by[1]} of trace {left_by[0]}, which ended before this work did: work that "
                     "run started and did not wait for (a job it left), so these are runs of their own, never its "
                     "answer")
    result = assembly(spans, explain=True)
    links = {} if links is None else links
    continued = run_steps.take(steps, trace_id, spans, result) if steps else {}
    new, chained = join(result.turns, result.chains, links)
    links.update({k: v for k, v in new.items() if k not in links})  # a response id's first link is kept
    for turn in result.turns:
        lines.append(f"turn {turn['span_id']}: the run is this span: {result.why.get(turn['span_id'], '')}")
        read = result.read.get(turn["span_id"], {})
        question = next((m["content"] for m in reversed(turn["input"]) if m["role"] == "user"), "")
        lines.append(f"  question: {_short(question)}")
        lines.append(f"    from {read.get('question', 'nothing')}")
        metadata = turn.get("metadata") or {}
        if metadata.get("vigil.run") == "failed":
            lines.append(f"  failed run: {_short(metadata.get('vigil.error', ''))} (recorded, never scored)")
        else:
            lines.append(f"  answer: {_short(turn['output'])}")
            lines.append(f"    from {read.get('answer', 'nothing')}")
        if metadata.get("vigil.content") == "missing":
            lines.append(f"  content not captured: set {metadata.get('vigil.content_setting')}")
        for call in turn.get("tool_calls") or []:
            outcome = f"error {_short(call['error'])}" if call.get("error") else f"-> {_short(call.get('result'))}"
            lines.append(f"  tool call {call['name']}({_short(call['arguments'])}) id={call.get('id')} {outcome}")
        if turn.get("tool_calls"):
            lines.append(f"    from {read.get('tool calls', '')}")
        for doc in turn.get("contexts") or []:
            lines.append(f"  context {doc.get('id') or ''}: {_short(doc['text'])}")
        said = {k: turn.get(k) for k in ("agent", "session_id", "model", "usage") if turn.get(k)}
        lines.append(f"  {', '.join(f'{k}={_short(v)}' for k, v in said.items()) or 'no agent, session or model'}")
        if turn["span_id"] in chained:
            lines.append(f"    session: {chained[turn['span_id']]}")
        if turn["span_id"] in continued:
            lines.append(f"    usage: {continued[turn['span_id']]}")
        for other in result.joined.get(turn["span_id"], []):
            lines.append(f"  joined by a link: trace {other}'s runs state no user words and its root is linked to a "
                         "span of this trace that waited for it, so they are this run's work (its answer is the "
                         "joined work's last)")
    if result.steps:
        lines.append(f"{len(result.steps)} LLM call(s) only asked for tools and nothing in this trace answered: steps, "
                     "not turns")
    if result.no_turn:
        lines.append(f"no turn: {result.no_turn}")
    elif not result.turns and not result.steps:
        lines.append("no turn: no span in this trace carries anything vigil reads")
    return lines


@click.command("explain-trace")
@click.argument("source")
@click.option("--project", default="default", show_default=True,
              help="With a trace id: the project whose trace it is (the same id in two projects is two traces).")
def explain_command(source: str, project: str) -> None:
    """How vigil reads a trace as turns: which span became the run, which convention read what, and why.

    SOURCE: a file of OTLP (JSON or protobuf, one export request or a recording of several) or the id of a trace
    the intake holds in Redis (REDIS_URL).

    \b
    Examples:
      vigil explain-trace tests/fixtures/otlp/pydantic_ai_tool.json
      REDIS_URL=redis://127.0.0.1:6379/0 vigil explain-trace 4bf92f3577b34da6a3ce929d0e0e4736
    """
    from vigil.schemas import links as trace_links
    from vigil.schemas import steps as run_steps
    from vigil.schemas.spans import assembly
    from vigil.worker.assembly.traces import split_name

    redis_url = os.environ.get("REDIS_URL")
    traces = read_source(source, redis_url, project)
    joined: dict[str, tuple[str, str]] = {}
    left: dict[str, tuple[str, str]] = {}
    steps: dict[str, list[dict[str, Any]]] = {}
    if Path(source).is_file():  # the file's traces joined by their links, as the worker joins them
        results = {trace_id: assembly(spans) for trace_id, spans in traces.items()}
        kept, hosts = trace_links.join(traces, results)
        joined = {trace_id: (host, results[trace_id].link[1]) for trace_id, host in hosts.items()}
        left = {trace_id: results[trace_id].link for trace_id, ok in trace_links.waits(traces, results).items()
                if not ok}
        traces = {trace_id: kept.get(trace_id, spans) for trace_id, spans in traces.items()}
        links = {}
        for trace_id, spans in traces.items():  # the file's open steps, for the turns that continue them
            run_steps.keep(steps, trace_id, spans, assembly(spans))
    else:
        links = _links(traces, redis_url, project)
        steps = _steps(traces, redis_url, project)
        joined = {t: (split_name(s.joined[0])[1], s.joined[1]) for t, s in traces.items()
                  if getattr(s, "joined", None)}
    for trace_id, spans in traces.items():
        for line in explain_lines(trace_id, spans, links, joined.get(trace_id), steps, left.get(trace_id)):
            click.echo(line)


def _links(traces: dict[str, list[dict[str, Any]]], redis_url: str | None, project: str) -> dict[str, str]:
    """The worker's conversation links (``vigil.worker.assembly.chains``) that a stored trace's runs name."""
    import redis
    from vigil.schemas.chains import named
    from vigil.schemas.spans import assembly
    from vigil.worker.assembly.chains import links_of

    wanted = [(project, i) for spans in traces.values() for i in named(assembly(spans).chains)]
    if not wanted or not redis_url:
        return {}
    client = redis.Redis.from_url(redis_url, socket_connect_timeout=5, socket_timeout=10)
    try:
        return links_of(client, wanted).get(project, {})
    finally:
        client.close()


def _steps(traces: dict[str, list[dict[str, Any]]], redis_url: str | None, project: str,
           ) -> dict[str, list[dict[str, Any]]]:
    """The worker's kept steps (``vigil.worker.assembly.steps``) that a stored trace's turns continue."""
    import redis
    from vigil.schemas import steps as run_steps
    from vigil.schemas.spans import assembly
    from vigil.worker.assembly.steps import kept_steps

    keys = list(dict.fromkeys(k for spans in traces.values() for turn in assembly(spans).turns
                              for k in run_steps.wanted(turn)))
    if not keys or not redis_url:
        return {}
    client = redis.Redis.from_url(redis_url, socket_connect_timeout=5, socket_timeout=10)
    try:
        return kept_steps(client, project, keys)
    finally:
        client.close()
