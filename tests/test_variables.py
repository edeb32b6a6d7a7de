"""A turn's variables (``worker.scorers.variables``): a check's ``field`` and a rubric's ``{{ place }}`` name the same
variables and see the same text, through the real scorers (the rubric against the scripted judge server)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from vigil.schemas import ScoreStatus, Turn
from vigil.worker.judge import NO_JUDGE
from vigil.worker.scorers import variables
from vigil.worker.scorers.user import build_user_scorer

from tests.judge_server import Reply
from tests.scoring_support import judge_factory, llm_judge  # noqa: F401 (fixtures)
from tests.test_user_scorers import config

README = Path(__file__).resolve().parent.parent / "README.md"

FULL = Turn.model_validate({
    "trace_id": "t-vars", "agent": "support-bot", "system": "Be brief.", "reference": "Five days.",
    "input": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Where is order 40-118873?"}],
    "output": "It ships tomorrow.", "contexts": [{"id": "kb-1", "text": "Orders ship in 2 days."}, {"text": "FAQ"}],
    "tool_calls": [{"name": "lookup_order", "arguments": {"order_id": "40-118873"}, "result": "shipped", "id": "c1"},
                   {"name": "notify", "arguments": {}, "error": "Timeout"}],
    "metadata": {"order_id": "40-118873"},
})
BARE = Turn.model_validate({"trace_id": "t-bare", "agent": "faq-bot", "output": "",
                            "input": [{"role": "user", "content": "What are your hours?"}]})

# Each variable as it renders: a text as it is, a list as a JSON array with fixed keys, one key per line.
EXPECTED = {
    "question": "Where is order 40-118873?",
    "answer": "It ships tomorrow.",
    "system": "Be brief.",
    "contexts": '[\n{\n"id": "kb-1",\n"text": "Orders ship in 2 days."\n},\n{\n"id": null,\n"text": "FAQ"\n}\n]',
    "messages": json.dumps([{"role": "system", "content": "Be brief."},
                            {"role": "user", "content": "Where is order 40-118873?"}], indent=0),
    "tool_calls": json.dumps([
        {"name": "lookup_order", "arguments": {"order_id": "40-118873"}, "result": "shipped", "error": None},
        {"name": "notify", "arguments": {}, "result": None, "error": "Timeout"}], indent=0),
    "reference": "Five days.",
    "agent": "support-bot",
    "metadata.order_id": "40-118873",
}


async def check(name: str, turn: Turn, pattern: str):
    """A regex check of ``field: name`` over ``turn``."""
    spec = config({"name": "c", "kind": "regex", "pattern": pattern, "field": name}).scorers[0]
    return await build_user_scorer(spec).score(turn, NO_JUDGE)


def test_every_variable_is_listed_in_the_readme_table_with_the_same_names():
    text = README.read_text(encoding="utf-8")
    table = text[text.index("| variable | renders as |"):].split("\n\n")[0]

    names = re.findall(r"^\| `([a-z_.A-Z]+)` \|", table, flags=re.MULTILINE)

    assert names == [*variables.VARIABLES, "metadata.KEY"]


@pytest.mark.parametrize("name", list(EXPECTED))
async def test_a_check_sees_each_variable_as_the_rule_renders_it(name):
    exact = await check(name, FULL, r"\A" + re.escape(EXPECTED[name]) + r"\z")

    assert (exact.status, exact.label) == (ScoreStatus.SCORED, "pass"), exact.reason


@pytest.mark.parametrize("name", list(EXPECTED))
async def test_a_rubric_sees_each_variable_as_the_same_text_a_check_sees(judge_server, llm_judge, name):
    judge_server.replies.append(Reply.json({"reason": "ok", "verdict": True}))
    spec = config({"name": "r", "kind": "llm_judge", "prompt": f"Judge {{{{ {name} }}}}",
                   "output": {"type": "boolean"}}).scorers[0]

    result = await build_user_scorer(spec).score(FULL, llm_judge)

    assert result.status is ScoreStatus.SCORED
    prompt = judge_server.requests[0].body["messages"][1]["content"]
    fenced = re.search(r"<<<DATA_[0-9a-f]{16} [^>]*>>>\n(.*)\n<<<END_DATA_", prompt, flags=re.DOTALL).group(1)
    assert fenced == EXPECTED[name]


@pytest.mark.parametrize(("name", "rendered"), [
    pytest.param("tool_calls", "[]", id="no-tool-calls-is-an-empty-array"),
    pytest.param("answer", "", id="an-empty-answer-is-the-answer"),
    pytest.param("messages", '[\n{\n"role": "user",\n"content": "What are your hours?"\n}\n]', id="messages"),
    pytest.param("agent", "faq-bot", id="agent"),
])
async def test_what_the_agent_did_is_always_there_for_a_check_and_a_rubric_alike(judge_server, llm_judge, name,
                                                                                 rendered):
    judge_server.replies.append(Reply.json({"reason": "ok", "verdict": True}))
    spec = config({"name": "r", "kind": "llm_judge", "prompt": f"Judge {{{{ {name} }}}} of {{{{ question }}}}",
                   "output": {"type": "boolean"}}).scorers[0]

    checked = await check(name, BARE, r"\A" + re.escape(rendered) + r"\z")
    rubric = await build_user_scorer(spec).score(BARE, llm_judge)

    assert (checked.status, checked.label) == (ScoreStatus.SCORED, "pass")
    assert rubric.status is ScoreStatus.SCORED


@pytest.mark.parametrize("name", ["system", "contexts", "reference", "metadata.order_id"])
async def test_what_the_agent_was_given_is_missing_for_a_check_and_a_rubric_alike(judge_server, llm_judge, name):
    spec = config({"name": "r", "kind": "llm_judge", "prompt": f"Judge {{{{ {name} }}}}",
                   "output": {"type": "boolean"}}).scorers[0]

    checked = await check(name, BARE, "x")
    rubric = await build_user_scorer(spec).score(BARE, llm_judge)

    assert (checked.status, checked.reason) == (ScoreStatus.UNSCORED, f"the turn has no {name} to check")
    assert (rubric.status, rubric.reason) == (ScoreStatus.UNSCORED, f"the turn has no {name} for {{{{{name}}}}}")
    assert judge_server.requests == []


@pytest.mark.parametrize(("old", "new"), [("input", "question"), ("output", "answer")])
def test_the_older_names_mean_the_same_variables(old, new):
    assert variables.value(old, FULL) == variables.value(new, FULL) == EXPECTED[new]


def test_a_check_of_a_field_that_names_no_variable_is_a_build_error_naming_the_known_ones():
    spec = config({"name": "c", "kind": "regex", "pattern": "x", "field": "answr"}).scorers[0]

    with pytest.raises(ValueError, match=r"unknown variable 'answr' \(known: question, answer, system, contexts"):
        build_user_scorer(spec)
