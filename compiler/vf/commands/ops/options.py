"""Options shared by the operator commands, and how their bodies run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from vf.commands.ops.output import FORMATS
from vf.commands.ops.select import selector_option

F = TypeVar("F", bound=Callable[..., Any])
DEFAULT_TIMEOUT = 10.0


def broker_options(func: F) -> F:
    """``--nats``, ``--timeout`` and ``--format``."""
    func = click.option(
        "--format",
        "fmt",
        type=click.Choice(FORMATS),
        default="table",
        show_default=True,
        help="Table for people, JSON for machines.",
    )(func)
    func = click.option(
        "--timeout",
        type=click.FloatRange(0.5, 600),
        default=DEFAULT_TIMEOUT,
        show_default=True,
        metavar="SECONDS",
        help="Fail (exit 3) when the broker has not answered within this.",
    )(func)
    func = click.option(
        "--nats",
        "nats_url",
        required=True,
        envvar="VF_NATS_URL",
        metavar="URL",
        help="The flow's NATS JetStream (default: $VF_NATS_URL).",
    )(func)
    return func


def redis_option(func: F) -> F:
    return click.option(
        "--redis",
        "redis_url",
        default=None,
        envvar="VF_BLOB_REDIS_URL",
        metavar="URL",
        help="The payload store, to read offloaded payloads (default: $VF_BLOB_REDIS_URL).",
    )(func)


def flow_option(func: F) -> F:
    return selector_option("flow", "The flow id.", required=True)(func)


def execute(action: Callable[[], int | None]) -> None:
    """Run a command body under vf's exit-code mapping (named errors, never a traceback)."""
    from vf.commands.exits import run_body

    run_body(action)
