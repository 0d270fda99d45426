"""``vf init`` and ``vf inventory``: a new project, and a cluster's GPU pool for its vf.yaml."""

from __future__ import annotations

from pathlib import Path

import click

from vf.commands.exits import run_body
from vf.errors import VfError


@click.command("inventory")
@click.option("--context", "context", required=True, metavar="NAME", help="kubectl context.")
@click.option(
    "--out", "out", type=click.Path(path_type=Path), default=None, help="vf.yaml to update."
)
@click.option("--env", "env", default=None, metavar="NAME", help="Environment to update.")
@click.option("--kubectl", "kubectl", default="kubectl", show_default=True, metavar="PATH")
def inventory_command(*, context: str, out: Path | None, env: str | None, kubectl: str) -> None:
    """Read a cluster's GPU nodes, Kubernetes version and DeviceClasses (read-only).

    With --out and --env, write them into that environment of vf.yaml, keeping everything
    else; otherwise print them.
    """

    def body() -> int:
        from vf.commands.inventory.read import read_cluster
        from vf.commands.inventory.write import fragment_text, write_inventory

        if out is not None and env is None:
            raise VfError(
                "VF_INVENTORY_ENV",
                "--out needs --env: which environment of the file gets the inventory",
                f"pass --env NAME, e.g. vf inventory --context {context} --out {out} --env prod",
            )
        inventory = read_cluster(context, kubectl=kubectl)
        if out is None or env is None:
            text, warnings = fragment_text(inventory)
            click.echo(text, nl=False)
        else:
            warnings = write_inventory(out, environment=env, inventory=inventory)
            click.echo(f"wrote {len(inventory.nodes)} GPU node(s) to {out} ({env})", err=True)
        for warning in warnings:
            click.echo(f"warning: {warning}", err=True)
        return 0

    run_body(body)


@click.command("init")
@click.argument("directory", metavar="DIR", type=click.Path(path_type=Path))
@click.option("--name", default=None, metavar="NAME", help="Flow name (default: from DIR).")
def init_command(*, directory: Path, name: str | None) -> None:
    """Create a new pipeline project in DIR that compiles and runs as it is."""

    def body() -> int:
        from vf.commands.scaffold import init_project

        written = init_project(directory, name=name)
        for path in written:
            click.echo(f"  {directory / path}")
        click.echo(f"created {directory}: try vf run-local {directory / 'graph.py'}", err=True)
        return 0

    run_body(body)


def register(group: click.Group) -> None:
    group.add_command(inventory_command)
    group.add_command(init_command)
