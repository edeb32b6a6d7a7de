"""OpenInference's ``metadata`` JSON object is each span's own turn metadata, however often its text was read before.

``openinference.identity`` remembers what a ``metadata`` text reads as (a LangChain run hands its metadata down, and
every span under it writes the same text again): a span's answer must still be only what that span states, and
every text must read as itself after the memory has been filled and forgotten."""

from __future__ import annotations

import json

from vigil.schemas.conventions import openinference


def test_spans_with_the_same_metadata_text_state_only_their_own_user() -> None:
    said = json.dumps({"thread_id": "t-1", "langgraph_step": 2, "langgraph_path": ["__pregel_pull", "agent"]})
    first = openinference.identity({"metadata": said, "user.id": "u-1"})
    second = openinference.identity({"metadata": said})
    shared = {"metadata.thread_id": "t-1", "metadata.langgraph_step": "2",
              "metadata.langgraph_path": '["__pregel_pull", "agent"]'}
    assert first["metadata"] == {**shared, "user.id": "u-1"}
    assert second["metadata"] == shared
    first["metadata"]["metadata.thread_id"] = "changed by a caller"
    assert openinference.identity({"metadata": said})["metadata"] == shared


def test_every_text_reads_as_itself_past_what_is_remembered() -> None:
    texts = [json.dumps({"run": n}) for n in range(3 * openinference._METADATA_MAX)]
    for _ in range(2):  # read once, then again after the memory was filled and forgotten
        for n, said in enumerate(texts):
            assert openinference.identity({"metadata": said})["metadata"] == {"metadata.run": str(n)}


def test_metadata_an_exporter_wrote_as_an_object_is_read_as_one() -> None:
    assert openinference.identity({"metadata": {"tier": "gold"}})["metadata"] == {"metadata.tier": "gold"}
    assert openinference.identity({"metadata": "not json"})["metadata"] == {}


def test_long_metadata_texts_are_read_and_not_remembered() -> None:
    """Whoever sends spans sets their metadata: what is remembered stays within a bound whatever they send."""
    openinference._METADATA.clear()
    for n in range(50):
        said = json.dumps({"run": n, "padding": "x" * 100_000})
        assert openinference.identity({"metadata": said})["metadata"]["metadata.run"] == str(n)
    assert openinference._METADATA == {}
    short = json.dumps({"run": "short"})
    openinference.identity({"metadata": short})
    assert list(openinference._METADATA) == [short]
