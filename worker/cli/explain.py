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
stored trace says what the worker joined); and the rules across traces of ``vigil.schemas.steps``, in the worker's
order: a trace that is one model call written by two instrumentations, each in a trace of its own, makes no turn
when the other trace's call is the turn (counted joined; the turn names it), which traces' open steps a turn
continues (their usage added to the run's), which trace's model call asked for a call the run's tool message names
only by its id (its name and arguments; the asking trace names the run that took it), and which trace's failed tool
span gave a turn's call its error (the failed span's trace names the run) — over a file as the file's traces decide them (``steps.join``), for a stored
trace as the worker's steps store holds them for its project; or why the trace made no turn. It decodes exactly as
``vigil intake`` does and assembles with the worker's own code.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    import redis
    from vigil.schemas.spans import Assembly
    from vigil.schemas.steps import Joined

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


def explain_lines(trace_id: str, spans: list[dict[str, Any]], result: Assembly | None, *,
                  links: dict[str, str] | None = None, joined_to: tuple[str, str] | None = None,
                  left_by: tuple[str, str] | None = None, decided: Joined | None = None,
                  failed_for: dict[str, str] | None = None,
                  asked_for: dict[str, list[tuple[str, str]]] | None = None) -> list[str]:
    """What ``vigil explain-trace`` prints for one trace; ``result``: its assembly (``explain=True``) as the rules
    across traces left it (``None`` with ``joined_to``); ``links``: the conversation links of the runs before it (a
    run's last response id -> its session), which its runs' links are added to; ``joined_to``: the trace (and span)
    whose run this trace's work joined, when it did; ``left_by``: the trace (and span) its link names, when that span
    ended before this work did (``vigil.schemas.links.waits``); ``decided``: what the rules of ``vigil.schemas.steps``
    decided (``steps.Joined``); ``failed_for``: a failed tool call's trace -> the trace whose run's call it is;
    ``asked_for``: a trace of open steps -> the calls (id, the taking trace) another trace's run named by id."""
    from vigil.schemas import conventions
    from vigil.schemas import steps as run_steps
    from vigil.schemas.chains import join

    decided = decided if decided is not None else run_steps.Joined({}, {}, {})
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
    links = {} if links is None else links
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
        told = {index: (trace, span) for index, trace, span in decided.told.get(turn["span_id"], ())}
        for index, call in enumerate(turn.get("tool_calls") or []):
            outcome = f"error {_short(call['error'])}" if call.get("error") else f"-> {_short(call.get('result'))}"
            lines.append(f"  tool call {call['name']}({_short(call['arguments'])}) id={call.get('id')} {outcome}")
            if call.get("id") in decided.named.get(turn["span_id"], {}):
                lines.append(f"    its name and arguments: asked by the model call of trace "
                             f"{decided.named[turn['span_id']][call['id']]}, a trace of its own; this run's tool "
                             "message names that call's id, and states its result")
            if index in told:
                lines.append(f"    its error: the tool's span {told[index][1]} failed in trace {told[index][0]}, a "
                             "trace of its own, and the tool message this run's model was sent states that error")
        if turn.get("tool_calls"):
            lines.append(f"    from {read.get('tool calls', '')}")
        for doc in turn.get("contexts") or []:
            lines.append(f"  context {doc.get('id') or ''}: {_short(doc['text'])}")
        said = {k: turn.get(k) for k in ("agent", "session_id", "model", "usage") if turn.get(k)}
        lines.append(f"  {', '.join(f'{k}={_short(v)}' for k, v in said.items()) or 'no agent, session or model'}")
        if turn["span_id"] in chained:
            lines.append(f"    session: {chained[turn['span_id']]}")
        if turn["span_id"] in decided.usage:
            lines.append(f"    usage: {decided.usage[turn['span_id']]}")
        for other, host in decided.calls.items():
            if host == (trace_id, turn["span_id"]):
                lines.append(f"  written twice: trace {other} is this same model call written by another "
                             "instrumentation (the same service, conversation sent and answer, at the same time), so "
                             "it makes no turn of its own (counted joined)")
        for other in result.joined.get(turn["span_id"], []):
            lines.append(f"  joined by a link: trace {other}'s runs state no user words and its root is linked to a "
                         "span of this trace that waited for it, so they are this run's work (its answer is the "
                         "joined work's last)")
    if trace_id in decided.calls:
        other, span = decided.calls[trace_id]
        lines.append(f"no turn: the same model call as trace {other}, span {span}, written by another instrumentation "
                     "(the same service, conversation sent and answer, at the same time): that trace's turn is the "
                     "call's, and this one is counted joined")
        return lines
    if result.steps:
        lines.append(f"{len(result.steps)} LLM call(s) only asked for tools and nothing in this trace answered: steps, "
                     "not turns")
        for call_id, taker in (asked_for or {}).get(trace_id, ()):
            lines.append(f"  its tool call {call_id} is a call of trace {taker}'s run: that run's tool message names "
                         "its id, so the run's call has its name and arguments (and its usage is the run's)")
    if result.no_turn:
        lines.append(f"no turn: {result.no_turn}")
        if failed_for and trace_id in failed_for:
            lines.append(f"  its failed tool call is a call of trace {failed_for[trace_id]}'s run: the tool message "
                         "that run's model was sent states this error, so the run's call has it")
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
    if Path(source).is_file():  # the file's traces joined by their links, then the rules across traces, as the worker
        results = {trace_id: assembly(spans) for trace_id, spans in traces.items()}
        kept, hosts = trace_links.join(traces, results)
        joined = {trace_id: (host, results[trace_id].link[1]) for trace_id, host in hosts.items()}
        left = {trace_id: results[trace_id].link for trace_id, ok in trace_links.waits(traces, results).items()
                if not ok}
        traces = {trace_id: kept.get(trace_id, spans) for trace_id, spans in traces.items()}
        results = {trace_id: assembly(spans, explain=True) for trace_id, spans in kept.items()}
        decided = run_steps.join(kept, results)
        turn_trace = {turn["span_id"]: trace_id for trace_id, result in results.items() for turn in result.turns}
        failed_for = {failure: turn_trace[span_id] for span_id, told in decided.told.items() for _, failure, _ in told}
        asked_for: dict[str, list[tuple[str, str]]] = defaultdict(list)
        for span_id, named in decided.named.items():
            for call_id, step_trace in named.items():
                asked_for[step_trace].append((call_id, turn_trace[span_id]))
        links: dict[str, str] = {}
    else:
        results = {trace_id: assembly(spans, explain=True) for trace_id, spans in traces.items()}
        decided, failed_for, asked_for = _decided(traces, results, redis_url, project)
        links = _links(results, redis_url, project)
        joined = {t: (split_name(s.joined[0])[1], s.joined[1]) for t, s in traces.items()
                  if getattr(s, "joined", None)}
    for trace_id, spans in traces.items():
        for line in explain_lines(trace_id, spans, results.get(trace_id), links=links, joined_to=joined.get(trace_id),
                                  left_by=left.get(trace_id), decided=decided, failed_for=failed_for,
                                  asked_for=asked_for):
            click.echo(line)


