"""The review page's queues, leases, labels, guard and export, on a real chDB store and a real Redis.

The page's service reads the store in this process (a worker would serve the same reads through its endpoint, which
tests/test_review_browser.py covers); labels are published to the real ingest queue and read back from it here.
"""

from __future__ import annotations

import http.client
import json
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
import redis as redis_py
from scipy import stats
from vigil.schemas import MonitorConfig, Turn
from vigil.schemas.feedback import Feedback, feedback_id
from vigil.schemas.rows import score_row, trace_row
from vigil.schemas.score import ScoreResult
from vigil.worker.assembly.traces import trace_name
from vigil.worker.eval.items import load_dataset
from vigil.worker.review.agreement import Label, item_verdicts, weighted_agreement
from vigil.worker.review.export import export_items, write_jsonl
from vigil.worker.review.guard import Guard
from vigil.worker.review.leases import Leases, LocalLeases
from vigil.worker.review.service import LabelRequest, ReviewService
from vigil.worker.review.web import ReviewServer

NOW = datetime.now(UTC).replace(microsecond=0)
MONITOR = MonitorConfig(name="relevancy", scorer="answer_relevancy", judge="offline")


def _insert(store, table: str, models: list) -> None:
    if models:
        columns = list(type(models[0]).model_fields)
        store.insert(table, [[getattr(m, c) for c in columns] for m in models], column_names=columns)


def seed(store, scores: list[float], *, monitor: MonitorConfig = MONITOR, agent: str = "support-bot",
         at: datetime = NOW, **turn_fields) -> list[str]:
    """One stored, scored turn per score (on 0..1, the newest first); returns their trace ids in that order."""
    turns, rows = [], []
    for i, value in enumerate(scores):
        turn = Turn.model_validate({"trace_id": uuid.uuid4().hex, "project": "shop", "agent": agent,
                                    "started_at": at - timedelta(minutes=i),
                                    "input": [{"role": "user", "content": f"question {i}"}],
                                    "output": f"answer {i}", **turn_fields})
        result = ScoreResult(run_id=f"r{i}", scorer="answer_relevancy", scorer_version="1", status="scored",
                             score=value, label="good" if value >= 0.5 else "bad", reason=f"reason {i}")
        turns.append(trace_row(turn))
        rows.append(score_row(turn, monitor, result))
    _insert(store, "traces", turns)
    _insert(store, "scores", rows)
    return [t.trace_id for t in turns]


def add_feedback(store, items: list[Feedback]) -> None:
    _insert(store, "feedback", items)


def served_and_skipped(service: ReviewService, queue: str, reviewer: str = "ana") -> dict | None:
    """The next item for ``reviewer``, skipped at once so that the next call serves another one."""
    item = service.next_item("relevancy", queue, reviewer)
    if item is not None:
        service.done("shop", item["trace_id"], reviewer, skipped=True)
    return item


def leased_label(service: ReviewService, request: LabelRequest) -> Feedback:
    """A label as the page gives it: on a turn leased to its reviewer, the lease given back after."""
    reviewer = request.reviewer or service.reviewer
    assert service.leases.take(trace_name("shop", request.trace_id), reviewer)
    row = service.label(request)
    service.done("shop", request.trace_id, reviewer)
    return row


class Sent(list):
    """The feedback items the service published (what the ingest queue would carry)."""

    def __call__(self, items: list[dict]) -> None:
        self.extend(Feedback.model_validate(item["feedback"]) for item in items)


@pytest.fixture
def leases(redis_url):
    client = redis_py.Redis.from_url(redis_url)
    yield Leases(client)
    client.close()


@pytest.fixture
def service(store, leases):
    return ReviewService(store, leases, Sent(), reviewer="ana")


@pytest.fixture(params=["redis", "memory"])
def either_service(request, store):
    """The service on Redis leases, and on the in-memory ones of a page that holds the store itself."""
    leases = request.getfixturevalue("leases") if request.param == "redis" else LocalLeases()
    return ReviewService(store, leases, Sent(), reviewer="ana")


# -- queues ----------------------------------------------------------------------------------------------------


def test_the_random_queue_draws_every_unreviewed_turn_equally_often(store, service, leases):
    """A chi-square goodness-of-fit test on 360 draws over 12 turns, each lease given back before the next draw: the
    queue may be rejected as non-uniform only at the 0.1% level (so a correct queue fails 1 run in 1,000), and one
    that draws half the turns twice as often as the others is (30 draws expected each: p below 0.0001). Each draw is
    the lease the page's next item starts with (``next_item`` then loads the turn whole, which draws nothing)."""
    traces = seed(store, [i / 12 for i in range(12)])
    drawn = Counter()
    for _ in range(360):
        queue, project, trace_id = service.lease("relevancy", "random", "ana")
        assert (queue, project) == ("random", "shop")
        drawn[trace_id] += 1
        leases.release(trace_name(project, trace_id), "ana")

    assert set(drawn) == set(traces)
    assert stats.chisquare([drawn[t] for t in traces]).pvalue > 0.001


