"""``python -m tests.versioned_worker worker ...``: `vigil worker` as deployed with a new Answer Relevancy version.

``VIGIL_TEST_ANSWER_RELEVANCY_VERSION`` stands for the version a new release would carry (its prompts changed):
the rest of the process is the production worker, unchanged.
"""

from __future__ import annotations

import os
import runpy

from vigil.worker.scorers.answer_relevancy import AnswerRelevancy

AnswerRelevancy.version = os.environ["VIGIL_TEST_ANSWER_RELEVANCY_VERSION"]
runpy.run_module("vigil.worker", run_name="__main__", alter_sys=True)
