"""The demo's bundled data: valid turns from three agents, some bad on purpose, and a regression the detector finds.

The files are ``worker/demo/data/``'s; ``labels.jsonl`` holds the ground truth the turns cannot carry.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import re
import statistics
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from vigil.schemas import ScoreStatus, Turn, load_config

DATA = Path(__file__).resolve().parents[1] / "worker" / "demo" / "data"
ROOT = DATA.parents[2]
ANCHOR = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
WINDOW = timedelta(minutes=120)
AGENTS = {"support-bot": "acme-shop", "travel-assistant": "acme-travel", "code-helper": "acme-dev"}


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def turns() -> list[Turn]:
    return [Turn.model_validate_json(line) for line in (DATA / "turns.jsonl").read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def labels() -> dict[str, dict]:
    return {row["trace_id"]: row for row in _jsonl(DATA / "labels.jsonl")}


@pytest.fixture(scope="module")
def kb() -> dict[str, dict]:
    return {row["id"]: row for row in _jsonl(DATA / "docs" / "kb.jsonl")}


@pytest.fixture(scope="module")
def config():
    return load_config(DATA / "vigil.yaml")


def _in_window(turn: Turn, newest: datetime) -> bool:
    """The detector's recent window once the demo has shifted the newest turn to now."""
    return turn.started_at > newest - WINDOW


def _newest(turns: list[Turn]) -> datetime:
    return max(t.started_at for t in turns)


# ---- the turns ----------------------------------------------------------------------------------------------


