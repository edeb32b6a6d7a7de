"""Releases and comparisons (issue 29, item 5): a release arrives from the SDK's ``release=`` or the OTel resource's
``service.version`` as metadata['release']; ``vigil compare`` says per monitor whether B scores worse than A, with the
difference's 95% interval, the turns on each side and an always-valid sequential verdict (also on the demo's own
model switch)."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest
from vigil.producers._wire import to_wire
from vigil.schemas.spans import assemble
from vigil.worker.report.compare import Side, half_width, judge

TRACE = "0af7651916cd43dd8448eb211c80319c"


def side(value: str, xs) -> Side:
    xs = np.asarray(xs, dtype=float)
    return Side(value=value, n=len(xs), mean=float(xs.mean()), variance=float(xs.var(ddof=1)))


def test_a_clear_drop_is_a_verdict_with_its_interval_and_turn_counts():
    rng = np.random.default_rng(1)
    result = judge("relevancy", "release", side("v6", rng.normal(0.7, 0.1, 60)), side("v7", rng.normal(0.45, 0.1, 40)))

    assert result.verdict == "worse" and result.low < result.difference < result.high < 0
    assert result.sentence().startswith("relevancy: release = v7 0.4")
    assert "(95%: " in result.sentence() and "40 vs 60 turns" in result.sentence()
    assert result.sentence().endswith("sequential test: v7 is worse")


def test_a_small_canary_has_no_verdict_yet_and_says_about_how_many_more_turns_it_needs():
    rng = np.random.default_rng(2)
    result = judge("relevancy", "release", side("v6", rng.normal(0.7, 0.2, 8)), side("v7", rng.normal(0.6, 0.2, 5)))

    assert result.verdict == "no verdict yet" and result.more_turns and result.more_turns > 0
    assert f"about {result.more_turns} more turns if the difference holds" in result.sentence()


def test_the_interval_is_clipped_to_what_two_means_on_0_to_1_allow():
    result = judge("m", "model", Side(value="a", n=2, mean=0.99, variance=0.5), Side(value="b", n=2, mean=0.01,
                                                                                    variance=0.5))
    assert result.low >= -1.0 and result.high <= 1.0


def test_looking_after_every_turn_keeps_false_verdicts_under_the_stated_rate():
    """No difference, 200 canaries, a look after every pair of turns up to 300: an always-valid test declares a
    verdict in at most about 5% of them (a t-test repeated at every look would in far more)."""
    rng = np.random.default_rng(3)
    false = 0
    for _ in range(200):
        a, b = rng.normal(0.6, 0.2, 300), rng.normal(0.6, 0.2, 300)
        false += any(judge("m", "release", side("v6", a[:n]), side("v7", b[:n])).verdict != "no verdict yet"
                     for n in range(3, 301, 3))
    assert false <= 0.08 * 200, false


def test_the_half_width_shrinks_as_turns_come_in():
    assert half_width(100.0) > half_width(1000.0) > half_width(10000.0)


def test_the_sdks_release_is_metadata_release_unless_the_turn_says_its_own():
    defaults = {"project": "p", "agent": "a", "environment": "prod"}
    assert to_wire({"output": "hi"}, 0.0, None, defaults, release="v7")["metadata"] == {"release": "v7"}
    own = to_wire({"output": "hi", "metadata": {"release": "v8", "k": "x"}}, 0.0, None, defaults, release="v7")
    assert own["metadata"] == {"release": "v8", "k": "x"}


def test_an_otel_resource_service_version_is_the_turns_release():
    spans = [{"trace_id": TRACE, "span_id": "c1".ljust(16, "0"), "parent_id": None, "name": "chat", "start": 0,
              "end": 10, "attributes": {"gen_ai.operation.name": "chat", "gen_ai.prompt": "q?",
                                        "gen_ai.completion": "a"},
              "resource": {"service.name": "shop", "service.version": "2026.11.3"}}]

    [turn] = assemble(spans)

    assert turn["metadata"]["release"] == "2026.11.3"


def run(env, *args: str) -> subprocess.CompletedProcess:
    """``vigil compare ARGS`` in the demo's environment; the caller asserts on the exit code."""
    command = [sys.executable, "-m", "vigil.worker", "compare", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=False)


def test_compare_on_the_demos_model_switch_says_the_new_model_is_worse(vigil_demo):
    """The demo's support bot moves from llama-3.1-8b-instruct to llama-3.2-3b-instruct (README: the demo)."""
    done = run(vigil_demo.env, "--monitor", "answer_relevancy", "--by", "model", "llama-3.1-8b-instruct",
               "llama-3.2-3b-instruct")

    assert done.returncode == 0, done.stderr
    (line,) = done.stdout.strip().splitlines()
    assert line.startswith("answer_relevancy: model = llama-3.2-3b-instruct 0.")
    assert " lower (95%: 0." in line and " vs " in line and "turns)" in line
    assert line.endswith("sequential test: llama-3.2-3b-instruct is worse")
    data = json.loads(run(vigil_demo.env, "--by", "model", "--json", "llama-3.1-8b-instruct",
                          "llama-3.2-3b-instruct").stdout)
    worse = {c["monitor"] for c in data["comparisons"] if c["verdict"] == "worse"}
    assert {"answer_relevancy", "rag_correctness"} <= worse
    assert all(math.isfinite(c["difference"]) for c in data["comparisons"] if c["difference"] is not None)


@pytest.mark.parametrize("args, said", [
    (["--by", "it's", "a", "b"], "--by"),
    (["--since", "yesterday", "a", "b"], "--since"),
], ids=["bad-key", "bad-since"])
def test_a_mistake_is_one_line_naming_the_option(vigil_demo, args, said):
    done = run(vigil_demo.env, *args)
    assert done.returncode != 0 and said in done.stderr and "Traceback" not in done.stderr
