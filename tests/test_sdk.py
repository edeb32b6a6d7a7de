"""The producer SDK against a real redis-server: what reaches the ingest queue, and what happens when it can't."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from openai.types.chat import ChatCompletion
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from vigil.producers import (
    CelerySender,
    DropReason,
    Monitor,
    MonitorSettings,
    ReplayProgress,
    current_turn,
    replay,
)
from vigil.schemas import Turn
from vigil.schemas.backoff import backoff
from vigil.worker.demo.embedded_redis import EmbeddedRedis, free_port
from vigil.worker.store import connect

from tests.pipeline import WorkerProcess, wait_drained

PIPELINE_CONFIG = Path(__file__).parent / "fixtures" / "pipeline.yaml"

MakeMonitor = Callable[..., Monitor]


def ingested(url: str) -> list[list[dict[str, Any]]]:
    """The batches on the ``vigil.ingest`` list, oldest first, decoded from their Celery envelopes."""
    client = redis.Redis.from_url(url)
    try:
        raw = client.lrange("vigil.ingest", 0, -1)
    finally:
        client.close()
    batches = []
    for message in reversed(raw):  # kombu LPUSHes, workers BRPOP: the tail is the oldest
        envelope = json.loads(message)
        assert envelope["headers"]["task"] == "vigil.ingest"
        assert envelope["content-type"] == "application/json"
        assert envelope["properties"]["body_encoding"] == "base64"
        args, kwargs, _embed = json.loads(base64.b64decode(envelope["body"]))
        assert set(kwargs) <= {"sender"} and len(args) == 1  # the intake names who sent it
        batches.append(args[0])
    return batches


def turns(url: str) -> list[dict[str, Any]]:
    return [turn for batch in ingested(url) for turn in batch]


def down_url() -> str:
    return f"redis://127.0.0.1:{free_port()}/0"


@pytest.fixture
def make_monitor(tmp_path: Path) -> Iterator[MakeMonitor]:
    """Monitors that ship only when a batch fills or a test flushes, each with its own spool; shut down after."""
    made: list[Monitor] = []

    def make(url: str, **settings: Any) -> Monitor:
        settings.setdefault("spool_path", tmp_path / f"spool-{len(made)}.jsonl")
        settings.setdefault("flush_interval", 3600)
        settings.setdefault("agent", "support-bot")
        monitor = Monitor(url, **settings)
        made.append(monitor)
        return monitor

    yield make
    for monitor in made:
        monitor.shutdown(timeout=5)


@pytest.fixture
def private_redis() -> Iterator[EmbeddedRedis]:
    """A redis-server of the test's own, free to be stopped, frozen and restarted."""
    server = EmbeddedRedis().start()
    yield server
    if server.process is not None and server.process.poll() is None:
        os.kill(server.process.pid, signal.SIGCONT)
    server.stop()


class ObservedSender:
    """The real Celery transport, with events marking when the shipper enters and leaves its first send."""

    def __init__(self, inner: CelerySender) -> None:
        self.inner = inner
        self.entered = threading.Event()
        self.returned = threading.Event()

    def send(self, batch: list[dict[str, Any]]) -> None:
        self.entered.set()
        try:
            self.inner.send(batch)
        finally:
            self.returned.set()

    def close(self) -> None:
        self.inner.close()


# -- the wire ------------------------------------------------------------------------------------------------


def test_captured_turns_arrive_as_one_celery_task_message_per_batch(redis_url, make_monitor):
    monitor = make_monitor(redis_url, project="shop", environment="staging")

    monitor.capture(input="Where is my order?", output="It ships today.", contexts=["Orders ship in 24h."])
    monitor.capture({"input": [{"role": "user", "content": "Hi"}], "output": "Hello", "tags": ["greeting"]})
    assert monitor.flush(timeout=10)

    [batch] = ingested(redis_url)
    first, second = batch
    assert first["input"] == [{"role": "user", "content": "Where is my order?"}]
    assert first["contexts"] == [{"text": "Orders ship in 24h."}]
    assert (first["project"], first["agent"], first["environment"]) == ("shop", "support-bot", "staging")
    assert len(first["trace_id"]) == 32 and first["trace_id"] != second["trace_id"]
    assert second["tags"] == ["greeting"]
    assert [Turn.model_validate(turn).output for turn in batch] == ["It ships today.", "Hello"]