def test_each_queue_names_itself_and_picks_its_turns(store, service):
    low, *rest = seed(store, [0.05, 0.4, 0.7, 0.8, 0.9, 0.95])
    complained = rest[-1]
    add_feedback(store, [Feedback(trace_id=complained, name="thumbs", value=0, source="user", author="u1")])

    lowest = service.next_item("relevancy", "lowest", "ana")
    flagged = service.next_item("relevancy", "flagged", "ana")

    assert (lowest["trace_id"], lowest["queue"]) == (low, "lowest")
    assert "lowest" in lowest["queue_title"]
    assert (flagged["trace_id"], flagged["queue"]) == (complained, "flagged")
    assert flagged["scores"][0]["monitor"] == "relevancy" and flagged["spans"][0]["output"]


def test_the_alerts_queue_serves_the_worst_turns_of_the_newest_firing_alert(store, service):
    before = seed(store, [0.1], at=NOW - timedelta(hours=6))  # long before the alert: not its turn
    during = seed(store, [0.9, 0.3, 0.6], at=NOW)
    store.insert("alerts", [["a1", "score-regression", "regression", "shop", "support-bot", "relevancy", "firing",
                             NOW - timedelta(minutes=30), NOW + timedelta(minutes=1), 0.5, 0.8, 3, 100, 0.01, 0.5,
                             "dropped"]],
                 column_names=["alert_id", "rule", "kind", "project", "agent", "monitor", "state", "fired_at",
                               "updated_at", "recent_mean", "baseline_mean", "recent_n", "baseline_n", "p_value",
                               "effect_size", "message"])

    served = [served_and_skipped(service, "alerts")["trace_id"] for _ in range(3)]

    assert served == [during[1], during[2], during[0]]
    assert before[0] not in served
    assert service.next_item("relevancy", "alerts", "ana") is None


def test_auto_mode_serves_every_other_item_from_the_random_queue(store, service):
    seed(store, [i / 10 for i in range(10)])
    add_feedback(store, [Feedback(trace_id=t, name="thumbs", value=0, source="user", author="u")
                         for t in seed(store, [0.9, 0.8])])

    queues = [served_and_skipped(service, "auto")["queue"] for _ in range(4)]

    assert queues == ["random", "flagged", "random", "random"]  # no firing alert: its turn falls to the random queue


# -- leases ----------------------------------------------------------------------------------------------------


def test_two_reviewers_never_hold_the_same_item_at_once(store, either_service):
    seed(store, [0.2, 0.4, 0.6])

    ana = [either_service.next_item("relevancy", "lowest", "ana")["trace_id"] for _ in range(1)]
    bob = either_service.next_item("relevancy", "lowest", "bob")["trace_id"]
    ana_again = either_service.next_item("relevancy", "lowest", "ana")["trace_id"]

    assert bob != ana[0]
    assert ana_again == ana[0]  # asking again renews one's own lease, it does not hand out a second item


def test_a_lapsed_lease_returns_the_item_to_the_queue(store, redis_url):
    client = redis_py.Redis.from_url(redis_url)
    leases = Leases(client)  # the lease lapses when the test says (pexpire below), never by a slow query
    service = ReviewService(store, leases, Sent(), reviewer="ana")
    (only,) = seed(store, [0.5])

    assert service.next_item("relevancy", "random", "ana")["trace_id"] == only
    assert service.next_item("relevancy", "random", "bob") is None
    lease = f"vigil.review.lease.{trace_name('shop', only)}"
    client.pexpire(lease, 1)  # the lease's time runs out (no waiting on a clock)
    while client.exists(lease):
        pass
    assert service.next_item("relevancy", "random", "bob")["trace_id"] == only
    client.close()


def test_a_labelled_item_is_not_served_again_before_the_store_has_the_label(store, either_service):
    (only,) = seed(store, [0.3])
    either_service.next_item("relevancy", "random", "ana")

    either_service.label(LabelRequest(project="shop", trace_id=only, monitor="relevancy", action="judge-right",
                                      queue="random", reviewer="ana"))
    either_service.done("shop", only, "ana")

    assert either_service.next_item("relevancy", "random", "bob") is None


def test_a_skipped_item_goes_to_the_next_reviewer_but_not_back_to_the_one_who_skipped(store, either_service):
    (only,) = seed(store, [0.3])
    either_service.next_item("relevancy", "random", "ana")
    either_service.done("shop", only, "ana", skipped=True)

    assert either_service.next_item("relevancy", "random", "ana") is None
    assert either_service.next_item("relevancy", "random", "bob")["trace_id"] == only


# -- labels ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("score", "action", "value"), [
    (0.9, "judge-right", 1.0), (0.9, "judge-wrong", 0.0), (0.2, "judge-right", 0.0), (0.2, "judge-wrong", 1.0),
], ids=["good-turn-judge-right", "good-turn-judge-wrong", "bad-turn-judge-right", "bad-turn-judge-wrong"])
def test_a_verdict_on_the_judge_becomes_the_reviewers_value_of_the_turn(store, service, score, action, value):
    (trace,) = seed(store, [score])

    row = leased_label(service, LabelRequest(project="shop", trace_id=trace, monitor="relevancy", action=action,
                                             queue="lowest", comment="refund window is 30 days", reviewer="bob"))

    assert service.publish == [row]
    assert (row.value, row.scale, row.source, row.author, row.monitor, row.queue, row.comment) == (
        value, 1.0, "reviewer", "bob", "relevancy", "lowest", "refund window is 30 days")
    assert row.feedback_id == feedback_id(trace, "review", "reviewer", "bob", "relevancy", "shop")


