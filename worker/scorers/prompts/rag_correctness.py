"""RAG correctness (seed 002, method I): the Prometheus-style 0–5 rubric of the paper's Figure 5.

The judge sees the question, the contexts, the response and the reference answer (the score-5 example) and writes
"Feedback: … [RESULT] n". The figure's static parts (the task description, the instruction, the score rubric) are
the system message, in the figure's words; the user message holds the fenced data in the figure's order and ends
with the figure's ``###Feedback:``. The reply travels in the JSON field ``evaluation``; the verdict is the *last*
``[RESULT] n`` in it, and only the integers 0–5 the rubric offers are verdicts.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, Field
from vigil.schemas import ContextDoc
from vigil.worker.judge.fence import fence
from vigil.worker.scorers.prompts.common import data_message, nonce_for

__all__ = [
    "LABELS",
    "RUBRIC",
    "SYSTEM",
    "Evaluation",
    "Verdict",
    "parse_verdict",
    "render",
]

RUBRIC = {
    0: "The response states it is not sure.",
    1: "The response is completely wrong, and fatal.",
    2: "The response is mostly wrong, but not very fatal.",
    3: "The response is partially correct and partially wrong.",
    4: "The answer is largely correct, but incomplete.",
    5: "The response is correct and complete.",
}
LABELS = {1: "completely wrong", 2: "mostly wrong", 3: "partially correct", 4: "largely correct",
          5: "correct and complete"}


class Evaluation(BaseModel):
    evaluation: str = Field(min_length=1)


@dataclass(frozen=True)
class Verdict:
    score: float  # 0 ("not sure") to 5; an integer from an LLM, possibly finer (3.47) from the baseline heuristic
    feedback: str


SYSTEM = """You are a fair judge assistant tasked with providing clear, objective feedback based on a specific \
criteria, ensuring each assessment reflects the absolute standards set for performance.

###Task Description:
An instruction, a question, context documents, a response to evaluate, a reference answer that gets a score of 5, \
and a score rubric representing a evaluation criteria are given.
1. Write a detailed feedback that assess the quality of the response strictly based on the given score rubric, not \
evaluating in general.
2. After writing a feedback, write a score that is an integer between 0 and 5. You should refer to the score rubric.
3. The output format should look as follows: "Feedback: (write a feedback for criteria) [RESULT] (an integer number \
between 0 and 5)". It is the value of the "evaluation" field of your reply.
4. Please do not generate any other opening, closing, and explanations.
###The instruction to evaluate:
Evaluate the below given response based on the contexts and the reference answer. The evaluation should be based \
strongly on the fact that the reference answer is a correct answer to the question. So make sure if the response \
implies the reference answer, the response is also correct.
###Score Rubrics:
[If the context contains the correct information and the reference answer is completely correct, what is score of \
the response based on the following criteria?]
""" + "\n".join(f"Score {score}: {text}" for score, text in RUBRIC.items())

_RESULT = re.compile(r"\[RESULT\]\s*[:=]?\s*\(?\s*(-?\d+(?:\.\d+)?)", re.IGNORECASE)
_FEEDBACK = re.compile(r"^\s*(?:###\s*)?Feedback\s*:\s*", re.IGNORECASE)


def render(*, question: str, contexts: Sequence[ContextDoc], response: str, reference: str) -> str:
    texts = [doc.text for doc in contexts]
    nonce = nonce_for(question, response, reference, *texts)
    fenced = [fence(text, nonce=nonce, label=f"context {i}" + (f" ({doc.id})" if doc.id else ""))
              for i, (doc, text) in enumerate(zip(contexts, texts, strict=True), start=1)]
    return data_message(
        nonce,
        "###Contexts:\n" + ("\n".join(fenced) or "(no context documents)"),
        "###Question:\n" + fence(question, nonce=nonce, label="question"),
        "###Response to evaluate:\n" + fence(response, nonce=nonce, label="response"),
        "###Reference Answer (Score 5):\n" + fence(reference, nonce=nonce, label="reference answer"),
        "###Feedback:",
    )


def parse_verdict(text: str) -> Verdict | None:
    """The last ``[RESULT] n`` in ``text`` and the feedback before it; None unless 0 <= n <= 5. A fraction (3.47,
    the baseline's finer scale) is kept; 0 means only 0 ("not sure"), never a fraction below 1 rounded down."""
    matches = list(_RESULT.finditer(text))
    if not matches:
        return None
    last = matches[-1]
    value = float(last.group(1))
    if not 0 <= value <= max(RUBRIC) or 0 < value < 1:
        return None
    score = int(value) if value.is_integer() else value
    return Verdict(score=score, feedback=_FEEDBACK.sub("", text[: last.start()]).strip())
