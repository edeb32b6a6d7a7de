"""The monitor configuration: judges, users' own scorers, monitors and alert rules, read from YAML (``vigil config
check FILE``).

String values may name environment variables, as docker-compose does: ``${VAR}`` (required: unset is an error
naming the field and the variable), ``${VAR:-default}`` (the default when unset or empty), ``$$`` for a literal
``$``. Interpolation runs on the parsed values, so a variable's text never changes the YAML's structure.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from vigil.schemas import pass_line
from vigil.schemas.user_scorers import UserScorerSpec

__all__ = [
    "BUILTIN_SCORERS", "DEFAULT_PROJECT", "PROJECT_NAME", "AlertRule", "AlwaysSample", "AnchorSet", "Budget",
    "IngestKey", "JudgeConfig", "MonitorConfig", "MonitorFilter", "ProjectConfig", "ReviewerConfig", "VigilConfig",
    "interpolate_env", "load_config",
]

BUILTIN_SCORERS = ("answer_relevancy", "context_relevance", "prompt_alignment", "rag_correctness", "multi_turn")
JUDGELESS_KINDS = ("regex", "contains", "length", "json_schema", "python", "tool_policy")  # user scorers, no judge


SESSION_SCORERS = ("multi_turn",)  # the scorers that can score a whole conversation (monitor target: session)


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid")


class JudgeConfig(_Config):
    """An LLM judge: an OpenAI-compatible endpoint (``kind: openai``) or the offline baseline (``kind: baseline``)."""

    name: str = Field(min_length=1)
    kind: Literal["openai", "baseline"] = "openai"
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"  # the secret by reference: the name of the variable that holds it
    model: str = "baseline"
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    timeout_s: float = Field(default=60.0, gt=0)
    max_tokens: int | None = Field(default=1024, gt=0)  # a cap on each reply, so a runaway one cannot fill the context
    rpm: int | None = Field(default=None, gt=0)  # requests per minute, across every worker
    tpm: int | None = Field(default=None, gt=0)  # tokens per minute, across every worker
    max_concurrency: int = Field(default=64, gt=0)  # in flight per worker process
    max_retry_age_s: float = Field(default=300.0, gt=0)  # give up retrying 429/5xx/timeouts after this long
    price_per_prompt_token: float = Field(default=0.0, ge=0)
    price_per_completion_token: float = Field(default=0.0, ge=0)
    # prompt tokens the provider served from its prefix cache; unset: priced as any prompt token
    price_per_cached_prompt_token: float | None = Field(default=None, ge=0)
    cache_ttl_s: int = Field(default=0, ge=0)  # 0: no reply cache

    @property
    def priced(self) -> bool:
        return self.price_per_prompt_token > 0 or self.price_per_completion_token > 0

    @model_validator(mode="after")
    def _endpoint(self) -> JudgeConfig:
        if self.kind == "openai" and not self.base_url:
            raise ValueError(f"judge {self.name!r}: base_url is required for kind 'openai'")
        return self


class MonitorFilter(_Config):
    """Which turns a monitor looks at. Empty lists match everything; tags and metadata must all match."""

    agents: list[str] = Field(default_factory=list)
    environments: list[str] = Field(default_factory=list)
    projects: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    metadata: dict[str, str] = Field(default_factory=dict)


class AlwaysSample(_Config):
    """Turns a monitor scores whatever its sampling rate. ``feedback: negative``: every turn that received
    negative human feedback (under the middle of its scale, ``Feedback.negative``), also when the feedback arrives after the turn."""

    feedback: Literal["negative"] | None = None


class Budget(_Config):
    """What a monitor, or the whole deployment (top-level ``budget:``), may spend on its judge per UTC day. A USD
    budget needs the judge's prices (``config check`` refuses one over a judge with none: it could not be kept); a
    token budget works for any judge. Under it the sampling rate is paced down within the day so the forecast stays
    under it, never above the configured rate (``vigil.worker.pipeline.budget``)."""

    usd_per_day: float | None = Field(default=None, gt=0)
    tokens_per_day: int | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _some_limit(self) -> Budget:
        if self.usd_per_day is None and self.tokens_per_day is None:
            raise ValueError("budget: give usd_per_day, tokens_per_day or both")
        return self


class AnchorSet(_Config):
    """Labelled turns the monitor's judge re-scores every ``every_minutes`` (a ``vigil review export`` or any
    ``vigil eval`` JSON-lines file), so an alert can tell the judge's drift from the agent's
    (``vigil.worker.alerts.anchors``)."""

    dataset: str = Field(min_length=1)
    every_minutes: int = Field(default=60, gt=0)


class MonitorConfig(_Config):
    """One scorer watching a sample of the turns: a built-in one (``BUILTIN_SCORERS``) or one of the config's
    ``scorers:``. ``judge`` is needed when the scorer calls one (the built-ins and ``llm_judge`` rubrics)."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.\-]+$")
    scorer: str = Field(min_length=1)
    params: dict[str, Any] = Field(default_factory=dict)
    sampling_rate: float = Field(default=1.0, ge=0.0, le=1.0)
    filters: MonitorFilter = Field(default_factory=MonitorFilter)
    judge: str | None = None
    reason: Literal["llm", "template", "none"] = "llm"
    always_sample: AlwaysSample = Field(default_factory=AlwaysSample)
    # where a verdict passes, on the scorer's own scale (``schemas.pass_line``): a number, or a categorical rubric's
    # pass set (a list of labels); unset: the middle of 0..1
    pass_at: float | list[str] | None = None
    # turn: every sampled turn is scored; session: a conversation is scored once, as a whole, when it has had no new
    # turn for VIGIL_SESSION_IDLE_S (sampled on the session id; the filters look at its first turn)
    target: Literal["turn", "session"] = "turn"
    budget: Budget | None = None  # judge spend per UTC day: the sampling rate is paced to keep under it
    anchors: AnchorSet | None = None  # labelled turns re-scored on a schedule: judge drift told from agent drift

    @model_validator(mode="after")
    def _session_scorer(self) -> MonitorConfig:
        if self.target == "session" and self.scorer not in SESSION_SCORERS:
            raise ValueError(f"target: monitor {self.name!r} scores sessions, which only "
                             f"{', '.join(SESSION_SCORERS)} can do (scorer is {self.scorer!r})")
        return self