def test_a_score_label_must_be_on_the_monitors_scale(store, service):
    (trace,) = seed(store, [0.5])

    with pytest.raises(ValueError, match="value"):
        leased_label(service, LabelRequest(project="shop", trace_id=trace, monitor="relevancy", action="score",
                                           value=3))
    assert leased_label(service, LabelRequest(project="shop", trace_id=trace, monitor="relevancy", action="score",
                                              value=0.25)).value == 0.25


def test_feedback_without_a_monitor_keeps_the_id_it_always_had():
    assert feedback_id("t", "thumbs", "user", "u") == feedback_id("t", "thumbs", "user", "u", "")
    assert feedback_id("t", "review", "reviewer", "a", "m1") != feedback_id("t", "review", "reviewer", "a", "m2")


def test_two_reviewers_labels_of_one_turn_are_two_rows_and_a_relabel_replaces(store, service):
    (trace,) = seed(store, [0.8])
    ana = leased_label(service, LabelRequest(project="shop", trace_id=trace, monitor="relevancy", action="judge-right",
                                             reviewer="ana"))
    bob = leased_label(service, LabelRequest(project="shop", trace_id=trace, monitor="relevancy", action="judge-wrong",
                                             reviewer="bob"))
    ana_again = leased_label(service, LabelRequest(project="shop", trace_id=trace, monitor="relevancy",
                                                   action="judge-wrong", reviewer="ana"))
    add_feedback(store, [ana, bob, ana_again])

    rows = store.query("SELECT author, value FROM feedback FINAL WHERE trace_id = {t:String} ORDER BY author",
                       parameters={"t": trace}).result_rows
    assert rows == [("ana", 0.0), ("bob", 0.0)]


def test_a_reviewers_label_pairs_only_with_its_monitor_in_the_agreement_panel(store):
    from vigil.worker.report.build import run_query
    from vigil.worker.store.queries import PANELS

    other = MonitorConfig(name="alignment", scorer="answer_relevancy", judge="offline")
    (trace,) = seed(store, [0.9])
    result = ScoreResult(run_id="x", scorer="answer_relevancy", scorer_version="1", status="scored", score=0.9)
    turn = Turn.model_validate({"trace_id": trace, "project": "shop", "agent": "support-bot", "started_at": NOW,
                                "input": [{"role": "user", "content": "q"}], "output": "a"})
    _insert(store, "scores", [score_row(turn, other, result)])
    add_feedback(store, [Feedback(trace_id=trace, name="review", value=0, source="reviewer", author="ana",
                                  monitor="relevancy", queue="random")])

    rows = run_query(store, PANELS["judge_agreement"], start=NOW - timedelta(days=1), end=NOW + timedelta(hours=1))

    assert [(r["monitor"], r["pairs"], r["agreed"]) for r in rows] == [("relevancy", 1, 0)]


# -- agreement -------------------------------------------------------------------------------------------------


def test_agreement_weights_random_draws_by_the_turns_nobody_picked():
    """100 turns: 10 complaints reviewed on purpose (all judge-wrong) and 20 random draws (18 right). The random
    draws stand for the 90 turns nobody picked: (0 + 90 × 0.9) / 100 = 0.81, where the plain share of the labels
    (18 / 30 = 0.6) would say the judge is wrong far more often than it is."""
    estimate = weighted_agreement([True] * 18 + [False] * 2, [False] * 10, population=100)

    assert estimate.value == pytest.approx(0.81)
    assert estimate.labelled_agreement == pytest.approx(0.6)
    assert estimate.low < 0.81 < estimate.high
    assert estimate.low >= 0.0 and estimate.high <= 0.9  # at most 90 of the 100 can agree


def test_without_random_draws_agreement_is_only_bounded():
    estimate = weighted_agreement([], [True, False], population=10)

    assert estimate.value is None
    assert (estimate.low, estimate.high) == (pytest.approx(0.1), pytest.approx(0.9))


def test_a_turn_with_several_labels_counts_once_by_majority_and_as_random_if_drawn_at_random():
    verdicts = item_verdicts([Label("t1", "flagged", False), Label("t1", "random", True), Label("t1", "random", True),
                              Label("t2", "lowest", True), Label("t2", "flagged", False)])

    assert verdicts == {"t1": (True, True), "t2": (False, True)}  # t2: a tie goes to the first label


