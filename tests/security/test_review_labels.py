"""Forged review labels, sent to a real `vigil review` process (its store a chDB directory it opened itself, its
leases, rate counts and published labels in a real redis-server): a label is accepted only for a turn leased to the
reviewer its token names, whatever name the request gives, and at most VIGIL_REVIEW_LABELS_PER_MINUTE of them. A
turn is its project's trace: a lease, a label's mark and a label are of one project's turn, never of another
project's turn of the same trace id, and a reviewer's token reaches only their projects' turns.

Before leases and per-reviewer tokens, 400 labels posted without a lease under made-up names set a monitor's
agreement to 2.5% in 29 s. Before leases named the project, a bank reviewer's lease of a trace id kept shop's turn of
that id from shop's reviewer."""

from __future__ import annotations

import hashlib
import http.client
import json
import re
import shutil

import pytest
from vigil.schemas import Turn
from vigil.schemas.broker import INGEST_TASK
from vigil.schemas.rows import score_row, trace_row
from vigil.schemas.score import ScoreResult
from vigil.worker.store import connect

from tests.pipeline import ReviewProcess
from tests.test_intake import queued
from tests.test_review import MONITOR, NOW, _insert, seed

TOKENS = {"ana": "ana-token-0123456789", "bob": "bob-token-0123456789", "carol": "carol-token-0123456789"}
PROJECTS = {"ana": ["shop"], "bob": [], "carol": ["bank"]}


def reviewers_yaml() -> str:
    lines = ["reviewers:"]
    for name, token in TOKENS.items():
        lines += [f"  - name: {name}", f"    token_sha256: {hashlib.sha256(token.encode()).hexdigest()}",
                  f"    projects: {json.dumps(PROJECTS[name])}"]
    return "\n".join(lines) + "\n"


class Client:
    """Requests to the page as one reviewer (their token as a Bearer header), with the page's CSRF header."""

    def __init__(self, page: ReviewProcess, token: str | None, csrf: str = "") -> None:
        self.page, self.token, self.csrf = page, token, csrf

    def __call__(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict | str, dict]:
        connection = http.client.HTTPConnection("127.0.0.1", self.page.port, timeout=60)
        headers = {"Host": f"127.0.0.1:{self.page.port}", "Content-Type": "application/json",
                   "X-Vigil-CSRF": self.csrf}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        connection.request(method, path, body=json.dumps(body).encode() if body is not None else None,
                           headers=headers)
        response = connection.getresponse()
        text = response.read().decode()
        connection.close()
        try:
            return response.status, json.loads(text), dict(response.getheaders())
        except ValueError:
            return response.status, text, dict(response.getheaders())

    def next(self, queue: str = "lowest") -> dict | None:
        status, answer, _ = self("GET", f"/review/api/next?monitor=relevancy&queue={queue}")
        assert status == 200, answer
        return answer["item"]

    def label(self, trace_id: str, project: str = "shop", **fields) -> tuple[int, dict | str, dict]:
        return self("POST", "/review/api/label", {"project": project, "trace_id": trace_id, "monitor": "relevancy",
                                                  "action": "judge-wrong", "queue": "lowest", **fields})


def _serve(redis_url, tmp_path, migrated_store, fill):
    """`vigil review --config` with three reviewers (ana: project shop; bob: every project; carol: bank), over a
    store ``fill`` wrote (it returns the page's ``traces``), at most 3 labels per reviewer a minute."""
    dsn = f"chdb://{tmp_path / 'chdb'}"
    shutil.copytree(migrated_store, tmp_path / "chdb", symlinks=True)
    store = connect(dsn)
    traces = fill(store)
    store.close()  # the page opens the directory itself (no worker runs; one process at a time may)
    config = tmp_path / "vigil.yaml"
    config.write_text(reviewers_yaml())
    process = ReviewProcess(redis_url, tmp_path / "home", dsn, VIGIL_REVIEW_LABELS_PER_MINUTE="3")
    process.start("--config", str(config))
    try:
        status, page_html, _ = Client(process, TOKENS["ana"])("GET", "/review/")
        assert status == 200, page_html
        process.csrf = re.search(r'name="vigil-csrf" content="([^"]+)"', page_html).group(1)
        process.traces = traces
        yield process
    finally:
        assert process.stop() in (0, -15), process.output()


