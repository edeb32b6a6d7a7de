"""The scorers' arithmetic, checked against the seeds' formulas and worked examples."""

from __future__ import annotations

import pytest
from vigil.worker.scorers.formulas import (
    answer_relevancy_score,
    context_relevance_score,
    lscore,
    mscore,
    prompt_alignment_score,
    wscore,
)


@pytest.mark.parametrize(
    ("verdicts", "kwargs", "expected"),
    [
        pytest.param(["yes", "yes", "yes"], {}, 1.0, id="all-yes-is-full-score"),
        pytest.param(["no", "no"], {}, 0.0, id="all-no-is-zero"),
        pytest.param(["yes", "yes", "yes", "unsure", "no"], {}, (3 + 0.3) / 5, id="unsure-weighs-0.3"),
        pytest.param(["unsure", "unsure"], {"uncertainty_weight": 0.5}, 0.5, id="custom-uncertainty-weight"),
        pytest.param(["yes", "no"], {"scale": 10}, 5.0, id="scale-multiplies"),
        pytest.param(["unsure"], {"uncertainty_weight": 0.0}, 0.0, id="unsure-can-weigh-nothing"),
    ],
)
def test_answer_relevancy_is_weighted_share_of_relevant_statements(verdicts, kwargs, expected):
    assert answer_relevancy_score(verdicts, **kwargs) == pytest.approx(expected)


def test_answer_relevancy_clamps_to_scale_when_weight_exceeds_one():
    assert answer_relevancy_score(["unsure"], uncertainty_weight=1.5) == 1.0


@pytest.mark.parametrize(
    "verdicts", [pytest.param([], id="no-verdicts"), pytest.param(["yes", "maybe"], id="verdict-outside-the-set")]
)
def test_answer_relevancy_refuses_what_it_cannot_score(verdicts):
    with pytest.raises(ValueError):
        answer_relevancy_score(verdicts)


@pytest.mark.parametrize(
    ("levels", "used", "missing", "kwargs", "expected"),
    [
        pytest.param(["high", "medium"], [True, True], 0, {}, (1.0 + 0.7) / 2, id="base-is-mean-of-level-weights"),
        pytest.param(["high", "medium", "low", "none"], [True] * 4, 0, {}, 2.0 / 4, id="all-four-levels"),
        pytest.param(["high", "high", "none"], [True, False, False], 1, {}, 2 / 3 - 0.1 - 0.15,
                     id="unused-high-and-one-missing-item"),
        pytest.param(["medium"], [False], 0, {}, 0.7, id="unused-medium-costs-nothing"),
        pytest.param(["high"], [True], 5, {}, 1.0 - 0.5, id="missing-penalty-capped-at-0.5"),
        pytest.param(["none", "low"], [False, False], 2, {}, 0.0, id="floored-at-zero"),
        pytest.param(
            ["high", "low"], [False, True], 3,
            {"unused_high_relevance_context": 0.05, "missing_context_per_item": 0.2,
             "max_missing_context_penalty": 0.4, "scale": 2},
            (0.65 - 0.05 - 0.4) * 2, id="seed-custom-penalties-and-scale-2",
        ),
    ],
)
def test_context_relevance_follows_seed_003_formula(levels, used, missing, kwargs, expected):
    assert context_relevance_score(levels, used, missing, **kwargs) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("levels", "used", "missing"),
    [
        pytest.param([], [], 0, id="no-contexts"),
        pytest.param(["high"], [True, False], 0, id="usage-flags-do-not-match"),
        pytest.param(["critical"], [True], 0, id="level-outside-the-set"),
        pytest.param(["high"], [True], -1, id="negative-missing-count"),
    ],
)
def test_context_relevance_refuses_what_it_cannot_score(levels, used, missing):
    with pytest.raises(ValueError):
        context_relevance_score(levels, used, missing)


