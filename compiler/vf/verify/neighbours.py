"""Flows of one repository that would collide in a namespace.

Every object vf emits carries the flow id in its name, except the Namespace, whose owner is
the flow that asks vf to label it (``pod_security.namespace_labels``). Two flows therefore
collide only when they share a flow id in a namespace, or when both claim that Namespace.
vf looks for them among the other vf trees beside the output folder (``deploy/a`` and
``deploy/b``), reading only their committed plans, and takes environments of the same name
for the same cluster.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from vf.errors import Problem, raise_if
from vf.ir.plan import Plan

MANIFEST = ".vf-manifest.json"


def _neighbour_plans(out: Path) -> Iterator[tuple[Path, dict[str, Any]]]:
    here = out.resolve()
    parent = here.parent
    if not parent.is_dir():
        return
    for tree in sorted(parent.iterdir()):
        if tree == here or not (tree / MANIFEST).is_file():
            continue
        for path in sorted((tree / "plan").glob("*.json")):
            try:
                plan = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue  # not a plan vf can read: vf diff and --check report such trees
            if isinstance(plan, dict):
                yield path, plan


def check_neighbours(plans: Sequence[Plan], *, out: Path) -> None:
    """Raise when a flow of this compile collides with a vf tree beside ``out``."""
    problems: list[Problem] = []
    for path, other in _neighbour_plans(out):
        for plan in plans:
            # the same environment name and namespace: taken for the same cluster
            if (other.get("environment"), other.get("namespace")) != (
                plan.environment,
                plan.namespace,
            ):
                continue
            where = f"{path} (environment '{other.get('environment')}')"
            if other.get("flow_id") == plan.flow_id:
                problems.append(_same_flow(plan, where=where))
            labels = (other.get("security") or {}).get("namespace_labels")
            if labels and plan.security.namespace_labels:
                problems.append(_two_owners(plan, where=where))
    raise_if(problems)


def _same_flow(plan: Plan, *, where: str) -> Problem:
    return Problem(
        code="VF_FLOW_COLLISION",
        what=f"environment '{plan.environment}': flow '{plan.flow_id}' is also deployed to "
        f"namespace '{plan.namespace}' by another tree, so every object name is shared and "
        "each sync overwrites and prunes the other's",
        remedy="give one of the flows its own flow_id (Flow(flow_id=...)) or namespace",
        where=where,
    )


def _two_owners(plan: Plan, *, where: str) -> Problem:
    return Problem(
        code="VF_FLOW_COLLISION",
        what=f"environment '{plan.environment}': namespace '{plan.namespace}' is labelled by "
        "two flows; both would own the one Namespace object",
        remedy="set pod_security.namespace_labels in one flow's vf.yaml only (its owner)",
        where=where,
    )
