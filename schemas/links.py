"""Work a run started and waited for in a trace of its own: traces joined by OpenTelemetry span links.

A link says a span was caused by a span of another trace without being its child: a message consumed (the span that
produced it), a batch (a link per message), a fan-out, a job scheduled. So an agent run can hand work to a run in a
trace of its own: a multi-agent runtime that delivers each agent its input as a message starts each agent's trace
from that message, linked to the span that sent it (Semantic Kernel's SequentialOrchestration on its InProcessRuntime:
the second agent is handed the first one's answer, as an assistant message, in a trace of its own, and the span that
sent it lasts until that trace's work is done). A run can as well start work and not wait for it: a background job
(a summariser, a memory writer, an evaluation) linked to a span of a run that answered its user and ended.

The rule, over traces each assembled by ``vigil.schemas.spans``:

- **A trace whose runs state no user words of their own, linked to exactly one span of one other trace that waited
  for it, is work that trace's run started** (``target``: the links of its runs' roots and of the spans above them;
  ``waited``: the linked span ended no earlier than every span of the linked trace). A run that was asked nothing by a
  user answers what it was handed, the link names who handed it, and a linked span still open when the work was done
  says its run waited for that answer: whatever the run delivered came after it. Its spans join the run that holds
  the linked span, as if its top spans were that span's children (``graft``), and that run is assembled again with
  them: its question stays its own, its answer is its last in time: the joined work's last answer (or, when that
  work ended in error without one, the run failed with its error), unless one of its own calls answered after it, its tool calls, contexts and usage include the joined work's, and
  the linked trace makes no turn of its own. One question, one turn, whatever the runtime's traces.
- **Work the linked span did not wait for is a run of its own**: it ended after the span its link names had ended (a
  job a run started and left, a message published and forgotten), so nothing it answered reached the run's user
  through that run, and its answer is never the run's. Its runs are turns of their own under their own trace id, and
  the run keeps its answer. The host's answer alone cannot tell the two apart (the first agent of a sequential
  orchestration answers its question too; a job can be linked to a run's last step): that the host waited can. The
  times of two traces are compared: a runtime that waits across processes whose clocks differ by more than it waits
  past the work makes runs of their own (nothing lost, not joined), and a job that happens to end while the span
  it is linked to is still open joins it.
- **A run with user words of its own stays a run of its own.** It is a new request that merely references another
  trace (a follow-up, a retry, a job a run scheduled): someone asked it, and its question is its own.
- **A link to several spans joins nothing** (a batch, a fan-in: no one run started the work), nor does a span with
  more links than the decoder keeps. **A trace with no run** (no LLM call: a runtime's deliveries and acks) has
  nothing to add to a turn and stays what it was, a non-run.
- **The run that holds the linked span** (``spans``): the run whose spans include it; else, walking up from it, the
  first span with runs under it, and of those the last to start before the linked span (an agent's runtime sends the
  next agent's input from the handler the agent ran in, after it ran). Without one (the host has no run) the joined
  trace's runs are turns of their own, under their own trace id: nothing is lost.
- **Chains join through** (``hosts``): a trace linked to a trace that joined another joins the run that one joined
  (each link's span waited for its trace, and the spans of a joined trace include the one the next trace is linked
  to: the first run waited for the whole chain).
- **Only a run that is known is joined.** The host is a trace whose assembly made a turn (in the same file, or one the
  worker holds: ``vigil.worker.assembly.links``), and the linked span one of its known spans. A link to a trace or a
  span unknown or forgotten (expired, evicted) joins nothing: the linked trace is assembled on its own, as if it had
  no link.

Trace ids are not secrets (they travel in ``traceparent``), so the worker resolves a link only among the traces of
the sender's own project. Pure: ``target``, ``waited`` and ``hosts`` decide, ``graft`` marks the spans, ``join``
applies the rule to the traces of a file (a test, ``vigil explain-trace``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["MAX_LINKS", "graft", "hosts", "join", "states_user_words", "target", "waited", "waits"]

MAX_LINKS = 8  # the links of a span the decoder keeps (a batch's beyond it: ``links_more``)


def states_user_words(turn: Mapping[str, Any]) -> bool:
    """Whether a turn's question is a user's words (a user message with text)."""
    return any(m.get("role") == "user" and m.get("content") for m in turn.get("input") or ())


def target(trace_id: str, turns: Iterable[Mapping[str, Any]], above: Iterable[Mapping[str, Any]],
           ) -> tuple[str, str] | None:
    """The span (trace id, span id) whose run a trace's work joins, by the module's rule: ``turns`` are the trace's
    turns, ``above`` its runs' roots and the spans above them. ``None``: the trace is a run (or a non-run) of its
    own."""
    turns = list(turns)
    if not turns or any(states_user_words(t) for t in turns):
        return None
    named: set[tuple[str, str]] = set()
    for span in above:
        if span.get("links_more"):
            return None
        named.update((link["trace_id"], link["span_id"]) for link in span.get("links") or ())
    named = {link for link in named if link[0] != trace_id}
    return next(iter(named)) if len(named) == 1 else None


def waited(linked: Mapping[str, Any] | None, work: Iterable[Mapping[str, Any]]) -> bool:
    """Whether the span a trace's link names (``None``: not known) waited for the trace's ``work``: it ended no
    earlier than every span of it (its log records aside)."""
    return linked is not None and all(linked["end"] >= span["end"] for span in work if not span.get("log"))


def waits(traces: Mapping[str, list[dict[str, Any]]], results: Mapping[str, Any]) -> dict[str, bool]:
    """Of the traces of a file whose assembly names a link (``results``: each trace's, with its ``link``), whether
    the span it names, one of the file's, waited for it (``waited``); a trace whose linked span is not in the file is
    absent."""
    spans = {(s["trace_id"], s["span_id"]): s for trace in traces.values() for s in trace if not s.get("log")}
    return {trace: waited(spans[result.link], traces[trace]) for trace, result in results.items()
            if result.link is not None and result.link in spans}


def hosts(targets: Mapping[str, tuple[str, str]], holds_run: Callable[[str], bool]) -> dict[str, str]:
    """The trace each linked trace joins (``targets``: trace -> the span its work joins, ``target``): the linked
    trace, or, when that one joins another, the trace it joins, and so on; only a trace ``holds_run`` says made a
    turn. Traces absent from the result join nothing (their host is unknown or holds no run); links that loop back
    are followed until they do (the trace where the loop closes stays a run of its own)."""
    out: dict[str, str] = {}
    failed: set[str] = set()

    def resolve(trace: str, seen: tuple[str, ...]) -> str | None:
        if trace in out:
            return out[trace]
        if trace in failed or trace in seen:
            return None
        linked = targets[trace][0]
        found = resolve(linked, (*seen, trace)) if linked in targets else None
        if found is None and holds_run(linked) and linked not in seen:
            found = linked
        if found is None:
            failed.add(trace)
        else:
            out[trace] = found
        return found

    for trace in targets:
        resolve(trace, ())
    return out


def graft(spans: Iterable[Mapping[str, Any]], host: str, under: str) -> list[dict[str, Any]]:
    """A linked trace's spans as spans of the ``host`` trace, marked with the trace they came from and the span of
    the host (or of a trace joined to it) that its link names, which its top spans hang under."""
    return [{**span, "trace_id": host, "joined": {"trace_id": span["trace_id"], "under": under}} for span in spans]


def join(traces: Mapping[str, list[dict[str, Any]]], results: Mapping[str, Any],
         ) -> tuple[dict[str, list[dict[str, Any]]], dict[str, str]]:
    """The traces of a file with each linked trace's spans grafted into the trace whose run they join (``results``:
    each trace's assembly, with its ``link`` and ``turns``): the traces to assemble, and which trace joined which."""
    targets = {trace: results[trace].link for trace, ok in waits(traces, results).items() if ok}
    joined = hosts(targets, lambda trace: bool(trace in results and results[trace].turns))
    out = {trace: list(spans) for trace, spans in traces.items() if trace not in joined}
    for trace, host in joined.items():
        out[host] += graft(traces[trace], host, targets[trace][1])
    return out, joined
