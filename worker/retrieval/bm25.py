"""BM25 over a knowledge base on disk, with ``bm25s``: a folder of ``.txt`` / ``.md`` files or a JSONL file.

A folder's files are split into passages at blank lines (about ``PASSAGE_CHARS`` each, ids ``path#n``); a JSONL
file holds one document per line, ``{"id", "title", "text"}`` (only ``text`` is required). The built index is
cached in-process per path and rebuilt when a file changes. ``bm25s`` (with numpy and scipy.sparse, ~0.3 s of CPU)
is imported when the first index is built, not when a config naming a retriever is checked.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from vigil.schemas import ContextDoc

if TYPE_CHECKING:
    import bm25s
    from bm25s.tokenization import Tokenizer

__all__ = ["PASSAGE_CHARS", "BM25Retriever", "load_documents"]

PASSAGE_CHARS = 1200
_SUFFIXES = (".txt", ".md")
_build_lock = threading.Lock()


def load_documents(path: str | Path) -> list[ContextDoc]:
    """The documents under ``path``: passages of a folder's text files, or the lines of a JSONL file."""
    path = Path(path)
    if path.is_dir():
        return [doc for file in _text_files(path) for doc in _passages(file, path)]
    if path.is_file():
        return _jsonl(path)
    raise FileNotFoundError(f"retriever path {str(path)!r} does not exist")


def _text_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in _SUFFIXES)


def _passages(file: Path, root: Path) -> list[ContextDoc]:
    name = file.relative_to(root).as_posix()
    passages: list[str] = []
    for paragraph in file.read_text(encoding="utf-8", errors="replace").split("\n\n"):
        paragraph = paragraph.strip()
        if not paragraph:
            continue
        if passages and len(passages[-1]) + len(paragraph) < PASSAGE_CHARS:
            passages[-1] += "\n\n" + paragraph
        else:
            passages.append(paragraph)
    return [ContextDoc(id=f"{name}#{i}", text=text) for i, text in enumerate(passages)]


def _jsonl(file: Path) -> list[ContextDoc]:
    docs = []
    for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            text = row["text"]
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{file}:{number}: expected a JSON object with a 'text' field ({exc})") from None
        title = row.get("title")
        docs.append(ContextDoc(id=str(row.get("id", number)), text=f"{title}\n{text}" if title else str(text)))
    return docs


@dataclass(frozen=True)
class _Index:
    docs: list[ContextDoc]
    tokenizer: Tokenizer
    bm25: bm25s.BM25


def _stamp(path: Path) -> tuple[tuple[str, int, int], ...]:
    files = _text_files(path) if path.is_dir() else [path]
    return tuple((str(f), f.stat().st_mtime_ns, f.stat().st_size) for f in files)


@lru_cache(maxsize=16)
def _build(path: Path, stamp: tuple[tuple[str, int, int], ...]) -> _Index:
    import bm25s
    from bm25s.tokenization import Tokenizer

    docs = load_documents(path)
    tokenizer = Tokenizer(stopwords="en")
    bm25 = bm25s.BM25()
    if docs:
        bm25.index(tokenizer.tokenize([d.text for d in docs], show_progress=False), show_progress=False)
    return _Index(docs=docs, tokenizer=tokenizer, bm25=bm25)


class BM25Retriever:
    """``search`` ranks the documents under ``path`` by BM25 against the query; documents scoring 0 are left out."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).resolve()
        if not self.path.exists():
            raise FileNotFoundError(f"retriever path {str(self.path)!r} does not exist")

    def _index(self) -> _Index:
        with _build_lock:
            return _build(self.path, _stamp(self.path))

    def search(self, query: str, k: int) -> list[ContextDoc]:
        index = self._index()
        k = min(k, len(index.docs))
        if k <= 0:
            return []
        tokens = index.tokenizer.tokenize([query], update_vocab=False, show_progress=False, return_as="ids")
        ranks, scores = index.bm25.retrieve(tokens, k=k, show_progress=False, n_threads=1)
        return [
            index.docs[int(rank)].model_copy(update={"score": float(score)})
            for rank, score in zip(ranks[0], scores[0], strict=True)
            if score > 0
        ]
