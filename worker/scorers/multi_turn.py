"""Multi-turn continuous-response evaluation (seed 002, method II): how much of the reference answer a questioner
can get out of the agent under test, and in how many turns.

Each turn: (T1) ask the agent, keeping the whole session; (T2) the answer-composition agent composes an answer to
the target question from the Q/A history; (T3) the answer-evaluation agent (the correctness judge, with contexts
retrieved by question + reference answer) scores it 0–5, and a 5 ends the dialogue; (T4, T5) the
question-generation agent decides whether another query is needed and writes it, and the next turn starts; (T6)
when none is needed, or the last of ``turns`` turns is reached, the composed answer is revised to the reference
answer's grain and (T7) evaluated. σ holds one score per turn (the T7 score for the last turn), so ``len(σ) ≤
turns``. The result's score is ``wscore(σ, turns) / 5 · scale``; σ, wscore, lscore, mscore and the transcript are in
``details`` and the steps.

The offline baseline judge composes by joining the agent's answers, asks about the reference's content words the
tentative answer lacks (until it scores 4), and revises nothing.

A dialogue whose verdicts are all 0 (every answer was "not sure") is the agent abstaining: scored, labelled
``abstained``, no score. The label of a score is the rubric level (the paper "RAG の応答正確性と連続応答性能の自動評価",
Figure 5) its wscore falls in.

The agent under test is any callable ``(messages) -> str`` (sync or async, OpenAI-style messages) or an
OpenAI-compatible chat endpoint (``OpenAIAgent``). Its errors make the result *failed* (``agent_error``).

vigil's questions to the agent are vigil's own traffic, and are tagged so: ``OpenAIAgent`` sends the origin
(``follow_up`` for a live turn's follow-ups, ``probe`` under the golden-set probe) as the ``X-Vigil-Origin`` header
and as OpenAI ``metadata.vigil_origin``. An agent that passes it to ``capture(..., origin=...)`` (see
``vigil.producers.origin_of``) keeps those turns out of sampling, so the probe never feeds itself.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, model_validator
from vigil.schemas import ORIGIN_HEADER, ContextDoc, Origin, ScoreResult, Turn
from vigil.worker.judge.base import CallContext, Judge, JudgeRequest
from vigil.worker.judge.baseline import content_words
from vigil.worker.retrieval import RetrieverConfig
from vigil.worker.scorers import base
from vigil.worker.scorers.base import AgentFailed, Scorer, ScoreRun, Unscorable
from vigil.worker.scorers.formulas import Bands, lscore, mscore, wscore
from vigil.worker.scorers.prompts import multi_turn as prompts
from vigil.worker.scorers.prompts.rag_correctness import Verdict
from vigil.worker.scorers.rag_correctness import (
    MAX_RESULT,
    RUBRIC_BANDS,
    RagCorrectness,
    judge_correctness,
)

__all__ = ["Agent", "AgentEndpoint", "MultiTurn", "OpenAIAgent", "conversation_pairs"]

Messages = list[dict[str, str]]
Agent = Callable[[Messages], str | Awaitable[str]]

_ANSWER_CHARS = 120  # of the final answer in the reason (the details keep all of it)


class OpenAIAgent:
    """The agent under test behind an OpenAI-compatible chat endpoint; each call sends the whole session, tagged
    with ``origin`` (the ``X-Vigil-Origin`` header and ``metadata.vigil_origin``)."""

    def __init__(self, base_url: str, *, model: str = "default", api_key: str | None = None,
                 timeout_s: float = 120.0, origin: Origin = "follow_up") -> None:
        import openai  # ~0.7 s of CPU: imported by the scorer that talks to an agent, not by every one

        self.model = model
        self.origin = origin
        self.client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key or "not-needed", timeout=timeout_s,
                                         default_headers={ORIGIN_HEADER: origin})

    async def __call__(self, messages: Messages) -> str:
        completion = await self.client.chat.completions.create(model=self.model, messages=messages,
                                                               metadata={"vigil_origin": self.origin})
        return completion.choices[0].message.content or "" if completion.choices else ""

    async def aclose(self) -> None:
        await self.client.close()


class AgentEndpoint(BaseModel):
    """A monitor's ``params.agent``: the live agent the follow-up questions go to."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str = Field(min_length=1)
    model: str = "default"
    api_key_env: str = "AGENT_API_KEY"
    timeout_s: float = Field(default=120.0, gt=0)

    def open(self, origin: Origin = "follow_up") -> OpenAIAgent:
        return OpenAIAgent(self.base_url, model=self.model, api_key=os.environ.get(self.api_key_env),
                           timeout_s=self.timeout_s, origin=origin)


