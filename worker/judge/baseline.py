"""The offline baseline judge: no LLM, deterministic, fast, and labelled ``baseline`` in every row it produces.

It is a heuristic, and says so: it answers a ``JudgeRequest`` by computing the step's output from
``request.inputs`` with word-overlap rules (the paper's word-recall baseline family). Statements by sentence
segmentation; relevance by content words shared with the question *and* something added to it (a statement that
only restates the question's words is not relevant; one that shares a word and gives the kind of thing the question
asks for, a quantity, a time or a name, is; a lone terse answer is "unsure", not "no"); context relevance
by overlap with the question and the response; prompt alignment by overlap and length, discounted when the response
mostly echoes the prompt; the RAG rubric by word recall of the reference (words the question already holds count
half), continuous inside the rubric's buckets, with the credit of sentences that visibly contradict the reference
(a negation, or another number or name, beside its key words) halved, a response that mainly contradicts it at most
"mostly incorrect", and 0 ("not sure") only when the response
essentially is an abstention. A request names its heuristic itself (``JudgeRequest.offline``, set by the scorer
that builds it from the functions here or its own), so this module knows no scorer's steps. A ``*.reason`` step
without one returns ``inputs["summary"]``. A user's
rubric (a ``*.rubric`` step) gets the one heuristic this judge has for any rubric: the share of the judged text's
content words (``answer``, else the first variable) found in the turn's other variables, as the verdict (at least
half), the score along the rubric's range, or the label whose score is nearest.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping
from itertools import pairwise
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from vigil.schemas import JudgeCall, JudgeConfig
from vigil.worker.judge.base import JudgeFailed, JudgeReply, JudgeRequest

__all__ = [
    "FAMILY",
    "MODEL",
    "BaselineJudge",
    "alignment_both_step",
    "alignment_system_step",
    "alignment_user_step",
    "content_words",
    "context_relevance_step",
    "contradicted",
    "correctness",
    "gives_what_is_asked",
    "is_abstention",
    "judged_statements_step",
    "relevance_step",
    "rubric_step",
    "sentences",
    "statements_step",
    "word_recall",
]

T = TypeVar("T", bound=BaseModel)

FAMILY = "baseline-word-overlap"  # every version's model name starts so: a score's judge_model says it is a heuristic's
MODEL = f"{FAMILY}-v3"


def is_heuristic(judge_model: str) -> bool:
    """Whether a score's ``judge_model`` is this offline heuristic (any version), not an LLM judge."""
    return judge_model.startswith(FAMILY)

