"""The retriever protocol: where the correctness judge's contexts come from when they are not the trace's."""

from __future__ import annotations

from typing import Protocol

from vigil.schemas import ContextDoc

__all__ = ["Retriever"]


class Retriever(Protocol):
    def search(self, query: str, k: int) -> list[ContextDoc]:
        """The ``k`` best documents for ``query``, best first; fewer (or none) when fewer match."""
        ...
