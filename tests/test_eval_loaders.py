"""The dataset loaders of `vigil eval`: each format maps its records to labelled items.

The tests of real lines read the published files (the RAGChecker human-labelled correctness preferences and LLMBar
Natural) from a `shared/datasets/` folder beside the repository (or beside the folder holding it) only when it is
present, and are skipped otherwise; the other tests use small files of their own.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from vigil.worker.eval.items import load_dataset


def _shared_datasets() -> Path | None:
    for parent in Path(__file__).resolve().parents[1:4]:
        candidate = parent / "shared" / "datasets"
        if candidate.is_dir():
            return candidate
    return None


def _published(name: str) -> Path:
    folder = _shared_datasets()
    if folder is None or not (folder / name).is_file():
        pytest.skip(f"{name} is not beside the repository")
    return folder / name


def test_ragchecker_records_become_pairs_signed_by_the_annotators_label():
    path = _published("ragchecker_human_labeled_data.json")
    records = json.loads(path.read_text(encoding="utf-8"))

    dataset = load_dataset(path, "ragchecker")

    assert dataset.bad == [] and len(dataset.items) == 2 * len(records)
    first, second = dataset.items[:2]
    record = records[0]
    label = record["correctness_label"]
    assert (first.id, first.group, first.human) == (f"{record['instance_id']}/a1/model1", f"{record['instance_id']}/a1",
                                                    -label)
    assert (second.id, second.human) == (f"{record['instance_id']}/a1/model2", label)
    assert first.turn.question == record["query"] and first.turn.reference == record["gt_answer"]
    assert (first.turn.output, second.turn.output) == (record["model1"]["response"], record["model2"]["response"])


def test_ragchecker_annotators_of_one_instance_share_the_same_turns():
    path = _published("ragchecker_human_labeled_data.json")
    records = json.loads(path.read_text(encoding="utf-8"))
    instance = records[0]["instance_id"]

    items = [i for i in load_dataset(path, "ragchecker").items if i.id.startswith(f"{instance}/")]

    assert sorted({i.group for i in items}) == [f"{instance}/a1", f"{instance}/a2"]
    by_side = {}
    for item in items:
        by_side.setdefault(item.id.rsplit("/", 1)[1], set()).add(item.turn.trace_id)
    assert all(len(ids) == 1 for ids in by_side.values())


def test_ragchecker_pairs_people_found_equal_make_no_pair():
    path = _published("ragchecker_human_labeled_data.json")
    records = json.loads(path.read_text(encoding="utf-8"))
    index = next(i for i, r in enumerate(records) if r["correctness_label"] == 0)

    items = load_dataset(path, "ragchecker").items[2 * index: 2 * index + 2]

    assert [i.human for i in items] == [0, 0]


def test_llmbar_pairs_give_the_labelled_output_1_and_the_other_0():
    path = _published("llmbar_natural.json")
    records = json.loads(path.read_text(encoding="utf-8"))

    dataset = load_dataset(path, "llmbar")

    assert dataset.bad == [] and len(dataset.items) == 2 * len(records)
    for number in (1, 2, 3):
        record, (one, two) = records[number - 1], dataset.items[2 * number - 2: 2 * number]
        assert (one.group, two.group) == (str(number), str(number))
        assert (one.human, two.human) == ((1.0, 0.0) if record["label"] == 1 else (0.0, 1.0))
        assert one.turn.question == record["input"] and (one.turn.output, two.turn.output) == (
            record["output_1"], record["output_2"])
        assert one.turn.reference is None


def test_a_bad_record_is_named_by_its_number_and_field_and_the_others_load(tmp_path):
    good = {"input": "Say hi.", "output_1": "hi", "output_2": "bye", "label": 1}
    path = tmp_path / "llmbar.json"
    path.write_text(json.dumps([good, {"input": "x", "output_1": "a", "label": 2}, good | {"label": 3}]),
                    encoding="utf-8")

    dataset = load_dataset(path, "llmbar")

    assert [str(b) for b in dataset.bad] == ["record 2: output_2: missing",
                                            "record 3: (record): label must be 1 or 2, not 3"]
    assert len(dataset.items) == 2


def test_a_ragchecker_record_without_a_reference_is_named(tmp_path):
    record = {"instance_id": 7, "query": "Q?", "model1": {"response": "a"}, "model2": {"response": "b"},
              "correctness_label": 1}
    path = tmp_path / "rc.json"
    path.write_text(json.dumps([record | {"gt_answer": "r"}, record]), encoding="utf-8")

    dataset = load_dataset(path, "ragchecker")

    assert [str(b) for b in dataset.bad] == ["record 2: gt_answer: missing"]
    assert [i.id for i in dataset.items] == ["7/a1/model1", "7/a1/model2"]


def test_a_file_that_is_not_the_formats_json_list_is_refused_whole(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('{"a": 1}', encoding="utf-8")

    with pytest.raises(ValueError, match="not a ragchecker file: expected a JSON list of records"):
        load_dataset(path, "ragchecker")


def test_jsonl_turns_default_their_trace_id_to_the_item_id_and_their_agent_to_eval(tmp_path):
    path = tmp_path / "items.jsonl"
    path.write_text(json.dumps({"id": "q1", "human": 2, "turn": {"input": [{"role": "user", "content": "Q?"}],
                                                                  "output": "A."}}), encoding="utf-8")

    (item,) = load_dataset(path).items

    assert (item.turn.trace_id, item.turn.agent, item.group, item.human) == ("q1", "eval", None, 2.0)