async def _ask(agent: Agent | None, messages: Messages) -> str:
    if agent is None:
        raise AgentFailed("no agent under test to ask the follow-up question: set params.agent {base_url, model}")
    try:
        reply = agent(list(messages))
        if inspect.isawaitable(reply):
            reply = await reply
    except Exception as exc:  # the agent under test is foreign code: any error is its failure, recorded
        raise AgentFailed(f"{type(exc).__name__}: {exc}") from exc
    return str(reply)


class Details(base.Details):
    reference_source: str | None = None
    turns: int | None = None
    sigma: list[float] | None = None
    history: list[dict[str, str]] | None = None
    context_ids: list[str | None] | None = None
    wscore: float | None = None
    lscore: int | None = None
    mscore: float | None = None
    final_answer: str | None = None


class MultiTurn(Scorer):
    """Params: ``turns`` (n, 5), ``scale`` (1.0), ``retriever`` (the evaluation agent's E3 contexts; none without
    it), ``golden`` (references for traces without one), ``agent`` ({base_url, model}: where a trace's follow-up
    questions go)."""

    name: ClassVar[str] = "multi_turn"
    version: ClassVar[str] = "2"
    bands: ClassVar[Bands] = RUBRIC_BANDS
    Details: ClassVar[type[base.Details]] = Details

    turns: int = Field(default=5, ge=1, le=20)
    retriever: RetrieverConfig | None = None
    golden: str | None = None
    agent: AgentEndpoint | None = None
    conversation: bool = False  # a session monitor: score the conversation that happened, ask nothing

    @model_validator(mode="after")
    def _valid(self) -> MultiTurn:
        self._correctness()  # the golden path is checked there
        return self

    def _correctness(self) -> RagCorrectness:
        return RagCorrectness(retriever=self.retriever, golden=self.golden)

    async def evaluate(self, *, question: str, reference: str, agent: Agent, judge: Judge,
                       opening: Messages | None = None, context: CallContext | None = None) -> ScoreResult:
        """The T1–T7 dialogue for one (question, reference answer). ``opening``, when given, is the session so far
        ending with the agent's answer to ``question``: it stands for the first T1. Without ``context`` the calls
        are the probe's."""
        run = self.start(judge, context or CallContext(monitor="probe", scorer=self.name,
                                                       scorer_version=self.version, origin="probe"))
        return await run.outcome(lambda: self._dialogue(run, question, reference, agent, opening))

    async def _score(self, turn: Turn, run: ScoreRun) -> ScoreResult:
        """The trace's answer is turn 1; the follow-up questions go to ``params.agent``, tagged as vigil's. In
        ``conversation`` mode the turn is a whole session and its real turns are the dialogue (``_conversation``)."""
        if self.conversation:
            return await self._conversation(turn, run)
        found = self._correctness().reference_for(turn)
        if found is None:
            raise Unscorable("no reference answer: the trace has none and no golden set holds its question")
        run.details.reference_source = found[1]
        opening = [{"role": m.role, "content": m.content} for m in turn.input if m.role in ("user", "assistant")]
        opening.append({"role": "assistant", "content": turn.output})
        agent = self.agent.open(run.context.agent_origin) if self.agent is not None else None
        try:
            return await self._dialogue(run, turn.question, found[0], agent, opening)
        finally:
            if agent is not None:
                await agent.aclose()

    async def _conversation(self, session: Turn, run: ScoreRun) -> ScoreResult:
        """A session's real turns as the dialogue: the target question is the session's first user message, its
        reference answer the session's (or the golden set's); after each real turn (T2) the answer composed from the
        Q/A history so far is (T3) scored 0-5, giving σ one score per turn, up to ``turns`` turns, ending at the
        first 5. Nothing is asked of the agent."""
        pairs = conversation_pairs(session)
        if not pairs:
            raise Unscorable("the session has no question answered")
        question = pairs[0]["question"]
        first = session.model_copy(update={"input": [m for m in session.input if m.role == "user"][:1]})
        found = self._correctness().reference_for(first)
        if found is None:
            raise Unscorable("no reference answer: the session has none and no golden set holds its first question")
        reference = found[0]
        run.details.reference_source = found[1]
        correctness = self._correctness()
        contexts = await correctness.retrieve(question, reference) if self.retriever is not None else []
        history: list[dict[str, str]] = []
        sigma: list[int] = []
        run.details.set(turns=self.turns, sigma=sigma, history=history, context_ids=[c.id for c in contexts])
        composed = ""
        for number, pair in enumerate(pairs[:self.turns], start=1):
            history.append(pair)
            run.note(f"turn{number}.ask", pair, prompt=pair["question"])
            composed = await self._compose(run, number, question, history)  # T2
            verdict = await judge_correctness(run, step=f"turn{number}.evaluate", question=question,  # T3
                                              contexts=contexts, response=composed, reference=reference)
            sigma.append(verdict.score)
            if verdict.score == MAX_RESULT:
                break
        return self._scored(run, sigma, composed)

    async def _dialogue(self, run: ScoreRun, question: str, reference: str, agent: Agent | None,
                        opening: Messages | None) -> ScoreResult:
        correctness = self._correctness()
        contexts = await correctness.retrieve(question, reference) if self.retriever is not None else []
        session: Messages = list(opening or [])
        history: list[dict[str, str]] = []
        sigma: list[float] = []
        run.details.set(turns=self.turns, sigma=sigma, history=history, context_ids=[c.id for c in contexts])
        query = question
        for number in range(1, self.turns + 1):
            if not (number == 1 and session):  # T1
                session.append({"role": "user", "content": query})
                session.append({"role": "assistant", "content": await _ask(agent, session)})
            history.append({"question": query, "answer": session[-1]["content"]})
            run.note(f"turn{number}.ask", history[-1], prompt=query)
            composed = await self._compose(run, number, question, history)  # T2
            verdict = await judge_correctness(run, step=f"turn{number}.evaluate", question=question,  # T3
                                              contexts=contexts, response=composed, reference=reference)
            if verdict.score == MAX_RESULT:
                sigma.append(verdict.score)
                return self._scored(run, sigma, composed)
            if number < self.turns:
                query = await self._next_query(run, number, question, history, composed, verdict, reference)
                if query:
                    sigma.append(verdict.score)
                    continue
            final, score = await self._finalise(run, number, question, history, composed, reference, contexts)
            sigma.append(score)
            return self._scored(run, sigma, final)
        raise AssertionError("every turn ends the dialogue or asks the next query")

    async def _compose(self, run: ScoreRun, number: int, question: str, history: list[dict[str, str]]) -> str:
        composed = await run.ask(f"turn{number}.compose", JudgeRequest(
            step=f"{self.name}.compose", instructions=prompts.COMPOSE_SYSTEM,
            prompt=prompts.render_compose(question=question, history=history), output_type=prompts.Composition,
            inputs={"question": question, "history": list(history)}, offline=_baseline_compose,
        ))
        return composed.answer

    async def _next_query(self, run: ScoreRun, number: int, question: str, history: list[dict[str, str]],
                          tentative: str, verdict: Verdict, reference: str) -> str:
        evaluation = f"{verdict.feedback} Score: {verdict.score}"
        nxt = await run.ask(f"turn{number}.query", JudgeRequest(
            step=f"{self.name}.query", instructions=prompts.QUERY_SYSTEM,
            prompt=prompts.render_query(question=question, history=history, tentative=tentative,
                                        evaluation=evaluation, reference=reference),
            output_type=prompts.NextQuery,
            inputs={"question": question, "history": list(history), "tentative": tentative,
                    "evaluation": evaluation, "score": verdict.score, "reference": reference},
            offline=_baseline_query,
        ))
        return nxt.query.strip()

    async def _finalise(self, run: ScoreRun, number: int, question: str, history: list[dict[str, str]],
                        tentative: str, reference: str, contexts: Sequence[ContextDoc]) -> tuple[str, int]:
        """T6 and T7: the tentative answer revised to the reference answer's grain, and its score."""
        revised = await run.ask(f"turn{number}.revise", JudgeRequest(
            step=f"{self.name}.revise", instructions=prompts.REVISE_SYSTEM,
            prompt=prompts.render_revise(question=question, history=history, tentative=tentative,
                                         reference=reference),
            output_type=prompts.Composition,
            inputs={"question": question, "history": list(history), "tentative": tentative, "reference": reference},
            offline=_baseline_revise,
        ))
        verdict = await judge_correctness(run, step=f"turn{number}.final_evaluate", question=question,
                                          contexts=contexts, response=revised.answer, reference=reference)
        return revised.answer, verdict.score

    def _scored(self, run: ScoreRun, sigma: list[float], final: str) -> ScoreResult:
        w, length, best = wscore(sigma, self.turns), lscore(sigma), mscore(sigma)
        run.details.set(wscore=w, lscore=length, mscore=best, final_answer=final)
        summary = f"σ = {sigma} over at most {self.turns} turns"
        # The reason names the final answer, the details keep it whole: a reason is read in lists of turns.
        named = final if len(final) <= _ANSWER_CHARS else final[:_ANSWER_CHARS].rstrip() + "…"
        if not any(sigma):
            return run.abstained(f"{summary}: every verdict was 0, the agent said it is not sure. "
                                 f"Final answer: {named}")
        reason = (f"{summary}: wscore {w:.3g}, lscore {length}, mscore {best} (of {MAX_RESULT}). "
                  f"Final answer: {named}")
        return run.scored(w / MAX_RESULT * self.scale, reason)