def test_every_batch_costs_exactly_one_redis_transaction(redis_url, make_monitor):
    """Given a warmed-up connection, when 50 turns ship in batches of 10, Redis sees 5 transactions, each one
    LPUSH with its journal entry (``vigil.schemas.broker``) sent as one pipelined MULTI/EXEC, and nothing else."""
    monitor = make_monitor(redis_url, batch_size=10)
    monitor.capture(input="warm-up", output="declares the queue once")
    assert monitor.flush(timeout=10)
    client = redis.Redis.from_url(redis_url)
    client.config_resetstat()

    for i in range(50):
        monitor.capture(input=f"q{i}", output=f"a{i}")
    assert monitor.flush(timeout=10)

    calls = {name: stats["calls"] for name, stats in client.info("commandstats").items()}
    assert {name: n for name, n in calls.items() if name not in ("cmdstat_config", "cmdstat_info")} == {
        "cmdstat_multi": 5, "cmdstat_lpush": 5, "cmdstat_hset": 5, "cmdstat_zadd": 5, "cmdstat_exec": 5,
    }
    assert [len(batch) for batch in ingested(redis_url)] == [1, 10, 10, 10, 10, 10]


class _HostileMapping(dict):
    def __iter__(self):
        raise RuntimeError("boom")

    def keys(self):
        raise RuntimeError("boom")


_SELF: dict[str, Any] = {"output": "loops"}
_SELF["again"] = _SELF


@pytest.mark.parametrize(
    ("args", "kwargs", "reason"),
    [
        pytest.param(("a string",), {}, DropReason.BAD_ARGUMENT, id="a string instead of a turn"),
        pytest.param((42,), {}, DropReason.BAD_ARGUMENT, id="a number instead of a turn"),
        pytest.param(([("input", "q")],), {}, DropReason.BAD_ARGUMENT, id="a list instead of a turn"),
        pytest.param((_HostileMapping(),), {"output": "x"}, DropReason.BAD_ARGUMENT, id="a mapping that raises"),
        pytest.param((Turn(trace_id="t", agent="a", input=[{"role": "user", "content": "q"}], output="a"),),
                     {"output": "b"}, DropReason.BAD_ARGUMENT, id="a Turn plus fields"),
        pytest.param((), {"output": object()}, DropReason.UNSERIALIZABLE, id="an object as a field"),
        pytest.param((), {"metadata": {"ids": {1, 2}}}, DropReason.UNSERIALIZABLE, id="a set deep inside"),
        pytest.param((_SELF,), {}, DropReason.UNSERIALIZABLE, id="a dict that contains itself"),
        pytest.param((), {"metadata": {(1, 2): "tuple key"}}, DropReason.UNSERIALIZABLE, id="a tuple as a key"),
    ],
)
def test_garbage_is_counted_with_its_reason_and_never_raised(redis_url, make_monitor, args, kwargs, reason):
    monitor = make_monitor(redis_url)

    monitor.capture(*args, **kwargs)
    monitor.capture(input="next", output="still fine")
    assert monitor.flush(timeout=10)

    assert monitor.counters().dropped == {reason: 1}
    assert [turn["output"] for turn in turns(redis_url)] == ["still fine"]


def test_invalid_utf8_bytes_are_dropped_at_capture_as_invalid_naming_the_field(redis_url, make_monitor):
    """The worker would dead-letter such a turn; the SDK refuses it first, so the agent's counters say so."""
    monitor = make_monitor(redis_url)

    monitor.capture(input="q", output=b"caf\xe9")
    monitor.capture(input="q", output="fine")
    assert monitor.flush(timeout=10)

    counters = monitor.counters()
    assert counters.dropped == {DropReason.INVALID: 1}
    assert "output: invalid UTF-8" in counters.drop_details[DropReason.INVALID]
    assert [turn["output"] for turn in turns(redis_url)] == ["fine"]