_STOPWORDS = frozenset(["a", "about", "above", "after", "again", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "could", "did", "do", "does", "doing", "down", "during", "each", "few", "for", "from", "further", "had", "has", "have", "having", "he", "her", "here", "hers", "him", "his", "how", "i", "if", "in", "into", "is", "it", "its", "itself", "just", "me", "more", "most", "my", "no", "nor", "not", "of", "off", "on", "once", "only", "or", "other", "our", "out", "over", "own", "same", "she", "should", "so", "some", "such", "than", "that", "the", "their", "them", "then", "there", "these", "they", "this", "those", "through", "to", "too", "under", "until", "up", "very", "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours", "please", "tell", "explain", "give"])
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f"
_TOKEN = re.compile(f"[{_CJK}]+|[^\\W_]+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])|\n+")
# What an agent says when it abstains. A response is an abstention only when, these phrases and the question's own
# words aside, almost nothing is left (``is_abstention``): a long answer that quotes "not sure" is an answer.
_NOT_SURE = re.compile(
    r"(?i)\b(i\s*(do not|don't|dont)\s+know|not\s+(sure|certain)|(cannot|can't|can ?not|unable to)\s+"
    r"(answer|say|tell|determine|find|help)|no (information|idea)|(do not|don't) have (enough |any )?information"
    r"|not (mentioned|provided|stated|given) in)\b|わかりません|分かりません|わからない|不明です"
)
_ABSTAIN_WORDS = frozenset(["sorry", "unfortunately", "information", "context", "document", "provided", "answer", "question", "sure", "certain", "know", "able", "unable", "cannot", "can't", "exact", "exactly", "idea", "mention", "mentioned", "stated", "given", "find", "found", "say", "tell", "determine", "help", "afraid", "enough", "data", "source", "sources", "based", "text", "passage", "available", "regarding", "specific", "detail", "details"])
_ABSTAIN_SUBSTANCE = 3  # at most this many content words of its own, and an abstention phrase: an abstention
_NEGATION = re.compile(r"(?i)not|no|never|neither|nor|none|cannot|without|isn't|wasn't|doesn't|didn't|don't|won't")
_NOT_ONLY = re.compile(r"(?i)\bnot (only|just|merely)\b")
# Word recall through the rubric's old bucket floors (0.2 -> 2, 0.4 -> 3, 0.65 -> 4) to 5 at full recall: the
# integer part is the bucket, the rest is where in it the response falls, so different answers rarely tie.
_KNOTS = ((0.0, 1.0), (0.2, 2.0), (0.4, 3.0), (0.65, 4.0), (1.0, 5.0))
QUESTION_WORD_WEIGHT = 0.5  # a reference word the question already holds is worth half of one it does not
CONTRADICTED_CREDIT = 0.5  # what a reference word is worth when the response says it only while contradicting it
# A response whose contradicting sentences carry more of the reference than its other sentences says mainly the
# opposite: at most "mostly incorrect" on the rubric. "The train does not leave from platform 4" repeats every word of
# the reference; at half credit it scored like the terse right answer "Platform 4." (3.4 each).
MOSTLY_INCORRECT = 2.0
RESTATED_SHARE = 0.25  # a statement adding fewer of its own words than this share restates the question
TERSE_WORDS = 4  # content words: a lone statement this short is a terse answer
ECHO_NOVELTY = 0.3  # a response at least this share of its own words (not the prompt's) is no echo
PHRASE_WEIGHT = 0.01  # a tie-breaker: the share of the reference's phrases kept weighs 1% of the recall


def _normalise(word: str) -> str:
    word = word.lower()
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def content_words(text: str) -> set[str]:
    """Lower-cased words that carry meaning (no stopwords, plural ``s`` dropped, numbers kept whatever their length);
    CJK runs as character bigrams."""
    words: set[str] = set()
    for match in _TOKEN.finditer(text):
        token = match.group()
        if re.match(f"[{_CJK}]", token):
            words.update(token[i:i + 2] for i in range(max(1, len(token) - 1)))
        elif (len(token) > 1 or token.isdigit()) and token.lower() not in _STOPWORDS:
            words.add(_normalise(token))
    return words


def sentences(text: str) -> list[str]:
    """``text`` split after sentence-ending punctuation and at line breaks."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def _share(part: set[str], whole: set[str]) -> float:
    """The fraction of ``whole`` found in ``part`` (0 when ``whole`` is empty)."""
    return len(part & whole) / len(whole) if whole else 0.0


def word_recall(response: str, reference: str) -> float:
    """The fraction of the reference's content words that the response contains."""
    return _share(content_words(response), content_words(reference))


def is_abstention(response: str, question: str = "") -> bool:
    """Whether the response essentially *is* an abstention: it says it is not sure (or cannot answer) and, that
    phrase, the question's words and apologetic filler aside, has at most ``_ABSTAIN_SUBSTANCE`` words of its own."""
    if not _NOT_SURE.search(response):
        return False
    rest = content_words(_NOT_SURE.sub(" ", response)) - content_words(question) - _ABSTAIN_WORDS
    return len(rest) <= _ABSTAIN_SUBSTANCE


_CITATION = re.compile(r"\[\d+(?:[,\s]*\d+)*\]")  # "[4]", "[1, 2]": a source marker, not a claim's number
_WORD = re.compile(f"[{_CJK}]+|\\d+(?:[.,]\\d+)?|[^\\W_]+(?:'[a-z]+)?")
_NEAR = 3  # tokens: how close a negation, number or name must stand to a key word to be about it


def _tokens(text: str) -> list[str]:
    return [m.group() for m in _WORD.finditer(_CITATION.sub(" ", text))]


def _is_number(token: str) -> bool:
    return token[0].isdigit()


def _is_name(token: str) -> bool:
    return token[0].isupper() and token.lower() not in _STOPWORDS and not _is_number(token)


def _is_negation(token: str) -> bool:
    return bool(_NEGATION.fullmatch(token)) or token.lower().endswith("n't")


