"""Reading the embedded store while a real `vigil worker` process holds it: report, show and alerts check ask the
worker (its read endpoint, found next to the chDB directory under VIGIL_HOME), and nothing else can write there."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import clickhouse_connect
import pytest
from vigil.worker.demo.embedded_redis import EmbeddedRedis
from vigil.worker.store.read_server import endpoint_path, read_endpoint

from tests.pipeline import (
    WorkerProcess,
    make_turn,
    migrated_home,
    send,
    ship,
    wait_drained,
)
from tests.test_eval import LABELLED, labelled_file

CONFIG = Path(__file__).parent / "fixtures" / "pipeline.yaml"


def vigil(home: Path, *args: str, **extra_env: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("CLICKHOUSE_DSN", "VIGIL_CONFIG", "REDIS_URL")}
    env.update(VIGIL_HOME=str(home), COLUMNS="200", **extra_env)
    return subprocess.run([sys.executable, "-m", "vigil.worker", *args], env=env, capture_output=True, text=True,
                          timeout=120, check=False)


def wait_for_endpoint(worker: WorkerProcess, timeout: float = 60):
    deadline = time.monotonic() + timeout  # the worker opens and migrates the store before it serves
    while (endpoint := read_endpoint(worker.home / "chdb")) is None:
        assert worker.process.poll() is None, worker.output()[-3000:]
        assert time.monotonic() < deadline, worker.output()[-3000:]
        time.sleep(0.2)
    return endpoint


def _scored_worker(redis_url: str, home: Path) -> tuple[WorkerProcess, list[dict]]:
    """A worker that has scored 12 turns, dead-lettered 2, and is still running (so it holds the chDB directory)."""
    worker = WorkerProcess(redis_url, home, CONFIG)
    turns = [make_turn(i) for i in range(12)]
    poison = [{**make_turn(100 + i), "output": {"text": "a response object, not a string"}} for i in range(2)]
    ship(redis_url, turns + poison)
    worker.start()
    wait_drained(redis_url, worker)
    return worker, turns


@pytest.fixture(scope="module")
def running(tmp_path_factory):
    """One such worker shared by the tests that only read from it (the eval run adds only its own run), on a Redis
    of its own: the other tests flush the session's."""
    with EmbeddedRedis() as server:
        worker, turns = _scored_worker(server.url, tmp_path_factory.mktemp("running") / "vigil")
        yield worker, turns
        worker.stop()


@pytest.fixture
def running_alone(redis_url, tmp_path):
    """Such a worker of the test's own, for a test that gives it more turns or stops it."""
    worker, turns = _scored_worker(redis_url, tmp_path / "vigil")
    yield worker, turns
    worker.stop()


def test_report_reads_the_scores_while_the_worker_holds_the_embedded_store(running):
    worker, turns = running
    wait_for_endpoint(worker)

    run = vigil(worker.home, "report", "--json")

    assert worker.process.poll() is None, "the worker still runs"
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    monitors = {m["monitor"]: m for m in report["monitors"]}
    assert monitors["relevancy"]["scored"] == len(turns)


def test_report_shows_the_dead_letters_in_every_format_and_in_the_funnel(running):
    worker, _ = running
    wait_for_endpoint(worker)

    report = json.loads(vigil(worker.home, "report", "--json").stdout)
    text = vigil(worker.home, "report")
    page = vigil(worker.home, "report", "--html", str(worker.home / "report.html"))

    dead = report["dead_letters"]
    assert [(d["error_type"], d["agent"], d["letters"]) for d in dead] == [("invalid_turn", "support-bot", 2)]
    assert "output" in dead[0]["reason"]
    assert {f["monitor"]: f["dead_lettered"] for f in report["funnel"]}["relevancy"] == 2
    assert "dead letters: 2 message(s)" in text.stdout and "invalid_turn" in text.stdout
    assert "Dead letters: 2 message(s)" in (worker.home / "report.html").read_text(encoding="utf-8")
    assert page.stdout.strip() == f"HTML report: {(worker.home / 'report.html').resolve()}"  # the page alone, not the text too