def test_trace_ids_come_from_the_active_opentelemetry_span(redis_url, make_monitor):
    monitor = make_monitor(redis_url)
    tracer = TracerProvider().get_tracer("agent")

    with tracer.start_as_current_span("turn") as span:
        monitor.capture(input="inside", output="a")
    monitor.capture(input="outside", output="a")
    monitor.capture(input="explicit", output="a", trace_id="my-trace")
    assert monitor.flush(timeout=10)

    inside, outside, explicit = turns(redis_url)
    context = span.get_span_context()
    assert (inside["trace_id"], inside["span_id"]) == (format(context.trace_id, "032x"), format(context.span_id, "016x"))
    assert outside["trace_id"] not in (inside["trace_id"], "") and "span_id" not in outside
    assert explicit["trace_id"] == "my-trace" and "span_id" not in explicit


# -- outages -------------------------------------------------------------------------------------------------


def test_an_agent_loop_rides_out_a_redis_outage_and_every_turn_arrives_once_in_order(private_redis, make_monitor):
    """Given a monitor that has shipped, when Redis stops, the agent captures 1,000 turns, and a new redis-server
    comes up on the same port, then every capture returned True, the turns waited in the spool, and all of them
    arrive exactly once and in capture order."""
    monitor = make_monitor(private_redis.url, batch_size=50, backoff_initial=3600, backoff_max=3600)
    monitor.capture(input="before", output="the outage", metadata={"seq": "-1"})
    assert monitor.flush(timeout=10)
    private_redis.stop()

    accepted = [monitor.capture(input=f"q{i}", output=f"a{i}", metadata={"seq": str(i)}) for i in range(1000)]

    assert all(accepted)
    assert monitor.flush(timeout=10) is False  # one forced attempt, refused: everything goes to the spool
    during = monitor.counters()
    assert (during.broker_down, during.spool_pending, during.dropped_total) == (True, 1000, 0)

    restarted = EmbeddedRedis(port=private_redis.port).start()
    try:
        assert monitor.flush(timeout=30)
        seqs = [turn["metadata"]["seq"] for turn in turns(restarted.url)]
    finally:
        restarted.stop()
    assert seqs == [str(i) for i in range(1000)]  # the list was lost with the old server; only the outage's turns
    after = monitor.counters()
    assert (after.captured, after.shipped, after.spooled, after.spool_pending, after.dropped_total) == (
        1001, 1001, 1000, 0, 0,
    )


def test_the_shipper_drains_the_spool_by_itself_when_the_broker_returns(private_redis, make_monitor):
    monitor = make_monitor(private_redis.url, batch_size=10, flush_interval=0.05, backoff_initial=0.05, backoff_max=0.2)
    private_redis.stop()
    for i in range(25):
        monitor.capture(input=f"q{i}", output="a", metadata={"seq": str(i)})
    monitor.flush(timeout=10)

    restarted = EmbeddedRedis(port=private_redis.port).start()
    try:
        arrived = threading.Event()
        for _ in range(600):  # polls the outcome; the shipper's own backoff decides when it comes
            if monitor.counters().shipped == 25:
                arrived.set()
                break
            arrived.wait(0.05)
        seqs = [turn["metadata"]["seq"] for turn in turns(restarted.url)]
    finally:
        restarted.stop()
    assert arrived.is_set()
    assert seqs == [str(i) for i in range(25)]


def test_capture_returns_while_the_shipper_is_stuck_in_a_network_call(private_redis, make_monitor):
    """Given Redis frozen (SIGSTOP: connections hang, they are not refused) and the shipper blocked inside a send,
    when the agent captures 1,000 turns, then every call returns while that send still has not returned: capture
    never waits on the network. After Redis thaws, every turn arrives exactly once, in order."""
    transport = ObservedSender(CelerySender(private_redis.url, socket_timeout=120))
    monitor = make_monitor(private_redis.url, sender=transport, batch_size=100)
    os.kill(private_redis.process.pid, signal.SIGSTOP)
    monitor.capture(input="first", output="a", metadata={"seq": "-1"})
    monitor.flush(timeout=0)
    assert transport.entered.wait(timeout=60)

    accepted = [monitor.capture(input=f"q{i}", output="a", metadata={"seq": str(i)}) for i in range(1000)]

    assert not transport.returned.is_set(), "the shipper's send came back before the agent loop ended"
    assert all(accepted) and monitor.counters().captured == 1001
    os.kill(private_redis.process.pid, signal.SIGCONT)
    assert monitor.flush(timeout=60)
    assert [turn["metadata"]["seq"] for turn in turns(private_redis.url)] == [str(i) for i in range(-1, 1000)]


