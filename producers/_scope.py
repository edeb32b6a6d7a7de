"""One agent turn as a scope: the ``Monitor.turn`` context manager and the ``Monitor.trace`` decorator.

The scope records when the turn started and ended and, if the agent raised, the exception type in
``metadata["error.type"]`` (the exception itself propagates untouched). Code deeper in the call can add fields
through ``current_turn()``, e.g. the retrieved documents. Nothing here raises into agent code.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from contextvars import ContextVar, Token
from datetime import UTC, datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from producers.monitor import Monitor

__all__ = ["TurnScope", "current_turn", "traced"]

_current: ContextVar[TurnScope | None] = ContextVar("vigil_turn", default=None)


def current_turn() -> TurnScope | None:
    """The turn being recorded in this context (thread or task), if any."""
    return _current.get()


class TurnScope:
    """The fields of one turn in progress; captured when the ``with`` block ends."""

    def __init__(self, monitor: Monitor, fields: dict[str, Any]) -> None:
        self.monitor = monitor
        self.fields = fields
        self._token: Token[TurnScope | None] | None = None

    def set(self, **fields: Any) -> None:
        self.fields.update(fields)

    def __enter__(self) -> TurnScope:
        self.fields.setdefault("started_at", datetime.now(UTC))
        self._token = _current.set(self)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            if self._token is not None:
                _current.reset(self._token)
            self.fields.setdefault("ended_at", datetime.now(UTC))
            if kind is not None:
                metadata = self.fields.get("metadata")
                metadata = dict(metadata) if isinstance(metadata, dict) else {}
                metadata["error.type"] = kind.__qualname__
                self.fields["metadata"] = metadata
        except Exception:  # noqa: BLE001, S110 - never into agent code; capture still counts what it gets
            pass
        self.monitor.capture(self.fields)


def traced(monitor: Monitor, fn: Callable[..., Any], *, input_arg: str | None, fields: dict[str, Any]) -> Callable[..., Any]:
    """Wrap ``fn`` so each call is one turn.

    The input is the argument named ``input_arg`` (default: the first parameter other than self/cls); the output
    is the return value when it is a string, unless the function set ``output`` through ``current_turn()``.
    """
    signature = inspect.signature(fn)
    names = [name for name in signature.parameters if name not in ("self", "cls")]
    name = input_arg or (names[0] if names else None)

    def scope(args: tuple[Any, ...], kwargs: dict[str, Any]) -> TurnScope:
        turn = dict(fields)
        try:
            value = signature.bind_partial(*args, **kwargs).arguments.get(name) if name else None
        except TypeError:
            value = None
        if value is not None:
            turn["input"] = value
        return TurnScope(monitor, turn)

    def finish(turn: TurnScope, result: Any) -> Any:
        if isinstance(result, str):
            turn.fields.setdefault("output", result)
        return result

    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            with scope(args, kwargs) as turn:
                return finish(turn, await fn(*args, **kwargs))

        return async_wrapper

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with scope(args, kwargs) as turn:
            return finish(turn, fn(*args, **kwargs))

    return wrapper
