"""Retrieval for the correctness judge: the ``Retriever`` protocol, BM25 over a knowledge base, and its config."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from vigil.worker.retrieval.base import Retriever
from vigil.worker.retrieval.bm25 import BM25Retriever, load_documents

__all__ = ["BM25Retriever", "Retriever", "RetrieverConfig", "load_documents"]


class RetrieverConfig(BaseModel):
    """A monitor's ``params.retriever``: ``{"kind": "bm25", "path": "docs/ or docs.jsonl", "top_k": 3}``."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["bm25"] = "bm25"
    path: str = Field(min_length=1)
    top_k: int = Field(default=3, gt=0)

    def open(self) -> Retriever:
        return BM25Retriever(self.path)