def test_progress_reports_each_monitor_with_its_weighted_agreement(store, service):
    traces = seed(store, [0.9, 0.8, 0.2, 0.1])
    add_feedback(store, [
        Feedback(trace_id=traces[0], name="review", value=1, source="reviewer", author="a", monitor="relevancy",
                 queue="random"),
        Feedback(trace_id=traces[3], name="review", value=1, source="reviewer", author="a", monitor="relevancy",
                 queue="lowest"),
    ])

    (row,) = service.progress()

    assert (row["monitor"], row["population"], row["reviewed"], row["unreviewed"]) == ("relevancy", 4, 2, 2)
    assert row["agreement"]["random"] == 1 and row["agreement"]["chosen"] == 1
    assert row["agreement"]["value"] == pytest.approx((0 + 3 * 1.0) / 4)


# -- export ----------------------------------------------------------------------------------------------------


def test_export_writes_the_labelled_turns_as_a_vigil_eval_dataset(store, tmp_path):
    traces = seed(store, [0.9, 0.2, 0.5])
    add_feedback(store, [
        Feedback(trace_id=traces[0], name="review", value=1, source="reviewer", author="a", monitor="relevancy"),
        Feedback(trace_id=traces[0], name="review", value=0, source="reviewer", author="b", monitor="relevancy"),
        Feedback(trace_id=traces[1], name="review", value=2, scale=5, source="reviewer", author="a",
                 monitor="relevancy"),
        Feedback(trace_id=traces[2], name="review", value=1, source="reviewer", author="a", monitor="other"),
    ])
    path = tmp_path / "labels.jsonl"

    with path.open("w") as out:
        written = write_jsonl(export_items(store, "relevancy"), out)
    dataset = load_dataset(path)

    assert written == 2 and not dataset.bad
    assert {item.id: item.human for item in dataset.items} == {f"shop/{traces[0]}": 0.5, f"shop/{traces[1]}": 0.4}
    assert {item.turn.trace_id: item.turn.output for item in dataset.items} == {traces[0]: "answer 0",
                                                                                 traces[1]: "answer 1"}


def test_export_pairs_each_label_with_its_own_projects_turn_of_the_trace_id(store, tmp_path):
    """shop's label of a trace id is exported with shop's turn, bank's with bank's (stored later, under a span id
    that sorts after shop's): two items, each the text its reviewer saw."""
    (trace,) = seed(store, [0.2])
    bank = Turn.model_validate({"trace_id": trace, "span_id": "f" * 16, "project": "bank", "agent": "support-bot",
                                "started_at": NOW, "input": [{"role": "user", "content": "q"}],
                                "output": "bank's answer"})
    _insert(store, "traces", [trace_row(bank)])
    add_feedback(store, [Feedback(project=project, trace_id=trace, name="review", value=value, source="reviewer",
                                  author="a", monitor="relevancy") for project, value in (("shop", 1), ("bank", 0))])
    path = tmp_path / "labels.jsonl"

    with path.open("w") as out:
        write_jsonl(export_items(store, "relevancy"), out)
    dataset = load_dataset(path)

    assert not dataset.bad
    assert {item.id: (item.turn.project, item.turn.output, item.human) for item in dataset.items} == {
        f"shop/{trace}": ("shop", "answer 0", 1.0), f"bank/{trace}": ("bank", "bank's answer", 0.0)}


# -- the guard -------------------------------------------------------------------------------------------------


@pytest.fixture
def server(service):
    running = ReviewServer(service, port=0).start()
    yield running
    running.shutdown()


def request(server: ReviewServer | int, method: str, path: str, *, body: dict | None = None,
            headers: dict[str, str] | None = None) -> tuple[int, dict | str]:
    port = server if isinstance(server, int) else server.port
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    data = json.dumps(body).encode() if body is not None else None
    sent = {"Host": f"127.0.0.1:{port}", **(headers or {})}
    if data is not None:
        sent.setdefault("Content-Type", "application/json")
    connection.request(method, path, body=data, headers=sent)
    response = connection.getresponse()
    text = response.read().decode()
    connection.close()
    try:
        return response.status, json.loads(text)
    except ValueError:
        return response.status, text


def test_a_foreign_host_header_is_refused_on_every_path(server):
    """DNS rebinding: a page on evil.example resolves its name to 127.0.0.1 and reads the review API."""
    for path in ("/review/", "/review/api/progress", "/review/api/next?monitor=relevancy", "/"):
        status, _ = request(server, "GET", path, headers={"Host": f"evil.example:{server.port}"})
        assert status == 403, path
    status, _ = request(server, "POST", "/review/api/label", headers={"Host": "evil.example",
                                                                       "X-Vigil-CSRF": server.guard.csrf},
                        body={"project": "shop", "trace_id": "t", "monitor": "relevancy", "action": "judge-right"})
    assert status == 403 and server.app.service.publish == []
    assert request(server, "GET", "/review/api/progress", headers={"Host": f"localhost:{server.port}"})[0] == 200