@pytest.fixture
def page(redis_url, tmp_path, _migrated_store):
    """The page over six scored turns of project shop."""
    yield from _serve(redis_url, tmp_path, _migrated_store, lambda store: seed(store, [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]))


def _same_ids_in_bank(store) -> list[str]:
    """Two shop turns (0.1, 0.2), and bank turns of the same trace ids (0.15, 0.25), scored after shop's."""
    traces = seed(store, [0.1, 0.2])
    for trace, value in zip(traces, [0.15, 0.25], strict=True):
        turn = Turn.model_validate({"trace_id": trace, "project": "bank", "agent": "support-bot", "started_at": NOW,
                                    "input": [{"role": "user", "content": "bank's question"}], "output": "bank's"})
        _insert(store, "traces", [trace_row(turn)])
        _insert(store, "scores", [score_row(turn, MONITOR, ScoreResult(
            run_id="b", scorer="answer_relevancy", scorer_version="1", status="scored", score=value))])
    return traces


@pytest.fixture
def shared_ids(redis_url, tmp_path, _migrated_store):
    """The page over shop's and bank's turns of the same two trace ids (``_same_ids_in_bank``)."""
    yield from _serve(redis_url, tmp_path, _migrated_store, _same_ids_in_bank)


def turn_of(item: dict | None) -> tuple[str, ...] | None:
    """What an item shows: the projects of its spans and scores, and its trace id."""
    return None if item is None else (*sorted({r["project"] for r in item["spans"] + item["scores"]}), item["trace_id"])


def published(redis_url: str) -> list[tuple[str, str]]:
    """The labels the page put on the ingest queue: (trace, author)."""
    return [(f["trace_id"], f["author"]) for f in published_rows(redis_url)]


def published_rows(redis_url: str) -> list[dict]:
    return [f["feedback"] for f in queued(redis_url, INGEST_TASK) if "feedback" in f]


def test_forged_labels_are_refused_and_only_the_lease_holders_own_label_is_published(page, redis_url):
    ana, bob, carol = (Client(page, TOKENS[name], page.csrf) for name in ("ana", "bob", "carol"))
    nobody = Client(page, None, page.csrf)
    leased = ana.next()["trace_id"]  # the lowest turn, leased to ana
    never_served = next(t for t in page.traces if t != leased)

    no_token = nobody.label(leased, reviewer="ana")
    bobs_on_anas_lease = bob.label(leased)
    no_lease = bob.label(never_served)
    spoofed_name = bob.label(leased, reviewer="ana")
    guessed_token = Client(page, "ana-token-guess", page.csrf).label(leased)
    carols_queue = carol.next()  # her project has no turns here
    anas_own = ana.label(leased, reviewer="ana", comment="the answer is wrong")

    assert no_token[0] == 401 and guessed_token[0] == 401
    assert bobs_on_anas_lease[0] == 403 and "leased to someone else" in bobs_on_anas_lease[1]["error"]
    assert no_lease[0] == 403 and "not leased" in no_lease[1]["error"]
    assert spoofed_name[0] == 403 and "bob's" in spoofed_name[1]["error"]
    assert carols_queue is None
    assert anas_own[0] == 200 and anas_own[1]["author"] == "ana"
    assert published(redis_url) == [(leased, "ana")]


