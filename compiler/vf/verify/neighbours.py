"""Flows of one repository that would collide in a namespace of one cluster.

Every object vf emits carries the flow id in its name, except the Namespace, whose owner is
the flow that asks vf to label it (``pod_security.namespace_labels``). Two trees therefore
collide only when they put the same flow id into the same namespace *of the same cluster*,
or both label that Namespace there (ADR 0160).

Environment names say nothing about clusters (``deploy/us`` and ``deploy/eu`` both have a
``prod``); what does is where a tree sends each environment: vf.yaml's
``environments.<env>.cluster``, else the Argo CD Application's destination (``name``, or a
``server`` other than the controller's own cluster), else the Flux Kustomization's
``kubeConfig``. The rule, for each environment of this compile and each plan of another
tree with the same flow id and namespace (or both labelling the namespace):

- both trees name the cluster, and the names differ: no collision, nothing said;
- both name the same cluster: refused (``VF_FLOW_COLLISION``), unless the plans are the
  same (a copy of the same flow: one warning);
- either says nothing: a warning (``VF_FLOW_NEIGHBOUR``) naming the other tree and how to
  say which cluster each is for.

The other trees are looked for where the repository keeps them (``neighbour_trees``); one
that cannot be read is a warning naming the file, never a failure.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from vf.errors import Problem, raise_if
from vf.ir.delivery import GitOps
from vf.ir.plan import Plan, plan_to_json
from vf.verify.neighbour_trees import (
    Neighbour,
    Place,
    argocd_place,
    find_trees,
    read_neighbour,
)

Warn = Callable[[str], object]
Note = tuple[str, str]  # what was found, and the fix
UNREAD_FIX = "restore the file from version control, or remove the tree if it is not vf's"
CLUSTER_HOW = (
    "give each environment its cluster's name in vf.yaml (environments.<env>.cluster), or a "
    "GitOps destination (gitops.environments.<env>.server, cluster or kubeconfig_secret)"
)
CLUSTER_FIX = (
    "nothing, if the trees are for different clusters; to say so, and be told when they "
    f"are not, {CLUSTER_HOW}"
)


def own_place(plan: Plan, gitops: GitOps | None) -> Place:
    """Where this compile sends ``plan``'s environment, in the terms a tree records."""
    if gitops is None:
        return Place(cluster=plan.cluster)
    dest = gitops.destination(plan.environment)
    argocd = (
        None
        if gitops.argocd is None
        else argocd_place(name=dest.cluster, server=dest.server or gitops.argocd.server)
    )
    flux = dest.kubeconfig_secret if gitops.flux is not None else None
    return Place(cluster=plan.cluster, argocd=argocd, flux=flux)


def check_neighbours(
    plans: Sequence[Plan], *, out: Path, gitops: GitOps | None = None, warn: Warn
) -> None:
    """Raise when a flow of this compile collides with another vf tree of the repository;
    warn where that cannot be known, and about trees that cannot be read."""
    search = find_trees(out, None if gitops is None else gitops.path)
    problems: list[Problem] = []
    notes = [(note, "compile from a folder nearer to the trees") for note in search.notes]
    for tree in search.trees:
        neighbour = read_neighbour(tree)
        notes += [(f"{note}; this tree was not compared", UNREAD_FIX) for note in neighbour.notes]
        for plan in plans:
            problems += _compare(plan, own_place(plan, gitops), neighbour, notes)
    for note, fix in notes:
        warn(f"warning[VF_FLOW_NEIGHBOUR] {note}\n  = fix: {fix}\n")
    raise_if(problems)


def _compare(plan: Plan, place: Place, neighbour: Neighbour, notes: list[Note]) -> list[Problem]:
    problems: list[Problem] = []
    for path, other in neighbour.plans:
        if other.get("namespace") != plan.namespace:
            continue
        same_flow = other.get("flow_id") == plan.flow_id
        labels = (other.get("security") or {}).get("namespace_labels")
        two_owners = bool(labels) and bool(plan.security.namespace_labels) and not same_flow
        if not (same_flow or two_owners):
            continue
        theirs = neighbour.places.get(str(other.get("environment")), Place())
        same = place.same_cluster(theirs)
        where = f"{path} (environment '{other.get('environment')}')"
        if same is False:
            continue
        if same_flow and _copy(plan, other):
            cluster = "the same cluster" if same else "a cluster neither tree names"
            copy = (
                f"environment '{plan.environment}': {where} is a copy of this plan of flow "
                f"'{plan.flow_id}' for {cluster}; harmless while only one of the two is synced"
            )
            also = "" if same else f", or, if the trees are for different clusters, {CLUSTER_HOW}"
            notes.append((copy, "remove the copy you do not deploy" + also))
        elif same is None:
            notes.append((_unknown(plan, where, same_flow=same_flow), CLUSTER_FIX))
        else:
            problems.append(
                _same_flow(plan, where=where, place=place)
                if same_flow
                else _two_owners(plan, where=where, place=place)
            )
    return problems


def _copy(plan: Plan, other: dict[str, Any]) -> bool:
    return plan_to_json(plan) == other


def _unknown(plan: Plan, where: str, *, same_flow: bool) -> str:
    what = (
        f"flow '{plan.flow_id}' is also deployed"
        if same_flow
        else "another flow also labels the namespace"
    )
    return (
        f"environment '{plan.environment}': {what} to namespace '{plan.namespace}' by {where}; "
        "neither tree says which cluster it is for, so vf cannot tell whether they collide"
    )


def _same_flow(plan: Plan, *, where: str, place: Place) -> Problem:
    return Problem(
        code="VF_FLOW_COLLISION",
        what=f"environment '{plan.environment}': flow '{plan.flow_id}' is also deployed to "
        f"namespace '{plan.namespace}' of the same cluster ({place.describe()}) by another "
        "tree with a different plan, so every object name is shared and each sync "
        "overwrites and prunes the other's",
        remedy="give one of the flows its own flow_id (Flow(flow_id=...)) or namespace, or, "
        f"if the trees are for different clusters, {CLUSTER_HOW}",
        where=where,
    )


def _two_owners(plan: Plan, *, where: str, place: Place) -> Problem:
    return Problem(
        code="VF_FLOW_COLLISION",
        what=f"environment '{plan.environment}': namespace '{plan.namespace}' of the same "
        f"cluster ({place.describe()}) is labelled by two flows; both would own the one "
        "Namespace object",
        remedy="set pod_security.namespace_labels in one flow's vf.yaml only (its owner), "
        f"or, if the trees are for different clusters, {CLUSTER_HOW}",
        where=where,
    )
