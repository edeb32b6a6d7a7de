"""The scorers' arithmetic, as the seeds state it: pure functions, no judge, no I/O.

Every function refuses input it cannot score (``ValueError``) rather than returning 0: the caller turns that into
an *unscored* result. Results are clamped to ``[0, scale]``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = [
    "DIMENSIONS",
    "RELEVANCE_WEIGHTS",
    "SYSTEM_WEIGHTS",
    "USER_WEIGHTS",
    "VERDICTS",
    "Bands",
    "answer_relevancy_score",
    "band_label",
    "clamp",
    "context_relevance_score",
    "lscore",
    "mscore",
    "prompt_alignment_score",
    "wscore",
]

VERDICTS = ("yes", "unsure", "no")
RELEVANCE_WEIGHTS: Mapping[str, float] = {"high": 1.0, "medium": 0.7, "low": 0.3, "none": 0.0}
DIMENSIONS = ("intent", "requirements", "completeness", "appropriateness")
USER_WEIGHTS: Mapping[str, float] = {"intent": 0.4, "requirements": 0.3, "completeness": 0.2, "appropriateness": 0.1}
SYSTEM_WEIGHTS: Mapping[str, float] = {
    "intent": 0.35, "requirements": 0.35, "completeness": 0.15, "appropriateness": 0.15,
}
USER_SHARE_IN_BOTH = 0.7


Bands = tuple[tuple[float, str], ...]
"""A seed's interpretation of a score: (lowest score / scale of the band, its label), best band first."""


def band_label(bands: Bands, fraction: float) -> str:
    """The label of the first band whose floor ``fraction`` (score / scale) reaches; the last band below that."""
    return next((label for floor, label in bands if fraction >= floor - 1e-9), bands[-1][1])


def clamp(value: float, scale: float) -> float:
    """``value`` limited to ``[0, scale]``."""
    return min(max(value, 0.0), scale)


def answer_relevancy_score(
    verdicts: Sequence[str], *, uncertainty_weight: float = 0.3, scale: float = 1.0
) -> float:
    """Seeds 000/001: ``((yes + uncertainty_weight · unsure) / statements) · scale``."""
    if not verdicts:
        raise ValueError("no verdicts to score")
    unknown = sorted({v for v in verdicts if v not in VERDICTS})
    if unknown:
        raise ValueError(f"verdicts outside {'/'.join(VERDICTS)}: {', '.join(map(repr, unknown))}")
    yes = verdicts.count("yes")
    unsure = verdicts.count("unsure")
    return clamp((yes + uncertainty_weight * unsure) / len(verdicts) * scale, scale)


def context_relevance_score(
    levels: Sequence[str],
    used: Sequence[bool],
    missing_count: int,
    *,
    unused_high_relevance_context: float = 0.1,
    missing_context_per_item: float = 0.15,
    max_missing_context_penalty: float = 0.5,
    scale: float = 1.0,
) -> float:
    """Seed 003: ``max(0, Σweights / contexts − unused_high · per_unused − min(missing · per_item, cap)) · scale``."""
    if not levels:
        raise ValueError("no context pieces to score")
    if len(used) != len(levels):
        raise ValueError(f"{len(levels)} relevance levels but {len(used)} usage flags")
    unknown = sorted({level for level in levels if level not in RELEVANCE_WEIGHTS})
    if unknown:
        raise ValueError(f"relevance levels outside {'/'.join(RELEVANCE_WEIGHTS)}: {', '.join(map(repr, unknown))}")
    if missing_count < 0:
        raise ValueError("missing_count must be >= 0")
    base = sum(RELEVANCE_WEIGHTS[level] for level in levels) / len(levels)
    unused_high = sum(1 for level, was_used in zip(levels, used, strict=True) if level == "high" and not was_used)
    usage_penalty = unused_high * unused_high_relevance_context
    missing_penalty = min(missing_count * missing_context_per_item, max_missing_context_penalty)
    return clamp(max(0.0, base - usage_penalty - missing_penalty) * scale, scale)


def _weighted(dimensions: Mapping[str, float], weights: Mapping[str, float], side: str) -> float:
    absent = [d for d in DIMENSIONS if d not in dimensions]
    if absent:
        raise ValueError(f"{side} alignment lacks {', '.join(absent)}")
    outside = [d for d in DIMENSIONS if not 0.0 <= dimensions[d] <= 1.0]
    if outside:
        raise ValueError(f"{side} alignment outside [0, 1]: {', '.join(f'{d}={dimensions[d]}' for d in outside)}")
    return sum(dimensions[d] * weights[d] for d in DIMENSIONS)


def prompt_alignment_score(
    user: Mapping[str, float] | None,
    system: Mapping[str, float] | None,
    *,
    mode: str = "both",
    scale: float = 1.0,
) -> float:
    """Seed 004. ``user``/``system`` map intent, requirements, completeness, appropriateness to [0, 1].

    ``both`` is ``0.7 · user + 0.3 · system``; with ``system`` None it is the user score alone (the trace had no
    system instructions to comply with).
    """
    if mode not in ("user", "system", "both"):
        raise ValueError(f"mode must be user, system or both, not {mode!r}")
    if mode in ("user", "both") and user is None:
        raise ValueError(f"mode {mode!r} needs the user alignment")
    if mode == "system" and system is None:
        raise ValueError("mode 'system' needs the system alignment")
    if mode == "user":
        value = _weighted(user, USER_WEIGHTS, "user")
    elif mode == "system":
        value = _weighted(system, SYSTEM_WEIGHTS, "system")
    elif system is None:
        value = _weighted(user, USER_WEIGHTS, "user")
    else:
        value = USER_SHARE_IN_BOTH * _weighted(user, USER_WEIGHTS, "user") + (
            1 - USER_SHARE_IN_BOTH
        ) * _weighted(system, SYSTEM_WEIGHTS, "system")
    return clamp(value * scale, scale)


def wscore(sigma: Sequence[float], n: int) -> float:
    """Seed 002, §3.1: turn ``i`` weighs ``n − i``; the turns after the last are filled with its score.

    ``(n·s0 + … + (n−k)·sk + Σ_{i=1}^{n−k−1} (n−k−i)·sk) / (n + … + 1)``.
    """
    if n < 1:
        raise ValueError("n must be >= 1")
    if not sigma:
        raise ValueError("sigma is empty: no turn was scored")
    if len(sigma) > n:
        raise ValueError(f"sigma has {len(sigma)} scores, more than n={n} turns")
    padded = list(sigma) + [sigma[-1]] * (n - len(sigma))
    return sum((n - i) * s for i, s in enumerate(padded)) / (n * (n + 1) / 2)


def lscore(sigma: Sequence[float]) -> int:
    """Seed 002: the number of turns until the dialogue ended (lower is better)."""
    if not sigma:
        raise ValueError("sigma is empty: no turn was scored")
    return len(sigma)


def mscore(sigma: Sequence[float]) -> float:
    """Seed 002: the best score the dialogue reached."""
    if not sigma:
        raise ValueError("sigma is empty: no turn was scored")
    return max(sigma)
