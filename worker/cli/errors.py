"""Every ``vigil`` mistake as one line on stderr: what went wrong, in words, never with a password.

``one_line`` turns an exception into that line; ``redact`` hides the credentials of any URL in a text
(``redis://:secret@host`` -> ``redis://***@host``). The ``vigil`` group (``vigil.worker.cli``) calls them for every
command, so a command raises and never prints its own traceback.
"""

from __future__ import annotations

import re
from pathlib import Path

from vigil.worker.redact import redact

__all__ = ["check_kombu", "one_line", "redact"]

_MAX = 600


def _flat(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= _MAX else text[: _MAX - 1] + "…"


def _validation(exc) -> str:
    parts = []
    for error in exc.errors():
        where = ".".join(str(part) for part in error["loc"]) or "(top level)"
        parts.append(f"{where}: {error['msg']}")
    return "; ".join(parts)


def describe(exc: BaseException) -> str:
    """What went wrong, in words, for the exceptions a user's mistake or environment raises."""
    import redis
    import yaml
    from clickhouse_connect.driver.exceptions import DatabaseError, OperationalError
    from pydantic import ValidationError
    from vigil.worker.store.clickhouse import StoreError

    if isinstance(exc, StoreError):
        return str(exc)
    if isinstance(exc, redis.ConnectionError | redis.TimeoutError):
        return f"cannot reach Redis ({exc}); is REDIS_URL right and the server up?"
    if isinstance(exc, redis.AuthenticationError | redis.ResponseError):
        return f"Redis refused the request: {exc}"
    if isinstance(exc, OperationalError):
        return f"cannot reach ClickHouse: {exc}"
    if isinstance(exc, DatabaseError):
        text = str(exc)
        if "UNKNOWN_TABLE" in text or "Unknown table" in text:
            return ("the store has no vigil tables yet: run `vigil migrate` or start `vigil worker` (or point "
                    "VIGIL_HOME / CLICKHOUSE_DSN at the store you meant)")
        match = re.search(r"Code: \d+\. DB::Exception: (.*?)(?:\(for url|$)", text, re.DOTALL)
        return f"ClickHouse refused the query: {match.group(1) if match else text}"
    if isinstance(exc, yaml.YAMLError):
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        name = Path(mark.name).name if mark is not None and mark.name and not mark.name.startswith("<") else ""
        problem = getattr(exc, "problem", None) or str(exc)
        return f"{name + ': ' if name else ''}not valid YAML{where}: {problem}"
    if isinstance(exc, ValidationError):
        return f"invalid {exc.title}: {_validation(exc)}"
    if isinstance(exc, FileNotFoundError):
        return f"no such file: {exc.filename or exc}"
    if isinstance(exc, IsADirectoryError | PermissionError | NotADirectoryError):
        return f"{exc.strerror}: {exc.filename}"
    if isinstance(exc, TimeoutError):
        return f"timed out: {exc}" if str(exc) else "timed out"
    if isinstance(exc, ConnectionError | OSError):
        return f"{exc}"
    if isinstance(exc, ValueError | KeyError | LookupError):
        return str(exc.args[0]) if len(exc.args) == 1 else str(exc)
    return f"{type(exc).__name__}: {exc} (run `vigil --debug …` for the traceback)"


def one_line(exc: BaseException) -> str:
    """``describe(exc)`` on one line, credentials hidden."""
    return redact(_flat(describe(exc)))


def quiet_logs(debug: bool) -> None:
    """CLI commands log to stderr only (stdout stays for their output, e.g. JSON for ``| jq``), and only errors
    unless ``--debug``: the one-line error says what matters. ``vigil worker`` reconfigures for its own logs."""
    import logging
    import sys

    import structlog

    level = logging.DEBUG if debug else logging.CRITICAL
    structlog.configure(
        processors=[structlog.processors.add_log_level, structlog.processors.TimeStamper(fmt="iso", utc=True),
                    structlog.processors.format_exc_info, structlog.processors.JSONRenderer()],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=False,
    )
    for name in ("clickhouse_connect", "urllib3", "httpx", "httpcore", "openai", "celery", "kombu"):
        logging.getLogger(name).setLevel(level)


def check_kombu() -> None:
    """At the start of every process that consumes or publishes tasks: one line, exit non-zero, when the installed
    kombu no longer has what ``vigil.schemas.broker`` overrides (``kombu_drift``)."""
    import click
    import kombu
    from vigil.schemas.broker import kombu_drift

    if problems := kombu_drift():
        raise click.ClickException(f"kombu {kombu.__version__} changed what vigil's broker transport builds on "
                                   f"({'; '.join(problems)}): install kombu>=5.7,<5.8")
