"""Fuzzed turns: whatever JSON arrives as a turn, validation answers with a turn or a ValidationError naming the
field (which the worker dead-letters), never another exception that would take the batch down with it."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from vigil.schemas import Turn
from vigil.schemas.rows import trace_row
from vigil.schemas.trace import WIRE_VERSION

FIELDS = ["schema_version", "trace_id", "span_id", "session_id", "project", "agent", "environment", "started_at",
          "ended_at", "system", "input", "output", "contexts", "reference", "tool_calls", "model", "usage", "tags",
          "metadata", "truncated", "origin", "unknown_field"]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-2**70, max_value=2**70) | st.floats(allow_nan=True)
    | st.text(max_size=40),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=20,
)
VALID = {"trace_id": "t-1", "agent": "support-bot", "input": [{"role": "user", "content": "Where is my parcel?"}],
         "output": "It ships tomorrow."}


def validate(data: object) -> Turn | None:
    try:
        turn = Turn.model_validate(data)
    except ValidationError as exc:
        assert exc.errors(), "a refusal names what is wrong"
        return None
    trace_row(turn)  # what the worker stores next must not fail either
    return turn


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(FIELDS), json_values)
def test_any_value_in_any_field_is_a_turn_or_a_validation_error(field, value):
    validate({**VALID, field: value})


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_any_json_at_all_is_a_turn_or_a_validation_error(value):
    validate(value)


@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=1, max_value=3000), st.sampled_from(["metadata", "input", "tool_calls", "contexts"]))
def test_nesting_of_any_depth_is_a_validation_error_not_a_recursion_error(depth, field):
    value: object = "leaf"
    for _ in range(depth):
        value = {"k": value} if depth % 2 else [value]
    validate({**VALID, field: value})


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.text(min_size=1, max_size=12).filter(lambda k: k not in FIELDS), json_values, max_size=3))
def test_a_newer_contract_s_unknown_fields_never_refuse_a_valid_turn(extra):
    assert validate({**VALID, **extra, "schema_version": WIRE_VERSION + 1}) is not None
