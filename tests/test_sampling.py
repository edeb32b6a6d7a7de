"""Sampling is deterministic on the trace id: accurate, nested across rates, the same in every process."""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest
from vigil.worker.pipeline.sampling import sampled

IDS = [uuid.UUID(int=i * 7919 + 13).hex for i in range(100_000)]


@pytest.mark.parametrize("rate", [0.01, 0.1, 0.25, 0.5, 0.9], ids=lambda r: f"rate={r}")
def test_the_sampled_fraction_is_within_one_percent_of_the_rate_over_100k_ids(rate):
    fraction = sum(sampled(trace_id, rate) for trace_id in IDS) / len(IDS)
    assert abs(fraction - rate) <= 0.01 * max(rate, 0.1)


def test_the_set_at_a_lower_rate_is_a_subset_of_the_set_at_any_higher_rate():
    rates = [0.05, 0.2, 0.5, 0.8, 1.0]
    sets = [{t for t in IDS[:20_000] if sampled(t, r)} for r in rates]
    for lower, higher in zip(sets, sets[1:], strict=False):
        assert lower <= higher
        assert len(lower) < len(higher)


def test_rate_zero_samples_nothing_and_rate_one_samples_everything():
    assert not any(sampled(t, 0.0) for t in IDS[:5000])
    assert all(sampled(t, 1.0) for t in IDS[:5000])


def test_another_process_samples_exactly_the_same_ids():
    """Python's hash() is salted per process; sha256 is not, so a second interpreter must agree."""
    here = [t for t in IDS[:3000] if sampled(t, 0.3)]
    code = (
        "import uuid; from worker.pipeline.sampling import sampled;"
        "ids=[uuid.UUID(int=i*7919+13).hex for i in range(3000)];"
        "print(','.join(t for t in ids if sampled(t, 0.3)))"
    )
    there = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={"PYTHONHASHSEED": "12345", "PATH": ""}).stdout.strip().split(",")
    assert there == here
