"""How a command body runs: every outcome mapped to vf's exit codes, never a traceback."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import IO, Any

import click

from vf.errors import EXIT_BUG, EXIT_INTERRUPTED, VfError


def debug() -> bool:
    return os.environ.get("VF_DEBUG", "") not in ("", "0")


def _print_traceback() -> None:
    import traceback

    traceback.print_exc()


def run_body(action: Callable[[], int | None]) -> None:
    """Run a command body and map every outcome to vf's exit codes."""
    try:
        code = action() or 0
    except VfError as exc:
        if debug():
            _print_traceback()
        click.echo(exc.render(), err=True)
        code = exc.exit_code
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        code = EXIT_INTERRUPTED
    except Exception as exc:
        if debug():
            _print_traceback()
        click.echo(
            f"error[VF_INTERNAL] vf hit a bug: {type(exc).__name__}: {exc}\n"
            "  = fix: rerun with VF_DEBUG=1 and report the traceback with your graph",
            err=True,
        )
        code = EXIT_BUG
    sys.exit(code)


class VfUsageError(click.UsageError):
    """A usage error click found (an unknown option, a missing argument), shown as vf shows
    every error: ``error[VF_USAGE] …`` and the fix, with click's exit code 2."""

    def __init__(self, source: click.UsageError) -> None:
        super().__init__(source.message, source.ctx)
        self.problem = usage_problem(source)

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(self.problem.render(), file=file, err=file is None)


def usage_problem(exc: click.UsageError) -> VfError:
    """``exc`` as a named error: the command, click's message, and how to get it right."""
    ctx = exc.ctx
    command = ctx.command_path if ctx is not None else "vf"
    message = exc.format_message()
    hints: list[str] = []
    param = exc.param if isinstance(exc, click.MissingParameter) else None
    if isinstance(param, click.Option) and param.envvar:
        names = [param.envvar] if isinstance(param.envvar, str) else list(param.envvar)
        option = max(param.opts, key=len)
        metavar = f" {param.metavar}" if param.metavar else ""
        message = f"{message.rstrip('.')} (or the environment variable {' / '.join(names)})."
        hints.append(f"pass {option}{metavar}, or set {names[0]} in the environment")
    if ctx is not None:
        hints.append(f"usage: {ctx.get_usage().removeprefix('Usage: ').strip()}")
    listed = "its commands" if isinstance(exc.cmd, click.Group) else "each option and argument"
    hints.append(f"`{command} --help` explains {listed}")
    return VfError("VF_USAGE", f"{command}: {message}", "; ".join(hints))