def test_show_prints_a_turn_with_its_scores_and_reasons_while_the_worker_runs(running):
    worker, turns = running
    wait_for_endpoint(worker)
    turn = turns[3]

    text = vigil(worker.home, "show", turn["trace_id"])
    data = vigil(worker.home, "show", turn["trace_id"][:12], "--json")

    assert text.returncode == 0, text.stderr
    assert turn["input"][0]["content"] in text.stdout and "Biscuit" in text.stdout
    assert "relevancy" in text.stdout and "reason:" in text.stdout
    scores = json.loads(data.stdout)["scores"]
    assert {s["monitor"] for s in scores} >= {"relevancy"}
    assert all(s["reason"] and s["steps"] for s in scores if s["status"] == "scored")


def test_alerts_check_runs_while_the_worker_runs(running):
    worker, _ = running
    wait_for_endpoint(worker)

    run = vigil(worker.home, "alerts", "check")

    assert run.returncode == 0, run.stderr
    assert "alert event(s)" in run.stdout


def test_eval_hands_its_run_to_the_running_workers_writer_and_report_lists_it(running, tmp_path):
    worker, _ = running
    endpoint = wait_for_endpoint(worker)
    dataset = labelled_file(tmp_path)

    run = vigil(worker.home, "eval", "--dataset", str(dataset), "--scorer", "answer_relevancy", "--json",
                REDIS_URL=worker.env["REDIS_URL"])

    assert run.returncode == 0, run.stderr
    run_id = json.loads(run.stdout)["run_id"]
    assert f"kept as run {run_id}" in run.stderr and "through the running worker's writer" in run.stderr
    client = clickhouse_connect.get_client(host=endpoint.host, port=endpoint.port, password=endpoint.password,
                                           compress=False)
    deadline = time.monotonic() + 30
    while not (rows := client.query("SELECT run_id, scorer, n FROM judge_evals WHERE run_id = {r:String}",
                                    parameters={"r": run_id}).result_rows):
        assert time.monotonic() < deadline, worker.output()[-3000:]
        time.sleep(0.2)
    assert rows == [(run_id, "answer_relevancy", len(LABELLED))]
    listed = json.loads(vigil(worker.home, "report", "--json").stdout)["judge_evals"]
    assert [e["run_id"] for e in listed] == [run_id]


def test_the_read_endpoint_refuses_writes_and_strangers(running):
    worker, _ = running
    endpoint = wait_for_endpoint(worker)
    client = clickhouse_connect.get_client(host=endpoint.host, port=endpoint.port, password=endpoint.password,
                                           compress=False)
    with pytest.raises(Exception, match="only read-only statements"):
        client.command("TRUNCATE TABLE scores")
    with pytest.raises(Exception, match="only inserts into alerts"):
        client.insert("scores", [["x"]], column_names=["trace_id"])
    with pytest.raises(Exception, match="AUTHENTICATION_FAILED|wrong password"):
        clickhouse_connect.get_client(host=endpoint.host, port=endpoint.port, password="guess", compress=False)
    assert oct(endpoint_path(worker.home / "chdb").stat().st_mode & 0o777) == "0o600"


def test_after_the_worker_stops_the_endpoint_is_gone_and_report_opens_the_store_itself(running_alone):
    worker, turns = running_alone
    wait_for_endpoint(worker)
    assert worker.stop() == 0

    run = vigil(worker.home, "report", "--json")

    assert not endpoint_path(worker.home / "chdb").exists()
    assert run.returncode == 0, run.stderr
    assert {m["monitor"]: m["scored"] for m in json.loads(run.stdout)["monitors"]}["relevancy"] == len(turns)


def _dump_dom(url: str, tmp_path: Path) -> str:
    """The page as headless Chromium renders it (scripts run), as tests/test_report_html.py runs Chromium."""
    chromium = "/usr/bin/chromium"
    assert shutil.which(chromium), "chromium is missing: `make system-deps` installs it (apt-get install chromium)"
    return subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           "--disable-background-networking", "--disable-component-update", "--disable-sync",
                           f"--user-data-dir={tmp_path / 'chromium-profile'}", "--dump-dom", url],
                          capture_output=True, text=True, timeout=180, check=True).stdout