PERFECT = {"intent": 1.0, "requirements": 1.0, "completeness": 1.0, "appropriateness": 1.0}
USER = {"intent": 1.0, "requirements": 0.5, "completeness": 1.0, "appropriateness": 0.0}  # 0.4+0.15+0.2+0 = 0.75
SYSTEM = {"intent": 0.8, "requirements": 0.6, "completeness": 1.0, "appropriateness": 1.0}  # .28+.21+.15+.15 = .79


@pytest.mark.parametrize(
    ("user", "system", "kwargs", "expected"),
    [
        pytest.param(PERFECT, PERFECT, {}, 1.0, id="perfect-both"),
        pytest.param(USER, None, {"mode": "user"}, 0.75, id="user-weights-40-30-20-10"),
        pytest.param(None, SYSTEM, {"mode": "system"}, 0.79, id="system-weights-35-35-15-15"),
        pytest.param(USER, SYSTEM, {}, 0.7 * 0.75 + 0.3 * 0.79, id="both-is-70-user-30-system"),
        pytest.param(PERFECT, {k: 0.0 for k in PERFECT}, {}, 0.7, id="both-really-uses-the-system-score"),
        pytest.param(USER, None, {"mode": "both"}, 0.75, id="both-without-system-is-user"),
        pytest.param(USER, SYSTEM, {"mode": "user", "scale": 10}, 7.5, id="scale-10"),
    ],
)
def test_prompt_alignment_follows_seed_004_weights(user, system, kwargs, expected):
    assert prompt_alignment_score(user, system, **kwargs) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("user", "system", "mode"),
    [
        pytest.param(None, SYSTEM, "user", id="user-mode-without-user"),
        pytest.param(USER, None, "system", id="system-mode-without-system"),
        pytest.param(None, None, "both", id="both-without-user"),
        pytest.param({"intent": 1.0}, None, "user", id="missing-dimensions"),
        pytest.param({**PERFECT, "intent": 1.2}, None, "user", id="dimension-outside-0-1"),
        pytest.param(PERFECT, PERFECT, "everything", id="unknown-mode"),
    ],
)
def test_prompt_alignment_refuses_what_it_cannot_score(user, system, mode):
    with pytest.raises(ValueError):
        prompt_alignment_score(user, system, mode=mode)


def test_paper_worked_example_n3_sigma_1_5():
    """Seed 002 §3.1: n=3, σ=[1,5] → wscore (3·1 + 2·5 + 1·5) / 6 = 3, lscore 2, mscore 5."""
    assert wscore([1, 5], 3) == 3
    assert lscore([1, 5]) == 2
    assert mscore([1, 5]) == 5


@pytest.mark.parametrize(
    ("sigma", "n", "expected"),
    [
        pytest.param([5], 5, 5.0, id="correct-at-once-is-full-score"),
        pytest.param([1, 2, 3, 4, 5], 5, (5 * 1 + 4 * 2 + 3 * 3 + 2 * 4 + 1 * 5) / 15, id="every-turn-used"),
        pytest.param([3], 1, 3.0, id="single-turn-budget"),
        pytest.param([2, 4], 4, (4 * 2 + 3 * 4 + 2 * 4 + 1 * 4) / 10, id="last-score-fills-remaining-turns"),
        pytest.param([0, 5], 2, (2 * 0 + 1 * 5) / 3, id="early-zero-weighs-most"),
    ],
)
def test_wscore_rewards_reaching_a_good_answer_early(sigma, n, expected):
    assert wscore(sigma, n) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("sigma", "n"),
    [pytest.param([], 3, id="empty-sigma"), pytest.param([1, 2, 3], 2, id="more-turns-than-n"),
     pytest.param([1], 0, id="n-zero")],
)
def test_wscore_refuses_impossible_dialogues(sigma, n):
    with pytest.raises(ValueError):
        wscore(sigma, n)


@pytest.mark.parametrize("fn", [pytest.param(lscore, id="lscore"), pytest.param(mscore, id="mscore")])
def test_lscore_and_mscore_refuse_an_empty_dialogue(fn):
    with pytest.raises(ValueError):
        fn([])
