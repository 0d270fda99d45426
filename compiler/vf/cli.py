"""The ``vf`` command line: argument parsing and printing around the compiler facade."""

from __future__ import annotations

import atexit
import gc
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from vf import __version__
from vf.collector import collector_paused
from vf.commands.cli_machine import register as register_machine_commands
from vf.commands.cli_project import register as register_project_commands
from vf.commands.exits import VfUsageError, run_body
from vf.commands.ops.commands import LazyGroup
from vf.commands.ops.commands import register as register_operator_commands
from vf.errors import EXIT_STALE, VfError

if TYPE_CHECKING:
    from vf.pipeline import CompileRequest, CompileResult, GraphLoad, Sink

F = TypeVar("F", bound=Callable[..., Any])


# The commands run in this process after which it may skip interpreter teardown.
_FAST_EXIT: set[str] = set()
# Set by ``main``: this process is the ``vf`` executable, not a caller of ``cli`` that lives on.
_EXECUTABLE: list[bool] = []


def _graph_options(func: F) -> F:
    func = click.option(
        "--env",
        "envs",
        multiple=True,
        metavar="NAME",
        help="Environment(s) to build (default: all).",
    )(func)
    func = click.option(
        "--config",
        type=str,
        default=None,
        metavar="FILE",
        help="vf.yaml to use (default: next to GRAPH).",
    )(func)
    func = click.option(
        "--require-profile",
        "profiles",
        multiple=True,
        metavar="CHANNEL=PROFILE",
        help="Require a messaging profile on a channel (repeatable); Unknown capabilities fail.",
    )(func)
    func = click.argument("graph", metavar="GRAPH")(func)
    return func


def _request(
    graph: str, config: str | None, envs: tuple[str, ...], profiles: tuple[str, ...]
) -> CompileRequest:
    with collector_paused():  # importing the compiler makes no garbage (vf.collector)
        from vf.pipeline import CompileRequest
    return CompileRequest(graph=graph, config=config, environments=envs, required_profiles=profiles)


def _compile_into(
    graph: str,
    config: str | None,
    envs: tuple[str, ...],
    profiles: tuple[str, ...],
    *,
    out: Path,
    sink: Sink,
    loaded: GraphLoad,
) -> tuple[str, ...]:
    """``vf compile``'s run of the compiler, whose graph ``loaded`` is already building;
    the environments it compiled."""
    from dataclasses import replace

    from vf.pipeline import compile_tree

    request = replace(_request(graph, config, envs, profiles), out=out)
    return compile_tree(request, sink=sink, loaded=loaded)


def _compile(request: CompileRequest) -> CompileResult:
    from vf.pipeline import compile_project

    return compile_project(request)


class VfGroup(LazyGroup):
    """vf's own group: click's usage errors, raised while the command line is parsed or a
    command is looked up, are shown as vf's named errors (``VF_USAGE``), exit code 2."""

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.UsageError as exc:
            raise _usage(exc) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            raise _usage(exc) from None


def _usage(exc: click.UsageError) -> click.UsageError:
    """``exc`` in vf's form; click's help screen for a bare group stays as it is."""
    if isinstance(exc, VfUsageError | click.exceptions.NoArgsIsHelpError):
        return exc
    return VfUsageError(exc)


@click.group(cls=VfGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="vf", message="%(prog)s %(version)s")
def cli() -> None:
    """vf compiles a pipeline graph module into a deterministic GitOps tree.

    GRAPH is path/to/graph.py or path/to/graph.py:factory (default factory: build_flow).
    """


@cli.command("compile")
@_graph_options
@click.option(
    "--out", "out", required=True, type=click.Path(path_type=Path), help="Output directory."
)
@click.option("--check", is_flag=True, help="Write nothing; exit 1 with a diff when OUT is stale.")
def compile_command(
    *,
    graph: str,
    config: str | None,
    envs: tuple[str, ...],
    profiles: tuple[str, ...],
    out: Path,
    check: bool,
) -> None:
    """Compile GRAPH into a Kustomize tree and plans under OUT."""

    def body() -> int:
        from vf.frontend.isolate import graph_loader
        from vf.tree.write import (
            MANIFEST,
            TreeCheck,
            check_owned,
            staged_tree,
            stray_files,
            stray_reason,
        )

        _FAST_EXIT.add("compile")  # nothing after a compile needs the heap torn down
        if _EXECUTABLE:  # nor collected: re-enabled, the collector would first scan all the
            gc.disable()  # compile built and kept (0.04 s at 5,000 nodes) in a process that ends

        if check:
            check_owned(out)
            compared = TreeCheck(out)
            # The graph builds in its child while this process imports the compiler.
            with graph_loader(graph) as loaded:
                _compile_into(
                    graph, config, envs, profiles, out=out, sink=compared.add, loaded=loaded
                )
            diff = compared.diff()
            if diff:
                click.echo(diff, nl=False)
                click.echo(f"{out} is stale: run vf compile {graph} --out {out}", err=True)
                return EXIT_STALE
            click.echo(f"{out} is up to date", err=True)
            return 0
        # Each file goes to the staging tree as soon as it is made: the tree is never
        # held whole in memory, and it replaces OUT only once every file is written.
        with staged_tree(out, only=envs) as stage, graph_loader(graph) as loaded:
            compiled = _compile_into(
                graph, config, envs, profiles, out=out, sink=stage.add, loaded=loaded
            )
        envs_done = ", ".join(compiled)
        click.echo(f"wrote {len(stage.files)} files to {out} ({envs_done})", err=True)
        for rel in stray_files(out, known=[*stage.files, MANIFEST]):
            click.echo(
                f"warning[VF_OUTPUT_STRAY] {rel}: vf did not write it, and "
                f"{stray_reason(rel)}\n  = fix: delete it or move it out of the tree",
                err=True,
            )
        return 0

    run_body(body)


