"""The review page in a real headless browser (Debian's chromium through chromium-driver and selenium), served
from the store a real `vigil worker` process holds and writes while it runs; labels travel through its ingest
queue into the store, and back onto the page's progress.

`make system-deps` installs chromium and chromium-driver; where they (or selenium) are missing, these tests skip
and say so. VIGIL_UPDATE_SCREENSHOT=1 also copies the page's screenshot to docs/review.png (the README's).
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from vigil.worker.demo.embedded_redis import EmbeddedRedis
from vigil.worker.review.leases import Leases
from vigil.worker.review.service import ReviewService, open_service
from vigil.worker.review.web import ReviewServer
from vigil.worker.store.clickhouse import connect_for_reading
from vigil.worker.store.read_server import read_endpoint

from tests.pipeline import WorkerProcess, make_turn, ship, wait_drained
from tests.test_review import seed

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
CONFIG = Path(__file__).parent / "fixtures" / "pipeline.yaml"
SCREENSHOT = Path(__file__).parent.parent / "docs" / "review.png"

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is missing: pip install -e '.[dev]'")
if not (shutil.which(CHROMIUM) and shutil.which(CHROMEDRIVER)):
    pytest.skip("chromium or chromium-driver is missing: `make system-deps` installs them "
                "(apt-get install chromium chromium-driver)", allow_module_level=True)

from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait


# a wait reads an element the page may render again meanwhile (a stale reference): read it again, not fail
RERENDERED = (StaleElementReferenceException,)

def until(condition: Callable[[], Any], timeout: float = 120, what: str = "") -> Any:
    """Poll ``condition`` until it returns something truthy (the work has no clock of its own to wait on)."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)
    return value


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1280,1000", "--no-first-run", "--disable-background-networking",
                     "--disable-component-update", "--disable-sync",
                     f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=webdriver.ChromeService(executable_path=CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


@dataclass
class Stack:
    worker: WorkerProcess
    server: ReviewServer
    store: Any  # a client reading through the worker's read endpoint
    traces: list[str]
    redis_url: str


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """A Redis of its own, a `vigil worker` that has scored 12 turns and still runs (holding chDB), and the review
    page reading through it."""
    home = tmp_path_factory.mktemp("review") / "vigil"
    with EmbeddedRedis() as redis_server:
        worker = WorkerProcess(redis_server.url, home, CONFIG)
        turns = [make_turn(i) for i in range(12)]
        ship(redis_server.url, turns)
        worker.start()
        try:
            wait_drained(redis_server.url, worker)
            until(lambda: read_endpoint(home / "chdb"), 60, "the worker's read endpoint")
            store = connect_for_reading(worker.dsn, open_here=False)
            until(lambda: store.query("SELECT count() FROM scores FINAL WHERE monitor = 'relevancy'")
                  .result_rows[0][0] == len(turns), 120, "12 scores in the store")
            # the page's own client: a clickhouse-connect client runs one query at a time, and the test's checks
            # on `store` run while the page serves other requests
            page_store = connect_for_reading(worker.dsn, open_here=False)
            server = ReviewServer(open_service(page_store, redis_server.url, reviewer="ana"), port=0).start()
            yield Stack(worker, server, store, [t["trace_id"] for t in turns], redis_server.url)
            server.shutdown()
        finally:
            worker.stop()


def review_labels(store, monitor: str = "relevancy") -> list[tuple]:
    return store.query("SELECT trace_id, author, source, monitor, queue, value FROM feedback FINAL "
                       "WHERE source = 'reviewer' AND monitor = {m:String} ORDER BY created_at",
                       parameters={"m": monitor}).result_rows


def open_page(browser, server: ReviewServer, monitor: str = "relevancy", queue: str = "random") -> None:
    browser.get(f"http://127.0.0.1:{server.port}/review/")
    browser.execute_script("localStorage.clear(); localStorage.setItem('vigil.monitor', arguments[0]);"
                           "localStorage.setItem('vigil.queue', arguments[1]);", monitor, queue)
    browser.get(f"http://127.0.0.1:{server.port}/review/")


def current_item(browser, timeout: float = 60) -> str:
    return WebDriverWait(browser, timeout, ignored_exceptions=RERENDERED).until(
        lambda d: d.find_element(By.ID, "item").get_attribute("data-trace-id"))


def test_a_reviewer_labels_a_turn_with_the_keyboard_and_the_store_and_agreement_follow(browser, stack):
    open_page(browser, stack.server)
    first = current_item(browser)
    item = browser.find_element(By.CSS_SELECTOR, f'#item[data-trace-id="{first}"]')
    block = item.find_element(By.CSS_SELECTOR, '[data-monitor="relevancy"]')
    question = item.text

    assert first in stack.traces
    assert "within 30 days" in question and "How do I return order" in question  # the answer and the question
    assert "random" in item.find_element(By.CSS_SELECTOR, "[data-queue]").text  # which queue it came from
    for action in ("judge-right", "judge-wrong", "score"):
        assert block.find_element(By.CSS_SELECTOR, f'[data-action="{action}"]').is_displayed()
    assert item.find_element(By.CSS_SELECTOR, '[data-action="skip"]').is_displayed()
    assert "wrong: the judge's (or check's) verdict is wrong" in browser.find_element(By.ID, "keys").text

    browser.find_element(By.TAG_NAME, "body").send_keys("w")
    second = WebDriverWait(browser, 60, ignored_exceptions=RERENDERED).until(
        lambda d: (t := d.find_element(By.ID, "item").get_attribute("data-trace-id")) != first and t)

    assert second in stack.traces  # the next item, at once
    rows = until(lambda: review_labels(stack.store), 120, "the label in the store")
    assert [r[:5] for r in rows] == [(first, "ana", "reviewer", "relevancy", "random")]
    progress = {m["monitor"]: m for m in stack.server.app.service.progress()}["relevancy"]
    assert (progress["reviewed"], progress["agreement"]["random"]) == (1, 1)
    assert progress["agreement"]["value"] == 0.0  # "judge wrong" on the only random draw
    WebDriverWait(browser, 60, ignored_exceptions=RERENDERED).until(  # and the page's progress panel shows it
        lambda d: d.find_element(By.CSS_SELECTOR, '#progress-rows [data-monitor="relevancy"] [data-field="reviewed"]')
        .text.startswith("1 /"))
    browser.save_screenshot(str(stack.worker.home / "review.png"))
    if os.environ.get("VIGIL_UPDATE_SCREENSHOT"):
        SCREENSHOT.parent.mkdir(exist_ok=True)
        shutil.copy(stack.worker.home / "review.png", SCREENSHOT)


def test_concurrent_labels_from_many_reviewers_all_reach_the_store(stack):
    """8 labels posted at the same instant, by 8 reviewers, each on the turn the page leased to them."""
    server = stack.server
    served = {f"reviewer-{r}": server.app.service.next_item("relevancy", "random", f"reviewer-{r}") for r in range(8)}
    jobs = [(reviewer, item["project"], item["trace_id"]) for reviewer, item in served.items()]
    start, statuses = threading.Barrier(len(jobs)), []

    def post(reviewer: str, project: str, trace_id: str) -> None:
        body = json.dumps({"project": project, "trace_id": trace_id, "monitor": "relevancy", "action": "judge-right",
                           "queue": "random", "reviewer": reviewer, "comment": uuid.uuid4().hex})
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        start.wait()
        try:
            connection.request("POST", "/review/api/label", body=body, headers={
                "Host": f"127.0.0.1:{server.port}", "Content-Type": "application/json",
                "X-Vigil-CSRF": server.guard.csrf})
            statuses.append(connection.getresponse().status)
        except OSError as exc:
            statuses.append(repr(exc))
        finally:
            connection.close()

    threads = [threading.Thread(target=post, args=job) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)

    assert len({trace for _, _, trace in jobs}) == len(jobs)  # one turn each: a lease is one reviewer's
    assert sorted(map(str, statuses)) == ["200"] * len(jobs)
    expected = {(reviewer, trace) for reviewer, _, trace in jobs}
    until(lambda: expected <= {(r[1], r[0]) for r in review_labels(stack.store)}, 120, "all 8 labels")


HOSTILE = {
    "system": '<script>window.__pwned = "system"</script>You are helpful.',
    "input": [{"role": "user", "content": '<img src=x onerror="window.__pwned = \'img\'">Where is my order?'}],
    "output": '<a href="javascript:window.__pwned=\'link\'">click here</a> [ok](javascript:alert(1)) '
              '<svg onload="window.__pwned = \'svg\'"></svg>',
    "contexts": [{"text": '<iframe src="javascript:window.__pwned=\'iframe\'"></iframe>', "id": '"><b id=x>'}],
    "tool_calls": [{"name": '<b onmouseover="window.__pwned=1">lookup</b>', "arguments": {"q": "</pre><script>x"},
                    "result": '<style>body{display:none}</style>found'}],
    "metadata": {"<i onclick=x>": '<script>window.__pwned = "meta"</script>'},
}


def test_hostile_trace_text_is_shown_as_text_and_never_runs(browser, store, redis_url):
    """Script tags, event handlers and javascript: links in every field of a turn: the browser's DOM holds them
    as text, no element or attribute comes from them, and nothing ran."""
    import redis as redis_py

    (trace,) = seed(store, [0.1], **HOSTILE)
    client = redis_py.Redis.from_url(redis_url)
    server = ReviewServer(ReviewService(store, Leases(client), lambda items: None, reviewer="ana"), port=0).start()
    try:
        open_page(browser, server, queue="lowest")
        assert current_item(browser) == trace
        page = browser.find_element(By.ID, "item")

        assert browser.execute_script("return window.__pwned") is None
        assert browser.find_elements(By.CSS_SELECTOR, "#item script, #item img, #item svg, #item iframe, "
                                                      "#item style, #item a, #item i, #item #x") == []
        handlers = browser.execute_script(
            "return [...document.querySelectorAll('#item *')].flatMap(e => [...e.attributes].map(a => a.name))"
            ".filter(n => n.startsWith('on') || n === 'href' || n === 'src')")
        assert handlers == []
        text = page.text
        for shown in ("<script>window.__pwned", "<img src=x onerror=", "javascript:window.__pwned='link'",
                      "<svg onload=", "<iframe src=", '<b onmouseover="window.__pwned=1">lookup</b>',
                      "</pre><script>x", "<style>body{display:none}</style>found", "<i onclick=x>"):
            assert shown in text, shown
        assert page.is_displayed()
    finally:
        server.shutdown()
        client.close()


def in_view(browser, css: str) -> bool:
    """Whether the element's top edge is inside the browser's window, not under the page's header."""
    return browser.execute_script(
        "const r = document.querySelector(arguments[0]).getBoundingClientRect();"
        "const header = document.querySelector('header');"
        "const below = header.contains(document.querySelector(arguments[0])) ? 0 : header.offsetHeight;"
        "return r.top >= below && r.top < window.innerHeight;", css)


def test_after_a_label_the_next_item_opens_at_its_question_and_the_page_says_it_was_saved(browser, store,
                                                                                        redis_url):
    """Turns long enough that labelling one means scrolling to its monitors: the next item opens at its question,
    the header keeps a mark of the saved label, a check's verdict is labelled with "Check right / wrong" and a
    judge's with "Judge right / wrong", and one line says what a label records."""
    import redis as redis_py
    from vigil.schemas import MonitorConfig, Turn
    from vigil.schemas.rows import score_row
    from vigil.schemas.score import ScoreResult

    from tests.test_review import Sent, _insert

    long_text = "\n".join(f"Step {i}: the policy says returns are accepted within 30 days." for i in range(60))
    traces = seed(store, [0.2, 0.3], system=long_text,
                  contexts=[{"text": long_text, "id": f"kb-{i}"} for i in range(4)])
    check = MonitorConfig(name="cites_order", scorer="cites_order")  # a regex check: no judge
    for trace in traces:
        turn = Turn.model_validate({"trace_id": trace, "project": "shop", "agent": "support-bot",
                                    "input": [{"role": "user", "content": "q"}], "output": "a"})
        _insert(store, "scores", [score_row(turn, check, ScoreResult(
            run_id="c", scorer="cites_order", scorer_version="1", status="scored", score=0.0,
            reason="the output does not match /order [0-9]+/"))])
    client, sent = redis_py.Redis.from_url(redis_url), Sent()
    server = ReviewServer(ReviewService(store, Leases(client), sent, reviewer="ana"), port=0).start()
    try:
        open_page(browser, server, queue="lowest")
        first = current_item(browser)
        blocks = {b.get_attribute("data-monitor"): b for b in browser.find_elements(By.CSS_SELECTOR, "#item .monitor")}
        buttons = {m: [e.text for e in b.find_elements(By.CSS_SELECTOR, "button[data-action^='judge-']")]
                   for m, b in blocks.items()}
        meaning = browser.find_element(By.ID, "label-meaning")
        meaning = (meaning.is_displayed(), meaning.text)
        button = blocks["relevancy"].find_element(By.CSS_SELECTOR, '[data-action="judge-wrong"]')
        browser.execute_script("arguments[0].scrollIntoView({block: 'end'});", button)
        assert not in_view(browser, '#item [data-field="question"]')  # the reviewer is down at the buttons
        button.click()
        second = WebDriverWait(browser, 60, ignored_exceptions=RERENDERED).until(
            lambda d: (t := d.find_element(By.ID, "item").get_attribute("data-trace-id")) != first and t)
        mark = browser.find_element(By.ID, "saved")

        assert buttons == {"relevancy": ["Judge right (r)", "Judge wrong (w)"],
                           "cites_order": ["Check right (r)", "Check wrong (w)"]}
        assert meaning[0] and meaning[1].startswith("A label records whether this monitor's verdict")
        assert (first, second) == (traces[0], traces[1])  # the lowest score first
        assert in_view(browser, '#item [data-field="question"]')
        assert mark.is_displayed() and mark.text == "✓ saved: relevancy wrong, by ana"
        assert in_view(browser, "#saved")  # the header stays on screen
        assert [(f.trace_id, f.monitor) for f in sent] == [(first, "relevancy")]
    finally:
        server.shutdown()
        client.close()


def test_vigil_review_serves_the_page_from_the_store_the_running_worker_holds(stack):
    """The command itself, as a user starts it: `vigil review --port 0` with VIGIL_HOME and REDIS_URL."""
    import re
    import signal
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("CLICKHOUSE_DSN", "VIGIL_CONFIG")}
    env.update(VIGIL_HOME=str(stack.worker.home), REDIS_URL=stack.redis_url)
    # as from a terminal, where Ctrl-C stops it: a test run started in the background by a non-interactive shell
    # would hand it SIGINT ignored, and Python keeps an ignored SIGINT ignored
    process = subprocess.Popen([sys.executable, "-m", "vigil.worker", "review", "--port", "0", "--reviewer", "cli"],
                               env=env, stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        line = process.stderr.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)/review/", line)
        assert match, line + process.stderr.read() if process.poll() is not None else line
        port = int(match.group(1))
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        connection.request("GET", "/review/api/progress", headers={"Host": f"localhost:{port}"})
        progress = json.loads(connection.getresponse().read())
        connection.request("GET", "/review/", headers={"Host": f"localhost:{port}"})
        page = connection.getresponse().read().decode()
        connection.close()
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(30)

    assert "(reviewer cli;" in line
    assert {m["monitor"]: m["population"] for m in progress["monitors"]}["relevancy"] == len(stack.traces)
    assert 'name="vigil-reviewer" content="cli"' in page
    assert process.returncode in (0, 130)