def test_shutdown_returns_by_its_deadline_even_with_the_shipper_stuck(private_redis, make_monitor):
    transport = ObservedSender(CelerySender(private_redis.url, socket_timeout=120))
    monitor = make_monitor(private_redis.url, sender=transport)
    os.kill(private_redis.process.pid, signal.SIGSTOP)
    monitor.capture(input="q", output="a")
    monitor.flush(timeout=0)
    assert transport.entered.wait(timeout=60)

    assert monitor.shutdown(timeout=0.2) is False
    assert not transport.returned.is_set()  # it gave up waiting; it did not wait the network out
    os.kill(private_redis.process.pid, signal.SIGCONT)


def test_the_spool_stays_within_its_bound_and_counts_overflow_as_spool_full(make_monitor, tmp_path):
    spool = tmp_path / "small.jsonl"
    monitor = make_monitor(down_url(), spool_path=spool, spool_max_bytes=2_000, batch_size=10)

    for i in range(100):
        monitor.capture(input=f"q{i}", output="a" * 50)
    assert monitor.flush(timeout=10) is False

    counters = monitor.counters()
    assert 0 < counters.spooled < 100
    assert counters.spooled + counters.dropped[DropReason.SPOOL_FULL] == 100
    assert counters.spool_bytes == spool.stat().st_size <= 2_000
    assert len(spool.read_bytes().splitlines()) == counters.spooled


def test_a_full_queue_sheds_new_turns_and_counts_them(make_monitor):
    """The shipper sleeps (long interval, batches bigger than the queue), so the queue only fills."""
    monitor = make_monitor(down_url(), max_queue=10, batch_size=1_000)

    accepted = [monitor.capture(input=f"q{i}", output="a") for i in range(15)]

    assert accepted == [True] * 10 + [False] * 5
    assert monitor.counters().dropped == {DropReason.QUEUE_FULL: 5}


def test_turns_spooled_at_shutdown_are_shipped_by_the_next_process(redis_url, make_monitor, tmp_path):
    spool = tmp_path / "carry-over.jsonl"
    first = make_monitor(down_url(), spool_path=spool)
    for i in range(5):
        first.capture(input=f"q{i}", output="a", metadata={"seq": str(i)})
    assert first.shutdown(timeout=10) is False
    assert first.counters().spool_pending == 5

    second = make_monitor(redis_url, spool_path=spool)
    assert second.flush(timeout=10)

    assert [turn["metadata"]["seq"] for turn in turns(redis_url)] == ["0", "1", "2", "3", "4"]
    assert spool.stat().st_size == 0
    assert second.shutdown(timeout=10) and not spool.exists()


# -- lifecycle -----------------------------------------------------------------------------------------------


def test_shutdown_ships_everything_then_refuses_new_turns(redis_url, make_monitor):
    monitor = make_monitor(redis_url)
    for i in range(10):
        monitor.capture(input=f"q{i}", output="a")

    assert monitor.shutdown(timeout=10)
    assert monitor.capture(input="late", output="a") is False

    assert len(turns(redis_url)) == 10
    assert monitor.counters().dropped == {DropReason.CLOSED: 1}


def test_a_forked_child_ships_its_own_turns_and_not_the_parents(redis_url, make_monitor):
    monitor = make_monitor(redis_url)
    monitor.capture(input="parent, before the fork", output="a")

    pid = os.fork()
    if pid == 0:  # the child: a fresh queue and shipper
        ok = monitor.counters().queued == 0 and monitor.capture(input="child", output="a") and monitor.flush(10)
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0

    assert monitor.flush(timeout=10)
    assert sorted(turn["input"][0]["content"] for turn in turns(redis_url)) == ["child", "parent, before the fork"]


# -- agent-function helpers ----------------------------------------------------------------------------------


def test_a_turn_scope_records_fields_times_and_the_span(redis_url, make_monitor):
    monitor = make_monitor(redis_url)
    tracer = TracerProvider().get_tracer("agent")

    with tracer.start_as_current_span("turn") as span, monitor.turn(input="q", session_id="s1") as turn:
        turn.set(output="a", contexts=["doc one"])
    assert monitor.flush(timeout=10)

    [wire] = turns(redis_url)
    parsed = Turn.model_validate(wire)
    assert (parsed.output, parsed.session_id, parsed.context_texts) == ("a", "s1", ["doc one"])
    assert parsed.started_at <= parsed.ended_at
    assert parsed.trace_id == format(span.get_span_context().trace_id, "032x")