_SUFFIX = re.compile(r"(?:ing|ed|es|e)$")


def _stem(word: str) -> str:
    """A word without its inflection, for telling whether two sentences are about the same thing: "received" and
    "receive", "acquired" and "acquires" match ("won" and "win" do not: no dictionary here)."""
    stem = _SUFFIX.sub("", word) if len(word) > 4 else word
    return stem if len(stem) >= 3 else word


def _near(tokens: list[str], keys: set[str], test: Callable[[str], bool]) -> dict[str, set[str]]:
    """For each key word (by its stem), the tokens passing ``test`` within ``_NEAR`` tokens of it."""
    found: dict[str, set[str]] = {}
    for i, token in enumerate(tokens):
        key = _stem(_normalise(token))
        if key not in keys:
            continue
        window = tokens[max(0, i - _NEAR): i] + tokens[i + 1: i + 1 + _NEAR]
        hits = {t.lower().replace(",", ".") for t in window if test(t)}
        if hits:
            found.setdefault(key, set()).update(hits)
    return found


def contradicted(statement: str, reference: str, question: str = "") -> str | None:
    """Why ``statement`` visibly contradicts the reference sentence it restates, or None.

    The statement must be about one reference sentence: share at least two of its content words, compared by their
    stems, and at least half of them (the key words). Visible means, beside a key word (within ``_NEAR`` tokens): a negation where the
    reference sentence has none ("not", "never", "n't" …; "not only" and "not sure" are no negation); or a number where the
    reference sentence has another beside the same key word, and the statement nowhere gives the reference's; or
    a name (a capitalised word neither the reference nor the question holds) where the reference sentence has
    another beside the same key word that the statement lacks. Source markers such as "[4]" are not numbers."""
    # "not only" adds, and a hedge ("I'm not sure about every species") doubts: neither negates the claim beside it
    words, tokens = content_words(statement), _tokens(_NOT_SURE.sub(" ", _NOT_ONLY.sub(" ", statement)))
    everywhere = {t.lower() for t in _tokens(reference) + _tokens(question)}
    mine_all = {t.lower().replace(",", ".") for t in tokens}
    for target in sentences(reference):
        key_words = {_stem(w) for w in content_words(target)}
        keys = {_stem(w) for w in words} & key_words
        if len(keys) < 2 or len(keys) < 0.5 * len(key_words):
            continue
        theirs = _tokens(_NOT_ONLY.sub(" ", target))
        about = ", ".join(sorted(w for w in words if _stem(w) in keys)[:4])
        if _near(tokens, keys, _is_negation) and not any(_is_negation(t) for t in theirs):
            return f"negates what the reference says about {about}"
        their_numbers, my_numbers = _near(theirs, keys, _is_number), _near(tokens, keys, _is_number)
        for key, numbers in my_numbers.items():
            expected = their_numbers.get(key, set())
            if expected and not expected & mine_all and numbers - expected:
                return (f"gives {', '.join(sorted(numbers))} beside {key} where the reference gives "
                        f"{', '.join(sorted(expected))}")
        their_names, my_names = _near(theirs, keys, _is_name), _near(tokens, keys, _is_name)
        for key, names in my_names.items():
            expected = their_names.get(key, set()) - mine_all
            other = names - everywhere
            if expected and other:
                return f"names {', '.join(sorted(other))} beside {key} where the reference names {', '.join(sorted(expected))}"
    return None


def _weighted_recall(found: set[str], reference: set[str], question: set[str]) -> float:
    weight = {w: QUESTION_WORD_WEIGHT if w in question else 1.0 for w in reference}
    total = sum(weight.values())
    return sum(weight[w] for w in found & reference) / total if total else 0.0


def _phrases(text: str) -> set[tuple[str, str]]:
    """Adjacent content-word pairs: the reference's phrases, finer than its words."""
    words = [_normalise(t) for t in _tokens(text) if t.lower() not in _STOPWORDS and (len(t) > 1 or t.isdigit())]
    return set(pairwise(words))


def _through_knots(recall: float) -> float:
    for (x0, y0), (x1, y1) in pairwise(_KNOTS):
        if recall <= x1:
            return y0 + (y1 - y0) * (recall - x0) / (x1 - x0)
    return _KNOTS[-1][1]


