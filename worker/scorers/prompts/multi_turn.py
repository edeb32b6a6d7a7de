"""Multi-turn continuous-response evaluation (seed 002, method II): the answer-composition agent's prompts (the
paper's Figure 6: compose for T2, revise for T6) and the question-generation agent's (Figure 7: T4 and T5).

The answer-evaluation agent (T3, T7) is the correctness judge of ``prompts.rag_correctness``. The figures' "Answer:
…, Explanation: …" and "Query: …, Explanation: …" formats are the fields of ``Composition`` and ``NextQuery``.
Each system message is the figure's system prompt and its task, in the figures' words (static); the user message
holds the fenced target question, Q/A history, tentative answer, EVAL's evaluation and reference answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel, Field
from vigil.worker.judge.fence import fence
from vigil.worker.scorers.prompts.common import data_message, fenced_json, nonce_for

__all__ = [
    "COMPOSE_SYSTEM",
    "QUERY_SYSTEM",
    "REVISE_SYSTEM",
    "Composition",
    "NextQuery",
    "render_compose",
    "render_query",
    "render_revise",
]


class Composition(BaseModel):
    answer: str
    explanation: str


class NextQuery(BaseModel):
    query: str = Field(description="Empty when no additional query is needed.")
    explanation: str


_ROLE = """You are trying to {task} to the Question and Answer System (QA), which uses the entire session history \
for generating answers, and get an answer that the Evaluation System (EVAL) would judge the answer as a complete \
correct answer (of score 5) for the target question given in the user message."""

COMPOSE_SYSTEM = _ROLE.format(task="ask a series of questions") + """

Generate a correct and complete answer to the target question by selecting and summarizing information in the \
history of Q/A session. Note that the responses from the QA are not necessarily correct, but only information \
contained in, or that can be inferred from, the answers from QA must be used.

Give the answer and an explanation."""

REVISE_SYSTEM = _ROLE.format(task="ask a series of questions") + """

Given are the question and answer history between you and QA in its current state (note that the responses from \
the QA are not necessarily correct), your tentative answer to the target question, and a reference answer (of \
score 5) for it.
Revise the tentative answer to a complete and correct answer. The revised response may delete or rephrase \
information in the tentative response or add information inferred from previous responses from the QA, according \
to reference answer, but may not contain information described solely in the reference answer.

Give the revised answer and an explanation."""

QUERY_SYSTEM = _ROLE.format(task="ask a question") + """

Given are the question and answer history between you and QA in its current state (note that the responses from \
the QA are not necessarily correct), your tentative answer to the target question, EVAL's evaluation of it, and a \
reference answer (of score 5) for it.
Complete the below tasks:
1. Decide if additional queries are needed to the QA to obtain or confirm any unknown information for revising the \
tentative answer to ones that EVAL would judge to be the complete correct answer to the target question. Here, you \
must not use information contained only in the reference answer or evaluation from EVAL without first validating \
such information with QA.
2. If additional queries are needed, generate a query that should be made to QA to directly obtain or directly \
confirm information that is still missing or unknown in order for EVAL to judge to be the complete correct answer to \
the target question. The query must be different from previous questions and can include information contained in \
the EVAL evaluation results. (If no additional questions are needed, leave blank).

Give the query (empty if no additional question is needed) and an explanation."""


def _texts(history: Sequence[Mapping[str, str]]) -> list[str]:
    return [text for pair in history for text in (pair["question"], pair["answer"])]


def render_compose(*, question: str, history: Sequence[Mapping[str, str]]) -> str:
    """T2: an answer composed from the Q/A history alone."""
    nonce = nonce_for(question, *_texts(history))
    return data_message(nonce, fence(question, nonce=nonce, label="target question"),
                        fenced_json(list(history), nonce=nonce, label="Q/A history"))


def render_revise(*, question: str, history: Sequence[Mapping[str, str]], tentative: str, reference: str) -> str:
    """T6: the tentative answer rewritten to the reference answer's grain."""
    nonce = nonce_for(question, tentative, reference, *_texts(history))
    return data_message(nonce, fence(question, nonce=nonce, label="target question"),
                        fenced_json(list(history), nonce=nonce, label="Q/A history"),
                        fence(tentative, nonce=nonce, label="tentative answer"),
                        fence(reference, nonce=nonce, label="reference answer (score 5)"))


def render_query(
    *, question: str, history: Sequence[Mapping[str, str]], tentative: str, evaluation: str, reference: str
) -> str:
    """T4 and T5: whether another query is needed, and which."""
    nonce = nonce_for(question, tentative, evaluation, reference, *_texts(history))
    return data_message(nonce, fence(question, nonce=nonce, label="target question"),
                        fenced_json(list(history), nonce=nonce, label="Q/A history"),
                        fence(tentative, nonce=nonce, label="tentative answer"),
                        fence(evaluation, nonce=nonce, label="EVAL evaluation"),
                        fence(reference, nonce=nonce, label="reference answer (score 5)"))
