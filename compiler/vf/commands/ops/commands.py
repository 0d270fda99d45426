"""The operator commands, added to the ``vf`` group in one call.

They talk to a live broker and store, so their modules load nats-py and redis (about
0.2 s). A :class:`LazyGroup` imports a command's module only when that command runs or
help lists it, so ``vf compile`` and ``vf compile --check`` never pay for them.
"""

from __future__ import annotations

import importlib

import click

# command name -> (module, attribute) of the click command
OPERATOR_COMMANDS: dict[str, tuple[str, str]] = {
    "dlq": ("vf.commands.ops.cli_dlq", "dlq_group"),
    "runs": ("vf.commands.ops.cli_runs", "runs_command"),
    "teardown": ("vf.commands.ops.cli_runs", "teardown_command"),
    "debug": ("vf.commands.ops.cli_debug", "debug_group"),
}


class LazyGroup(click.Group):
    """A click group some of whose commands are imported on first use."""

    lazy: dict[str, tuple[str, str]]

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.lazy = {}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy and cmd_name not in self.commands:
            self.add_command(_load(*self.lazy[cmd_name]), cmd_name)
        return super().get_command(ctx, cmd_name)


def _load(module: str, attribute: str) -> click.Command:
    command = getattr(importlib.import_module(module), attribute)
    if not isinstance(command, click.Command):
        raise TypeError(f"{module}.{attribute} is not a click command")
    return command


def register(group: click.Group) -> None:
    if isinstance(group, LazyGroup):
        group.lazy.update(OPERATOR_COMMANDS)
        return
    for name, (module, attribute) in OPERATOR_COMMANDS.items():
        group.add_command(_load(module, attribute), name)
