"""A user's Python scorer function: found by its ``function`` path or ``entry_point`` name, and called in a scorer
process (``isolation: process``). Light on purpose: a scorer process imports this, not the judge or the worker."""

from __future__ import annotations

import asyncio
import importlib
import inspect
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

from vigil.schemas import Turn
from vigil.schemas.user_scorers import PythonSpec

__all__ = ["ENTRY_POINT_GROUP", "in_process", "load_function"]

ENTRY_POINT_GROUP = "vigil.scorers"


def load_function(spec: PythonSpec) -> tuple[Any, tuple[str, ...]]:
    """The callable and what it adds to the version; a ValueError says why it cannot be had."""
    if spec.entry_point is not None:
        found = entry_points(group=ENTRY_POINT_GROUP, name=spec.entry_point)
        if not found:
            known = sorted(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))
            raise ValueError(f"no entry point {spec.entry_point!r} in group {ENTRY_POINT_GROUP} "
                             f"(installed: {', '.join(known) or 'none'})")
        point = next(iter(found))
        try:
            fn = point.load()
        except Exception as exc:  # noqa: BLE001 (whatever the import raises is the config's problem to name)
            raise ValueError(f"entry point {spec.entry_point!r} ({point.value}) cannot be imported: "
                             f"{type(exc).__name__}: {exc}") from None
        dist = point.dist
        extra = (point.value, f"{dist.name}=={dist.version}" if dist is not None else "")
    else:
        module, _, attr = (spec.function or "").partition(":")
        try:
            fn = importlib.import_module(module)
            for part in attr.split("."):
                fn = getattr(fn, part)
        except Exception as exc:  # noqa: BLE001
            raise ValueError(f"function {spec.function!r} cannot be imported: {type(exc).__name__}: {exc}") from None
        extra = ()
    if not callable(fn):
        raise ValueError(f"{spec.function or spec.entry_point!r} is not callable")  # noqa: TRY004 (a config error)
    return fn, extra


def in_process(spec_json: str) -> Callable[[str], Any]:
    """In an ``isolation: process`` scorer's process: the function, called with a turn sent as JSON."""
    spec = PythonSpec.model_validate_json(spec_json)
    fn, _ = load_function(spec)

    def call(turn_json: str) -> Any:
        value = fn(Turn.model_validate_json(turn_json), **spec.params)
        return asyncio.run(value) if inspect.iscoroutine(value) else value

    return call
