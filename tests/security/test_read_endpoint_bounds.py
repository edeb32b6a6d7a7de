"""The read endpoint of a real `vigil worker` holding the embedded store (the process that also runs the writer):
the password is checked from the headers before a body is read, bodies and connections are capped, and a query reads
tables, never the host (no files, URLs or other servers, no INTO OUTFILE, one statement), within a memory and a time
limit. Each test measures the worker (resident memory, files on disk) or the answer, and checks that the report
still reads through the same endpoint."""

from __future__ import annotations

import base64
import threading

import pytest

from tests.abuse import held_connections, raw_request, rss_mb, wait_until
from tests.pipeline import WorkerProcess
from tests.test_cli_read_while_running import CONFIG, vigil, wait_for_endpoint

MB = 2**20


@pytest.fixture(scope="module")
def holder(redis_server, tmp_path_factory):
    home = tmp_path_factory.mktemp("reads") / "vigil"
    worker = WorkerProcess(redis_server.url, home, CONFIG, VIGIL_READ_MAX_MEMORY=str(256 * MB),
                           VIGIL_READ_MAX_SECONDS="3", VIGIL_READ_MAX_CONNECTIONS="6", VIGIL_READ_MAX_BYTES=str(MB))
    worker.start()
    endpoint = wait_for_endpoint(worker)
    yield worker, endpoint
    worker.stop()


def _headers(endpoint, **extra: str) -> dict[str, str]:
    basic = base64.b64encode(f"default:{endpoint.password}".encode()).decode()
    return {"Host": f"127.0.0.1:{endpoint.port}", "Authorization": f"Basic {basic}", **extra}


def query(endpoint, sql: str) -> tuple[int, str]:
    body = sql.encode()
    headers = _headers(endpoint, **{"Content-Length": str(len(body))})
    status, _, answer = raw_request(endpoint.port, "POST", "/", headers, body)
    return status, answer.decode("utf-8", "replace")


def test_unauthenticated_posts_declaring_1_gib_are_refused_before_the_body_is_read(holder):
    worker, endpoint = holder
    before = rss_mb(worker.process.pid)

    answers = [raw_request(endpoint.port, "POST", "/", {"Host": f"127.0.0.1:{endpoint.port}",
                                                        "Content-Length": str(2**30)}, bytes(256 * 1024))
               for _ in range(4)]

    assert [status for status, _, _ in answers] == [401] * 4
    assert rss_mb(worker.process.pid) - before < 50  # it used to read all 4 GiB first: 439 -> 4,532 MB
    assert query(endpoint, "SELECT 1") == (200, "1\n")


def test_a_declared_length_over_the_budget_is_answered_413_before_any_body_is_sent(holder):
    _, endpoint = holder

    status, headers, _ = raw_request(endpoint.port, "POST", "/", _headers(endpoint, **{"Content-Length": str(2**30)}))

    assert status == 413 and headers["connection"] == "close"


@pytest.mark.parametrize("sql,why", [
    pytest.param("SELECT * FROM file('/etc/passwd', 'LineAsString')", "reaches outside", id="file() table function"),
    pytest.param("SELECT file('/etc/passwd')", "reaches outside", id="file() scalar"),
    pytest.param("WITH file('/etc/passwd') AS f SELECT f", "reaches outside", id="file() in WITH"),
    pytest.param("DESCRIBE file('/etc/passwd')", "reaches outside", id="DESCRIBE a file"),
    pytest.param("SELECT * FROM url('http://127.0.0.1:9/', 'LineAsString')", "reaches outside",
                 id="url() to a dead port"),
    pytest.param("SELECT * FROM remote('127.0.0.1:9', system.one)", "reaches outside", id="remote()"),
    pytest.param("SELECT * FROM s3('http://127.0.0.1:9/b/k', 'CSV')", "reaches outside", id="s3()"),
    pytest.param("SELECT 1; SELECT 2", "one statement", id="two statements"),
    pytest.param("INSERT INTO FUNCTION file('/tmp/x', 'TSV') SELECT 1", "read-only", id="INSERT INTO FUNCTION file"),
])
def test_a_statement_that_reaches_the_host_is_refused_403(holder, sql, why):
    _, endpoint = holder

    status, answer = query(endpoint, sql)

    assert status == 403 and why in answer


def test_into_outfile_is_refused_and_no_file_is_written(holder, tmp_path):
    _, endpoint = holder
    target = tmp_path / "out.tsv"

    status, answer = query(endpoint, f"SELECT name FROM system.tables INTO OUTFILE '{target}'")

    assert status == 403 and "INTO OUTFILE" in answer
    assert not target.exists()


def test_a_query_cannot_lift_its_own_limits(holder):
    _, endpoint = holder

    status, answer = query(endpoint, "SELECT count() FROM system.one SETTINGS max_memory_usage = 0")

    assert status == 500 and "readonly" in answer.lower()


def test_a_query_over_the_memory_limit_fails_and_the_worker_stays_small(holder):
    worker, endpoint = holder
    before = rss_mb(worker.process.pid)

    status, answer = query(endpoint, "SELECT length(groupArray(number)) FROM numbers(1000000000)")

    assert status == 500 and "MEMORY_LIMIT_EXCEEDED" in answer
    assert rss_mb(worker.process.pid) - before < 400  # the limit is 256 MB; unbounded, this took ~4.5 GB
    assert query(endpoint, "SELECT 1") == (200, "1\n")


def test_a_query_over_the_time_limit_is_stopped_and_the_next_one_gets_the_handle(holder):
    _, endpoint = holder
    slow: list[tuple[int, str]] = []
    forever = "SELECT count() FROM numbers(10000000000000)"
    thread = threading.Thread(target=lambda: slow.append(query(endpoint, forever)))
    thread.start()

    after = query(endpoint, "SELECT 2")  # waits for the handle at most the time limit, or is told to come back
    thread.join()

    assert slow[0][0] == 500 and "TIMEOUT_EXCEEDED" in slow[0][1]
    assert after == (200, "2\n") or after[0] == 503
    assert query(endpoint, "SELECT 3") == (200, "3\n")


def test_a_foreign_host_header_is_refused(holder):
    _, endpoint = holder

    status, _, _ = raw_request(endpoint.port, "POST", "/", _headers(endpoint, Host="attacker.example",
                                                                    **{"Content-Length": "8"}), b"SELECT 1")

    assert status == 403


def test_connections_over_the_cap_are_answered_503(holder):
    _, endpoint = holder

    answers = []
    with held_connections(endpoint.port, 6):
        # a connection the kernel took is counted once the server accepts it: probe until the six are
        wait_until(lambda: answers.append(raw_request(endpoint.port, "GET", "/ping", {"Host": "127.0.0.1"}))
                   or answers[-1][0] == 503, what="a connection over the cap to be answered 503")

    status, headers, _ = answers[-1]
    assert status == 503 and headers["retry-after"] == "1"
    wait_until(lambda: query(endpoint, "SELECT 1")[0] != 503, what="the held connections to be released")
    assert query(endpoint, "SELECT 1") == (200, "1\n")


def test_the_report_still_reads_through_the_endpoint(holder):
    worker, _ = holder

    run = vigil(worker.home, "report", "--json")

    assert run.returncode == 0, run.stderr
    assert worker.process.poll() is None
