"""The flow after a change, with what changed marked: the diagram ``vf diff`` puts in a
pull request comment.

A node is changed when its box says something new or its own workload differs in any
environment both trees have: names, the run id and what its neighbours set (reader and
parent replica counts) aside, so a change is marked where it is made. A channel arrow is
marked when it is new or its profile or admission verdict changed.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vf.render.diagram import Diagram, diagram_of, env_view
from vf.render.diagram_syntax import Highlight
from vf.tree.read import committed_environments, committed_plan

Obj = Mapping[str, Any]
# Workload fields that carry names or digests of names: a new run changes them all.
_NAMED = frozenset(
    {"name", "replicas_configmap", "headless_service", "pdb", "labels", "selector", "config_hash"}
)
# Variables a run or a neighbour sets: a change shows where it is made, not downstream.
_DERIVED_VARIABLES = frozenset(
    {"VF_RUN_ID", "VF_BLOB_READERS", "VF_PARENT_REPLICAS", "VF_HAS_CHILDREN"}
)


@dataclass(frozen=True, kw_only=True)
class FlowChange:
    diagram: Diagram
    highlight: Highlight
    removed_nodes: tuple[str, ...]
    removed_arrows: tuple[tuple[str, str], ...]


def _plans(files: Mapping[str, str], environments: Collection[str]) -> dict[str, Obj]:
    wanted = [env for env in committed_environments(files) if env in environments]
    found = {env: committed_plan(files, env=env) for env in wanted}
    return {env: plan for env, plan in found.items() if plan is not None}


def _signatures(plan: Obj) -> dict[str, str]:
    """Each node's workload and GPU grant as text, without the names a run gives them."""
    grants = {
        str(g.get("node")): {k: v for k, v in g.items() if k != "claim_template"}
        for g in ((plan.get("gpu") or {}).get("grants") or [])
        if isinstance(g, Mapping)
    }
    found = {}
    for workload in plan.get("workloads") or []:
        if not isinstance(workload, Mapping):
            continue
        record = {k: v for k, v in workload.items() if k not in _NAMED}
        env = record.get("env")
        if isinstance(env, Mapping):
            record["env"] = {k: v for k, v in env.items() if k not in _DERIVED_VARIABLES}
        node = str(workload.get("node"))
        record["gpu_grant"] = grants.get(node)
        found[node] = json.dumps(record, sort_keys=True, default=str)
    return found


def _changed_nodes(old: Sequence[Obj], new: Sequence[Obj]) -> set[str]:
    changed: set[str] = set()
    for before, after in zip(old, new, strict=True):
        a, b = _signatures(before), _signatures(after)
        changed.update(node for node in set(a) & set(b) if a[node] != b[node])
    return changed


def flow_change(
    committed: Mapping[str, str], fresh: Mapping[str, str], *, environments: Collection[str]
) -> FlowChange | None:
    """The fresh flow's diagram in ``environments``, marked against the committed one
    (None when the fresh tree has no plan there)."""
    old_plans = _plans(committed, environments)
    new_plans = _plans(fresh, environments)
    if not new_plans:
        return None
    diagram = diagram_of([env_view(p) for p in new_plans.values()])
    common = [env for env in new_plans if env in old_plans]
    if not common:  # a first commit, or no environment in common: everything is new
        every = frozenset(b.node for b in diagram.boxes)
        arrows = frozenset((a.source, a.target) for a in diagram.arrows)
        return FlowChange(
            diagram=diagram,
            highlight=Highlight(added=every, arrows=arrows),
            removed_nodes=(),
            removed_arrows=(),
        )
    old = diagram_of([env_view(old_plans[env]) for env in common])
    new = diagram_of([env_view(new_plans[env]) for env in common])
    old_boxes = {b.node: b for b in old.boxes}
    old_arrows = {(a.source, a.target): a for a in old.arrows}
    added = {b.node for b in diagram.boxes if b.node not in old_boxes}
    changed = {b.node for b in new.boxes if b.node in old_boxes and old_boxes[b.node] != b}
    changed |= _changed_nodes([old_plans[e] for e in common], [new_plans[e] for e in common])
    new_keys = {(a.source, a.target) for a in diagram.arrows}
    marked = {(a.source, a.target) for a in new.arrows if old_arrows.get((a.source, a.target)) != a}
    surviving = {b.node for b in diagram.boxes}
    return FlowChange(
        diagram=diagram,
        highlight=Highlight(
            added=frozenset(added),
            changed=frozenset(changed - added),
            arrows=frozenset(marked | (new_keys - set(old_arrows))),
        ),
        removed_nodes=tuple(sorted(set(old_boxes) - surviving)),
        removed_arrows=tuple(
            key
            for key in old_arrows
            if key not in new_keys and key[0] in surviving and key[1] in surviving
        ),
    )
