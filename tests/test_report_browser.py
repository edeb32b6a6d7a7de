"""The on-call page as a person meets it (issue 29, item 7): a real headless Chromium (Debian's chromium through
chromium-driver and selenium) opens ``vigil report --serve``'s server over the store `vigil demo` left, reads the
first screen, follows a firing alert to its worst turn (its conversation, tool calls, scores and span tree), and looks at what
changed.

Where chromium, chromium-driver or selenium are missing these tests skip and say so (``make system-deps``).
VIGIL_UPDATE_SCREENSHOT=1 also copies the screenshots to docs/ (report-status.png, turn.png, compare.png).
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import pytest
from vigil.worker.report.build import build_report
from vigil.worker.report.serve import ReportServer
from vigil.worker.report.turn import load_turn
from vigil.worker.store import connect

from tests.test_review_browser import browser, until  # noqa: F401 - the fixture is shared (skips without chromium)

By = pytest.importorskip("selenium.webdriver.common.by").By

DOCS = Path(__file__).parent.parent / "docs"


@pytest.fixture
def served(vigil_demo):
    """The report server over the demo's store, in this process, as ``vigil report --serve`` builds it."""
    client = connect(f"chdb://{vigil_demo.home / 'chdb'}")
    server = ReportServer(lambda: build_report(client), port=0, turn=lambda trace_id: load_turn(client, trace_id))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    thread.join(30)
    client.close()


def _keep(browser, tmp_path: Path, name: str, element=None) -> None:  # noqa: F811 - the shared fixture
    shot = tmp_path / name
    if element is not None:
        element.screenshot(str(shot))
    else:
        browser.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000, f"{name} is blank"
    if os.environ.get("VIGIL_UPDATE_SCREENSHOT"):
        DOCS.mkdir(exist_ok=True)
        shutil.copy(shot, DOCS / name)


def test_the_first_screen_shows_each_firing_alert_in_one_sentence_and_a_click_reaches_its_worst_turn(
        browser, served, tmp_path):  # noqa: F811 - the shared fixture
    report = served.build()
    firing = report.status.firing
    assert {a.monitor for a in firing} == {"answer_relevancy", "rag_correctness"}

    browser.get(served.url)
    strip = until(lambda: browser.find_elements(By.ID, "status"), what="the status strip")[0]
    height = browser.execute_script("return window.innerHeight")
    for alert in firing:
        line = next(e for e in strip.find_elements(By.CSS_SELECTOR, "li.alert-line") if alert.monitor in e.text)
        assert alert.message in " ".join(line.text.split()), "the alert's own sentence, word for word"
        assert line.rect["y"] + line.rect["height"] <= height, "on the first screen"
        assert "fell from" in line.text and "since" in line.text and "UTC" in line.text
    chart = browser.find_element(By.ID, "firing-answer_relevancy-support-bot")
    assert chart.find_elements(By.CSS_SELECTOR, "g.alert-mark.firing"), "the mark is on the support bot's chart"
    assert not browser.find_elements(By.ID, "firing-answer_relevancy-travel-assistant"), "not on another agent's"
    _keep(browser, tmp_path, "report-status.png")

    line = next(e for e in strip.find_elements(By.CSS_SELECTOR, "li.alert-line") if "answer_relevancy" in e.text)
    line.find_element(By.CSS_SELECTOR, "a.worst-turn").click()
    until(lambda: "/turn/" in browser.current_url, what="the turn's page")
    page = browser.find_element(By.TAG_NAME, "body").text
    assert "Conversation" in page and "Tool calls" in page and "Scores" in page and "History" in page
    scores = browser.find_elements(By.CSS_SELECTOR, "#scores .score")
    assert "answer_relevancy" in {s.get_attribute("data-monitor") for s in scores}
    assert "support-bot" in page
    spans = browser.find_elements(By.CSS_SELECTOR, "table.waterfall tr.span")
    kinds = {row.get_attribute("class").split()[1] for row in spans}
    assert {"agent", "llm", "retriever"} <= kinds, "the span tree: the agent, its LLM calls and its retrieval"
    assert all(row.find_element(By.CSS_SELECTOR, ".bar").size["width"] > 0 for row in spans), "each span has a bar"
    _keep(browser, tmp_path, "turn.png")


def test_the_page_says_the_demos_new_model_is_worse_with_its_interval_and_turn_counts(
        browser, served, tmp_path):  # noqa: F811 - the shared fixture
    said = next(c for c in served.build().comparisons if c.monitor == "answer_relevancy")
    browser.get(served.url)
    section = until(lambda: browser.find_elements(By.ID, "compare"), what="the comparison")[0]
    assert "llama-3.1-8b-instruct → llama-3.2-3b-instruct" in section.text
    row = next(r for r in section.find_elements(By.CSS_SELECTOR, "tbody tr") if "answer_relevancy" in r.text)
    assert "llama-3.2-3b-instruct is worse" in row.text
    assert f"({said.a.n})" in row.text and f"({said.b.n})" in row.text and said.a.n > 10 and said.b.n > 10
    browser.execute_script("arguments[0].scrollIntoView()", section)
    _keep(browser, tmp_path, "compare.png", element=section)


def test_a_turn_that_is_not_there_is_a_404_saying_so(served):
    import http.client

    connection = http.client.HTTPConnection("127.0.0.1", served.server.server_address[1], timeout=30)
    connection.request("GET", "/turn/ffffffffffffffff")
    answer = connection.getresponse()
    assert answer.status == 404 and b"no turn" in answer.read()


def test_the_dashboards_worst_turns_link_opens_the_turns_page(served, vigil_demo):
    """The Grafana worst-turns panel links each trace id to ``${report_url}/turn/<id>``: filled as Grafana fills it,
    the link answers with that turn's page."""
    import http.client
    import json as _json

    from vigil.worker.store.grafana import REPORT_URL, TURN_LINK

    board = _json.loads((Path(__file__).parent.parent / "deploy/grafana/dashboards/vigil.json").read_text())
    [panel] = [p for p in board["panels"] if p["title"].startswith("Worst recent turns")]
    [link] = panel["fieldConfig"]["overrides"][0]["properties"][0]["value"]
    assert link["url"] == TURN_LINK and REPORT_URL in board["templating"]["list"]
    port = served.server.server_address[1]
    client = connect(f"chdb://{vigil_demo.home / 'chdb'}")
    try:
        trace_id = build_report(client).worst_turns[0].trace_id
    finally:
        client.close()
    url = link["url"].replace("${report_url}", f"http://127.0.0.1:{port}").replace("${__value.raw}", trace_id)
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request("GET", url.split(f":{port}", 1)[1])
    answer = connection.getresponse()
    assert answer.status == 200 and trace_id.encode() in answer.read()