def test_a_turn_scope_lets_the_agents_exception_through_and_records_its_type_and_message(redis_url, make_monitor):
    monitor = make_monitor(redis_url)

    with pytest.raises(KeyError), monitor.turn(input="q", output="partial"):
        raise KeyError("missing")
    assert monitor.flush(timeout=10)

    assert turns(redis_url)[0]["metadata"] == {"error.type": "KeyError", "error.message": "'missing'"}


def test_a_decorated_function_is_one_turn_per_call_sync_and_async(redis_url, make_monitor):
    monitor = make_monitor(redis_url)

    @monitor.trace(tags=["sync"])
    def answer(question: str, style: str = "short") -> str:
        current_turn().set(contexts=[f"doc for {question}"])
        return f"answer to {question}"

    @monitor.trace(input_arg="prompt", tags=["async"])
    async def answer_later(user_id: int, prompt: str) -> str:
        return "later"

    assert answer("q1") == "answer to q1"
    assert asyncio.run(answer_later(7, prompt="q2")) == "later"
    assert monitor.flush(timeout=10)

    sync, async_ = (Turn.model_validate(turn) for turn in turns(redis_url))
    assert (sync.question, sync.output, sync.context_texts, sync.tags) == ("q1", "answer to q1", ["doc for q1"], ["sync"])
    assert (async_.question, async_.output, async_.tags) == ("q2", "later", ["async"])


# -- replay --------------------------------------------------------------------------------------------------


def test_replay_captures_a_jsonl_file_in_order_and_reports_bad_lines(redis_url, make_monitor, tmp_path):
    path = tmp_path / "turns.jsonl"
    lines = [json.dumps({"input": f"q{i}", "output": "a", "trace_id": f"t{i}"}) for i in range(5)]
    path.write_text("\n".join([*lines[:2], "{not json", "", *lines[2:], "[1, 2]"]) + "\n")
    progress: list[ReplayProgress] = []
    monitor = make_monitor(redis_url, max_queue=4, batch_size=2)

    result = replay(path, monitor, on_progress=progress.append)

    assert (result.lines, result.captured, result.invalid_lines, result.delivered) == (8, 5, [3, 8], True)
    assert result.counters.dropped_total == 0
    assert [turn["trace_id"] for turn in turns(redis_url)] == ["t0", "t1", "t2", "t3", "t4"]
    assert len(progress) == 8 and progress[-1].bytes_read == progress[-1].bytes_total


# -- backoff arithmetic --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("attempt", "jitter", "expected"),
    [
        pytest.param(1, 0.0, 0.25, id="first retry, no jitter: half the initial delay"),
        pytest.param(1, 1.0, 0.5, id="first retry, full jitter: the initial delay"),
        pytest.param(3, 1.0, 2.0, id="doubles per attempt"),
        pytest.param(50, 1.0, 30.0, id="capped at the maximum"),
        pytest.param(10_000, 0.5, 22.5, id="huge attempts do not overflow"),
    ],
)
def test_backoff_grows_exponentially_with_equal_jitter_under_a_cap(attempt, jitter, expected):
    assert backoff(attempt, initial=0.5, maximum=30.0, rand=lambda: jitter) == expected


def test_without_jitter_the_backoff_is_the_capped_exponential_itself():
    assert [backoff(n, initial=2.0, maximum=30.0, rand=None) for n in range(1, 7)] == [2, 4, 8, 16, 30, 30]


# -- configuration and metrics -------------------------------------------------------------------------------


def test_the_broker_url_comes_from_redis_url_in_the_environment(redis_url, make_monitor, monkeypatch):
    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.setenv("VIGIL_ENVIRONMENT", "canary")
    monitor = make_monitor(None)

    monitor.capture(input="q", output="a")
    assert monitor.flush(timeout=10)

    assert monitor.settings.redis_url == redis_url
    assert turns(redis_url)[0]["environment"] == "canary"