def test_every_write_needs_the_pages_csrf_token_and_its_own_origin(store, server):
    (trace,) = seed(store, [0.7])
    assert server.app.service.leases.take(trace_name("shop", trace), "ana")
    body = {"project": "shop", "trace_id": trace, "monitor": "relevancy", "action": "judge-right"}
    good = {"X-Vigil-CSRF": server.guard.csrf}

    without = request(server, "POST", "/review/api/label", body=body)
    wrong = request(server, "POST", "/review/api/label", body=body, headers={"X-Vigil-CSRF": "guess"})
    other_origin = request(server, "POST", "/review/api/label", body=body,
                           headers={**good, "Origin": "http://evil.example"})
    cross_site = request(server, "POST", "/review/api/label", body=body,
                         headers={**good, "Sec-Fetch-Site": "cross-site"})
    form = request(server, "POST", "/review/api/skip", body=body,
                   headers={**good, "Content-Type": "application/x-www-form-urlencoded"})
    ok = request(server, "POST", "/review/api/label", body=body,
                 headers={**good, "Origin": f"http://127.0.0.1:{server.port}"})

    assert [r[0] for r in (without, wrong, other_origin, cross_site, form)] == [403] * 5
    assert "CSRF" in without[1]["error"]
    assert ok[0] == 200 and ok[1]["value"] == 1.0
    assert len(server.app.service.publish) == 1  # only the good request sent a label


def test_the_page_carries_its_csrf_token_and_forbids_inline_script(server):
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    connection.request("GET", "/review/", headers={"Host": f"127.0.0.1:{server.port}"})
    response = connection.getresponse()
    page = response.read().decode()

    assert f'content="{server.guard.csrf}"' in page
    assert "script-src 'self'" in response.getheader("Content-Security-Policy")
    assert "unsafe-inline" not in response.getheader("Content-Security-Policy")


def test_bound_beyond_loopback_the_page_asks_for_its_token():
    guard = Guard.for_binding("0.0.0.0", token="s3cret")

    assert not guard.token_ok({}, None)
    assert guard.token_ok({}, "s3cret")
    assert guard.token_ok({"Cookie": "vigil_review=s3cret"}, None)
    assert guard.token_ok({"Authorization": "Bearer s3cret"}, None)
    assert not guard.token_ok({"Cookie": "vigil_review=guess"}, None)
    assert Guard.for_binding("127.0.0.1").token is None  # on loopback labelling never waits on a login
    assert Guard.for_binding("10.0.0.5").token  # beyond it, a random token when none is given


def test_the_token_in_the_address_becomes_a_cookie_and_nothing_is_served_without_it(service):
    server = ReviewServer(service, port=0)
    server.app.guard = server.guard = Guard(token="s3cret")  # what binding beyond loopback sets up
    server.start()
    try:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        connection.request("GET", "/review/api/progress", headers={"Host": f"127.0.0.1:{server.port}"})
        refused = connection.getresponse()
        refused.read()
        connection.request("GET", "/review/?token=s3cret", headers={"Host": f"127.0.0.1:{server.port}"})
        redirect = connection.getresponse()
        redirect.read()
        cookie = redirect.getheader("Set-Cookie").split(";")[0]
        connection.request("GET", "/review/api/progress", headers={"Host": f"127.0.0.1:{server.port}",
                                                                   "Cookie": cookie})
        allowed = connection.getresponse()
        allowed.read()
        connection.close()
    finally:
        server.shutdown()

    assert refused.status == 401
    assert (redirect.status, redirect.getheader("Location")) == (303, "/review/")
    assert "HttpOnly" in redirect.getheader("Set-Cookie") and "SameSite=Strict" in redirect.getheader("Set-Cookie")
    assert allowed.status == 200


def test_a_body_over_the_limit_is_refused_before_it_is_read(server):
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    connection.putrequest("POST", "/review/api/label", skip_host=True)
    for key, value in {"Host": f"127.0.0.1:{server.port}", "Content-Type": "application/json",
                       "X-Vigil-CSRF": server.guard.csrf, "Content-Length": str(1 << 30)}.items():
        connection.putheader(key, value)
    connection.endheaders()  # declares 1 GiB and sends none of it
    response = connection.getresponse()

    assert response.status == 413
    connection.close()


def test_report_serve_serves_the_review_page_beside_the_report(store, leases):
    """`vigil report --serve` answers /review/ with the same page and API, on the store client the report reads
    (one lock for both), and keeps its own paths."""
    import threading

    from vigil.worker.report.build import build_report
    from vigil.worker.report.serve import ReportServer

    (trace,) = seed(store, [0.4])
    sent = Sent()
    report = ReportServer(lambda: build_report(store, start=None, now=datetime.now(UTC)), port=0,
                          review=lambda lock: ReviewService(store, leases, sent, reviewer="ana", lock=lock))
    threading.Thread(target=report.serve_forever, daemon=True).start()
    port = report.server.server_address[1]
    try:
        page = request(port, "GET", "/review/")
        item = request(port, "GET", "/review/api/next?monitor=relevancy&queue=random")
        label = request(port, "POST", "/review/api/label", headers={"X-Vigil-CSRF": report.review_app().guard.csrf},
                        body={"project": "shop", "trace_id": trace, "monitor": "relevancy", "action": "judge-wrong",
                              "queue": "random"})
        forged = request(port, "POST", "/review/api/label", body={"project": "shop", "trace_id": trace,
                                                                   "monitor": "relevancy", "action": "judge-wrong"})
        foreign = request(port, "GET", "/review/api/progress", headers={"Host": f"evil.example:{port}"})
        own = request(port, "GET", "/")
    finally:
        report.shutdown()

    assert page[0] == 200 and "vigil review" in page[1]
    assert item[0] == 200 and item[1]["item"]["trace_id"] == trace
    assert label[0] == 200 and [(f.trace_id, f.author, f.monitor, f.value) for f in sent] == [
        (trace, "ana", "relevancy", 1.0)]  # "judge wrong" on a 0.4: the turn is good
    assert forged[0] == 403 and foreign[0] == 403
    assert own[0] == 200 and "<html" in own[1]


