"""A mistyped command gets a did-you-mean: ``vigil reprot`` -> "No such command 'reprot'. Did you mean `vigil
report`?". The top-level table and every command group are ``SuggestingGroup``s."""

from __future__ import annotations

import difflib

import click

__all__ = ["SuggestingGroup", "suggestion"]


def suggestion(name: str, choices: list[str], *, path: str) -> str:
    """`` Did you mean `PATH X`?`` for the closest of ``choices``, or nothing when none is close."""
    close = difflib.get_close_matches(name, choices, n=1, cutoff=0.6)
    return f" Did you mean `{path} {close[0]}`?" if close else ""


class SuggestingGroup(click.Group):
    """A click group whose "No such command" names the closest command, with the group's full path."""

    def resolve_command(self, ctx: click.Context, args: list[str]):
        name = args[0] if args else ""
        unknown = bool(name) and not name.startswith("-") and self.get_command(ctx, name) is None
        if unknown and (close := suggestion(name, self.list_commands(ctx), path=ctx.command_path)):
            ctx.fail(f"No such command {name!r}.{close}")
        return super().resolve_command(ctx, args)
