"""How a command body runs: every outcome mapped to vf's exit codes, never a traceback."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

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