def test_review_export_writes_the_dataset_and_says_plainly_when_there_is_none(store, chdb_dsn, tmp_path):
    from click.testing import CliRunner
    from vigil.worker.cli import main

    (trace,) = seed(store, [0.9])
    add_feedback(store, [Feedback(trace_id=trace, name="review", value=1, source="reviewer", author="a",
                                  monitor="relevancy", queue="random")])
    out = tmp_path / "labels.jsonl"
    runner = CliRunner()

    done = runner.invoke(main, ["review", "export", "--monitor", "relevancy", "--out", str(out), "--dsn", chdb_dsn])
    none = runner.invoke(main, ["review", "export", "--monitor", "nope", "--dsn", chdb_dsn])

    assert done.exit_code == 0, done.output
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == [f"shop/{trace}"]
    assert none.exit_code == 1
    assert none.output.strip().splitlines() == [
        ("vigil: error: --monitor: no review labels of 'nope' in the store (label turns with `vigil review` first; "
         "labels reach the store through a running worker)")]


def test_an_item_is_the_turn_whole_with_the_session_before_it(store, service):
    earlier = seed(store, [0.9], at=NOW - timedelta(minutes=5), session_id="s-1",
                   tool_calls=[{"name": "lookup", "arguments": {"order": 7}, "result": "shipped"}])
    later = seed(store, [0.2], at=NOW, session_id="s-1", system="Be brief.",
                 contexts=[{"text": "Returns within 30 days.", "id": "kb-1"}], metadata={"release": "v2"},
                 tool_calls=[{"name": "lookup", "arguments": {"order": 7}}, {"name": "refund", "result": "error"}])

    item = service.item("shop", later[0])

    (span,) = item["spans"]
    assert (span["system"], span["contexts"][0]["id"], span["metadata"]) == ("Be brief.", "kb-1", {"release": "v2"})
    assert [call["name"] for call in span["tool_calls"]] == ["lookup", "refund"]  # in call order
    assert [turn["trace_id"] for turn in item["session"]] == earlier
    assert [(s["monitor"], s["score"], s["reason"]) for s in item["scores"]] == [("relevancy", 0.2, "reason 0")]


def test_a_queue_whose_head_is_all_taken_is_read_further(store, service, leases):
    """More of the lowest turns leased to someone else than one read of the queue returns: the next open one is
    still found, not an empty queue."""
    from vigil.worker.review.service import CANDIDATES

    traces = seed(store, [i / 100 for i in range(CANDIDATES[0] + 2)])  # lowest first
    for trace_id in traces[: CANDIDATES[0] + 1]:
        assert leases.take(trace_name("shop", trace_id), "bob")

    item = service.next_item("relevancy", "lowest", "ana")

    assert item is not None and item["trace_id"] == traces[-1]


def test_without_broker_or_worker_a_page_holding_the_store_writes_labels_straight_into_it(store):
    """After `vigil demo` (its Redis gone, no worker): the page that opened the store itself is the only process
    that can write it, so labels go into `feedback` there and leases live in its memory."""
    import redis as redis_py
    from vigil.worker.review.service import open_service

    nowhere = "redis://127.0.0.1:1/0"
    (trace, other) = seed(store, [0.9, 0.8])
    with pytest.raises(redis_py.ConnectionError):
        open_service(store, nowhere, reviewer="ana")  # a worker may be running: never bypass it
    service = open_service(store, nowhere, reviewer="ana", holds_store=True)

    ana = service.next_item("relevancy", "random", "ana")["trace_id"]
    bob = service.next_item("relevancy", "random", "bob")["trace_id"]
    service.label(LabelRequest(project="shop", trace_id=ana, monitor="relevancy", action="judge-wrong", queue="random"))

    assert service.direct and {ana, bob} == {trace, other}
    rows = store.query("SELECT trace_id, author, monitor, queue, value FROM feedback FINAL").result_rows
    assert rows == [(ana, "ana", "relevancy", "random", 0.0)]
    assert service.progress()[0]["reviewed"] == 1


# -- labels belong to leases -----------------------------------------------------------------------------------


def test_a_label_needs_the_turn_leased_to_its_reviewer(store, either_service):
    from vigil.worker.review.service import NotLeased

    (mine, other) = seed(store, [0.3, 0.4])
    assert either_service.next_item("relevancy", "lowest", "ana")["trace_id"] == mine

    for trace, reviewer in ((mine, "bob"), (other, "ana")):  # someone else's lease; no lease at all
        with pytest.raises(NotLeased):
            either_service.label(LabelRequest(project="shop", trace_id=trace, monitor="relevancy", action="judge-right",
                                              reviewer=reviewer))
    assert either_service.publish == []
    assert either_service.label(LabelRequest(project="shop", trace_id=mine, monitor="relevancy", action="judge-right",
                                             reviewer="ana")).author == "ana"


