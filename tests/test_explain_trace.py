"""``vigil explain-trace``: how a trace's spans became turns, from a file of OTLP or a trace the intake holds in
Redis, run as the real command (a subprocess), its ``--help`` example included."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import redis
from vigil.schemas.spans import assembly
from vigil.worker.assembly.traces import store_spans

from tests.test_recorded_conventions import recorded

ROOT = Path(__file__).parent.parent


def vigil(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vigil.worker", *args], capture_output=True, text=True, timeout=120,
                          check=False, cwd=ROOT, env={**os.environ, **env})


def test_the_help_example_explains_which_span_became_the_run_and_where_each_part_was_read():
    help_text = vigil("explain-trace", "--help").stdout
    example = next(line.split("vigil ", 1)[1] for line in help_text.split("Examples:")[1].splitlines()
                   if line.strip().startswith("vigil explain-trace"))

    run = vigil(*example.split())

    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert "  - 'invoke_agent support-bot' (a568540b0627574b): agent [genai: gen_ai.operation.name]" in lines
    assert "turn a568540b0627574b: the run is this span: the topmost agent span with an LLM call under it" in lines
    assert "  question: What is the status of order A-1001?" in lines
    assert ("    from span 'invoke_agent support-bot' (a568540b0627574b), read by pydantic_ai" in lines)
    assert any(line.startswith('  tool call lookup_order({"order_id": "A-1001"}) id=call_') for line in lines)


def test_a_run_with_no_llm_call_traced_says_it_is_a_run_because_it_states_its_answer():
    """MLflow's CrewAI autolog traces no model call of CrewAI's native provider: the agent span is a run because it
    states its answer, and the explanation says so rather than naming an LLM call that is not there."""
    run = vigil("explain-trace", "tests/fixtures/otlp/frameworks/crewai_mlflow/tool.json")

    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert "turn e58544d8a9fd3b69: the run is this span: the topmost agent span, which states its answer (no LLM call " \
           "is traced under it)" in lines
    assert not any("with an LLM call under it" in line for line in lines)


def test_a_run_with_no_llm_call_traced_says_its_tool_calls_were_read_from_the_conversation_a_span_above_it_reports():
    """The same recording: the tool calls are in the conversation the Task span above the agent's run returns
    (``TaskOutput.messages``), and the explanation names that span and part, not LLM calls that are not there."""
    run = vigil("explain-trace", "tests/fixtures/otlp/frameworks/crewai_mlflow/tool.json")

    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    at = lines.index("turn e58544d8a9fd3b69: the run is this span: the topmost agent span, which states its answer "
                     "(no LLM call is traced under it)")
    turn = lines[at:next((i for i in range(at + 1, len(lines)) if lines[i].startswith("trace ")), len(lines))]
    assert any(line.startswith('  tool call lookup_order({"order_id": "A-1001"}) id=call_1_48965 -> ') for line in turn)
    assert "    from the conversation in the outputs of span 'Task.execute_sync' (9b22c125f51238d3), read by mlflow" \
           in turn


def test_a_stored_trace_id_is_read_from_redis_and_a_failed_run_says_its_error(redis_url):
    [(trace_id, spans)] = recorded("pydantic_ai_crash.json").items()
    client = redis.Redis.from_url(redis_url)
    store_spans(client, spans, keep_s=600)
    client.close()

    run = vigil("explain-trace", trace_id, REDIS_URL=redis_url)

    assert run.returncode == 0, run.stderr
    assert ("  failed run: ValueError: order database unreachable for A-1001 (recorded, never scored)"
            in run.stdout.splitlines())


def test_a_trace_with_no_llm_call_says_why_it_made_no_turn(tmp_path):
    request = {"resourceSpans": [{"scopeSpans": [{"spans": [
        {"traceId": "1dec" * 8, "spanId": "4" * 16, "name": "SentenceSplitter.__call__", "startTimeUnixNano": "1",
         "endTimeUnixNano": "2", "attributes": [{"key": "openinference.span.kind", "value": {"stringValue": "CHAIN"}}]}]}]}]}
    path = tmp_path / "index.json"
    path.write_text(json.dumps(request))

    run = vigil("explain-trace", str(path))

    assert run.stdout.splitlines()[-1] == "no turn: no LLM call (its spans: chain)"


def test_a_source_that_is_neither_a_file_nor_a_trace_id_is_one_line_and_a_non_zero_exit():
    run = vigil("explain-trace", "no-such-file.json")

    assert run.returncode == 1
    assert run.stderr.strip().splitlines() == ["vigil: error: 'no-such-file.json' is neither a file nor a trace id "
                                               "(32 hex digits)"]


def test_a_run_continuing_another_by_response_id_says_which_session_it_joined_and_why():
    recording = "tests/fixtures/otlp/frameworks/agent_framework/multi.json"  # two conversations of two runs each
    run = vigil("explain-trace", recording)

    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    sessions = [line.split("session_id=")[1].split(",")[0] for line in lines if "session_id=" in line]
    first, second = sessions[0], sessions[-1]
    assert sessions == [first] * 2 + [second] * 2 and first != second
    assert all(f'"{session}"' in Path(recording).read_text() for session in (first, second))  # response ids sent
    assert lines.count("    session: a conversation's first run: its conversation ids are its own model calls' "
                       "response ids (the Responses API chaining its calls), so its session is named by its last "
                       "response id, the id a run that continues it names") == 2
    assert (f"    session: it continues an earlier run: its conversation id {first} is that run's last "
            "response id, so it joins that run's session") in lines


def test_a_stored_run_continuing_another_reads_the_workers_links(redis_url):
    from vigil.schemas.spans import assembly
    from vigil.worker.assembly.chains import chain_sessions

    from tests.test_session_chains import conversation_traces

    first, second, third = conversation_traces()
    client = redis.Redis.from_url(redis_url)
    chain_sessions(client, [("default", assembly(first)), ("default", assembly(second))], keep_s=600, budget=2**20)
    store_spans(client, third, keep_s=600)
    client.close()

    run = vigil("explain-trace", third[0]["trace_id"], REDIS_URL=redis_url)

    assert run.returncode == 0, run.stderr
    assert "session_id=resp_a2" in run.stdout
    assert "its conversation id resp_a4 is that run's last response id, so it joins that run's session" in run.stdout


def test_a_run_joined_by_a_linked_trace_says_so_and_the_linked_trace_says_it_made_no_turn_of_its_own():
    run = vigil("explain-trace", "tests/fixtures/otlp/frameworks/semantic_kernel/sequential.json")

    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert ("  joined by a link: trace 0b7608ed8e6cdc9020815dd1110e682b's runs state no user words and its root is "
            "linked to a span of this trace that waited for it, so they are this run's work (its answer is the joined "
            "work's last)") in lines
    assert ("no turn of its own: its runs state no user words and its root is linked to span 6f4c8d8cdc6d5b01 of "
            "trace f5bab33b8157e3c5d9019163b4f21634, which waited for it, so its work joined that trace's run") in lines
    assert sum(line.startswith("turn ") for line in lines) == 2


def test_a_job_its_run_did_not_wait_for_says_it_is_a_run_of_its_own_and_the_run_keeps_its_answer(tmp_path):
    from tests.test_linked_traces import FIRST, SECOND, T0, background_job, first_agent
    from tests.test_session_chains import otlp

    chat, _ = first_agent("c4a7" * 8)
    job = background_job("10b5" * 8, ("c4a7" * 8, chat[2]["span_id"]), start=T0 + 2 * SECOND)
    path = tmp_path / "chat_and_job.json"
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": otlp(chat[:3]) + otlp(job)}]}]}))

    run = vigil("explain-trace", str(path))

    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert (f"linked to span {chat[2]['span_id']} of trace {'c4a7' * 8}, which ended before this work did: work that "
            "run started and did not wait for (a job it left), so these are runs of their own, never its answer"
            ) in lines
    assert f"  answer: {FIRST}" in lines and "  answer: Summary: A-1001 shipped." in lines
    assert not any("joined" in line for line in lines)


def test_a_stored_run_and_a_stored_trace_the_worker_joined_to_it_say_so(redis_url):
    from vigil.schemas.links import graft
    from vigil.worker.assembly.traces import record_key

    from tests.test_linked_traces import FINAL, first_agent, next_agent

    a, b = os.urandom(16).hex(), os.urandom(16).hex()
    first, send = first_agent(a)
    second = next_agent(b, [(a, send)])
    client = redis.Redis.from_url(redis_url)
    store_spans(client, [*first, *graft(second, a, send)], keep_s=600)  # what the worker's join leaves
    store_spans(client, second, keep_s=600)
    client.hset(record_key(b), "joined", json.dumps([a, send]))
    client.close()

    host = vigil("explain-trace", a, REDIS_URL=redis_url)
    joined = vigil("explain-trace", b, REDIS_URL=redis_url)

    assert host.returncode == joined.returncode == 0, host.stderr + joined.stderr
    assert f"  answer: {FINAL}" in host.stdout.splitlines()
    assert f"  joined by a link: trace {b}'s runs state no user words" in host.stdout
    assert joined.stdout.splitlines()[-1] == (f"no turn of its own: its runs state no user words and its root is "
                                              f"linked to span {send} of trace {a}, which waited for it, so its work "
                                              "joined that trace's run")


def test_a_turn_that_continues_a_step_of_another_trace_says_whose_usage_it_adds():
    recording = ROOT / "tests/fixtures/otlp/frameworks/litellm/tool.json"  # each completion() a trace of its own

    run = vigil("explain-trace", str(recording))

    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    joined = [line for line in lines if line.startswith("    usage: it continues a run whose earlier model calls")]
    assert len(joined) == 3  # one per run, each naming the trace of the call that asked for the tool
    assert sum('usage={"prompt_tokens": 84, "completion_tokens": 34}' in line for line in lines) == 3


def explained_after_the_worker(redis_url: str, step: list[dict], answer: list[dict], of: list[dict] | None = None,
                               ) -> str:
    """What ``vigil explain-trace`` says of ``answer``'s trace (or ``of``'s) once the worker kept ``step``'s open step
    and assembled both (its steps store as the worker leaves it)."""
    from vigil.worker.assembly.links import Trace
    from vigil.worker.assembly.steps import continue_runs
    from vigil.worker.assembly.traces import trace_name

    client = redis.Redis.from_url(redis_url)
    continue_runs(client, [Trace(trace_name("default", t[0]["trace_id"]), t, [], assembly(t)) for t in (step, answer)],
                  keep_s=600, budget=2**20)  # what the worker kept, took and gave
    store_spans(client, of or answer, keep_s=600)
    client.close()
    run = vigil("explain-trace", (of or answer)[0]["trace_id"], REDIS_URL=redis_url)
    assert run.returncode == 0, run.stderr
    return run.stdout


def test_a_stored_turn_says_which_kept_step_of_the_worker_it_continues(redis_url):
    from tests.test_run_steps import run

    step, answer = run(1_700_000_000 * 10**9, "Where is order A-1001?")

    said = explained_after_the_worker(redis_url, step, answer)

    assert f"usage: it continues a run whose earlier model calls are traces of their own ({step[0]['trace_id']})" in said


def test_a_call_named_only_by_its_tool_messages_id_says_which_trace_asked_it():
    recording = ROOT / "tests/fixtures/otlp/frameworks/llamaindex_openlit/agent.json"  # OpenLIT: no assistant message

    run = vigil("explain-trace", str(recording))

    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    asked = [line for line in lines if line.startswith("    its name and arguments: asked by the model call of trace")]
    assert len(asked) == 3  # one per run, each naming the trace of the call that asked for the tool
    assert sum(line.startswith('  tool call lookup_order({"order_id": "A-1001"})') for line in lines) == 3
    taken = [line for line in lines if line.startswith("  its tool call call_") and "'s run: that run's tool message "
             "names its id" in line]
    assert len(taken) == 3  # and each asking trace names the run that took its call


def test_a_stored_turn_says_which_trace_asked_the_call_the_worker_gave_it_by_id(redis_url):
    from tests.test_run_steps_by_id import run

    step, answer = run(1_700_000_000 * 10**9, "Where is order A-1001?")

    said = explained_after_the_worker(redis_url, step, answer)

    assert '  tool call lookup_order({"order_id": "A-1001"}) id=call_1_37313' in said
    assert f"    its name and arguments: asked by the model call of trace {step[0]['trace_id']}" in said
    asking = explained_after_the_worker(redis_url, step, answer, of=step)
    assert f"  its tool call call_1_37313 is a call of trace {answer[0]['trace_id']}'s run" in asking


LANGCHAINJS = ROOT / "tests/fixtures/otlp/frameworks/langchainjs_openllmetry"  # no withWorkflow: traces of their own
TOOL_WRAPPER, TOOL_HOST, TOOL_HOST_SPAN = ("96856f6d2ce9af948f66826a19d95774", "e3a4747605c21cf9862baac030167f67",
                                          "427351a99ae1e382")
ERROR_WRAPPER, ERROR_HOST, ERROR_HOST_SPAN = ("a6cc18a483b8543d6aaa869fd3892275", "52e4175d28b2b54226885ab9ba40d968",
                                              "2768533cdb70625f")
FAILED_TOOL, FAILED_TOOL_SPAN = "81ffe09bd3dc968e9ff4079b1113a6ba", "6d90f5bd1564bc1d"


def said_twice(wrapper: str, host: str, span: str) -> tuple[str, str]:
    """What the wrapper's trace and the turn say of one model call written by two instrumentations."""
    return (f"no turn: the same model call as trace {host}, span {span}, written by another instrumentation (the "
            "same service, conversation sent and answer, at the same time): that trace's turn is the call's, and this "
            "one is counted joined"), (
            f"  written twice: trace {wrapper} is this same model call written by another instrumentation (the same "
            "service, conversation sent and answer, at the same time), so it makes no turn of its own (counted joined)")