def correctness(response: str, reference: str, question: str = "") -> tuple[float, str]:
    """The rubric's result (0–5, continuous) for ``response`` against ``reference``, and why.

    0 only for an abstention; an empty response is the bottom of the scale (1). Otherwise the weighted word recall
    of the reference (its words that the question already holds count ``QUESTION_WORD_WEIGHT``); words the response
    states only in sentences that visibly contradict the reference (``contradicted``) count half, since a cheap
    detector can be wrong, and a response that carries more of the reference in contradicting sentences than in the
    others is at most ``MOSTLY_INCORRECT``; blended with the share of the reference's phrases (adjacent content-word pairs) the
    response keeps, at ``PHRASE_WEIGHT``, so answers recalling the same words rarely tie. Mapped through the buckets' floors
    (``_KNOTS``)."""
    if not response.strip():
        return 1.0, "baseline heuristic: the response is empty"
    if is_abstention(response, question):
        return 0.0, "baseline heuristic: the response says it is not sure, and little else"
    reference_words, question_words = content_words(reference), content_words(question)
    clean: set[str] = set()
    disputed: set[str] = set()
    conflicts = []
    for statement in sentences(response) or [response]:
        why = contradicted(statement, reference, question)
        if why:
            conflicts.append(why)
            disputed |= content_words(statement)
        else:
            clean |= content_words(statement)
    undisputed = _weighted_recall(clean, reference_words, question_words)
    only_disputed = _weighted_recall(clean | disputed, reference_words, question_words) - undisputed
    recall = undisputed + CONTRADICTED_CREDIT * only_disputed
    phrases = _phrases(reference)
    kept = len(_phrases(response) & phrases) / len(phrases) if phrases else 0.0
    why = f"baseline heuristic (word overlap, no LLM): word recall against the reference answer is {recall:.0%}"
    result = _through_knots((1 - PHRASE_WEIGHT) * recall + PHRASE_WEIGHT * kept)
    if conflicts:
        why += f"; half credit for {len(conflicts)} sentence(s) that contradict it ({conflicts[0]})"
        if only_disputed > undisputed and result > MOSTLY_INCORRECT:
            result = MOSTLY_INCORRECT - (1 - recall) / 10  # mostly the opposite; still ordered by recall
            why += "; it mainly says the opposite of the reference: at most mostly incorrect"
    return round(result, 3), why


class BaselineJudge:
    """A judge with no LLM behind it. ``model`` says so on every score and judge-call row."""

    def __init__(self, config: JudgeConfig | None = None) -> None:
        self.name = config.name if config else "baseline"
        self.model = MODEL

    async def ask(self, request: JudgeRequest[T]) -> JudgeReply[T]:
        handler = request.offline
        if handler is None and request.step.endswith(".reason") and "summary" in request.inputs:
            handler = _summary_reason
        if handler is None and request.step.endswith(".rubric") and "values" in request.inputs:
            handler = _user_rubric
        if handler is None:
            raise JudgeFailed("baseline_unsupported", f"the baseline judge has no heuristic for step {request.step!r}")
        started = time.perf_counter()
        data = handler(request.inputs)
        try:
            output = request.output_type.model_validate(data)
        except ValidationError as exc:
            raise JudgeFailed("baseline_mismatch", f"baseline {request.step} output does not fit: {exc}") from exc
        call = JudgeCall(step=request.step, model=self.model, latency_ms=(time.perf_counter() - started) * 1000)
        return JudgeReply(output=output, raw=json.dumps(data, ensure_ascii=False), calls=[call])


def _user_rubric(inputs: Mapping[str, Any]) -> dict[str, Any]:
    values: dict[str, str] = dict(inputs["values"])
    judged = "answer" if "answer" in values else next(iter(values))
    words = content_words(values.pop(judged))
    evidence = set().union(*(content_words(v) for v in values.values())) if values else set()
    support = _share(evidence, words)
    spec = inputs["output"]
    reply: dict[str, Any] = {"reason": f"Baseline judge (word overlap, no LLM): {support:.0%} of the {judged}'s "
                                       f"content words appear in {', '.join(values) or 'nothing else'}."}
    if spec["type"] == "boolean":
        reply["verdict"] = support >= 0.5
    elif spec["type"] == "numeric":
        reply["score"] = round(spec["min"] + support * (spec["max"] - spec["min"]), 2)
    else:
        scored = {label: score for label, score in spec["labels"].items() if score is not None}
        reply["label"] = min(scored, key=lambda label: abs(scored[label] - support))
    if inputs.get("applies_when"):
        reply["applies"] = True  # word overlap cannot tell: every turn is taken to be one the rubric applies to
    return reply