def test_the_page_keeps_its_lease_while_the_turn_is_open_and_only_its_own(store, either_service):
    from vigil.worker.review.service import NotLeased

    (only,) = seed(store, [0.3])
    either_service.next_item("relevancy", "random", "ana")

    either_service.renew("shop", only, "ana")
    with pytest.raises(NotLeased):
        either_service.renew("shop", only, "bob")
    assert either_service.leases.holder(trace_name("shop", only)) == "ana"


def test_labels_of_an_items_other_monitors_keep_its_lease_for_the_label_that_moves_on(store, server):
    """The page labels a turn's other monitors first (keep_lease), then the monitor it was served for."""
    other = MonitorConfig(name="alignment", scorer="answer_relevancy", judge="offline")
    (trace,) = seed(store, [0.8])
    seed_turn = Turn.model_validate({"trace_id": trace, "project": "shop", "agent": "support-bot", "started_at": NOW,
                                     "input": [{"role": "user", "content": "q"}], "output": "a"})
    _insert(store, "scores", [score_row(seed_turn, other, ScoreResult(
        run_id="x", scorer="answer_relevancy", scorer_version="1", status="scored", score=0.2))])
    csrf = {"X-Vigil-CSRF": server.guard.csrf}
    assert request(server, "GET", "/review/api/next?monitor=relevancy&queue=random")[1]["item"]["trace_id"] == trace

    side = request(server, "POST", "/review/api/label", headers=csrf, body={
        "project": "shop", "trace_id": trace, "monitor": "alignment", "action": "judge-right", "keep_lease": True})
    main = request(server, "POST", "/review/api/label", headers=csrf, body={
        "project": "shop", "trace_id": trace, "monitor": "relevancy", "action": "judge-right"})
    again = request(server, "POST", "/review/api/label", headers=csrf, body={
        "project": "shop", "trace_id": trace, "monitor": "relevancy", "action": "judge-wrong"})

    assert (side[0], main[0], again[0]) == (200, 200, 403)  # the lease went back with the item's own label
    assert [(f.monitor, f.author) for f in server.app.service.publish] == [("alignment", "ana"), ("relevancy", "ana")]


def test_reviewers_in_the_config_each_have_a_token_of_their_own():
    from pydantic import ValidationError
    from vigil.schemas.config import VigilConfig

    digest = "a" * 64
    with pytest.raises(ValidationError, match="ana, bob share one token"):
        VigilConfig.model_validate({"reviewers": [{"name": "ana", "token_sha256": digest},
                                                  {"name": "bob", "token_sha256": digest}]})
    with pytest.raises(ValidationError, match="reviewers.0.token_sha256"):
        VigilConfig.model_validate({"reviewers": [{"name": "ana", "token_sha256": "s3cret"}]})


def test_a_reviewer_of_one_project_sees_nothing_another_project_stored_under_the_same_trace_id(store, service):
    """Trace ids are no secret and each project's are its own: a turn another project sent under a shop turn's trace
    id (and session) is neither shown to shop's reviewer nor what their label is measured against."""
    (trace,) = seed(store, [0.2], session_id="s-1")
    intruder = Turn.model_validate({"trace_id": trace, "project": "bank", "agent": "support-bot", "session_id": "s-1",
                                    "started_at": NOW - timedelta(minutes=5), "span_id": "b" * 16,
                                    "input": [{"role": "user", "content": "bank secret question"}],
                                    "output": "bank secret answer"})
    _insert(store, "traces", [trace_row(intruder)])
    _insert(store, "scores", [score_row(intruder, MONITOR, ScoreResult(
        run_id="b", scorer="answer_relevancy", scorer_version="1", status="scored", score=0.9,
        reason="bank's reason"))])

    item = service.next_item("relevancy", "lowest", "ana", projects=["shop"])
    row = service.label(LabelRequest(project="shop", trace_id=trace, monitor="relevancy", action="judge-right",
                                     reviewer="ana"), projects=["shop"])

    assert item["trace_id"] == trace
    assert [s["project"] for s in item["spans"]] == ["shop"] and [s["reason"] for s in item["scores"]] == [
        "reason 0"]
    assert "bank secret" not in json.dumps(item, default=str)  # its session neither
    assert row.value == 0.0  # "judge right" on shop's 0.2, not on bank's 0.9


