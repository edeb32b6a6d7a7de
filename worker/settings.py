"""Process settings from the environment (pydantic-settings). The monitor config itself is YAML (``VIGIL_CONFIG``)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict
from vigil.schemas import VigilConfig, load_config
from vigil.schemas.broker_limits import DEFAULT_MESSAGE_BYTES, MIN_MESSAGE_BYTES, POOL_CONNECTIONS

__all__ = ["CONFIG_NOT_SET", "ConfigNotSet", "Settings", "config_path", "get_settings", "monitor_config"]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="", extra="ignore")

    redis_url: str | None = Field(default=None, alias="REDIS_URL")
    clickhouse_dsn: str | None = Field(default=None, alias="CLICKHOUSE_DSN")
    config_path: Path | None = Field(default=None, alias="VIGIL_CONFIG")
    home: Path = Field(default=Path(".vigil"), alias="VIGIL_HOME")
    # Longer than any countdown vigil uses (paused-judge waits, retry backoff): a task is redelivered only after
    # this long without an ack, so a shorter value would duplicate delayed tasks.
    visibility_timeout_s: int = Field(default=3600, alias="VIGIL_VISIBILITY_TIMEOUT")
    restore_interval_s: int = Field(default=10, alias="VIGIL_RESTORE_INTERVAL")
    # How often each worker checks whether work parked for a paused judge may run again (worker.pipeline.parked).
    paused_retry_s: float = Field(default=10.0, gt=0, alias="VIGIL_PAUSED_RETRY")
    # Score tasks queued before ingest sheds load (samples less, each shed turn counted); 0: no bound.
    score_queue_max: int = Field(default=10_000, ge=0, alias="VIGIL_SCORE_QUEUE_MAX")
    # How long a sampled turn's stored text may wait for its scores (worker.pipeline.turn_store): a leak guard.
    turn_ttl_s: int = Field(default=7 * 86400, gt=0, alias="VIGIL_TURN_TTL")
    # How long a stored turn's id keeps its content digest, so a resend with other content is refused as a conflict
    # (vigil.worker.pipeline.ownership): one key per turn in Redis, ~165 bytes.
    turn_owned_s: int = Field(default=86400, gt=0, alias="VIGIL_TURN_OWNED_S")
    # Bytes of rows waiting for the writer (queued and in flight) before ingest and score tasks wait for room, then go
    # back on their queue: while the store is down the write queue stops here; 0: no bound.
    write_queue_max_bytes: int = Field(default=256 * 1024 * 1024, ge=0, alias="VIGIL_WRITE_QUEUE_MAX_BYTES")
    # How long a task waits for room in the write queue before it goes back on its queue (well under the visibility
    # timeout: a task held longer than that is delivered again).
    write_wait_s: float = Field(default=30.0, gt=0, alias="VIGIL_WRITE_WAIT")
    write_batch_rows: int = Field(default=5000, alias="VIGIL_WRITE_BATCH_ROWS")
    write_batch_age_s: float = Field(default=1.0, alias="VIGIL_WRITE_BATCH_AGE")
    alerts_interval_s: int = Field(default=60, alias="VIGIL_ALERTS_INTERVAL")
    log_level: str = Field(default="INFO", alias="VIGIL_LOG_LEVEL")
    # Connections each of a worker's Redis pools (its threads', its judge loop's) holds at once; one more caller waits
    # for a free one. `vigil worker` sets it to its --concurrency unless it is set.
    redis_connections: int = Field(default=POOL_CONNECTIONS, gt=0, alias="VIGIL_REDIS_CONNECTIONS")
    # The largest queue message a worker decodes and the intake publishes; a larger one is dead-lettered unread.
    max_message_bytes: int = Field(default=DEFAULT_MESSAGE_BYTES, ge=MIN_MESSAGE_BYTES,
                                   alias="VIGIL_MAX_MESSAGE_BYTES")
    # The judge reply cache (worker.judge.cache): a Redis of its own, else in each process within a byte budget
    cache_url: str | None = Field(default=None, alias="VIGIL_CACHE_URL")
    cache_max_bytes: int = Field(default=64 * 2**20, ge=0, alias="VIGIL_CACHE_MAX_BYTES")


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()


class ConfigNotSet(ValueError):
    """``VIGIL_CONFIG`` is unset where a monitor config is needed (a production worker never guesses one)."""


CONFIG_NOT_SET = ("VIGIL_CONFIG is not set: point it at your monitor config YAML (check it with `vigil config "
                  "check FILE`); only `vigil demo` runs the bundled demo monitors")


def config_path() -> Path:
    """``VIGIL_CONFIG``; ``ConfigNotSet`` when it is unset."""
    path = get_settings().config_path
    if path is None:
        raise ConfigNotSet(CONFIG_NOT_SET)
    return path


@lru_cache(maxsize=1)
def monitor_config() -> VigilConfig:
    """The monitor config this process runs: ``VIGIL_CONFIG`` (``ConfigNotSet`` when it is unset)."""
    return load_config(config_path())