def test_every_line_is_a_valid_turn_with_nothing_truncated(turns):
    raw = (DATA / "turns.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(turns) == len(raw) >= 240
    assert all(not t.truncated for t in turns)


def test_three_agents_each_in_its_own_project(turns):
    counts = Counter(t.agent for t in turns)
    assert set(counts) == set(AGENTS)
    assert min(counts.values()) >= 50
    assert all(t.project == AGENTS[t.agent] for t in turns)


def test_ids_are_otel_shaped_and_unique(turns):
    assert all(re.fullmatch(r"[0-9a-f]{32}", t.trace_id) for t in turns)
    assert all(t.span_id and re.fullmatch(r"[0-9a-f]{16}", t.span_id) for t in turns)
    assert len({t.trace_id for t in turns}) == len(turns)
    assert len({t.span_id for t in turns}) == len(turns)


def test_timestamps_span_eight_days_before_the_anchor_in_order(turns):
    starts = [t.started_at for t in turns]
    assert starts == sorted(starts)
    assert min(starts) >= ANCHOR - timedelta(days=8) and max(starts) <= ANCHOR
    assert max(starts) - min(starts) > timedelta(days=7)
    assert all(t.ended_at and timedelta(0) < t.ended_at - t.started_at < timedelta(seconds=30) for t in turns)
    assert len({s.date() for s in starts}) >= 8


def test_multi_turn_sessions_carry_the_earlier_questions_and_answers(turns):
    sessions: dict[str, list[Turn]] = defaultdict(list)
    for turn in turns:
        sessions[turn.session_id].append(turn)
    multi = [members for members in sessions.values() if len(members) > 1]
    assert len(multi) >= 20
    for members in multi:
        assert len({t.agent for t in members}) == 1
        for earlier, later in zip(members, members[1:]):
            assert later.input[: len(earlier.input)] == earlier.input
            assert later.input[len(earlier.input)].content == earlier.output


def test_usage_and_metadata_look_like_production(turns):
    assert all(t.usage and t.usage.prompt_tokens > 50 for t in turns)
    assert all((t.usage.completion_tokens > 0) == bool(t.output) for t in turns)
    assert all("demo" in t.tags and t.metadata.get("release") and t.metadata.get("region") for t in turns)
    assert all(t.model for t in turns)


def test_the_support_bot_answers_from_knowledge_base_documents(turns, kb):
    support = [t for t in turns if t.agent == "support-bot"]
    assert all(t.system and len(t.contexts) == 3 for t in support)
    for turn in support:
        for doc in turn.contexts:
            assert doc.id in kb and doc.text == f"{kb[doc.id]['title']}\n{kb[doc.id]['text']}"
            assert doc.score is not None and 0 < doc.score < 1
        assert [d.score for d in turn.contexts] == sorted((d.score for d in turn.contexts), reverse=True)
    assert sum(t.reference is not None for t in support) / len(support) >= 0.75


def test_the_assistants_have_system_instructions_and_some_tool_calls(turns):
    for agent in ("travel-assistant", "code-helper"):
        mine = [t for t in turns if t.agent == agent]
        assert all(t.system for t in mine)
        assert len({t.system for t in mine}) == (2 if agent == "travel-assistant" else 1)
        assert sum(bool(t.tool_calls) for t in mine) >= 5
        assert not any(t.contexts for t in mine)


def test_the_support_bot_looks_orders_up_and_refunds_some_breaking_the_refund_rules_now_and_then(turns):
    support = [t for t in turns if t.agent == "support-bot" and t.tool_calls]
    refunds = [t for t in support if any(c.name == "issue_refund" for c in t.tool_calls)]
    looked_up_first = [t for t in refunds if t.tool_calls[0].name == "lookup_order"]
    over_limit = [t for t in refunds if any(c.name == "issue_refund" and c.arguments["amount"] > 500
                                            for c in t.tool_calls)]
    failed = [t for t in refunds if any(c.error for c in t.tool_calls)]
    assert len(support) >= 40 and len(refunds) >= 15
    assert 0 < len(refunds) - len(looked_up_first) < len(refunds) / 3
    assert over_limit and failed


def test_the_material_is_varied_not_repeated(turns):
    assert len({t.question for t in turns}) >= 120
    assert len({t.output for t in turns if t.output}) >= 100


# ---- the labels: bad turns and the regression ---------------------------------------------------------------


def test_every_turn_has_exactly_one_label(turns, labels):
    assert set(labels) == {t.trace_id for t in turns}
    assert all(labels[t.trace_id]["agent"] == t.agent for t in turns)
    assert all((row["label"] == "good") == (row["kind"] == "ok") for row in labels.values())


def test_about_a_sixth_of_the_turns_outside_the_regression_are_bad_in_varied_ways(labels):
    outside = [row for row in labels.values() if not row["regression"]]
    bad = [row for row in outside if row["label"] == "bad"]
    assert 0.15 <= len(bad) / len(outside) <= 0.20
    for agent in AGENTS:
        assert len({row["kind"] for row in bad if row["agent"] == agent}) >= 5
    kinds = {row["kind"] for row in bad}
    assert {"off_topic", "hallucinated_policy", "wrong_language", "empty", "truncated", "prompt_injection",
            "too_many_bullets", "usd_prices", "booked_without_confirmation"} <= kinds


def test_bad_turns_show_their_defect(turns, labels):
    by_kind = defaultdict(list)
    for turn in turns:
        by_kind[labels[turn.trace_id]["kind"]].append(turn)
    assert all(t.output == "" for t in by_kind["empty"])
    assert all(not t.output.rstrip().endswith((".", "```", "!", "?")) for t in by_kind["truncated"])
    assert all(re.search(r"(?i)ignore|override|system|instruction|pretend|</", t.question)
               for t in by_kind["prompt_injection"])
    assert all("$" in t.output and "€" not in t.output for t in by_kind["usd_prices"])
    assert all(t.output.count("\n- ") + t.output.startswith("- ") > 3 for t in by_kind["too_many_bullets"])
    assert all(any(c.name.startswith("book_") for c in t.tool_calls) for t in by_kind["booked_without_confirmation"])


def test_the_last_two_hours_hold_the_support_bot_v2_regression(turns, labels):
    newest = _newest(turns)
    support = [t for t in turns if t.agent == "support-bot"]
    window = [t for t in support if _in_window(t, newest)]
    assert len(window) >= 40
    assert all(t.metadata["release"] == "v2" and t.model == "llama-3.2-3b-instruct" for t in window)
    assert all(labels[t.trace_id]["regression"] for t in window)
    before = [t for t in support if not _in_window(t, newest)]
    assert all(t.metadata["release"] == "v1" and t.model == "llama-3.1-8b-instruct" for t in before)
    assert len(before) >= 80 and len({t.started_at.date() for t in before}) >= 7  # a steady baseline
    assert max(t.started_at for t in before) < newest - WINDOW - timedelta(minutes=10)
    bad_share = sum(labels[t.trace_id]["label"] == "bad" for t in window) / len(window)
    assert bad_share >= 0.6


def test_the_regression_keeps_its_window_under_the_demo_shift(turns):
    """The demo moves the newest turn to just before now; the v2 turns must all sit in the last 120 minutes
    even if the alert check runs several minutes after the replay."""
    newest = _newest(turns)
    v2 = [t for t in turns if t.metadata.get("release") == "v2"]
    assert newest - min(t.started_at for t in v2) < WINDOW - timedelta(minutes=5)


_WORD = re.compile(r"[a-z0-9€]+")
_STOP = set("the a an and or of to in for on is are be it you your i my we our can with at as this that if by from "
            "not do does was so".split())


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP and len(w) > 2}


