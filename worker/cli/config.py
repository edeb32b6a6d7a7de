"""``vigil config check FILE``: validate a monitor config the way a worker will use it; errors name the field.

Beyond the YAML schema, ``check_config`` builds every judge, every user scorer (compiling its pattern or schema,
parsing its template, importing its function: each problem one line naming the scorer) and every monitor's scorer
from its params (so a typo in a param, ``uncertanty_weight``, or a bad value, ``evaluation_mode: bothh``, is an error now, not a failed score per
turn later), checks that the files the params name exist, and warns about monitors that will score nothing (RAG
correctness with neither reference answers in the traces nor a golden set), and names a judge key that is not set
(``worker.judge.key``). ``vigil worker`` runs the same check at start and refuses an invalid config with the same
one line.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import click
import yaml
from pydantic import ValidationError
from vigil.schemas import VigilConfig
from vigil.worker.cli.suggest import SuggestingGroup

__all__ = ["CheckedConfig", "ConfigError", "check_config", "config"]


class ConfigError(ValueError):
    """An invalid monitor config; the message is one line naming the file and the fields."""


@dataclass
class CheckedConfig:
    config: VigilConfig
    warnings: list[str] = field(default_factory=list)


def _where(loc: tuple) -> str:
    return ".".join(str(part) for part in loc) or "(top level)"


_KIND_TAGS = ("llm_judge", "regex", "contains", "length", "json_schema", "python", "tool_policy",
              "boolean", "numeric", "categorical")


def _validation(prefix: str, exc: ValidationError, data: dict | None = None) -> list[str]:
    """One line per error, each naming its field; a check across the whole config names its field itself
    (``monitors[0].pass_at: ...``), so it is said as it is."""
    return [_scorer_error(error, data) if error["loc"][:1] == ("scorers",) and len(error["loc"]) > 1 else
            f"{prefix}{'.' if prefix and error['loc'] else ''}{_where(error['loc'])}: {error['msg']}"
            if error["loc"] or prefix else error["msg"].removeprefix("Value error, ") for error in exc.errors()]


def _scorer_error(error: dict, data: dict | None) -> str:
    """``scorers.2 (refund_policy).rules.1: unknown rule 'forbidd' (...)``: the scorer named, its field, the problem
    (without the union's tag pydantic puts in the location)."""
    index = error["loc"][1]
    scorers = (data or {}).get("scorers")
    entry = scorers[index] if isinstance(scorers, list) and isinstance(index, int) and index < len(scorers) else None
    name = entry.get("name") if isinstance(entry, dict) else None
    rest = [p for p in error["loc"][2:] if p not in _KIND_TAGS]
    message = error["msg"].removeprefix("Value error, ")
    return f"scorers.{index}{f' ({name})' if name else ''}{'.' + _where(tuple(rest)) if rest else ''}: {message}"


def _files(params: dict, where: str) -> list[str]:
    """Errors for the files a monitor's params name that do not exist (a retriever's path, a golden set)."""
    problems = []
    retriever = params.get("retriever")
    if isinstance(retriever, dict) and isinstance(retriever.get("path"), str) and \
            not Path(retriever["path"]).exists():
        problems.append(f"{where}.retriever.path: {retriever['path']!r} does not exist "
                        f"(relative paths are read from {Path.cwd()})")
    golden = params.get("golden")
    if isinstance(golden, str) and not Path(golden).is_file():
        problems.append(f"{where}.golden: {golden!r} is not a file (relative paths are read from {Path.cwd()})")
    return problems


def check_config(path: str | Path) -> CheckedConfig:
    """The config at ``path``, validated and with every judge and scorer built; a ``ConfigError`` otherwise."""
    from vigil.worker.judge import build_judge
    from vigil.worker.judge.key import key_problem
    from vigil.worker.scorers import build_scorer
    from vigil.worker.scorers.user import build_user_scorer

    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"{path}: not valid YAML{at}: {getattr(exc, 'problem', None) or exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: (top level): expected a mapping with judges, monitors and alerts, "
                          f"got {type(data).__name__}")
    try:
        cfg = VigilConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{path}: " + "; ".join(_validation("", exc, data))) from exc

    problems: list[str] = []
    warnings: list[str] = []
    for index, judge in enumerate(cfg.judges):
        try:
            build_judge(judge)
        except (ValueError, TypeError) as exc:
            problems.append(f"judges.{index} ({judge.name}): {exc}")
        if said := key_problem(judge, index):
            (problems if said[0] == "error" else warnings).append(said[1])
    broken = set()
    for index, spec in enumerate(cfg.scorers):
        try:
            build_user_scorer(spec)
        except ValueError as exc:
            problems.append(f"scorers.{index} ({spec.name}): {exc}")
            broken.add(spec.name)
    for index, monitor in enumerate(cfg.monitors):
        if monitor.scorer in broken:
            continue
        where = f"monitors.{index}.params"
        if monitor.anchors is not None and not Path(monitor.anchors.dataset).is_file():
            problems.append(f"monitors.{index}.anchors.dataset: {monitor.anchors.dataset!r} is not a file "
                            f"(relative paths are read from {Path.cwd()})")
        missing = _files(monitor.params, where)
        problems += missing
        if missing:
            continue
        try:
            build_scorer(monitor, cfg)
        except ValueError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError):
                problems += [f"{where}.{_where(e['loc'])} ({monitor.name}): {e['msg']}" if e["loc"] else
                             f"{where} ({monitor.name}): {e['msg']}" for e in cause.errors()]
            else:
                problems.append(f"{where} ({monitor.name}): {exc}")
            continue
        if monitor.scorer == "rag_correctness" and not monitor.params.get("golden"):
            warnings.append(f"monitor {monitor.name!r} (rag_correctness) has no golden set: it scores only turns "
                            "that carry a reference answer and leaves every other turn unscored (set "
                            "params.golden to a JSONL of question/reference, or send reference= with each turn)")
    if problems:
        raise ConfigError(f"{path}: " + "; ".join(problems))
    return CheckedConfig(cfg, warnings)


@click.group(cls=SuggestingGroup)
def config() -> None:
    """Monitor configuration."""


@config.command("check")
@click.argument("path", type=click.Path(dir_okay=False))
def config_check(path: str) -> None:
    """Validate a monitor config YAML: the schema, every judge and scorer built from its params, the files they
    name. Errors name the field; warnings say which monitors will leave turns unscored. With REDIS_URL set and a
    budget configured, also each monitor's judge spend today, the day's forecast and its budget.

    \b
    Examples:
      vigil config check vigil.yaml
      vigil config check "$VIGIL_CONFIG"
    """
    checked = check_config(path)
    cfg = checked.config
    for warning in checked.warnings:
        click.echo(f"warning: {warning}", err=True)
    click.echo(f"{path}: ok ({len(cfg.judges)} judges, {len(cfg.scorers)} scorers, {len(cfg.monitors)} monitors, "
               f"{len(cfg.alerts)} alert rules)")
    if os.environ.get("REDIS_URL") and (cfg.budget or any(m.budget for m in cfg.monitors)):
        from vigil.worker.cli.judge import print_budgets

        print_budgets(cfg)  # with the workers' Redis: what the budgets look like today
