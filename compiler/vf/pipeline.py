"""The compiler facade: graph module + vf.yaml → verified plans → output tree, in memory."""

from __future__ import annotations

import gc
import itertools
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from vf import names
from vf.config.targets import Targets, find_config, load_targets, select_environments
from vf.emit.delivery import delivery_files
from vf.emit.helm.version import read_previous
from vf.emit.kustomize.tree import EnvObjects, kustomize_files
from vf.emit.readme import README, tree_readme
from vf.errors import VfError
from vf.frontend.graph_checks import graph_module_classes
from vf.frontend.isolate import load_graph
from vf.ir.graph import Graph
from vf.ir.plan import Plan
from vf.plan.admission import parse_profile_flags
from vf.plan.planner import plan_environment
from vf.render.diagram import EnvView, env_view
from vf.render.objects import (
    render_components,
    render_generated_components,
    render_plan,
    render_shapes,
)
from vf.textio.filetext import Chunks, FileText, whole
from vf.textio.jsontext import json_chunks, json_text
from vf.verify.checks import verify
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
    chart_from: Path | None = None  # the tree whose chart version counts on (default: out)


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


def resolve_flow_id(graph: Graph, targets: Targets) -> str:
    """``Flow(flow_id=…)``, else ``vf.yaml``'s ``flow_id``, else the graph file's stem."""
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


def compile_project(
    request: CompileRequest, *, sink: Sink | None = None, loaded: GraphLoad | None = None
) -> CompileResult:
    """Run every stage; raise a VfError listing every problem, never write anything.

    Each file of the tree goes to ``sink(path, text)`` as soon as it is made, so a large
    tree never has to be held whole; without a sink the files are kept in ``tree``.
    ``loaded``: the wait for ``request.graph`` from ``graph_loader``, when the caller
    started building the graph before it imported this module.
    """
    # The compile builds many small, long-lived objects and no cycles worth collecting:
    # pausing the collector saves a large share of the time at thousands of nodes.
    enabled = gc.isenabled()
    gc.disable()
    tree: dict[str, str] = {}

    def keep(path: str, text: FileText) -> None:
        tree[path] = whole(text)

    try:
        load = loaded or (lambda: load_graph(request.graph))
        return _compile(request, load, sink=sink or keep, tree=tree)
    finally:
        if enabled:
            gc.enable()


def _compile(
    request: CompileRequest, load: GraphLoad, *, sink: Sink, tree: dict[str, str]
) -> CompileResult:
    graph, path = load()
    targets = select_environments(
        load_targets(find_config(path, request.config)), request.environments
    )
    note = graph_module_classes(graph)
    if note is not None:
        (request.warn or sys.stderr.write)(note)
    flags = parse_profile_flags(request.required_profiles)
    flow_id = resolve_flow_id(graph, targets)
    plans: list[Plan] = []
    objects: dict[str, list[dict[str, Any]]] = {}
    views: list[EnvView] = []
    for declared in targets.environments:
        env = declared
        if request.images_optional and env.default_image is None:
            env = replace(env, default_image=UNUSED_IMAGE)
        plan = plan_environment(graph, env, flow_id=flow_id, flags=flags)
        rendered = render_plan(plan)
        document = verify(plan, rendered, enforce_admission=request.enforce_admission)
        plans.append(plan)
        objects[env.name] = rendered
        views.append(env_view(document))
        sink(f"plan/{env.name}.json", Chunks(json_chunks(document)))
        del document  # the plan's JSON form is as large as the plan: free it now
    if request.out is not None:
        check_neighbours(plans, out=request.out)
    current = request.chart_from or request.out
    previous = read_previous(current) if current is not None else None
    kustomize = kustomize_files(
        {
            plan.environment: EnvObjects(
                namespace=plan.namespace,
                objects=objects[plan.environment],
                components=render_components(plan),
                generated=render_generated_components(plan),
                shapes=render_shapes(plan),
            )
            for plan in plans
        }
    )
    delivery = delivery_files(plans=plans, objects=objects, gitops=targets.gitops, chart=previous)
    paths = []
    for file, text in itertools.chain(kustomize, delivery):
        sink(file, text)
        paths.append(file)
    sink(README, tree_readme(views, gitops=targets.gitops, paths=frozenset(paths)))
    return CompileResult(
        graph=graph, targets=targets, plans=tuple(plans), objects=objects, tree=tree
    )


def plan_json_text(document: dict[str, Any]) -> str:
    return json_text(document)