def test_a_name_in_the_body_never_changes_whose_label_it_is(page, redis_url):
    """bob leases a turn and labels it naming no one: the label is bob's, the name his token's."""
    bob = Client(page, TOKENS["bob"], page.csrf)
    leased = bob.next()["trace_id"]

    status, answer, _ = bob.label(leased)

    assert status == 200 and answer["author"] == "bob"
    assert published(redis_url) == [(leased, "bob")]


def test_a_reviewer_over_the_label_rate_is_told_when_to_come_back(page, redis_url):
    ana = Client(page, TOKENS["ana"], page.csrf)
    answers = []
    for _ in range(4):
        item = ana.next()
        answers.append(ana.label(item["trace_id"]))

    assert [a[0] for a in answers] == [200, 200, 200, 429]
    assert int(answers[-1][2]["Retry-After"]) >= 1
    assert "3 labels in the last minute" in answers[-1][1]["error"]
    assert [author for _, author in published(redis_url)] == ["ana"] * 3


def test_a_lease_of_one_projects_turn_leaves_another_projects_turn_of_the_same_trace_id_open(shared_ids, redis_url):
    """carol (bank) leases bank's turn of a trace id, then ana (shop) asks for shop's lowest turn, of the same id:
    each gets their own project's turn, and each label is of it."""
    ana, carol = (Client(shared_ids, TOKENS[name], shared_ids.csrf) for name in ("ana", "carol"))
    lowest = shared_ids.traces[0]

    carols = carol.next()
    anas = ana.next()

    assert turn_of(carols) == ("bank", lowest)
    assert turn_of(anas) == ("shop", lowest)
    assert (carols["project"], anas["project"]) == ("bank", "shop")  # what the page sends back with a label
    assert carol.label(lowest, "bank")[0] == 200 and ana.label(lowest, "shop")[0] == 200
    assert [(f["project"], f["trace_id"], f["author"]) for f in published_rows(redis_url)] == [
        ("bank", lowest, "carol"), ("shop", lowest, "ana")]


def test_a_label_of_one_projects_turn_leaves_another_projects_turn_of_the_same_trace_id_in_its_queue(shared_ids):
    """ana labels shop's lowest turn (it is kept out of the queues until the store has the label): bank's turn of the
    same trace id stays in carol's queue."""
    ana, carol = (Client(shared_ids, TOKENS[name], shared_ids.csrf) for name in ("ana", "carol"))
    lowest = shared_ids.traces[0]
    assert ana.next()["trace_id"] == lowest and ana.label(lowest, "shop")[0] == 200

    carols = carol.next()

    assert turn_of(carols) == ("bank", lowest)


def test_a_reviewer_of_one_project_cannot_lease_or_label_another_projects_turn(shared_ids, redis_url):
    """carol (bank) holds bank's turn: ana (shop) cannot label, renew, skip or release it, even naming it; bob (every
    project) leases shop's turn of that id, and his label is of shop's turn, though bank's score is newer."""
    ana, bob, carol = (Client(shared_ids, TOKENS[name], shared_ids.csrf) for name in ("ana", "bob", "carol"))
    lowest = shared_ids.traces[0]
    assert turn_of(carol.next()) == ("bank", lowest)
    turn = {"project": "bank", "trace_id": lowest}

    anas_label = ana.label(lowest, "bank")
    anas_renew = ana("POST", "/review/api/renew", turn)
    ana("POST", "/review/api/release", turn)
    ana("POST", "/review/api/skip", turn)
    bobs = bob.next()
    bobs_label = bob.label(lowest, "shop")
    carols_label = carol.label(lowest, "bank")

    assert turn_of(bobs) == ("shop", lowest)  # not both projects' turns of the id as one
    assert bobs_label[0] == 200 and carols_label[0] == 200  # carol's lease outlived ana's release
    assert [(f["project"], f["author"]) for f in published_rows(redis_url)] == [("shop", "bob"), ("bank", "carol")]
    assert anas_label[0] == 403 and "ana reviews shop, not bank" in anas_label[1]["error"]
    assert anas_renew[0] == 403