class AlertRule(_Config):
    """A regression rule. ``regression`` watches every new score of a monitor with the sequential detector
    (``method: sequential``, the default: no drop size to guess, ``false_alarms_per_month`` on the monitor's own
    score distribution, learning from ``warmup_minutes`` of history, a baseline that forgets with a half-life of
    ``baseline_minutes / 2``), or compares the recent window with a baseline window by Welch's test
    (``method: window``: ``window_minutes``, ``baseline_minutes``, ``p_value``, ``min_effect_size``);
    ``threshold`` fires when the recent mean is below ``threshold``; ``failure_rate`` when failed/(all) is above it;
    ``failed_runs`` per agent when its failed runs/received runs (runs that ended in error without an answer) is
    above it; ``coverage`` when scored/sampled is below it; ``judge_paused`` when a judge is paused; ``agreement`` when the
    judge's agreement with human feedback is below ``threshold`` (if set) or significantly below its own baseline
    (the regression statistics, on the agree/disagree outcome of each score-feedback pair)."""

    name: str = Field(min_length=1)
    kind: Literal["regression", "threshold", "failure_rate", "failed_runs", "coverage", "judge_paused",
                  "agreement"] = "regression"
    monitor: str | None = None  # None: every monitor
    method: Literal["sequential", "window"] = "sequential"  # regression only
    false_alarms_per_month: float = Field(default=1.0, gt=0)  # sequential: per monitor
    warmup_minutes: int = Field(default=24 * 60, gt=0)  # sequential: history needed before it can fire
    window_minutes: int = Field(default=60, gt=0)
    baseline_minutes: int = Field(default=7 * 24 * 60, gt=0)
    min_samples: int = Field(default=30, gt=0)
    min_effect_size: float = Field(default=0.5, ge=0)  # Cohen's d
    p_value: float = Field(default=0.01, gt=0, lt=1)
    threshold: float | None = None
    renotify_minutes: int = Field(default=60, gt=0)
    webhook_url: str | None = None  # Slack-compatible: receives {"text": ...}

    @model_validator(mode="after")
    def _threshold(self) -> AlertRule:
        if self.kind == "threshold" and self.threshold is None:
            raise ValueError(f"alert {self.name!r}: kind 'threshold' needs a threshold")
        if self.kind == "failed_runs" and self.monitor is not None:
            raise ValueError(f"alert {self.name!r}: kind 'failed_runs' is per agent: remove its monitor")
        return self


DEFAULT_PROJECT = "default"  # the project of VIGIL_INTAKE_TOKEN, and of turns that name none
PROJECT_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$"  # a plain string: how every section names a project


