"""The BM25 retriever: a folder of text files or a JSONL of documents, ranked against a query."""

from __future__ import annotations

import json
import os

import pytest
from vigil.worker.retrieval import BM25Retriever, RetrieverConfig, load_documents


@pytest.fixture
def jsonl(tmp_path):
    path = tmp_path / "kb.jsonl"
    rows = [
        {"id": "union", "title": "UNION",
         "text": "UNION combines the results of SELECT statements and removes duplicates."},
        {"id": "union-all", "title": "UNION ALL",
         "text": "UNION ALL combines SELECT results and keeps duplicate rows."},
        {"id": "deadlock", "title": "Deadlocks",
         "text": "A deadlock is two transactions each waiting for a lock the other holds."},
        {"id": "backup", "text": "Run BACKUP DATABASE to take an online backup."},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def test_the_best_matching_document_comes_first(jsonl):
    docs = BM25Retriever(jsonl).search("what is a deadlock between transactions", 2)
    assert docs[0].id == "deadlock"
    assert docs[0].score is not None and docs[0].score > 0


def test_a_jsonl_title_is_kept_as_the_first_line_of_the_text(jsonl):
    docs = BM25Retriever(jsonl).search("deadlock", 1)
    assert docs[0].text.startswith("Deadlocks\nA deadlock is")


def test_documents_that_share_no_word_with_the_query_are_left_out(jsonl):
    assert BM25Retriever(jsonl).search("zeppelin aurora", 3) == []


def test_k_larger_than_the_corpus_returns_only_what_matches(jsonl):
    docs = BM25Retriever(jsonl).search("UNION duplicates", 50)
    assert {d.id for d in docs} == {"union", "union-all"}


def test_a_folder_is_split_into_passages_named_after_their_file(tmp_path):
    (tmp_path / "sql").mkdir()
    (tmp_path / "sql" / "union.md").write_text("# UNION\n\nUNION removes duplicates.\n", encoding="utf-8")
    (tmp_path / "locks.txt").write_text("Deadlocks happen when two transactions wait on each other.",
                                        encoding="utf-8")
    (tmp_path / "image.png").write_bytes(b"\x89PNG")
    docs = BM25Retriever(tmp_path).search("deadlocks transactions", 1)
    assert [d.id for d in docs] == ["locks.txt#0"]
    assert [d.id for d in load_documents(tmp_path)] == ["locks.txt#0", "sql/union.md#0"]


def test_long_files_become_several_passages(tmp_path):
    paragraph = "word " * 200
    (tmp_path / "long.txt").write_text("\n\n".join([paragraph] * 4), encoding="utf-8")
    assert len(load_documents(tmp_path)) == 4


def test_the_index_is_rebuilt_when_a_file_changes(tmp_path):
    doc = tmp_path / "kb.txt"
    doc.write_text("Tablespaces hold tables.", encoding="utf-8")
    retriever = BM25Retriever(tmp_path)
    assert retriever.search("buffer pool", 1) == []
    doc.write_text("A buffer pool caches pages.", encoding="utf-8")
    os.utime(doc, ns=(doc.stat().st_atime_ns, doc.stat().st_mtime_ns + 1_000_000_000))
    assert [d.id for d in retriever.search("buffer pool", 1)] == ["kb.txt#0"]


def test_a_jsonl_line_without_text_is_an_error_naming_the_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": "a", "text": "fine"}\n{"id": "b"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad.jsonl:2"):
        BM25Retriever(path).search("fine", 1)


def test_a_missing_path_is_an_error_at_construction(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        RetrieverConfig(path=str(tmp_path / "nowhere")).open()


def test_an_empty_knowledge_base_finds_nothing(tmp_path):
    assert BM25Retriever(tmp_path).search("anything", 3) == []
