"""Fuzzed broker items and task bodies: whatever bytes sit on a queue, the transport hands Celery a well-formed
envelope, and the consumer's body check answers with a reason or None, never an exception (the end-to-end cases,
through a real worker, are in tests/test_poison.py)."""

from __future__ import annotations

import base64
import json

from hypothesis import given, settings
from hypothesis import strategies as st
from vigil.schemas.broker import UNDELIVERABLE_TASK, envelope
from vigil.worker.pipeline.poison import body_problem
from vigil.worker.pipeline.tasks import ingest, score

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=15,
)


def deliverable(message: dict) -> None:
    """What kombu's virtual transport reads from a delivered item (Message.__init__, QoS.append)."""
    properties = message["properties"]
    assert isinstance(properties["delivery_tag"], str) and properties["delivery_tag"]
    assert {"exchange", "routing_key"} <= set(properties["delivery_info"])
    assert isinstance(message.get("body", ""), str)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200) | json_values.map(lambda v: json.dumps(v).encode()))
def test_any_item_on_a_queue_becomes_a_deliverable_envelope(item):
    message = envelope(item, "vigil.ingest")
    deliverable(message)


@settings(max_examples=100, deadline=None)
@given(json_values)
def test_an_item_that_is_not_an_envelope_reaches_the_dead_letter_task_with_its_text_and_queue(value):
    raw = json.dumps(value)
    message = envelope(raw.encode(), "vigil.score")
    if message is not value and message != value:  # not delivered as it was: then it is the dead-letter task
        assert message["headers"]["task"] == UNDELIVERABLE_TASK
        (text, queue, reason), _, _ = json.loads(base64.b64decode(message["body"]))
        assert (text, queue) == (raw, "vigil.score") and reason
    else:
        deliverable(value)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_the_body_check_names_a_problem_or_accepts_never_raises(body):
    for task in (ingest, score):
        problem = body_problem(task, body)
        assert problem is None or isinstance(problem, str)
