"""The ``vf`` command line: argument parsing and printing around the compiler facade."""

from __future__ import annotations

import atexit
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from vf import __version__
from vf.errors import EXIT_BUG, EXIT_INTERRUPTED, EXIT_STALE, VfError
from vf.ops.commands import register as register_operator_commands

if TYPE_CHECKING:
    from vf.pipeline import CompileRequest, CompileResult

F = TypeVar("F", bound=Callable[..., Any])


# The commands run in this process after which it may skip interpreter teardown.
_FAST_EXIT: set[str] = set()


def _debug() -> bool:
    return os.environ.get("VF_DEBUG", "") not in ("", "0")


def _run(action: Callable[[], int | None]) -> None:
    """Run a command body and map every outcome to vf's exit codes."""
    try:
        code = action() or 0
    except VfError as exc:
        if _debug():
            traceback.print_exc()
        click.echo(exc.render(), err=True)
        code = exc.exit_code
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        code = EXIT_INTERRUPTED
    except Exception as exc:
        if _debug():
            traceback.print_exc()
        click.echo(
            f"error[VF_INTERNAL] vf hit a bug: {type(exc).__name__}: {exc}\n"
            "  = fix: rerun with VF_DEBUG=1 and report the traceback with your graph",
            err=True,
        )
        code = EXIT_BUG
    sys.exit(code)


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
    from vf.pipeline import CompileRequest

    return CompileRequest(graph=graph, config=config, environments=envs, required_profiles=profiles)


def _compile(request: CompileRequest) -> CompileResult:
    from vf.pipeline import compile_project

    return compile_project(request)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
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
        from dataclasses import replace

        from vf.pipeline import compile_project
        from vf.write import TreeCheck, check_owned, staged_tree

        _FAST_EXIT.add("compile")  # nothing after a compile needs the heap torn down

        request = replace(_request(graph, config, envs, profiles), out=out)
        if check:
            check_owned(out)
            compared = TreeCheck(out)
            compile_project(request, sink=compared.add)
            diff = compared.diff()
            if diff:
                click.echo(diff, nl=False)
                click.echo(f"{out} is stale: run vf compile {graph} --out {out}", err=True)
                return EXIT_STALE
            click.echo(f"{out} is up to date", err=True)
            return 0
        # Each file goes to the staging tree as soon as it is made: the tree is never
        # held whole in memory, and it replaces OUT only once every file is written.
        with staged_tree(out, only=envs) as stage:
            result = compile_project(request, sink=stage.add)
        envs_done = ", ".join(p.environment for p in result.plans)
        click.echo(f"wrote {len(stage.files)} files to {out} ({envs_done})", err=True)
        return 0

    _run(body)


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
        from vf import yamlout
        from vf.pipeline import plan_json_text
        from vf.planir import plan_to_json

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

    _run(body)


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
        from vf.explain_formats import run_explain

        text, code = run_explain(_request(graph, config, envs, profiles), fmt=fmt)
        click.echo(text, nl=False)
        return code

    _run(body)


@cli.command("validate")
@_graph_options
@_FORMAT
def validate_command(
    *, graph: str, config: str | None, envs: tuple[str, ...], profiles: tuple[str, ...], fmt: str
) -> None:
    """Check GRAPH and its vf.yaml without writing anything."""

    def body() -> int:
        from vf.summary import json_text, problems_document, validate_document

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

    _run(body)


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

        from vf.diff import diff_project
        from vf.diff_report import RENDERERS

        # the committed chart's version carries on, as in a compile into OUT
        result = _compile(replace(_request(graph, config, envs, profiles), chart_from=out))
        report = diff_project(result, out=out, environments=envs, raw=raw)
        click.echo(RENDERERS[fmt](report), nl=False)
        return EXIT_STALE if report.changed else 0

    _run(body)


@cli.command("run-local")
@click.argument("graph", metavar="GRAPH")
@click.option("--config", default=None, metavar="FILE", help="vf.yaml (default: next to GRAPH).")
@click.option("--env", default=None, metavar="NAME", help="Environment to run (default: first).")
@click.option("--nats", "nats_url", default=None, metavar="URL", help="Use this NATS JetStream.")
@click.option("--redis", "redis_url", default=None, metavar="URL", help="Use this payload store.")
@click.option(
    "--stall-timeout",
    "stall",
    type=float,
    default=120.0,
    show_default=True,
    help="Exit 5 after this many seconds without progress (0: never).",
)
@click.option(
    "--gpu-policy",
    "gpu_policy",
    type=click.Choice(["shared", "strict"]),
    default="shared",
    show_default=True,
    help="shared: GPU replicas may share this machine's devices; strict: refuse unless "
    "every grant fits.",
)
def run_local_command(
    *,
    graph: str,
    config: str | None,
    env: str | None,
    nats_url: str | None,
    redis_url: str | None,
    stall: float,
    gpu_policy: str,
) -> None:
    """Run GRAPH on this machine: one process per replica, embedded NATS and Redis."""

    def body() -> int:
        from vf.run_local import RunLocalRequest, run_local

        request = RunLocalRequest(
            graph=graph,
            config=config,
            environment=env,
            nats_url=nats_url,
            redis_url=redis_url,
            stall_seconds=stall or None,
            gpu_policy=gpu_policy,
        )
        return run_local(request)

    _run(body)


