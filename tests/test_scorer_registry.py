"""``build_scorer``: a monitor's scorer name, params and reason mode become a configured scorer."""

from __future__ import annotations

import pytest
from vigil.schemas import MonitorConfig
from vigil.worker.scorers import SCORERS, build_scorer, scorer_class
from vigil.worker.scorers.answer_relevancy import AnswerRelevancy
from vigil.worker.scorers.context_relevance import ContextRelevance


def monitor(scorer: str, params: dict | None = None, **fields) -> MonitorConfig:
    return MonitorConfig(name="m1", scorer=scorer, params=params or {}, judge="j", **fields)


def test_params_and_the_monitors_reason_mode_configure_the_scorer():
    scorer = build_scorer(monitor("answer_relevancy", {"uncertainty_weight": 0.5, "scale": 5}, reason="template"))

    assert scorer == AnswerRelevancy(uncertainty_weight=0.5, scale=5, reason_mode="template")


def test_nested_params_reach_nested_config():
    scorer = build_scorer(monitor("context_relevance", {"penalties": {"missing_context_per_item": 0.2}}))

    assert isinstance(scorer, ContextRelevance) and scorer.penalties.missing_context_per_item == 0.2


@pytest.mark.parametrize(
    ("scorer", "params", "message"),
    [
        pytest.param("answer_relevancy", {"uncertainty": 0.5}, "uncertainty", id="unknown-param"),
        pytest.param("prompt_alignment", {"evaluation_mode": "all"}, "evaluation_mode", id="bad-value"),
        pytest.param("answer_relevancy", {"reason_mode": "none"}, "monitor's `reason`", id="reason-mode-in-params"),
    ],
)
def test_a_bad_param_is_an_error_naming_the_monitor_and_the_param(scorer, params, message):
    with pytest.raises(ValueError, match="monitor 'm1'") as error:
        build_scorer(monitor(scorer, params))

    assert message in str(error.value)


def test_every_registered_scorer_resolves_to_a_class_with_a_name_and_version():
    for name in SCORERS:
        cls = scorer_class(name)
        assert cls.name == name and cls.version