def _redis(redis_url: str) -> redis.Redis:
    import redis

    return redis.Redis.from_url(redis_url, socket_connect_timeout=5, socket_timeout=10)


def _links(results: dict[str, Assembly], redis_url: str | None, project: str) -> dict[str, str]:
    """The worker's conversation links (``vigil.worker.assembly.chains``) that a stored trace's runs name."""
    from vigil.schemas.chains import named
    from vigil.worker.assembly.chains import links_of

    wanted = [(project, i) for result in results.values() for i in named(result.chains)]
    if not wanted or not redis_url:
        return {}
    client = _redis(redis_url)
    try:
        return links_of(client, wanted).get(project, {})
    finally:
        client.close()


def _decided(traces: dict[str, list[dict[str, Any]]], results: dict[str, Assembly], redis_url: str | None,
             project: str) -> tuple[Joined, dict[str, str], dict[str, list[tuple[str, str]]]]:
    """What the worker decided for stored traces by the rules of ``vigil.schemas.steps``, as its steps store
    (``vigil.worker.assembly.steps``, the project's) holds it, applied to their assemblies (``results``, changed in
    place) in the worker's order: a trace that is one model call written twice makes no turn when it yielded to the
    other trace's call; a turn takes the kept steps it continues (their usage) and the kept calls its tool messages name
    by id (the ones the worker gave it); a turn's calls have the errors of the
    failed tool calls the worker gave it. Returns those decisions (``steps.Joined``), by a failed tool call's
    trace, the trace whose run took it, and by a trace of open steps, the calls of it (id, the taking trace) another
    trace's run took by id. Nothing kept (or no Redis): nothing decided."""
    from vigil.schemas import steps as run_steps
    from vigil.worker.assembly.steps import MS, kept_entries, kept_named, kept_steps

    decided = run_steps.Joined({}, {}, {})
    failed_for: dict[str, str] = {}
    asked_for: dict[str, list[tuple[str, str]]] = defaultdict(list)
    if not redis_url:
        return decided, failed_for, asked_for
    client = _redis(redis_url)

    try:
        calls = {t: call for t in traces if (call := run_steps.lone(traces[t], results[t])) is not None}
        by_key = kept_entries(client, project, (call.key for call in calls.values()), "call")
        for trace_id, call in calls.items():
            for entry in by_key.get(call.key, ()):
                if entry["trace"] == trace_id and entry["yielded"]:  # it yielded: its call is the other's turn
                    decided.calls[trace_id] = (entry["yielded"], entry["to"])
                    run_steps.drop(results[trace_id])
                elif entry["yielded"] == trace_id:  # the other yielded to it
                    decided.calls[entry["trace"]] = (trace_id, entry["to"])
        for trace_id, spans in traces.items():
            result, service = results[trace_id], run_steps.service(spans)
            keys = [k for turn in result.turns for k in run_steps.wanted(turn, sender=service)]
            ids = [run_steps.id_key(service, i) for turn in result.turns for i, _ in run_steps.unasked(turn)]
            if keys or ids:
                named = {k: [e for e in entries if e["taken"] == trace_id]  # what the worker gave its turns
                         for k, entries in kept_named(client, project, ids).items()}
                decided.usage.update(run_steps.take(kept_steps(client, project, keys), trace_id, spans, result, named,
                                                    decided.named))
            failures = kept_entries(client, project, (k for turn in result.turns
                                                      for _, k in run_steps.failed_here(turn, service)), "tool")
            pool = {k: [{**e, "trace_id": e["trace"], "span_id": e["span"], "start": e["start"] * MS,
                         "end": e["end"] * MS} for e in entries if e["taken"] == trace_id]
                    for k, entries in failures.items()}  # what the worker gave its turns, which they take again
            for turn in result.turns:
                if given := run_steps.tell(turn, service, pool, trace_id):
                    decided.told[turn["span_id"]] = [(i, e["trace_id"], e["span_id"]) for i, e in given]
            if (failure := run_steps.failure(spans, result)) is not None:
                kept = kept_entries(client, project, [failure.key], "tool").get(failure.key, ())
                taker = next((e["taken"] for e in kept if e["trace"] == trace_id and e["taken"]), None)
                if taker:
                    failed_for[trace_id] = taker
            calls = [call for step in run_steps.left(spans, result.steps) for call in step.calls]
            by_id = kept_named(client, project, [run_steps.id_key(service, call["id"]) for call in calls])
            for call in calls:
                asked_for[trace_id] += [(call["id"], e["taken"]) for e in by_id.get(run_steps.id_key(
                    service, call["id"]), ()) if e["trace"] == trace_id and e["taken"]]
    finally:
        client.close()
    return decided, failed_for, asked_for
