"""``vf run-local`` and ``vf run-tree``: a flow, or its committed tree, run on this machine."""

from __future__ import annotations

from pathlib import Path

import click

from vf.commands.exits import run_body


@click.command("run-local")
@click.argument("graph", metavar="GRAPH")
@click.option("--config", default=None, metavar="FILE", help="vf.yaml (default: next to GRAPH).")
@click.option(
    "--env",
    default=None,
    metavar="NAME",
    help="Environment to run (default: the first vf.yaml lists).",
)
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
@click.option(
    "--run-dir",
    type=click.Path(path_type=Path),
    default=None,
    metavar="DIR",
    help="Keep the claim folders (DIR/claims/NAMESPACE/CLAIM) and a copy of the dead letters "
    "here, made if missing (default: a temporary folder, removed).",
)
@click.option(
    "--oversubscribe",
    is_flag=True,
    help="Start the run even when it cannot fit this machine (more than 64 worker processes "
    "a CPU core, or more than its available memory holds).",
)
@click.option(
    "--live",
    is_flag=True,
    help="Every 5 s, instead of the progress line, a table of each node's processed count, "
    "rate, p50/p95 processing time, dead letters and backlog (plain lines; one more at "
    "the end).",
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
    run_dir: Path | None,
    oversubscribe: bool,
    live: bool,
) -> None:
    """Run GRAPH on this machine: one process per replica, embedded NATS (and Redis where
    the environment has a payload store)."""

    def body() -> int:
        from vf.commands.run_local.command import RunLocalRequest, run_local

        request = RunLocalRequest(
            graph=graph,
            config=config,
            environment=env,
            nats_url=nats_url,
            redis_url=redis_url,
            stall_seconds=stall or None,
            gpu_policy=gpu_policy,
            run_dir=run_dir,
            oversubscribe=oversubscribe,
            live=live,
        )
        return run_local(request)

    run_body(body)


@click.command("run-tree")
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
@click.option(
    "--runtime",
    type=click.Choice(["auto", "podman", "process"]),
    default="auto",
    show_default=True,
    help="podman: the worker and provision containers run as OCI containers from the tree's "
    "image (security contexts, limits, mounts applied); process: every container a local "
    "process; auto: podman where it is installed.",
)
@click.option(
    "--no-build",
    is_flag=True,
    help="--runtime podman: run the worker image podman already holds instead of building "
    "it from --app (a missing one is an error).",
)
@click.option(
    "--oversubscribe",
    is_flag=True,
    help="Start the run even when it cannot fit this machine (more than 64 containers a CPU "
    "core, or more than its available memory holds).",
)
@click.option(
    "--without-crd",
    "without_crd",
    multiple=True,
    metavar="KIND",
    help="Run on a cluster that serves no such kind (ScaledObject, ServiceMonitor): its "
    "objects are refused as the API server refuses them, and each --sync reacts as its "
    "tool does (repeatable).",
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
    runtime: str,
    no_build: bool,
    oversubscribe: bool,
    without_crd: tuple[str, ...],
) -> None:
    """Run the committed tree DIR as a cluster would: worker pods as containers or processes."""

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
            runtime=runtime,
            build=not no_build,
            oversubscribe=oversubscribe,
            absent_kinds=frozenset(without_crd),
        )
        return run_tree(request)

    run_body(body)


def register(group: click.Group) -> None:
    group.add_command(run_local_command)
    group.add_command(run_tree_command)
