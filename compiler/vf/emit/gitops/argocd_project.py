"""An Argo CD AppProject locked to one flow (``gitops.argocd.app_project: true``): its
repository, its environments' destinations, and exactly the kinds its trees hold."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from vf import names
from vf.ir.delivery import ArgoCD, GitOps
from vf.ir.plan import Plan
from vf_runtime.labels import FLOW_LABEL, MANAGED_BY, MANAGER, PART_OF

Obj = dict[str, Any]
_CLUSTER_KINDS = frozenset({"Namespace", "PriorityClass"})


def _group(obj: Mapping[str, Any]) -> str:
    return str(obj["apiVersion"]).rpartition("/")[0]


def _kinds(objects: Mapping[str, Sequence[Obj]], *, cluster: bool) -> list[Obj]:
    found = {
        (_group(o), str(o["kind"]))
        for objs in objects.values()
        for o in objs
        if (o["kind"] in _CLUSTER_KINDS) == cluster
    }
    if cluster:  # CreateNamespace=true creates the Namespace even when the tree has none
        found.add(("", "Namespace"))
    return [{"group": group, "kind": kind} for group, kind in sorted(found)]


def app_project(
    gitops: GitOps, *, argocd: ArgoCD, plans: Sequence[Plan], objects: Mapping[str, Sequence[Obj]]
) -> Obj:
    """Only this flow's repository, namespaces and kinds: a locked-down project admits the
    Namespace (CreateNamespace), ScaledObjects and ResourceClaimTemplates it needs, no more."""
    destinations = []
    for plan in plans:
        dest = gitops.destination(plan.environment)
        where = {"name": dest.cluster} if dest.cluster else {"server": dest.server or argocd.server}
        destinations.append({**where, "namespace": plan.namespace})
    flow = names.label_value(plans[0].flow_id)
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "AppProject",
        "metadata": {
            "name": argocd.project,
            "namespace": argocd.namespace,
            "labels": {
                MANAGED_BY: MANAGER,
                PART_OF: flow,
                FLOW_LABEL: flow,
            },
        },
        "spec": {
            "description": f"vf flow {plans[0].flow_id}",
            "sourceRepos": [gitops.repo_url],
            "destinations": destinations,
            "clusterResourceWhitelist": _kinds(objects, cluster=True),
            "namespaceResourceWhitelist": _kinds(objects, cluster=False),
        },
    }