def conversation_pairs(session: Turn) -> list[dict[str, str]]:
    """The session's real turns as {question, answer}: each user message with the assistant reply that follows it
    (the session's output answers the last one)."""
    pairs: list[dict[str, str]] = []
    for message in session.input:
        if message.role == "user":
            pairs.append({"question": message.content, "answer": ""})
        elif message.role == "assistant" and pairs and not pairs[-1]["answer"]:
            pairs[-1]["answer"] = message.content
    if pairs and not pairs[-1]["answer"]:
        pairs[-1]["answer"] = session.output
    return [pair for pair in pairs if pair["answer"]]


def _baseline_compose(inputs: Mapping[str, Any]) -> dict[str, Any]:
    answers = [pair["answer"].strip() for pair in inputs["history"] if pair["answer"].strip()]
    return {"answer": " ".join(answers), "explanation": "baseline (no LLM): the QA's answers joined"}


def _baseline_query(inputs: Mapping[str, Any]) -> dict[str, Any]:
    missing = sorted(content_words(inputs["reference"]) - content_words(inputs["tentative"]))
    if inputs["score"] >= 4 or not missing:
        return {"query": "", "explanation": "baseline (no LLM): no further query needed"}
    return {"query": f"{inputs['question']} In particular, what about {', '.join(missing[:5])}?",
            "explanation": "baseline (no LLM): asks about reference words the tentative answer lacks"}


def _baseline_revise(inputs: Mapping[str, Any]) -> dict[str, Any]:
    return {"answer": inputs["tentative"], "explanation": "baseline (no LLM): the tentative answer unchanged"}

