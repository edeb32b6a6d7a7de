"""The intake's settings, from the environment (``VIGIL_INTAKE_*``), shared by ``vigil intake`` and the workers."""

from __future__ import annotations

from functools import lru_cache

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from vigil.worker.settings import get_settings

__all__ = ["IntakeSettings", "intake_settings"]


class IntakeSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="VIGIL_INTAKE_", extra="ignore")

    token: SecretStr | None = Field(default=None, description="when set, requests need 'Authorization: Bearer …'; "
                                                              "empty means none")
    max_bytes: int = Field(default_factory=lambda: get_settings().max_message_bytes, gt=0,
                           description="largest request body, after decompression (default VIGIL_MAX_MESSAGE_BYTES)")
    max_turns: int = Field(default=1000, gt=0, description="turns in one POST /v1/turns (the SDK sends 256)")
    max_connections: int = Field(default=256, gt=0, description="connections open at once; more are answered 503")
    max_trace_spans: int = Field(default=2000, gt=0, description="spans kept per trace; more are counted, not kept, "
                                                                 "and the trace's turns marked truncated")
    max_trace_bytes: int = Field(default=4 * 2**20, gt=0, description="bytes of span records kept per trace; more "
                                                                      "are counted like spans over max_trace_spans")
    max_reassemblies: int = Field(default=20, ge=0, description="times a trace is assembled again for late spans; "
                                  "later spans are counted like spans over max_trace_spans, and never reschedule")
    # Traces past what the workers assemble within the settle delay only queue work a flood leaves in Redis: size it
    # to VIGIL_INTAKE_SETTLE_S x the traces a second the fleet assembles (one worker on 2 cores: ~430 a second, so
    # 10,000 at the default 10 s admits twice that); an OTLP exporter answered 429 sends again after Retry-After.
    max_open_traces: int = Field(default=10_000, ge=0, description="traces waiting to settle before the intake "
                                                                  "answers 429 with Retry-After (0: no bound)")
    max_pending_bytes: int = Field(default=256 * 2**20, ge=0, description="bytes of span records waiting to settle "
                                   "(all traces) before the intake answers 429 with Retry-After (0: no bound)")
    max_kept_bytes: int = Field(default=16 * 2**20, ge=0, description="bytes of what assembled traces keep for late "
                                "spans (all traces); over it the oldest are dropped (0: no bound)")
    max_step_bytes: int = Field(default=16 * 2**20, ge=0, description="bytes of the open steps kept for the turns "
                                "that continue them in other traces (all projects; ``assembly.steps``); over it the "
                                "oldest are dropped (0: no bound)")
    retry_after_s: int = Field(default=5, ge=1, description="Retry-After of a 503 while Redis refuses writes")
    publish_timeout_s: float = Field(default=5.0, gt=0, description="per Redis command when publishing")
    settle_s: float = Field(default=10.0, ge=0, description="a trace is assembled this long after its last span")
    keep_s: int = Field(default=3600, gt=0, description="how long a trace's spans are kept for late spans")
    parent_wait_s: float = Field(default=120.0, ge=0, description="a trace with a span whose parent (in the same "
                                 "process) has not arrived waits this long after its last span (at most keep_s)")
    log_requests: bool = Field(default=True, description="one info line per request in the intake's log")
    lease_s: int = Field(default=120, gt=0, description="a claimed trace not released after this is claimed again")

    @field_validator("token", mode="before")
    @classmethod
    def _empty_is_none(cls, value: object) -> object:
        """``VIGIL_INTAKE_TOKEN=`` (what a template sets when no token is given) means no token, not a token
        no sender can present."""
        if isinstance(value, str) and not value.strip():
            return None
        return value


@lru_cache(maxsize=1)
def intake_settings() -> IntakeSettings:
    return IntakeSettings()