def told(host: str) -> tuple[str, str]:
    """What the turn and the failed tool span's trace say of a tool that failed in a trace of its own."""
    return (f"    its error: the tool's span {FAILED_TOOL_SPAN} failed in trace {FAILED_TOOL}, a trace of its own, "
            "and the tool message this run's model was sent states that error"), (
            f"  its failed tool call is a call of trace {host}'s run: the tool message that run's model was sent "
            "states this error, so the run's call has it")


def test_a_file_of_calls_written_twice_in_traces_of_their_own_makes_the_turns_the_worker_stores():
    """OpenLLMetry JS's LangChain handler and its openai instrumentation write each answering call as two traces:
    one turn each run, as the worker stores them (3, not 6), and the wrapper's trace says whose call it is."""
    run = vigil("explain-trace", str(LANGCHAINJS / "tool.json"))

    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert sum(line.startswith("turn ") for line in lines) == 3
    assert sum(line.startswith("no turn: the same model call as trace ") for line in lines) == 3
    wrapper, host = said_twice(TOOL_WRAPPER, TOOL_HOST, TOOL_HOST_SPAN)
    assert lines[lines.index(f"trace {TOOL_WRAPPER}: 1 span(s), 0 log record(s)") + 2] == wrapper
    assert host in lines[lines.index(f"turn {TOOL_HOST_SPAN}: the run is this span: an LLM call that answers, with no "
                                     "agent or container above it (the tool steps before it join it)"):]