@cli.command("run-tree")
@click.argument("tree", metavar="DIR", type=click.Path(path_type=Path))
@click.option("--env", "env", required=True, metavar="NAME", help="Environment of the tree to run.")
@click.option(
    "--renderer",
    type=click.Choice(["kustomize", "helm"]),
    default="kustomize",
    show_default=True,
    help="kustomize: kubectl kustomize DIR/overlays/ENV; helm: helm template DIR/chart "
    "with DIR/chart/values-ENV.yaml.",
)
@click.option(
    "--app",
    type=click.Path(path_type=Path),
    default=None,
    metavar="DIR",
    help="The folder the worker image copies to /app: the project with the node modules "
    "(default: the current directory).",
)
@click.option(
    "--secrets",
    type=click.Path(path_type=Path),
    default=None,
    metavar="FILE",
    help="YAML or JSON {secret-name: {key: value}} for the Secrets the pods reference.",
)
@click.option(
    "--sync",
    type=click.Choice(["kubectl", "argocd", "flux", "helm"]),
    default="kubectl",
    show_default=True,
    help="How objects are applied: all at once (kubectl, flux), by Argo CD sync waves, or "
    "as helm upgrade does (hooks after the rest); Argo CD, Flux and Helm prune last; a Job "
    "changed in place is refused as the API server refuses it.",
)
@click.option(
    "--timeout",
    type=float,
    default=300.0,
    show_default=True,
    help="Exit 5 when the flow is not done (BATCH) or not ready (REALTIME) by then.",
)
@click.option(
    "--for",
    "hold",
    type=float,
    default=0.0,
    show_default=True,
    metavar="SECONDS",
    help="REALTIME: keep the ready flow running this long before stopping it.",
)
@click.option(
    "--backoff",
    type=float,
    default=10.0,
    show_default=True,
    metavar="SECONDS",
    help="First restart back-off of crashed containers and failed Job pods (Kubernetes: 10).",
)
@click.option(
    "--run-dir",
    type=click.Path(path_type=Path),
    default=None,
    metavar="DIR",
    help="Keep pod logs, volumes and claims here (default: a temporary folder, removed).",
)
def run_tree_command(
    *,
    tree: Path,
    env: str,
    renderer: str,
    app: Path | None,
    secrets: Path | None,
    sync: str,
    timeout: float,
    hold: float,
    backoff: float,
    run_dir: Path | None,
) -> None:
    """Run the committed tree DIR as a cluster would: every pod a local process."""

    def body() -> int:
        from vf.runtree.command import RunTreeRequest, run_tree

        request = RunTreeRequest(
            tree=tree,
            env=env,
            renderer=renderer,
            app=app,
            secrets=secrets,
            sync=sync,
            timeout=timeout,
            hold=hold,
            backoff=backoff,
            run_dir=run_dir,
        )
        return run_tree(request)

    _run(body)


@cli.command("inventory")
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
        from vf.inventory import read_cluster
        from vf.inventory_write import fragment_text, write_inventory

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

    _run(body)


@cli.command("init")
@click.argument("directory", metavar="DIR", type=click.Path(path_type=Path))
@click.option("--name", default=None, metavar="NAME", help="Flow name (default: from DIR).")
def init_command(*, directory: Path, name: str | None) -> None:
    """Create a new pipeline project in DIR that compiles and runs as it is."""

    def body() -> int:
        from vf.scaffold import init_project

        written = init_project(directory, name=name)
        for path in written:
            click.echo(f"  {directory / path}")
        click.echo(f"created {directory}: try vf run-local {directory / 'graph.py'}", err=True)
        return 0

    _run(body)


register_operator_commands(cli)


def main() -> None:
    """The ``vf`` executable. After ``vf compile`` the process ends without tearing down the
    heap the compile built (tens of MiB of small objects at thousands of nodes): output is
    flushed and exit handlers run, then the operating system reclaims the memory at once."""
    try:
        cli.main(prog_name="vf")
    except SystemExit as done:
        if not _FAST_EXIT or not isinstance(done.code, int | None):
            raise
        sys.stdout.flush()
        sys.stderr.flush()
        atexit._run_exitfuncs()
        os._exit(done.code or 0)