def test_the_counters_are_opentelemetry_metrics(make_monitor):
    reader = InMemoryMetricReader()
    monitor = make_monitor(down_url(), max_queue=2, batch_size=100, meter_provider=MeterProvider(metric_readers=[reader]))

    for _ in range(3):
        monitor.capture(input="q", output="a")

    points = {
        (metric.name, tuple(sorted((k, v) for k, v in point.attributes.items() if not k.startswith("vigil.")))): point.value
        for resource in reader.get_metrics_data().resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        for point in metric.data.data_points
    }
    assert points[("vigil.sdk.turns", (("outcome", "captured"),))] == 2
    assert points[("vigil.sdk.turns.dropped", (("reason", "queue_full"),))] == 1
    assert points[("vigil.sdk.queue.depth", ())] == 2


# -- what agents actually pass: converted, or dropped with a reason, never dead-lettered downstream ---------


class _AIMessage:
    """Shaped like a LangChain AIMessage: the answer is ``.content``."""

    def __init__(self, content: str) -> None:
        self.content = content


def _chat_completion(text: str) -> ChatCompletion:
    return ChatCompletion.model_validate({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "gpt-x",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
    })


@pytest.mark.parametrize(
    "returned",
    [
        pytest.param(_chat_completion("It ships today."), id="an openai ChatCompletion object"),
        pytest.param({"choices": [{"message": {"role": "assistant", "content": "It ships today."}}]},
                     id="a chat completion as a dict"),
        pytest.param({"content": "It ships today.", "role": "assistant"}, id="a dict with content"),
        pytest.param({"output": "It ships today.", "intermediate_steps": []}, id="a dict with output"),
        pytest.param({"text": "It ships today."}, id="a dict with text"),
        pytest.param(_AIMessage("It ships today."), id="a message object with content"),
        pytest.param({"content": [{"type": "text", "text": "It ships"}, {"type": "text", "text": "today."}]},
                     id="content blocks"),
    ],
)
def test_a_decorated_function_returning_a_response_object_or_dict_ships_its_answer_text(redis_url, make_monitor, returned):
    monitor = make_monitor(redis_url)

    @monitor.trace()
    def answer(question: str) -> Any:
        return returned

    assert answer("Where is my order?") is returned
    assert monitor.flush(timeout=10)

    [wire] = turns(redis_url)
    assert Turn.model_validate(wire).output.replace("\n", " ") == "It ships today."
    assert monitor.counters().dropped == {}


@pytest.mark.parametrize(
    ("output", "named"),
    [
        pytest.param({"status": 200, "items": []}, "a dict with no answer text", id="a dict without text"),
        pytest.param(42, "a int with no answer text", id="a number"),
        pytest.param(["answer", ["doc 1"]], "a list with no answer text", id="a tuple-ish list"),
    ],
)
def test_an_output_with_no_text_in_it_is_dropped_at_capture_naming_what_it_was(redis_url, make_monitor, output, named):
    monitor = make_monitor(redis_url)

    monitor.capture(input="q", output=output)
    assert monitor.flush(timeout=10)

    counters = monitor.counters()
    assert counters.dropped == {DropReason.UNSERIALIZABLE: 1}
    assert counters.drop_details[DropReason.UNSERIALIZABLE].startswith(f"output: {named}")
    assert turns(redis_url) == []


def test_metadata_values_and_tags_that_are_not_strings_are_shipped_as_strings(redis_url, make_monitor):
    monitor = make_monitor(redis_url)

    monitor.capture(input="q", output="a", metadata={"release": 2, "beta": True, "ratio": 0.5, "cfg": {"k": [1]},
                                                     "none": None, "name": "x"}, tags=["v", 3])
    assert monitor.flush(timeout=10)

    parsed = Turn.model_validate(turns(redis_url)[0])
    assert parsed.metadata == {"release": "2", "beta": "true", "ratio": "0.5", "cfg": '{"k": [1]}', "none": "null",
                               "name": "x"}
    assert parsed.tags == ["v", "3"]


def test_a_turn_that_is_not_a_turn_is_dropped_at_capture_as_invalid_naming_the_field(redis_url, make_monitor):
    monitor = make_monitor(redis_url)

    monitor.capture(output="an answer to nothing")
    monitor.capture(input=[{"role": "robot", "content": "q"}], output="a")
    assert monitor.flush(timeout=10)

    counters = monitor.counters()
    assert counters.dropped == {DropReason.INVALID: 2}
    assert "input.0.role: Input should be" in counters.drop_details[DropReason.INVALID]
    assert turns(redis_url) == []


