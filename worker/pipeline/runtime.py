"""What one worker process holds: the config, a Redis client, telemetry, and its judges and scorers (built once)."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field

import redis
from vigil.schemas import MonitorConfig, VigilConfig
from vigil.schemas.broker import broker
from vigil.worker.judge.base import Judge
from vigil.worker.scorers.base import Scorer
from vigil.worker.settings import get_settings, monitor_config
from vigil.worker.sinks import write_queue
from vigil.worker.sinks.otel import Telemetry

__all__ = ["Runtime", "runtime"]


@dataclass
class Runtime:
    config: VigilConfig
    redis: redis.Redis
    telemetry: Telemetry
    _judges: dict[str, Judge] = field(default_factory=dict)
    _scorers: dict[str, Scorer] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def judge(self, name: str | None) -> Judge:
        """The judge called ``name``; ``NO_JUDGE`` for a monitor that names none (its scorer calls no judge)."""
        from vigil.worker.judge import build_judge

        if name is None:
            return build_judge(None)
        with self._lock:
            if name not in self._judges:
                self._judges[name] = build_judge(self.config.judge(name))
            return self._judges[name]

    def scorer(self, monitor: MonitorConfig) -> Scorer:
        from vigil.worker.scorers import build_scorer

        with self._lock:
            if monitor.name not in self._scorers:
                self._scorers[monitor.name] = build_scorer(monitor, self.config)
            return self._scorers[monitor.name]


_runtime: Runtime | None = None
_pid: int | None = None
_lock = threading.Lock()


def runtime() -> Runtime:
    """This process's runtime, built on first use and again after a fork."""
    global _runtime, _pid
    with _lock:
        if _runtime is None or _pid != os.getpid():
            from vigil.worker.pipeline.app import app

            settings = get_settings()
            client = broker(settings.redis_url or app.conf.broker_url).redis(max_connections=settings.redis_connections)
            _runtime = Runtime(config=monitor_config(), redis=client, telemetry=Telemetry.create())
            _runtime.telemetry.observe_write_queue(lambda: write_queue.depth(client))
            _pid = os.getpid()
        return _runtime
