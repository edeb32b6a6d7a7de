"""`vigil worker` and SIGTERM: a warm shutdown and exit 0 at any moment, also while it is still starting (before
Celery installs its own handler the default action killed it: exit -15, no flush)."""

from __future__ import annotations

import time
from pathlib import Path

from tests.pipeline import WorkerProcess

CONFIG = Path(__file__).parent / "fixtures" / "pipeline.yaml"


def wait_for_line(worker: WorkerProcess, text: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while text not in worker.output():
        assert worker.process.poll() is None, worker.output()[-3000:]
        assert time.monotonic() < deadline, worker.output()[-3000:]
        time.sleep(0.02)


def test_a_worker_sent_sigterm_while_it_opens_its_store_exits_0(redis_url, tmp_path):
    worker = WorkerProcess(redis_url, tmp_path / "vigil", CONFIG).start()
    wait_for_line(worker, "monitors (")  # the config is checked; the store is opened and migrated next

    assert worker.stop() == 0, worker.output()[-3000:]


def test_a_running_worker_sent_sigterm_shuts_down_warm_and_exits_0(redis_url, tmp_path):
    worker = WorkerProcess(redis_url, tmp_path / "vigil", CONFIG).start()
    wait_for_line(worker, "writer started")

    assert worker.stop() == 0, worker.output()[-3000:]
    assert "Warm shutdown" in worker.output() and "writer stopped" in worker.output()