class IngestKey(_Config):
    """One ingest key of a project, kept as its SHA-256 (``vigil keys new`` prints both). A key with ``not_after``
    stops working at that moment: rotate by adding the new key, moving senders over, then dating the old one."""

    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    not_after: datetime | None = None

    @field_validator("not_after")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


class ProjectConfig(_Config):
    """A project: whose turns these are. Its keys are what a sender presents to ``vigil intake``
    (``Authorization: Bearer <key>``); every span and turn sent with one is the project's, whatever the body says,
    and its trace ids are its own (the same trace id in another project is another trace)."""

    name: str = Field(pattern=PROJECT_NAME)
    keys: list[IngestKey] = Field(default_factory=list)
    read_keys: list[IngestKey] = Field(default_factory=list)  # the read endpoint's: this project's rows only


class ReviewerConfig(_Config):
    """A person who may label turns on the review page (``vigil review``). Their token is kept as its sha256 (hex:
    ``printf %s "$TOKEN" | sha256sum``), never itself; a request that carries it acts as ``name``, whatever its body
    says, on the turns of ``projects`` (none: every project)."""

    name: str = Field(min_length=1, max_length=256, pattern=r"^[^\x00-\x1f\x7f]+$")
    token_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    projects: list[Annotated[str, Field(pattern=PROJECT_NAME)]] = Field(default_factory=list)


class VigilConfig(_Config):
    projects: list[ProjectConfig] = Field(default_factory=list)
    judges: list[JudgeConfig] = Field(default_factory=list)
    scorers: list[UserScorerSpec] = Field(default_factory=list)
    monitors: list[MonitorConfig] = Field(default_factory=list)
    alerts: list[AlertRule] = Field(default_factory=list)
    budget: Budget | None = None  # judge spend per UTC day across every monitor
    reviewers: list[ReviewerConfig] = Field(default_factory=list)

    @model_validator(mode="after")
    def _references(self) -> VigilConfig:
        judges = [j.name for j in self.judges]
        monitors = [m.name for m in self.monitors]
        scorers = [s.name for s in self.scorers]
        for kind, names in (("judge", judges), ("scorer", scorers), ("monitor", monitors),
                            ("alert", [a.name for a in self.alerts]), ("reviewer", [r.name for r in self.reviewers]),
                            ("project", [p.name for p in self.projects])):
            dupes = sorted({n for n in names if names.count(n) > 1})
            if dupes:
                raise ValueError(f"{kind} names must be unique: {', '.join(dupes)}")
        hashes = [r.token_sha256 for r in self.reviewers]
        if shared := sorted({r.name for r in self.reviewers if hashes.count(r.token_sha256) > 1}):
            raise ValueError(f"reviewers: {', '.join(shared)} share one token; each person needs their own")
        keys = [k.sha256 for p in self.projects for k in [*p.keys, *p.read_keys]]
        if len(set(keys)) < len(keys):
            raise ValueError("projects: one key is listed twice (a key belongs to one project)")
        known = [DEFAULT_PROJECT, *(p.name for p in self.projects)]
        for index, reviewer in enumerate(self.reviewers):
            if self.projects and (unknown := [p for p in reviewer.projects if p not in known]):
                raise ValueError(f"reviewers[{index}].projects: unknown project {unknown[0]!r} (known: "
                                 f"{', '.join(known)})")
        for index, spec in enumerate(self.scorers):
            if spec.name in BUILTIN_SCORERS:
                raise ValueError(f"scorers[{index}].name: {spec.name!r} is a built-in scorer's name; "
                                 "choose another")
        for index, monitor in enumerate(self.monitors):
            self._check_monitor(index, monitor, judges, scorers)
        for index, rule in enumerate(self.alerts):
            if rule.monitor is not None and rule.monitor not in monitors:
                raise ValueError(f"alerts[{index}].monitor: unknown monitor {rule.monitor!r}")
        self._check_prices()
        return self

    def _check_prices(self) -> None:
        """Fail closed: a USD budget over a judge with no price would read $0 spent forever and cap nothing."""
        for index, monitor in enumerate(self.monitors):
            for limit, where in ((monitor.budget.usd_per_day if monitor.budget else None,
                                  f"monitors[{index}].budget.usd_per_day"),
                                 (self.budget.usd_per_day if self.budget else None, "budget.usd_per_day")):
                if limit is None or not monitor.judge or not self.calls_judge(monitor):
                    continue
                judge = self.judge(monitor.judge)
                if judge.kind == "openai" and not judge.priced:
                    raise ValueError(f"{where}: judge {judge.name!r} (monitor {monitor.name!r}) has no price, so "
                                     "its spend cannot be counted in USD; set its price_per_prompt_token and "
                                     "price_per_completion_token, or budget in tokens_per_day")

    def _check_monitor(self, index: int, monitor: MonitorConfig, judges: list[str], scorers: list[str]) -> None:
        if monitor.scorer not in BUILTIN_SCORERS and monitor.scorer not in scorers:
            raise ValueError(f"monitors[{index}].scorer: unknown scorer {monitor.scorer!r} (built-in: "
                             f"{', '.join(BUILTIN_SCORERS)}; in scorers: {', '.join(scorers) or 'none'})")
        if monitor.scorer in scorers and monitor.params:
            raise ValueError(f"monitors[{index}].params: {monitor.scorer!r} is defined under scorers:, where its "
                             "settings go; a monitor of it takes no params")
        if monitor.judge is None and self.calls_judge(monitor):
            raise ValueError(f"monitors[{index}].judge: scorer {monitor.scorer!r} calls a judge: name one "
                             f"(known: {judges})")
        if monitor.judge is not None and monitor.judge not in judges:
            raise ValueError(f"monitors[{index}].judge: unknown judge {monitor.judge!r} (known: {judges})")
        try:
            self.pass_line(monitor)
        except ValueError as exc:
            raise ValueError(f"monitors[{index}].pass_at: {exc}") from None

    def user_scorer(self, name: str) -> UserScorerSpec | None:
        """The ``scorers:`` definition called ``name``, if any."""
        return next((s for s in self.scorers if s.name == name), None)

    def calls_judge(self, monitor: MonitorConfig) -> bool:
        """Whether the monitor's scorer asks a judge (every built-in one and ``llm_judge`` rubrics do)."""
        spec = self.user_scorer(monitor.scorer)
        return spec is None or spec.kind not in JUDGELESS_KINDS

    def pass_line(self, monitor: MonitorConfig) -> float:
        """The monitor's pass line as a share of its scale (``schemas.pass_line.resolve``): ``pass_at`` read on its
        scorer's scale (a numeric rubric's min..max, a categorical rubric's labels, a built-in's ``scale``)."""
        spec = self.user_scorer(monitor.scorer)
        output = getattr(spec, "output", None)
        if output is not None and output.type == "numeric":
            return pass_line.resolve(monitor.pass_at, low=output.min, high=output.max)
        if output is not None and output.type == "categorical":
            return pass_line.resolve(monitor.pass_at, labels=output.labels)
        scale = monitor.params.get("scale", 1.0) if spec is None else 1.0
        if isinstance(scale, bool) or not isinstance(scale, int | float) or scale <= 0:
            return pass_line.resolve(monitor.pass_at)  # the scorer's own build names a bad scale
        return pass_line.resolve(monitor.pass_at, high=float(scale))

    def judge(self, name: str) -> JudgeConfig:
        return next(j for j in self.judges if j.name == name)

    def monitor(self, name: str) -> MonitorConfig:
        return next(m for m in self.monitors if m.name == name)


