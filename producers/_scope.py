"""One agent turn as a scope: the ``Monitor.turn`` context manager and the ``Monitor.trace`` decorator.

The scope records when the turn started and ended. If the agent raised, the turn is still recorded, as Langfuse
and LangSmith record a failed generation: the exception's type and message go in ``metadata["error.type"]`` and
``metadata["error.message"]``, and the output is what was set before the error, or empty (the user got no answer, so
the scorers see an empty answer); the exception itself propagates untouched. A scope that ends without an output
and without an error is not a turn: it is counted as dropped (``no_output``) with a word in the log. Code deeper in
the call can add fields through ``current_turn()``, e.g. the retrieved documents. Nothing here raises into agent code.
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
    from .monitor import Monitor

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
                metadata["error.message"] = _message(exc)
                self.fields["metadata"] = metadata
                if self.fields.get("output") is None:
                    self.fields["output"] = ""
            elif self.fields.get("output") is None:
                from .monitor import DropReason  # here: monitor.py imports this module

                self.monitor._drop_now(  # the scope is the monitor's own helper
                    DropReason.NO_OUTPUT, "the turn ended without an output: call t.set(output=...) in the scope, "
                    "or return the answer from the traced function",
                )
                return
        except Exception:  # noqa: BLE001, S110 - never into agent code; capture still counts what it gets
            pass
        self.monitor.capture(self.fields)


def _message(exc: BaseException | None) -> str:
    try:
        return str(exc)[:1000]
    except Exception:  # a foreign __str__ may raise
        return ""


def traced(monitor: Monitor, fn: Callable[..., Any], *, input_arg: str | None, fields: dict[str, Any]) -> Callable[..., Any]:
    """Wrap ``fn`` so each call is one turn.

    The input is the argument named ``input_arg`` (default: the first parameter other than self/cls); the output
    is the return value (a string, or a response object or dict the shipper takes the answer text from), unless
    the function set ``output`` through ``current_turn()``. A call that raises is recorded with its error.
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
        if result is not None and turn.fields.get("output") is None:
            turn.fields["output"] = result
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