def test_a_decorated_function_that_raises_is_recorded_with_its_error_and_the_exception_reaches_the_caller(
    redis_url, make_monitor
):
    monitor = make_monitor(redis_url)
    error = TimeoutError("the model did not answer in 30s")

    @monitor.trace()
    def answer(question: str) -> str:
        raise error

    @monitor.trace()
    async def answer_later(question: str) -> str:
        current_turn().set(output="partial answer")
        raise ValueError("tool failed")

    with pytest.raises(TimeoutError) as caught:
        answer("Where is my order?")
    with pytest.raises(ValueError, match="tool failed"):
        asyncio.run(answer_later("And my refund?"))
    assert monitor.flush(timeout=10)

    assert caught.value is error
    failed, partial = (Turn.model_validate(turn) for turn in turns(redis_url))
    assert (failed.question, failed.output) == ("Where is my order?", "")
    assert failed.metadata == {"error.type": "TimeoutError", "error.message": "the model did not answer in 30s"}
    assert (partial.output, partial.metadata["error.type"]) == ("partial answer", "ValueError")


def test_a_turn_scope_without_an_output_is_dropped_as_no_output_and_says_how_to_fix_it(redis_url, make_monitor):
    monitor = make_monitor(redis_url)

    with monitor.turn(input="q") as turn:
        turn.set(contexts=["a document"])

    @monitor.trace()
    def forgets_to_return(question: str) -> None:
        return None

    forgets_to_return("q")
    assert monitor.flush(timeout=10)

    counters = monitor.counters()
    assert counters.dropped == {DropReason.NO_OUTPUT: 2}
    assert "t.set(output=...)" in counters.drop_details[DropReason.NO_OUTPUT]
    assert turns(redis_url) == []


def test_what_agents_pass_is_scored_by_a_real_worker_and_nothing_is_dead_lettered(redis_url, make_monitor, tmp_path):
    """A response object, a dict, metadata numbers and a function that raised: each one shipped, then scored."""
    monitor = make_monitor(redis_url)

    @monitor.trace(trace_id="raised")
    def crashes(question: str) -> str:
        raise RuntimeError("upstream 503")

    monitor.capture(trace_id="completion", input="Where is my order?", output=_chat_completion("It ships today."))
    monitor.capture(trace_id="dict", input="Where is my order?", output={"output": "It ships today."})
    monitor.capture(trace_id="metadata", input="Where is my order?", output="It ships today.",
                    metadata={"release": 2})
    with pytest.raises(RuntimeError):
        crashes("Where is my order?")
    assert monitor.flush(timeout=10) and monitor.counters().dropped == {}

    worker = WorkerProcess(redis_url, tmp_path / "vigil", PIPELINE_CONFIG).start()
    try:
        wait_drained(redis_url, worker)
    finally:
        assert worker.stop() == 0
    store = connect(worker.dsn)
    scored = dict(store.query(
        "SELECT trace_id, score FROM scores FINAL WHERE monitor = 'relevancy' AND status = 'scored'"
    ).result_rows)
    assert set(scored) == {"completion", "dict", "metadata", "raised"}
    assert scored["raised"] == 0.0  # no answer reached the user: the empty answer scores the bottom of the scale
    assert store.query("SELECT count() FROM dead_letters FINAL").result_rows[0][0] == 0


# -- the spool belongs to its broker and its user -------------------------------------------------------------


