"""An Argo CD AppProject locked to one environment of a flow (``gitops.argocd.app_project:
true``): its repository, the environment's destination, and exactly the kinds its tree
holds. One per environment, so each environment's root Application manages its own."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from vf import names
from vf.ir.delivery import ArgoCD, GitOps
from vf.ir.plan import Plan
from vf.textio.objects import Obj
from vf_runtime.labels import ENVIRONMENT_LABEL, FLOW_LABEL, MANAGED_BY, MANAGER, PART_OF

_CLUSTER_KINDS = frozenset({"Namespace", "PriorityClass"})


def _group(obj: Mapping[str, Any]) -> str:
    return str(obj["apiVersion"]).rpartition("/")[0]


def _kinds(objects: Sequence[Obj], *, cluster: bool) -> list[Obj]:
    found = {
        (_group(o), str(o["kind"])) for o in objects if (o["kind"] in _CLUSTER_KINDS) == cluster
    }
    if cluster:  # CreateNamespace=true creates the Namespace even when the tree has none
        found.add(("", "Namespace"))
    return [{"group": group, "kind": kind} for group, kind in sorted(found)]


def app_project(
    gitops: GitOps, *, argocd: ArgoCD, plan: Plan, objects: Sequence[Obj], name: str
) -> Obj:
    """Only this flow's repository, the environment's namespace and its kinds: a locked-down
    project admits the Namespace (CreateNamespace), ScaledObjects and ResourceClaimTemplates
    it needs, no more. Its sync wave, -1, puts it before the Application in the root's sync,
    so a widened project is in place when the Application's own sync needs it."""
    dest = gitops.destination(plan.environment)
    where = {"name": dest.cluster} if dest.cluster else {"server": dest.server or argocd.server}
    flow = names.label_value(plan.flow_id)
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "AppProject",
        "metadata": {
            "name": name,
            "namespace": argocd.namespace,
            "labels": {
                MANAGED_BY: MANAGER,
                PART_OF: flow,
                ENVIRONMENT_LABEL: names.label_value(plan.environment),
                FLOW_LABEL: flow,
            },
            "annotations": {"argocd.argoproj.io/sync-wave": "-1"},
        },
        "spec": {
            "description": f"vf flow {plan.flow_id}, environment {plan.environment}",
            "sourceRepos": [gitops.repo_url],
            "destinations": [{**where, "namespace": plan.namespace}],
            "clusterResourceWhitelist": _kinds(objects, cluster=True),
            "namespaceResourceWhitelist": _kinds(objects, cluster=False),
        },
    }
