"""The ``vigil`` command: one table of subcommands, each in its own module of this package.

A subcommand's module is imported only when it runs (or when ``--help`` lists it), so ``vigil report`` never pays
for Celery or the demo, and the demo's room (``vigil.worker.demo``) is reached only through ``vigil demo``.

Every mistake, in any command, ends here as one line on stderr and a non-zero exit (``_Table.main``); ``--debug``
shows the traceback instead. Nothing printed here carries a password (``vigil.worker.cli.errors.redact``).
"""

from __future__ import annotations

import importlib
import importlib.abc
import os
import sys

import click
from vigil.worker.cli.suggest import SuggestingGroup

__all__ = ["COMMANDS", "import_hiding", "main"]


def import_hiding(module: str, hidden: str) -> None:
    """From now on, ``module`` loads (when first imported) with ``hidden`` unimportable, where ``module`` imports
    ``hidden`` only if it is installed, for output no vigil process produces (each caller says which). ``hidden``
    stays importable before and after, for whoever needs it, and is not hidden once imported (it then costs nothing).
    A start-up cost paid again by each of the many short ``vigil`` processes. Nothing is imported here: a command that
    never imports ``module`` never pays for it."""
    if module not in sys.modules:
        sys.meta_path.insert(0, _Hiding(module, hidden))


class _Hiding(importlib.abc.MetaPathFinder):
    """Finds ``module`` with the finders after it and loads it with ``hidden`` unimportable (``import_hiding``)."""

    def __init__(self, module: str, hidden: str) -> None:
        self.module, self.hidden = module, hidden

    def find_spec(self, name, path, target=None):
        if name != self.module:
            return None
        sys.meta_path.remove(self)  # once: the module is found here or nowhere
        spec = next(filter(None, (finder.find_spec(name, path, target) for finder in sys.meta_path
                                  if hasattr(finder, "find_spec"))), None)
        if spec is not None and spec.loader is not None and self.hidden not in sys.modules:
            spec.loader = _HidingLoader(spec.loader, self.hidden)
        return spec


class _HidingLoader(importlib.abc.Loader):
    """``loader``, with ``hidden`` unimportable while the module runs; the module keeps ``loader`` as its own."""

    def __init__(self, loader: importlib.abc.Loader, hidden: str) -> None:
        self.loader, self.hidden = loader, hidden

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        sys.modules[self.hidden] = None  # type: ignore[assignment]  # `import hidden` raises ImportError: the fallback
        try:
            module.__spec__.loader = module.__loader__ = self.loader
            self.loader.exec_module(module)
        finally:
            del sys.modules[self.hidden]


# structlog imports its console renderer's pretty tracebacks whenever rich is installed (rich.traceback,
# rich.pretty, pygments: ~0.04 CPU-s). vigil renders every log line as JSON with plain-text tracebacks
# (structlog.processors.format_exc_info) and `--debug` shows Python's own traceback: neither uses them. First, before
# anything in the process imports structlog; the report's tables still import rich.
import_hiding("structlog", "rich")
# redis-py 8 imports the OpenTelemetry metrics SDK (and psutil) to learn whether it is installed, for its own metrics,
# which only `redis.observability.get_observability_instance().init(...)` turns on and vigil never does (~0.035 CPU-s at
# each start of a process that imports redis; the worker still imports the SDK for its own metrics).
import_hiding("redis.observability.providers", "opentelemetry.sdk.metrics")

# name -> "module:attribute"; the order is the order of ``vigil --help``.
COMMANDS: dict[str, str] = {
    "demo": "vigil.worker.demo:demo_command",
    "worker": "vigil.worker.cli.worker:worker_command",
    "intake": "vigil.worker.cli.intake:intake_command",
    "beat": "vigil.worker.cli.worker:beat_command",
    "migrate": "vigil.worker.cli.worker:migrate_command",
    "config": "vigil.worker.cli.config:config",
    "emit": "vigil.worker.cli.emit:emit_command",
    "feedback": "vigil.worker.cli.feedback:feedback",
    "score": "vigil.worker.cli.score:score_command",
    "probe": "vigil.worker.cli.probe:probe_command",
    "report": "vigil.worker.cli.report:report",
    "show": "vigil.worker.cli.show:show_command",
    "explain-trace": "vigil.worker.cli.explain:explain_command",
    "compare": "vigil.worker.cli.compare:compare",
    "review": "vigil.worker.cli.review:review",
    "alerts": "vigil.worker.cli.alerts:alerts",
    "judge": "vigil.worker.cli.judge:judge",
    "eval": "vigil.worker.cli.eval:eval_command",
    "keys": "vigil.worker.cli.keys:keys",
}


class _Table(SuggestingGroup):
    """A click group whose commands come from ``COMMANDS``, imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        target = COMMANDS.get(name)
        if target is None:
            return None
        module, attribute = target.split(":")
        return getattr(importlib.import_module(module), attribute)

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        """Run a command; any mistake becomes one line on stderr and exit != 0 (a usage mistake exits 2)."""
        from vigil.worker.cli.errors import one_line, redact

        argv = list(sys.argv[1:] if args is None else args)
        debug = "--debug" in argv[: next((i for i, a in enumerate(argv) if a in COMMANDS), len(argv))] or \
            bool(os.environ.get("VIGIL_DEBUG"))
        try:
            code = super().main(argv, prog_name or "vigil", complete_var, standalone_mode=False, **extra)
        except click.UsageError as exc:
            where = exc.ctx.command_path if exc.ctx else "vigil"
            _fail(f"{where}: {redact(' '.join(exc.format_message().split()))} (see `{where} --help`)", 2)
        except click.ClickException as exc:
            _fail(redact(" ".join(exc.format_message().split())), exc.exit_code)
        except (click.Abort, KeyboardInterrupt):
            _fail("interrupted", 130)
        except Exception as exc:
            if debug:
                raise
            _fail(one_line(exc), 1)
        sys.exit(code if isinstance(code, int) else 0)


def _fail(message: str, code: int) -> None:
    click.echo(f"vigil: error: {message}", err=True)
    sys.exit(code)


def _version(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    """``vigil --version``: the installed distribution's version, looked up only when asked (importlib.metadata and
    the scan of site-packages cost ~0.07 CPU-s, which click's ``version_option`` would pay at every start)."""
    if not value or ctx.resilient_parsing:
        return
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("vigil")
    except PackageNotFoundError:
        found = "unknown"
    click.echo(f"vigil {found}")
    ctx.exit()


@click.group(cls=_Table, context_settings={"help_option_names": ["-h", "--help"]},
             epilog="""\b
Examples:
  vigil demo                                  the whole pipeline on this machine, then its report
  vigil report                                scores per monitor from the store in $VIGIL_HOME (default .vigil)
  vigil report --serve                        the same as a live page on http://127.0.0.1:8765
  vigil config check vigil.yaml               validate a monitor config, building every scorer and judge
  VIGIL_CONFIG=vigil.yaml vigil worker        score turns as they arrive
  vigil show TRACE_ID                         one turn with all its scores, steps and reasons
  vigil review                                label turns in the browser: http://127.0.0.1:8766/review/""")
@click.option("--version", "-V", is_flag=True, expose_value=False, is_eager=True, callback=_version,
              help="Show the version and exit.")
@click.option("--debug", is_flag=True, envvar="VIGIL_DEBUG",
              help="Show the full traceback when a command fails (and the drivers' own logs).")
def main(debug: bool) -> None:
    """vigil: online quality monitoring for LLM agents."""
    from vigil.worker.cli.errors import quiet_logs

    quiet_logs(debug)