def test_two_monitors_on_two_brokers_never_drain_each_others_spool(redis_url, make_monitor, tmp_path, monkeypatch):
    """Same project and agent, same VIGIL_HOME: what was spooled for a broker that is down stays for that broker."""
    monkeypatch.setenv("VIGIL_HOME", str(tmp_path / "home"))
    outage = EmbeddedRedis(port=free_port())
    first = make_monitor(outage.url, spool_path=None)
    for i in range(5):
        first.capture(input=f"q{i}", output="a", metadata={"seq": str(i)})
    assert first.shutdown(timeout=10) is False

    other = make_monitor(redis_url, spool_path=None)
    other.capture(input="for the other broker", output="a")
    assert other.flush(timeout=10)

    assert [turn["input"][0]["content"] for turn in turns(redis_url)] == ["for the other broker"]
    assert first.settings.resolved_spool_path() != other.settings.resolved_spool_path()
    assert first.settings.resolved_spool_path().parent == tmp_path / "home" / "spool"
    outage.start()
    try:
        again = make_monitor(outage.url, spool_path=None)
        assert again.flush(timeout=10)
        assert [turn["metadata"]["seq"] for turn in turns(outage.url)] == ["0", "1", "2", "3", "4"]
    finally:
        outage.stop()


def test_the_spool_path_never_holds_the_broker_password_and_is_logged_once_when_used(make_monitor, tmp_path, caplog):
    url = f"redis://:s3cret-pass@127.0.0.1:{free_port()}/0"
    monitor = make_monitor(url, spool_path=None, home=tmp_path, batch_size=2)
    same_broker = make_monitor(url.replace("s3cret-pass", "rotated"), spool_path=None, home=tmp_path)

    with caplog.at_level("WARNING", logger="vigil.producers"):
        for i in range(6):
            monitor.capture(input=f"q{i}", output="a")
            monitor.flush(timeout=10)

    path = monitor.settings.resolved_spool_path()
    assert "s3cret" not in str(path) and path.exists() and monitor.counters().spooled == 6
    assert path == same_broker.settings.resolved_spool_path()
    announced = [json.loads(r.getMessage()) for r in caplog.records if "vigil.spool_in_use" in r.getMessage()]
    assert [entry["path"] for entry in announced] == [str(path)]


def test_without_vigil_home_the_spool_lives_in_the_users_cache_directory(monkeypatch, tmp_path):
    monkeypatch.delenv("VIGIL_HOME", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))

    path = MonitorSettings(redis_url="redis://broker:6379/0", agent="bot").resolved_spool_path()

    assert path.parent == tmp_path / "cache" / "vigil" / "spool"
    assert path.name.startswith("default-bot-")


def test_tool_calls_in_openai_chat_shape_are_shipped_with_their_arguments_read(redis_url, make_monitor):
    """Chat completions' ``tool_calls``: ``function.arguments`` is JSON text, the message's content is None."""
    monitor = make_monitor(redis_url)
    call = {"id": "call_1", "type": "function",
            "function": {"name": "lookup_order", "arguments": '{"order_id": "A-1001"}'}}

    assert monitor.capture(input=[{"role": "user", "content": "Where is A-1001?"},
                                  {"role": "assistant", "content": None, "tool_calls": [call]},
                                  {"role": "tool", "tool_call_id": "call_1", "content": "shipped"}],
                           output="It has shipped.", tool_calls=[call])
    assert monitor.flush(timeout=10)

    [wire] = turns(redis_url)
    turn = Turn.model_validate(wire)
    assert [(c.name, c.arguments, c.id) for c in turn.tool_calls] == [("lookup_order", {"order_id": "A-1001"},
                                                                       "call_1")]
    assert turn.question == "Where is A-1001?" and turn.input[1].tool_calls[0].id == "call_1"
    assert monitor.counters().dropped == {}


def test_responses_function_call_items_are_shipped_as_tool_calls_with_their_outputs_as_results(
        redis_url, make_monitor):
    monitor = make_monitor(redis_url)
    items = [{"type": "function_call", "call_id": "c1", "name": "lookup_order", "arguments": '{"order_id":"A-1001"}'},
             {"type": "function_call_output", "call_id": "c1", "output": "shipped"}]

    assert monitor.capture(input=[{"role": "user", "content": [{"type": "input_text", "text": "Where is A-1001?"}]},
                                  *items], output="It has shipped.", tool_calls=items)
    assert monitor.flush(timeout=10)

    [wire] = turns(redis_url)
    turn = Turn.model_validate(wire)
    assert [(c.name, c.arguments, c.id, c.result) for c in turn.tool_calls] == [
        ("lookup_order", {"order_id": "A-1001"}, "c1", "shipped")]
    assert [(m.role, m.tool_call_id) for m in turn.input] == [("user", None), ("assistant", None), ("tool", "c1")]
    assert turn.question == "Where is A-1001?"
