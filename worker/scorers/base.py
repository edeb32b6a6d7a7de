"""The scorer protocol: a small typed object whose fields are its config, with one async run over one turn."""

from __future__ import annotations

from typing import ClassVar, Protocol

from schemas import ScoreResult, Turn
from worker.judge.base import Judge

__all__ = ["Scorer"]


class Scorer(Protocol):
    name: ClassVar[str]
    version: ClassVar[str]  # written on every score row; bump it when prompts or arithmetic change

    async def score(self, turn: Turn, judge: Judge) -> ScoreResult: ...