def test_v2_answers_drift_away_from_the_question_and_the_documents(turns):
    """A judge-free look at the regression: word overlap of the answer with the question and the top document."""
    newest = _newest(turns)

    def overlap(turn: Turn) -> float:
        answer = _words(turn.output)
        return len(answer & (_words(turn.question) | _words(turn.contexts[0].text))) / max(1, len(answer))

    support = [t for t in turns if t.agent == "support-bot"]
    recent = [overlap(t) for t in support if _in_window(t, newest)]
    baseline = [overlap(t) for t in support if not _in_window(t, newest)]
    assert statistics.mean(baseline) - statistics.mean(recent) > 0.25


# ---- the knowledge base and the golden set ------------------------------------------------------------------


def test_the_knowledge_base_has_forty_short_documents(kb):
    assert len(kb) >= 40
    for doc in kb.values():
        assert set(doc) == {"id", "title", "text"} and doc["title"] and 100 < len(doc["text"]) < 600


def test_golden_questions_are_answerable_from_the_documents_they_cite(kb):
    from vigil.worker.retrieval import BM25Retriever
    from vigil.worker.scorers.rag_correctness import load_golden

    golden = _jsonl(DATA / "golden.jsonl")
    assert len(golden) >= 20 and len({g["id"] for g in golden}) == len(golden)
    assert len(load_golden(DATA / "golden.jsonl")) == len(golden)
    retriever = BM25Retriever(DATA / "docs" / "kb.jsonl")
    for item in golden:
        assert item["doc_ids"] and set(item["doc_ids"]) <= set(kb), item["id"]
        cited = _words(" ".join(kb[d]["text"] for d in item["doc_ids"]))
        reference = _words(item["reference"])
        assert len(reference & cited) / len(reference) >= 0.6, item["id"]
        found = {d.id for d in retriever.search(f"{item['question']}\n{item['reference']}", 3)}
        assert found & set(item["doc_ids"]), item["id"]


# ---- the config ---------------------------------------------------------------------------------------------


def test_the_config_validates_with_a_baseline_judge_the_four_built_in_monitors_and_the_teams_own(config):
    assert [j.kind for j in config.judges] == ["baseline"]
    by_scorer = {m.scorer: m for m in config.monitors}
    assert set(by_scorer) == {"answer_relevancy", "context_relevance", "prompt_alignment", "rag_correctness",
                              "cites_sources", "refund_calls", "refund_policy", "task_completion"}
    assert {s.name: s.kind for s in config.scorers} == {
        "cites_sources": "llm_judge", "refund_calls": "json_schema", "refund_policy": "tool_policy",
        "task_completion": "llm_judge"}
    assert all(by_scorer[name].filters.agents == ["support-bot"] for name in ("cites_sources", "refund_calls",
                                                                              "refund_policy"))
    assert by_scorer["context_relevance"].filters.agents == ["support-bot"]
    assert by_scorer["rag_correctness"].filters.agents == ["support-bot"]
    assert set(by_scorer["prompt_alignment"].filters.agents) == {"travel-assistant", "code-helper"}
    assert by_scorer["prompt_alignment"].params["evaluation_mode"] == "both"


def test_the_rag_monitor_points_at_the_bundled_knowledge_base_and_golden_set(config):
    from vigil.worker.retrieval import RetrieverConfig

    params = config.monitor("rag_correctness").params
    retriever = RetrieverConfig.model_validate(params["retriever"])
    assert retriever.kind == "bm25" and (ROOT / retriever.path).resolve() == (DATA / "docs" / "kb.jsonl").resolve()
    assert (ROOT / params["golden"]).resolve() == (DATA / "golden.jsonl").resolve()