def test_a_file_whose_tool_failed_in_a_trace_of_its_own_gives_the_run_its_error_and_says_from_which_trace():
    run = vigil("explain-trace", str(LANGCHAINJS / "error.json"))

    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    call = lines.index('  tool call lookup_order({"order_id": "A-1001"}) id=call_1_46215 error Error: order database '
                       'unreachable for A-1001')
    error, failure = told(ERROR_HOST)
    assert lines[call + 1] == error
    assert lines[lines.index(f"trace {FAILED_TOOL}: 1 span(s), 0 log record(s)") + 3] == failure
    assert sum(line.startswith("turn ") for line in lines) == 2


def test_a_stored_trace_says_what_the_worker_decided_of_a_call_written_twice_and_of_a_tool_failed_apart(redis_url):
    """The recording's traces through the worker's own rules on a real Redis (one sweep), its spans stored: each
    trace explained by id says what the steps store holds of it, in its project."""
    from vigil.worker.assembly.links import Trace
    from vigil.worker.assembly.steps import continue_runs, one_call_once, tell_failures
    from vigil.worker.assembly.traces import trace_name

    traces = recorded("frameworks/langchainjs_openllmetry/error.json")
    client = redis.Redis.from_url(redis_url)
    swept = [Trace(trace_name("default", t), spans, [], assembly(spans)) for t, spans in traces.items()]
    one_call_once(client, swept, keep_s=600, budget=2**20, monitors=[])
    continue_runs(client, swept, keep_s=600, budget=2**20)
    tell_failures(client, swept, keep_s=600, budget=2**20)
    for spans in traces.values():
        store_spans(client, spans, keep_s=600)
    client.close()

    wrapper, host, failed = (vigil("explain-trace", t, REDIS_URL=redis_url).stdout.splitlines()
                             for t in (ERROR_WRAPPER, ERROR_HOST, FAILED_TOOL))

    said_by_wrapper, said_of_wrapper = said_twice(ERROR_WRAPPER, ERROR_HOST, ERROR_HOST_SPAN)
    error, failure = told(ERROR_HOST)
    assert wrapper[-1] == said_by_wrapper and not any(line.startswith("turn ") for line in wrapper)
    assert said_of_wrapper in host and error in host
    assert failed[-1] == failure