@cli.command("plan")
@_graph_options
@click.option(
    "--format", "fmt", type=click.Choice(["json", "yaml"]), default="json", show_default=True
)
def plan_command(
    *, graph: str, config: str | None, envs: tuple[str, ...], profiles: tuple[str, ...], fmt: str
) -> None:
    """Print the plan of each environment."""

    def body() -> int:
        from vf.ir.plan import plan_to_json
        from vf.pipeline import plan_json_text
        from vf.textio import yamlout

        result = _compile(_request(graph, config, envs, profiles))
        documents = [plan_to_json(p) for p in result.plans]
        if fmt == "json":
            payload = documents[0] if len(documents) == 1 else documents
            click.echo(
                plan_json_text(payload)
                if isinstance(payload, dict)
                else plan_json_text({"plans": payload}),
                nl=False,
            )
        else:
            click.echo(yamlout.dump_all(documents), nl=False)
        return 0

    run_body(body)


_FORMATS = ["text", "json", "mermaid", "dot", "svg"]  # explain's; validate has the first two
_FORMAT = click.option(
    "--format", "fmt", type=click.Choice(_FORMATS[:2]), default="text", show_default=True
)


@cli.command("explain")
@_graph_options
@click.option("--format", "fmt", type=click.Choice(_FORMATS), default="text", show_default=True)
def explain_command(
    *, graph: str, config: str | None, envs: tuple[str, ...], profiles: tuple[str, ...], fmt: str
) -> None:
    """Summarise what GRAPH deploys in each environment, or draw its flow (mermaid, dot,
    svg: drawn by Graphviz's dot)."""

    def body() -> int:
        from vf.commands.explain.formats import run_explain

        text, code = run_explain(_request(graph, config, envs, profiles), fmt=fmt)
        click.echo(text, nl=False)
        return code

    run_body(body)


@cli.command("validate")
@_graph_options
@_FORMAT
def validate_command(
    *, graph: str, config: str | None, envs: tuple[str, ...], profiles: tuple[str, ...], fmt: str
) -> None:
    """Check GRAPH and its vf.yaml without writing anything."""

    def body() -> int:
        from vf.commands.explain.summary import json_text, problems_document, validate_document

        if fmt == "text":
            result = _compile(_request(graph, config, envs, profiles))
            click.echo(f"ok: {len(result.graph.nodes)} nodes, {len(result.plans)} environment(s)")
            return 0
        try:
            result = _compile(_request(graph, config, envs, profiles))
        except VfError as exc:
            click.echo(json_text(problems_document(exc)), nl=False)
            return exc.exit_code
        click.echo(json_text(validate_document(result)), nl=False)
        return 0

    run_body(body)


@cli.command("diff")
@_graph_options
@click.option(
    "--out", "out", required=True, type=click.Path(path_type=Path), help="The committed tree."
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "markdown"]),
    default="text",
    show_default=True,
)
@click.option("--raw", is_flag=True, help="Append the file-level YAML diff.")
def diff_command(
    *,
    graph: str,
    config: str | None,
    envs: tuple[str, ...],
    profiles: tuple[str, ...],
    out: Path,
    fmt: str,
    raw: bool,
) -> None:
    """Explain what compiling GRAPH would change in the tree at OUT; exit 1 if anything."""

    def body() -> int:
        from dataclasses import replace

        from vf.commands.diff.command import diff_project
        from vf.commands.diff.report import RENDERERS

        # the committed chart's version carries on, as in a compile into OUT
        result = _compile(replace(_request(graph, config, envs, profiles), chart_from=out))
        report = diff_project(result, out=out, environments=envs, raw=raw)
        click.echo(RENDERERS[fmt](report), nl=False)
        return EXIT_STALE if report.changed else 0

    run_body(body)


register_operator_commands(cli)
register_machine_commands(cli)
register_project_commands(cli)


def main() -> None:
    """The ``vf`` executable. After ``vf compile`` the process ends without tearing down the
    heap the compile built (tens of MiB of small objects at thousands of nodes): output is
    flushed and exit handlers run, then the operating system reclaims the memory at once."""
    _EXECUTABLE.append(True)
    try:
        cli.main(prog_name="vf")
    except SystemExit as done:
        if not _FAST_EXIT or not isinstance(done.code, int | None):
            raise
        sys.stdout.flush()
        sys.stderr.flush()
        atexit._run_exitfuncs()
        os._exit(done.code or 0)