def _pairs(config, turns) -> dict[str, list[Turn]]:
    from vigil.worker.pipeline.filters import matches
    from vigil.worker.pipeline.sampling import sampled

    return {m.name: [t for t in turns if matches(t, m.filters) and sampled(t.trace_id, m.sampling_rate)]
            for m in config.monitors}


def test_the_demo_asks_the_judge_about_at_most_about_seven_hundred_pairs(config, turns):
    """The checks and the tool policy call no judge and cost microseconds: they are counted apart."""
    pairs = _pairs(config, turns)
    judged = [m.name for m in config.monitors if config.calls_judge(m)]
    assert 400 <= sum(len(pairs[name]) for name in judged) <= 700
    assert sum(len(sample) for name, sample in pairs.items() if name not in judged) == 2 * 150


def test_each_regression_rule_has_enough_support_bot_samples_on_both_sides(config, turns):
    newest = _newest(turns)
    pairs = _pairs(config, turns)
    rules = [r for r in config.alerts if r.kind == "regression"]
    assert {r.monitor for r in rules} >= {"answer_relevancy", "context_relevance", "rag_correctness"}
    for rule in rules:
        assert (rule.method, rule.baseline_minutes, rule.min_samples) == ("sequential", 7 * 24 * 60, 20)
        if config.monitor(rule.monitor).filters.agents in ([], ["support-bot"]):
            sample = [t for t in pairs[rule.monitor] if t.agent == "support-bot"]
            assert sum(_in_window(t, newest) for t in sample) >= rule.min_samples, rule.name
            assert sum(not _in_window(t, newest) for t in sample) >= rule.min_samples, rule.name


def _load_generator():
    spec = importlib.util.spec_from_file_location("demo_data_generate", DATA / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_files_are_exactly_the_generators_output():
    for name, text in _load_generator().render_files().items():
        assert (DATA / name).read_text(encoding="utf-8") == text, f"{name}: rerun worker/demo/data/generate.py"


# ---- the regression through the real scorers and the detector's decision -----------------------------------


def test_the_baseline_judge_and_the_detector_see_the_support_bot_regression(config, turns, monkeypatch):
    """Score every sampled pair with the offline baseline judge, then apply the detector's Welch test per
    (agent, monitor): the support-bot rules fire, the assistants have too few recent turns to tell."""
    from vigil.worker.alerts.decide import regression_verdict
    from vigil.worker.alerts.model import Subject, WindowStats
    from vigil.worker.judge.baseline import BaselineJudge
    from vigil.worker.scorers.answer_relevancy import AnswerRelevancy
    from vigil.worker.scorers.context_relevance import ContextRelevance
    from vigil.worker.scorers.prompt_alignment import PromptAlignment
    from vigil.worker.scorers.rag_correctness import RagCorrectness

    monkeypatch.chdir(ROOT)  # the config's paths are relative to the repository root
    classes = {c.name: c for c in (AnswerRelevancy, ContextRelevance, PromptAlignment, RagCorrectness)}
    newest, judge = _newest(turns), BaselineJudge()
    windows: dict[tuple[str, str, bool], list[float]] = defaultdict(list)

    async def score_all() -> None:
        for monitor_name, sample in _pairs(config, turns).items():
            monitor = config.monitor(monitor_name)
            if monitor.scorer not in classes:  # the team's own scorers: no regression rule watches them
                continue
            scorer = classes[monitor.scorer](**monitor.params)
            for turn in sample:
                result = await scorer.score(turn, judge)
                if result.status == ScoreStatus.SCORED and result.score is not None:
                    windows[(monitor_name, turn.agent, _in_window(turn, newest))].append(result.score)

    asyncio.run(score_all())

    def stats(values: list[float]) -> WindowStats:
        return WindowStats(n=len(values), mean=statistics.mean(values) if values else None,
                           variance=statistics.variance(values) if len(values) > 1 else None)

    for rule in (r for r in config.alerts if r.kind == "regression"):
        for agent in AGENTS:
            recent, baseline = windows[(rule.monitor, agent, True)], windows[(rule.monitor, agent, False)]
            if not baseline:
                continue
            verdict = regression_verdict(rule, Subject(project=AGENTS[agent], agent=agent, monitor=rule.monitor),
                                         stats(recent), stats(baseline))
            assert verdict.breach is (True if agent == "support-bot" else None), verdict.message