def load_config(path: str | Path, environ: Mapping[str, str] | None = None) -> VigilConfig:
    """Read and validate a YAML config; pydantic's errors name the field (``monitors.0.sampling_rate``), an unset
    environment variable included."""
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    try:
        data = interpolate_env(data, os.environ if environ is None else environ)
    except _UnsetVariable as exc:
        raise ValidationError.from_exception_data(
            "VigilConfig", [{"type": "value_error", "loc": exc.loc, "input": exc.text, "ctx": {"error": str(exc)}}]
        ) from None
    return VigilConfig.model_validate(data)


_VARIABLE = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class _UnsetVariable(ValueError):
    def __init__(self, loc: tuple[str | int, ...], name: str, text: str) -> None:
        super().__init__(f"environment variable {name} is not set (used as ${{{name}}})")
        self.loc, self.text = loc, text


def interpolate_env(value: Any, environ: Mapping[str, str], loc: tuple[str | int, ...] = ()) -> Any:
    """``value`` with ``${VAR}`` / ``${VAR:-default}`` in its strings replaced from ``environ``."""
    if isinstance(value, str):
        def substitute(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            if name is None:
                return "$"
            found = environ.get(name)
            if found:
                return found
            if default is not None:
                return default
            raise _UnsetVariable(loc, name, value)

        return _VARIABLE.sub(substitute, value)
    if isinstance(value, dict):
        return {key: interpolate_env(item, environ, (*loc, key)) for key, item in value.items()}
    if isinstance(value, list):
        return [interpolate_env(item, environ, (*loc, i)) for i, item in enumerate(value)]
    return value
