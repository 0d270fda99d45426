"""The operator commands, added to the ``vf`` group in one call."""

from __future__ import annotations

import click

from vf.commands.ops.cli_debug import debug_group
from vf.commands.ops.cli_dlq import dlq_group
from vf.commands.ops.cli_runs import runs_command, teardown_command


def register(group: click.Group) -> None:
    for command in (dlq_group, runs_command, teardown_command, debug_group):
        group.add_command(command)