def test_a_label_carries_its_turns_project_and_pairs_only_with_that_projects_score(store, service):
    """A review label is a row of the labelled turn's project: the agreement panel and the page's own agreement pair
    it with that project's score only, never with another project's turn of the same trace id."""
    from vigil.worker.report.build import run_query
    from vigil.worker.store.queries import PANELS

    (trace,) = seed(store, [0.2])
    intruder = Turn.model_validate({"trace_id": trace, "project": "bank", "agent": "support-bot", "started_at": NOW,
                                    "input": [{"role": "user", "content": "q"}], "output": "a"})
    _insert(store, "scores", [score_row(intruder, MONITOR, ScoreResult(
        run_id="b", scorer="answer_relevancy", scorer_version="1", status="scored", score=0.9))])

    service.next_item("relevancy", "lowest", "ana", projects=["shop"])
    row = service.label(LabelRequest(project="shop", trace_id=trace, monitor="relevancy", action="judge-right",
                                     reviewer="ana"), projects=["shop"])
    add_feedback(store, [row])
    panel = run_query(store, PANELS["judge_agreement"], start=NOW - timedelta(days=1), end=NOW + timedelta(hours=1))
    page = service.rows("labels", monitor="relevancy", projects=[])

    assert row.project == "shop"
    assert [(r["project"], r["pairs"], r["agreed"]) for r in panel] == [("shop", 1, 1)]
    assert [(r["trace_id"], r["human_positive"], r["judge_positive"]) for r in page] == [(trace, False, False)]


def test_a_reviewers_projects_are_projects_of_the_config():
    from pydantic import ValidationError
    from vigil.schemas.config import VigilConfig

    reviewer = {"name": "ana", "token_sha256": "a" * 64, "projects": ["shop", "bank"]}
    with pytest.raises(ValidationError, match="reviewers\\[0\\].projects: unknown project 'bank'"):
        VigilConfig.model_validate({"projects": [{"name": "shop"}], "reviewers": [reviewer]})
    assert VigilConfig.model_validate({"reviewers": [reviewer]}).reviewers[0].projects == ["shop", "bank"]


def test_report_serve_asks_the_configs_reviewers_for_their_tokens_on_loopback_too(store, leases):
    """With `reviewers:` configured, `vigil report --serve`'s /review/ is guarded as `vigil review` guards it: no
    request without a reviewer's token, and a label is the token's reviewer's."""
    import hashlib
    import threading

    from vigil.schemas.config import ReviewerConfig
    from vigil.worker.report.build import build_report
    from vigil.worker.report.serve import ReportServer

    (trace,) = seed(store, [0.4])
    sent = Sent()
    ana = ReviewerConfig(name="ana", token_sha256=hashlib.sha256(b"ana-token-0123456789").hexdigest())
    report = ReportServer(lambda: build_report(store, start=None, now=datetime.now(UTC)), port=0,
                          review=lambda lock: ReviewService(store, leases, sent, reviewer="os-user", lock=lock),
                          reviewers=(ana,))
    threading.Thread(target=report.serve_forever, daemon=True).start()
    port = report.server.server_address[1]
    signed = {"Authorization": "Bearer ana-token-0123456789"}
    try:
        anonymous = request(port, "GET", "/review/api/next?monitor=relevancy&queue=random&reviewer=mallory")
        item = request(port, "GET", "/review/api/next?monitor=relevancy&queue=random", headers=signed)
        label = request(port, "POST", "/review/api/label",
                        headers={**signed, "X-Vigil-CSRF": report.review_app().guard.csrf},
                        body={"project": "shop", "trace_id": trace, "monitor": "relevancy", "action": "judge-wrong",
                              "queue": "random"})
    finally:
        report.shutdown()

    assert anonymous[0] == 401
    assert item[0] == 200 and item[1]["item"]["reviewer"] == "ana"
    assert label[0] == 200 and [f.author for f in sent] == ["ana"]


def test_a_stored_label_of_one_projects_turn_leaves_another_projects_turn_of_the_trace_id_in_the_queues(store,
                                                                                                        service):
    """A label in the store is of its project's turn: bank's turn of a trace id shop's reviewer labelled is still
    bank's to review, and counted unreviewed. An older label that names no project is of every project's turn."""
    shop, legacy = seed(store, [0.2, 0.4])
    for trace in (shop, legacy):
        bank = Turn.model_validate({"trace_id": trace, "project": "bank", "agent": "support-bot", "started_at": NOW,
                                    "input": [{"role": "user", "content": "q"}], "output": "a"})
        _insert(store, "traces", [trace_row(bank)])
        _insert(store, "scores", [score_row(bank, MONITOR, ScoreResult(
            run_id="b", scorer="answer_relevancy", scorer_version="1", status="scored", score=0.3))])
    add_feedback(store, [Feedback(project=project, trace_id=trace, name="review", value=0.0, source="reviewer",
                                  author="ana", monitor="relevancy", queue="lowest")
                         for project, trace in (("shop", shop), ("", legacy))])

    sizes = service.rows("queue_sizes", monitor="relevancy", projects=[])[0]
    assert (sizes["population"], sizes["reviewed"], sizes["unreviewed"]) == (4, 3, 1)
    first = service.next_item("relevancy", "lowest", "carol", projects=["bank"])
    service.done("bank", shop, "carol", skipped=True)
    then = service.next_item("relevancy", "random", "carol", projects=["bank"])

    assert first is not None and (first["project"], first["trace_id"]) == ("bank", shop)
    assert then is None  # the label that names no project closed both projects' turns of its trace id
