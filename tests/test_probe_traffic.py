"""vigil's own traffic is tagged at the source and never sampled again: a multi-turn monitor's follow-up questions
reach the live agent marked as vigil's, the agent's own hook records that origin, and ingest stores those turns but
samples none of them (funnel stage `probe`). Real worker process, real Redis, chDB; the agent under test is a small
OpenAI-compatible server in this process with the SDK hook, as an agent would run it."""

from __future__ import annotations

import asyncio
import threading
import uuid

import pytest
import yaml
from aiohttp import web
from vigil.producers import Monitor, origin_of
from vigil.schemas import ORIGIN_HEADER
from vigil.worker.store import connect

from tests.pipeline import WorkerProcess, send, wait_drained

QUESTION = "How long do refunds take?"
REFERENCE = "Refunds are issued within fourteen days to the original payment card."


class HookedAgent:
    """A live agent: answers chat requests, and captures each turn with the SDK hook, passing vigil's origin on."""

    def __init__(self, monitor: Monitor) -> None:
        self.monitor = monitor
        self.seen: list[tuple[str | None, dict]] = []  # (origin header, OpenAI metadata) per request
        self.base_url = ""
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None

    async def _chat(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.seen.append((request.headers.get(ORIGIN_HEADER), body.get("metadata") or {}))
        answer = "Refunds go back to the original payment card."
        self.monitor.capture(input=body["messages"], output=answer,
                             origin=origin_of(request.headers, body.get("metadata")))
        return web.json_response({
            "id": uuid.uuid4().hex, "object": "chat.completion", "created": 0, "model": body.get("model", "kb"),
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": answer}}],
        })

    def __enter__(self) -> HookedAgent:
        async def serve() -> None:
            app = web.Application()
            app.router.add_post("/v1/chat/completions", self._chat)
            self._runner = web.AppRunner(app, access_log=None)
            await self._runner.setup()
            site = web.TCPSite(self._runner, "127.0.0.1", 0)
            await site.start()
            self.base_url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/v1"  # type: ignore

        self._loop.run_until_complete(serve())
        threading.Thread(target=self._loop.run_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)  # type: ignore[union-attr]
        self._loop.call_soon_threadsafe(self._loop.stop)


@pytest.fixture
def agent(redis_url):
    monitor = Monitor(redis_url=redis_url, project="acme", agent="kb-bot", flush_interval=0.05)
    with HookedAgent(monitor) as running:
        yield running
    monitor.shutdown(5)


def test_a_probes_follow_ups_captured_by_the_agents_own_hook_are_never_scored(redis_url, tmp_path, agent):
    config = tmp_path / "vigil.yaml"
    config.write_text(yaml.safe_dump({
        "judges": [{"name": "offline", "kind": "baseline"}],
        "monitors": [
            {"name": "follow-ups", "scorer": "multi_turn", "judge": "offline",
             "params": {"turns": 3, "agent": {"base_url": agent.base_url, "model": "kb"}}},
            {"name": "relevancy", "scorer": "answer_relevancy", "judge": "offline", "reason": "template"},
        ],
    }))
    live = {"trace_id": uuid.uuid4().hex, "project": "acme", "agent": "kb-bot", "reference": REFERENCE,
            "input": [{"role": "user", "content": QUESTION}], "output": "Let me check that for you."}
    worker = WorkerProcess(redis_url, tmp_path / "vigil", config).start()
    try:
        send(redis_url, [live])
        wait_drained(redis_url, worker)
        assert agent.monitor.flush(10), "the agent's hook shipped its turns"
        wait_drained(redis_url, worker)
    finally:
        assert worker.stop() == 0

    store = connect(worker.dsn)
    follow_ups = {r[0] for r in store.query("SELECT trace_id FROM traces WHERE trace_id != %(live)s",
                                            parameters={"live": live["trace_id"]}).result_rows}
    scored = store.query("SELECT trace_id, monitor FROM scores FINAL").result_rows
    stages = store.query("SELECT monitor, stage, count() FROM pipeline_events WHERE trace_id != %(live)s "
                         "GROUP BY monitor, stage ORDER BY monitor, stage",
                         parameters={"live": live["trace_id"]}).result_rows

    assert agent.seen and {seen for seen, _ in agent.seen} == {"follow_up"}
    assert all(metadata == {"vigil_origin": "follow_up"} for _, metadata in agent.seen)
    assert len(follow_ups) == len(agent.seen), "every follow-up the agent answered was captured and stored"
    assert sorted(scored) == [(live["trace_id"], "follow-ups"), (live["trace_id"], "relevancy")]
    n = len(follow_ups)
    assert stages == [("", "received", n), ("follow-ups", "probe", n), ("relevancy", "probe", n)]
