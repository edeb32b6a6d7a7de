"""`vigil demo` end to end, as `make demo` runs it: every part started for real, every part stopped after."""

from __future__ import annotations

import os
import re
import subprocess
import sys


def test_the_demo_scores_every_sampled_turn_reports_from_clickhouse_raises_the_regression_and_cleans_up(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "CLICKHOUSE_DSN", "VIGIL_JUDGE_BASE_URL")}
    env["COLUMNS"] = "200"
    run = subprocess.run([sys.executable, "-m", "worker", "demo", "--home", str(tmp_path / "demo")], env=env,
                         capture_output=True, text=True, timeout=600)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-4000:]

    assert "offline BASELINE judge" in out, "the demo says which judge it used"
    assert re.search(r"scored every sampled turn of 264 in", out)
    for monitor in ("answer_relevancy", "context_relevance", "prompt_alignment", "rag_correctness", "multi_turn"):
        assert f"monitor {monitor} ({monitor} v2)" in out, f"{monitor} missing from the report"
    assert "Baseline judge (word overlap, no LLM): score" in out, "reasons are read back"
    assert re.search(r"ALERT answer_relevancy on acme-shop/support-bot: mean 0\.\d+ over the last 120 min", out)
    assert (tmp_path / "demo" / "report.html").stat().st_size > 10_000

    redis_pid = int(re.search(r"pid\s+(\d+)", out).group(1))
    worker_pid = int(re.search(r"`vigil worker` pid (\d+)", out).group(1))
    for pid in (redis_pid, worker_pid):
        assert not os.path.exists(f"/proc/{pid}") or "zombie" in open(f"/proc/{pid}/status").read().lower(), \
            f"process {pid} outlived the demo"