def _summary_reason(inputs: Mapping[str, Any]) -> dict[str, Any]:
    return {"reason": f"Baseline judge (word overlap, no LLM): {inputs['summary']}."}


def statements_step(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """Answer Relevancy's preprocess: the output's sentences are its statements."""
    return {"statements": sentences(inputs["output"])}


_NUMBER_WORDS = frozenset((
    "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve", "fifteen",
    "twenty", "thirty", "forty", "fifty", "hundred", "thousand", "million", "billion", "dozen", "half", "once",
    "twice",
))
_TIME_WORDS = frozenset((
    "january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november",
    "december", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "today", "tomorrow",
    "yesterday", "tonight", "morning", "afternoon", "evening", "night", "noon", "midnight", "weekend", "weekday",
    "am", "pm",
))


def _gives_quantity(statement: str) -> bool:
    return any(t[0].isdigit() or t.lower() in _NUMBER_WORDS for t in _tokens(statement))


def _gives_time(statement: str) -> bool:
    return _gives_quantity(statement) or any(t.lower() in _TIME_WORDS for t in _tokens(statement))


def _gives_name(statement: str, question: str) -> bool:
    """A capitalised word past the sentence's first that the question does not hold: a person, a place, a thing."""
    asked = {t.lower() for t in _tokens(question)}
    return any(_is_name(t) and t.lower() not in asked for t in _tokens(statement)[1:])


# What a question asks for, by its wh-phrase, and whether a statement gives that kind of thing. A correct answer often
# shares one word with its question, or none ("How long is the refund window?" "You can request a refund within 30
# days of delivery."): giving what was asked is the evidence overlap lacks.
_ASKS: tuple[tuple[re.Pattern[str], str, Callable[[str, str], bool]], ...] = (
    (re.compile(r"(?i)\bhow (long|many|much|old|far|often|soon|big|tall|large|heavy|fast|late|early)\b"
                r"|\bwhat (percentage|percent|number|amount|price|size|age)\b"),
     "a quantity", lambda statement, question: _gives_quantity(statement)),
    (re.compile(r"(?i)\bwhen\b|\b(what|which) (time|date|year|day|month|hour)\b"),
     "a time", lambda statement, question: _gives_time(statement)),
    (re.compile(r"(?i)\b(who|whom|whose|where)\b|\bwhich (city|country|place|town|company|person)\b"),
     "a name", _gives_name),
)


def gives_what_is_asked(statement: str, question: str) -> str | None:
    """The kind of answer the question asks for (a quantity, a time, a name) when the statement gives one."""
    for asks, kind, gives in _ASKS:
        if asks.search(question):
            return kind if gives(statement, question) else None
    return None


def relevance_step(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """A statement is relevant when it shares the question's words *and* adds words of its own: one that only
    restates the question (or pads itself with its words) answers nothing. It is relevant too when it shares a word
    and gives the kind of thing the question asks for (``gives_what_is_asked``: "how long" and a number). A lone
    short statement sharing no word (a terse answer: "5", "Canberra.") is "yes" when it gives what was asked, else
    "unsure": word overlap cannot tell whether it answers."""
    question_text = inputs["question"]
    question = content_words(question_text)
    statements = inputs["statements"]
    results = []
    for statement in statements:
        words = content_words(statement)
        shared = sorted(words & question)
        added = words - question
        kind = gives_what_is_asked(statement, question_text) if added else None
        terse = len(statements) == 1 and 0 < len(words) <= TERSE_WORDS
        if shared and len(added) < max(1.0, RESTATED_SHARE * len(words)):
            result, why = "no", f"restates the question's words ({', '.join(shared[:5])}) without adding an answer"
        elif len(shared) >= 2 or (shared and len(shared) / len(words) >= 0.3):
            result, why = "yes", f"shares {', '.join(shared)} with the question and adds to it"
        elif shared and kind:
            result, why = "yes", f"shares {shared[0]} with the question and gives {kind}, what it asks for"
        elif shared:
            result, why = "unsure", f"shares only {shared[0]} with the question"
        elif terse and kind:
            result, why = "yes", f"a terse answer giving {kind}, what the question asks for"
        elif terse:
            result, why = "unsure", "a terse answer sharing no word with the question: overlap cannot tell"
        else:
            result, why = "no", "shares no content word with the question"
        results.append({"result": result, "reason": why})
    return {"results": results}


def judged_statements_step(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """Statements and their verdicts in one answer (Answer Relevancy's fused step)."""
    statements = sentences(inputs["output"])
    verdicts = relevance_step({"question": inputs["question"], "statements": statements})["results"]
    return {"statements": [{"statement": s, **v} for s, v in zip(statements, verdicts, strict=True)]}


def _level(coverage: float) -> str:
    return "high" if coverage >= 0.5 else "medium" if coverage >= 0.25 else "low" if coverage > 0 else "none"


def context_relevance_step(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """Context Relevance's analysis: each context's overlap with the question, and whether the response used it."""
    question, response = content_words(inputs["question"]), content_words(inputs["response"])
    evaluations, covered = [], set()
    for index, context in enumerate(inputs["contexts"]):
        words = content_words(context)
        covered |= words & question
        coverage = _share(words, question)
        news = words - question  # what the context adds beyond the question's own words
        used = _share(response, news) >= 0.25
        evaluations.append({"context_index": index, "relevance_level": _level(coverage), "used": used,
                            "reasoning": f"covers {coverage:.0%} of the question's content words"})
    uncovered = sorted(question - covered)
    missing = [f"information about {', '.join(uncovered)}"] if uncovered else []
    return {"evaluations": evaluations, "missing_context": missing,
            "overall_assessment": "baseline: word overlap between each context, the question and the response"}


def _alignment(target: str, response_text: str) -> dict[str, Any]:
    """Alignment of a response with a prompt or with system instructions, by overlap and length. A response that
    mostly echoes the prompt's own words is discounted on every dimension by how little it adds (``ECHO_NOVELTY``)."""
    asked, response = content_words(target), content_words(response_text)
    added = response - asked
    novelty = min(1.0, (len(added) / len(response)) / ECHO_NOVELTY) if response else 0.0
    checks = [{"requirement": s, "fulfilled": novelty >= 1 and _share(response, content_words(s)) >= 0.5}
              for s in sentences(target) if content_words(s)]
    intent = _share(response, asked) * novelty
    requirements = sum(c["fulfilled"] for c in checks) / len(checks) if checks else intent
    completeness = min(1.0, len(added) / max(3, 2 * len(asked)))
    appropriateness = novelty

    def dim(score: float, what: str) -> dict[str, Any]:
        return {"score": round(score, 4), "reasoning": f"baseline heuristic: {what}"}

    return {
        "primary_intent": sentences(target)[0] if sentences(target) else "",
        "requirement_checks": checks,
        "intent": dim(intent, "share of the prompt's content words the response contains, discounted when it "
                              "mostly echoes the prompt"),
        "requirements": dim(requirements, "share of the prompt's sentences half-covered by a response that adds "
                                          "words of its own"),
        "completeness": dim(completeness, "words the response adds, against twice the prompt's content words"),
        "appropriateness": dim(appropriateness, "the response is not empty and not an echo of the prompt"),
    }


def rubric_step(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """RAG correctness's Figure 5 verdict, from ``correctness``."""
    result, why = correctness(inputs["response"], inputs["reference"], inputs.get("question", ""))
    return {"evaluation": f"Feedback: {why}. [RESULT] {result:g}"}


def alignment_user_step(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """Prompt Alignment's user side."""
    return _alignment(inputs["prompt"], inputs["response"])


def alignment_system_step(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """Prompt Alignment's system side."""
    return _alignment(inputs["system"], inputs["response"])


def alignment_both_step(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """Prompt Alignment's fused step: both sides in one answer."""
    return {"user": alignment_user_step(inputs), "system": alignment_system_step(inputs)}
