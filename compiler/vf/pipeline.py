"""The compiler facade: graph module + vf.yaml → verified plans → output tree, in memory."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from vf import names
from vf.collector import collector_paused
from vf.config.targets import Targets, find_config, load_targets, select_environments
from vf.emit.delivery import chart_info, flux_values_maps, gitops_files
from vf.emit.helm.chart import chart_files
from vf.emit.helm.version import read_previous
from vf.emit.kustomize.tree import EnvObjects, kustomize_files
from vf.emit.manifests import manifest_files, reads_manifests
from vf.emit.prerequisites import missing_references, prerequisites
from vf.emit.readme import README, tree_readme
from vf.emit.retired import retired_files, retired_shards
from vf.emit.shards import environment_shards, shard_files
from vf.errors import VfError
from vf.frontend.graph_checks import graph_module_classes
from vf.frontend.isolate import load_graph
from vf.ir.graph import Graph
from vf.ir.plan import Plan
from vf.memo import compiling
from vf.plan.admission import parse_profile_flags
from vf.plan.planner import plan_environment
from vf.render.diagram import EnvView, env_view
from vf.render.objects import (
    as_rendered,
    render_components,
    render_generated_components,
    render_plan,
    render_shapes,
)
from vf.textio.filetext import Chunks, FileText, whole
from vf.textio.jsontext import json_chunks, json_text
from vf.verify.checks import plan_document, verify
from vf.verify.neighbours import check_neighbours

UNUSED_IMAGE = "vf.invalid/no-image-needed:local"


@dataclass(frozen=True, kw_only=True)
class CompileRequest:
    """What the user asked for: the graph target, an optional config and environments."""

    graph: str
    config: str | None = None
    environments: tuple[str, ...] = ()
    required_profiles: tuple[str, ...] = ()
    enforce_admission: bool = True
    # ``vf run-local`` runs nodes as local processes: a node without an image gets a
    # placeholder instead of VF_CONFIG_NO_IMAGE.
    images_optional: bool = False
    warn: Callable[[str], object] | None = None  # None: to standard error
    out: Path | None = None  # where the tree goes: flows beside it must not collide with it
    # the committed tree: its chart version counts on, its shards retire (default: out)
    chart_from: Path | None = None


@dataclass(frozen=True, kw_only=True)
class CompileResult:
    """Every stage's output: the graph, the targets, a plan per environment, and the tree
    (path → text; empty when the files went to a sink instead)."""

    graph: Graph
    targets: Targets
    plans: tuple[Plan, ...]
    objects: dict[str, list[dict[str, Any]]]
    tree: dict[str, str]


Sink = Callable[[str, FileText], None]
GraphLoad = Callable[[], tuple[Graph, Path]]


@dataclass(kw_only=True)
class _Planned:
    """The stages before the tree: a verified plan, its objects and its view per environment."""

    targets: Targets
    plans: list[Plan]
    objects: dict[str, list[dict[str, Any]]]
    views: list[EnvView]
    # the nodes with partition_by: their replica count is part of the run id and the
    # topology in every environment, whatever it is (ADR 154)
    partitioned: frozenset[str] = frozenset()


def resolve_flow_id(graph: Graph, targets: Targets) -> str:
    """``Flow(flow_id=…)``, else ``vf.yaml``'s ``flow_id``, else the graph file's stem; the
    two, when both are set, must agree (each names every object of the flow)."""
    if graph.flow_id and targets.flow_id and graph.flow_id != targets.flow_id:
        raise VfError(
            "VF_CONFIG_FLOW_ID_CONFLICT",
            f"vf.yaml's flow_id {targets.flow_id!r} differs from the graph's "
            f"Flow(flow_id={graph.flow_id!r})",
            "set the flow id in one place (drop flow_id from vf.yaml or from Flow(...)), "
            "or make the two equal",
            targets.flow_id_at,
        )
    explicit = graph.flow_id or targets.flow_id
    if explicit is not None:
        if not names.FLOW_ID.match(explicit):
            raise VfError(
                "VF_GRAPH_FLOW_ID",
                f"flow_id {explicit!r} is not a valid flow id",
                "use 1-63 lowercase letters, digits or '-', starting and ending alnum",
            )
        return explicit
    derived = names.slug(graph.source_stem)[:63].strip("-")
    return derived or "flow"


def compile_project(request: CompileRequest) -> CompileResult:
    """Run every stage and keep each one's output, the tree too; raise a VfError listing
    every problem, never write anything."""
    tree: dict[str, str] = {}

    def keep(path: str, text: FileText) -> None:
        tree[path] = whole(text)

    with collector_paused(), compiling():
        graph, path = load_graph(request.graph)
        planned = _plan(request, graph, path, sink=keep)
        plans = tuple(planned.plans)  # the tree frees its own list of them
        _emit(request, planned, sink=keep)
    return CompileResult(
        graph=graph, targets=planned.targets, plans=plans, objects=planned.objects, tree=tree
    )


def compile_tree(
    request: CompileRequest, *, sink: Sink, loaded: GraphLoad | None = None
) -> tuple[str, ...]:
    """Run every stage, handing each file of the tree to ``sink(path, text)`` as soon as it
    is made; return the environments compiled. Nothing is kept for the caller: the graph
    goes once every environment is planned and the plans once the files that need them are
    made, so a large compile never holds its graph, plans, objects and chart at once.
    ``loaded``: the wait for ``request.graph`` from ``graph_loader``, when the caller
    started building the graph before it imported this module."""
    with collector_paused(), compiling():
        graph, path = (loaded or (lambda: load_graph(request.graph)))()
        planned = _plan(request, graph, path, sink=sink)
        del graph
        plan_warnings(planned.plans, warn=request.warn or sys.stderr.write)
        environments = tuple(plan.environment for plan in planned.plans)
        _emit(request, planned, sink=sink)
    return environments


def _plan(request: CompileRequest, graph: Graph, path: Path, *, sink: Sink) -> _Planned:
    """Plan, check and render each environment, writing its plan file on the way."""
    targets = select_environments(
        load_targets(find_config(path, request.config)), request.environments
    )
    note = graph_module_classes(graph)
    if note is not None:
        (request.warn or sys.stderr.write)(note)
    flags = parse_profile_flags(request.required_profiles)
    flow_id = resolve_flow_id(graph, targets)
    partitioned = frozenset(n.name for n in graph.nodes if n.partition_by is not None)
    planned = _Planned(targets=targets, plans=[], objects={}, views=[], partitioned=partitioned)
    for declared in targets.environments:
        env = declared
        if request.images_optional and env.default_image is None:
            env = replace(env, default_image=UNUSED_IMAGE)
        plan = plan_environment(graph, env, flow_id=flow_id, flags=flags)
        # The plan's JSON form is about as large as the plan: it is written and let go
        # before the objects are made. A plan that breaks its schema is not written.
        document, problems = plan_document(plan)
        planned.views.append(env_view(document))
        if not problems:
            sink(f"plan/{env.name}.json", Chunks(json_chunks(document)))
        del document
        rendered = render_plan(plan)
        verify(plan, rendered, found=problems, enforce_admission=request.enforce_admission)
        planned.plans.append(plan)
        planned.objects[env.name] = rendered
    if request.out is not None:
        check_neighbours(
            planned.plans,
            out=request.out,
            gitops=targets.gitops,
            warn=request.warn or sys.stderr.write,
        )
    return planned


def plan_warnings(plans: list[Plan], *, warn: Callable[[str], object]) -> None:
    """Each plan warning once, naming the environments that have it (``vf explain`` shows
    them with the rest of the plan; a compile shows just these)."""
    found: dict[str, list[str]] = {}
    for plan in plans:
        for warning in plan.warnings:
            envs = found.setdefault(warning, [])
            if plan.environment not in envs:
                envs.append(plan.environment)
    for warning, envs in found.items():
        warn(f"warning ({', '.join(envs)}): {warning}\n")


def _emit(request: CompileRequest, planned: _Planned, *, sink: Sink) -> None:
    """Every file beside the plans. What the Kustomize tree and ``gitops/`` take from the
    plans is taken first and ``planned.plans`` emptied: the chart, the largest working set
    of the compile, then needs only the objects, and the Kustomize files come after it."""
    current = request.chart_from or request.out
    previous = read_previous(current) if current is not None else None
    plans, objects = planned.plans, planned.objects
    kustomize = kustomize_files(
        {
            plan.environment: EnvObjects(
                namespace=plan.namespace,
                objects=objects[plan.environment],
                components=as_rendered(render_components(plan), objects[plan.environment]),
                generated=as_rendered(render_generated_components(plan), objects[plan.environment]),
                shapes=render_shapes(plan),
            )
            for plan in plans
        }
    )
    needs = {
        env: prerequisites(objs, env=env) + missing_references(objs)
        for env, objs in objects.items()
    }
    shards = environment_shards(planned.targets.gitops, objects)
    retired = retired_shards(planned.targets.gitops, objects, shards=shards, out=current)
    gitops = gitops_files(
        planned.targets.gitops, plans=plans, objects=objects, shards=shards, retired=retired
    )
    values_maps = flux_values_maps(planned.targets.gitops, plans=plans)
    paths = []
    for file, text in gitops:
        sink(file, text)
        paths.append(file)
    info = chart_info(plans, previous=previous, partitioned=planned.partitioned)
    plans.clear()
    counts = {env: len(objs) for env, objs in objects.items()}
    rendered = manifest_files(objects) if reads_manifests(planned.targets.gitops) else ()
    sharding = itertools.chain(shard_files(shards), retired_files(retired))
    files = itertools.chain(chart_files(objects, info=info), kustomize, rendered, sharding)
    for file, made in files:
        text = made
        follows = values_maps.get(file)
        if follows is not None:  # the ConfigMap a Flux HelmRelease reads these values from
            text = whole(made)
            sink(follows[0], follows[1](text))
            paths.append(follows[0])
        sink(file, text)
        paths.append(file)
    readme = tree_readme(
        planned.views,
        gitops=planned.targets.gitops,
        paths=frozenset(paths),
        needs=needs,
        counts=counts,
        shards=shards,
        retired=retired,
    )
    sink(README, readme)


def plan_json_text(document: dict[str, Any]) -> str:
    return json_text(document)