def test_report_serve_shows_the_live_report_and_new_scores_on_the_next_load(running_alone, redis_url, tmp_path):
    worker, turns = running_alone
    wait_for_endpoint(worker)
    env = {k: v for k, v in os.environ.items() if k not in ("CLICKHOUSE_DSN", "VIGIL_CONFIG")}
    env["VIGIL_HOME"] = str(worker.home)
    server = subprocess.Popen([sys.executable, "-m", "vigil.worker", "report", "--serve", "--port", "0", "--refresh", "5"],
                              env=env, stderr=subprocess.PIPE, text=True)
    try:
        line = server.stderr.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+/", line).group(0)

        dom = _dump_dom(url, tmp_path)
        assert '<meta http-equiv="refresh" content="5">' in dom
        assert "data-chart=" in dom and "relevancy" in dom
        before = json.loads(urllib.request.urlopen(url + "report.json", timeout=60).read())

        more = [make_turn(200 + i) for i in range(5)]
        send(redis_url, more)
        wait_drained(redis_url, worker)
        after = json.loads(urllib.request.urlopen(url + "report.json", timeout=60).read())

        scored = {m["monitor"]: m["scored"] for m in before["monitors"]}["relevancy"]
        assert {m["monitor"]: m["scored"] for m in after["monitors"]}["relevancy"] == scored + len(more)
        assert scored == len(turns)
    finally:
        server.terminate()
        server.wait(30)


def test_the_worker_names_the_monitors_it_loaded(running):
    worker, _ = running
    wait_for_endpoint(worker)

    assert ("monitors (2): relevancy (answer_relevancy, rate 1, judge offline), relevancy-half (answer_relevancy, "
            "rate 0.5, judge offline)") in worker.output()


def test_judge_status_reads_the_configured_judges_and_their_calls_from_the_store(running):
    worker, _ = running
    wait_for_endpoint(worker)
    env = {k: v for k, v in os.environ.items() if k != "CLICKHOUSE_DSN"}
    env.update(VIGIL_HOME=str(worker.home), REDIS_URL=worker.env["REDIS_URL"], VIGIL_CONFIG=str(CONFIG),
               COLUMNS="200")

    run = subprocess.run([sys.executable, "-m", "vigil.worker", "judge", "status"], env=env, capture_output=True,
                         text=True, timeout=120, check=False)

    assert run.returncode == 0, run.stderr
    row = next(line for line in run.stdout.splitlines() if "offline" in line)
    assert "baseline (offline)" in row and "active" in row
    calls = json.loads(vigil(worker.home, "report", "--json").stdout)["judges"]
    assert calls and str(calls[0]["calls"] + calls[0]["cache_hits"]) in row.split()


def test_a_command_that_needs_the_store_to_itself_says_in_one_line_that_the_worker_holds_it(running):
    worker, _ = running
    endpoint = wait_for_endpoint(worker)

    run = vigil(worker.home, "migrate")

    assert run.returncode != 0 and "Traceback" not in run.stderr
    expected = (f"vigil: error: the embedded store {(worker.home / 'chdb').resolve()} is held by a running "
                f"`vigil worker` (pid {endpoint.pid}), which serves reads (`vigil report`, `vigil alerts check`) but "
                "no other use: stop it first")
    assert run.stderr.strip().splitlines() == [expected]


def test_a_stale_endpoint_record_does_not_stop_report_from_opening_the_store_itself(tmp_path):
    home = migrated_home(tmp_path / "vigil")
    # a worker killed with -9 leaves its record; its pid may now name another live process (this one)
    endpoint_path(home / "chdb").write_text(json.dumps({"pid": os.getpid(), "host": "127.0.0.1", "port": 1,
                                                        "password": "x"}), encoding="utf-8")

    run = vigil(home, "report", "--json")

    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["monitors"] == []
