"""deepeval's AnswerRelevancyMetric on the turns given, against an OpenAI-compatible judge: bench/economy.py's peer.

Runs under the peer's own virtualenv (``make bench-peers`` creates ``.bench-venv``), never vigil's, and imports
nothing of vigil's. Reads ``{"input", "actual_output"}`` JSON lines on stdin and prints one JSON line per turn:
deepeval's score, statements, verdicts and reason, or its error.

    .bench-venv/bin/python bench/deepeval_peer.py --base-url http://127.0.0.1:PORT/v1 [--no-reason] < turns.jsonl

deepeval's ``OpenAIModel`` is what a new user gets (``model=`` a model name it knows, here gpt-4.1, with
``base_url`` pointing at the judge): it sends each prompt as one user message with structured output
(``response_format`` = the step's JSON schema), three calls per score with the reason, two without.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "1")  # no network but the judge's
os.environ.setdefault("DEEPEVAL_UPDATE_WARNING_OPT_IN", "0")
os.environ.setdefault("ERROR_REPORTING", "0")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", default="gpt-4.1")
    parser.add_argument("--no-reason", action="store_true")
    args = parser.parse_args()

    import deepeval
    from deepeval.metrics import AnswerRelevancyMetric
    from deepeval.models import OpenAIModel
    from deepeval.test_case import LLMTestCase

    model = OpenAIModel(model=args.model, base_url=args.base_url, api_key="not-needed", temperature=0)
    for line in sys.stdin:
        if not line.strip():
            continue
        turn = json.loads(line)
        metric = AnswerRelevancyMetric(model=model, include_reason=not args.no_reason, async_mode=False,
                                       threshold=0.5)
        case = LLMTestCase(input=turn["input"], actual_output=turn["actual_output"])
        try:
            metric.measure(case, _show_indicator=False)
            row = {"score": metric.score, "statements": list(metric.statements),
                   "verdicts": [v.verdict if isinstance(v.verdict, str) else v.verdict.value
                                for v in metric.verdicts],
                   "reason": metric.reason}
        except Exception as exc:  # noqa: BLE001 (one turn's failure is reported, not fatal to the benchmark)
            row = {"error": f"{type(exc).__name__}: {exc}"}
        row["version"] = deepeval.__version__
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
