"""Emit ``gitops/``: an Argo CD Application and a Flux Kustomization per environment.

Both point at ``overlays/<env>`` in the repository the tree is committed to. Deployments
that KEDA scales carry no ``spec.replicas``; the Applications also ignore that field on
them, so a controller never reports the autoscaler's work as drift.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from vf import names, yamlout
from vf.delivery_config import ArgoCD, Flux, GitOps
from vf.planir import Plan

Obj = dict[str, Any]
Tree = dict[str, str]
ARGOCD_API = "argoproj.io/v1alpha1"
FLUX_KUSTOMIZE_API = "kustomize.toolkit.fluxcd.io/v1"
FLUX_SOURCE_API = "source.toolkit.fluxcd.io/v1"
KUSTOMIZE_API = "kustomize.config.k8s.io/v1beta1"
_COMMIT = re.compile(r"^[0-9a-f]{40}\Z")
ARGOCD_SYNC_OPTIONS = (
    "ApplyOutOfSyncOnly=true",
    "CreateNamespace=true",
    "PruneLast=true",
    "RespectIgnoreDifferences=true",
    "ServerSideApply=true",
)


def overlay_path(gitops: GitOps, *, env: str) -> str:
    """The overlay of ``env`` relative to the repository root."""
    return f"overlays/{env}" if gitops.path == "." else f"{gitops.path}/overlays/{env}"


def scaled_deployments(objects: Sequence[Mapping[str, Any]]) -> list[str]:
    """Names of the Deployments a ScaledObject targets (KEDA owns their replicas)."""
    return sorted(
        str(o["spec"]["scaleTargetRef"]["name"]) for o in objects if o["kind"] == "ScaledObject"
    )


def emit_gitops(
    gitops: GitOps | None, *, plans: Sequence[Plan], objects: Mapping[str, Sequence[Obj]]
) -> Tree:
    """The ``gitops/argocd`` and ``gitops/flux`` files; nothing without ``gitops:``."""
    if gitops is None:
        return {}
    tree: Tree = {}
    if gitops.argocd is not None:
        files = {
            f"application-{plan.environment}.yaml": _application(
                gitops,
                argocd=gitops.argocd,
                plan=plan,
                scaled=scaled_deployments(objects[plan.environment]),
            )
            for plan in plans
        }
        tree.update(_folder("gitops/argocd", files=files))
    if gitops.flux is not None:
        files = {
            f"kustomization-{plan.environment}.yaml": _flux_kustomization(
                gitops, flux=gitops.flux, plan=plan
            )
            for plan in plans
        }
        if gitops.flux.source is None:
            files["gitrepository.yaml"] = _git_repository(
                gitops, flux=gitops.flux, flow_id=plans[0].flow_id
            )
        tree.update(_folder("gitops/flux", files=files))
    return tree


def _folder(root: str, *, files: Mapping[str, Obj]) -> Tree:
    """One object per file, and a kustomization.yaml so ``kubectl apply -k`` takes them all."""
    tree = {f"{root}/{name}": yamlout.dump(obj) for name, obj in files.items()}
    index = {"apiVersion": KUSTOMIZE_API, "kind": "Kustomization", "resources": sorted(files)}
    tree[f"{root}/kustomization.yaml"] = yamlout.dump(index)
    return tree


def _labels(plan: Plan) -> dict[str, str]:
    flow = names.label_value(plan.flow_id)
    return {
        "app.kubernetes.io/managed-by": "vf",
        "app.kubernetes.io/part-of": flow,
        "vf.dev/environment": names.label_value(plan.environment),
        "vf.dev/flow": flow,
    }


def _application(gitops: GitOps, *, argocd: ArgoCD, plan: Plan, scaled: list[str]) -> Obj:
    dest = gitops.destination(plan.environment)
    destination: Obj = {"namespace": plan.namespace}
    if dest.cluster is not None:
        destination["name"] = dest.cluster
    else:
        destination["server"] = dest.server or argocd.server
    sync: Obj = {"syncOptions": list(ARGOCD_SYNC_OPTIONS)}
    if argocd.auto_sync:
        sync["automated"] = {"prune": True, "selfHeal": True}
    spec: Obj = {
        "project": argocd.project,
        "source": {
            "repoURL": gitops.repo_url,
            "targetRevision": gitops.revision,
            "path": overlay_path(gitops, env=plan.environment),
        },
        "destination": destination,
        "syncPolicy": sync,
    }
    if scaled:
        spec["ignoreDifferences"] = [
            {
                "group": "apps",
                "kind": "Deployment",
                "name": name,
                "jsonPointers": ["/spec/replicas"],
            }
            for name in scaled
        ]
    return {
        "apiVersion": ARGOCD_API,
        "kind": "Application",
        "metadata": {
            "name": names.k8s_name(plan.flow_id, plan.environment),
            "namespace": argocd.namespace,
            "labels": _labels(plan),
            "annotations": {"argocd.argoproj.io/compare-options": "ServerSideDiff=true"},
            "finalizers": ["resources-finalizer.argocd.argoproj.io"],
        },
        "spec": spec,
    }


def _source_name(flow_id: str) -> str:
    return names.k8s_name(flow_id, "deploy")


def _flux_kustomization(gitops: GitOps, *, flux: Flux, plan: Plan) -> Obj:
    source: Obj
    if flux.source is not None:
        source = {"kind": flux.source.kind, "name": flux.source.name}
        if flux.source.namespace is not None:
            source["namespace"] = flux.source.namespace
    else:
        source = {"kind": "GitRepository", "name": _source_name(plan.flow_id)}
    spec: Obj = {
        "interval": flux.interval,
        "path": "./" + overlay_path(gitops, env=plan.environment),
        "prune": True,
        "sourceRef": source,
        "timeout": "5m",
        # A batch Job is healthy only once it has finished, which can outlast any timeout.
        "wait": plan.flow_type != "batch",
    }
    secret = gitops.destination(plan.environment).kubeconfig_secret
    if secret is not None:
        spec["kubeConfig"] = {"secretRef": {"name": secret}}
    return {
        "apiVersion": FLUX_KUSTOMIZE_API,
        "kind": "Kustomization",
        "metadata": {
            "name": names.k8s_name(plan.flow_id, plan.environment),
            "namespace": flux.namespace,
            "labels": _labels(plan),
        },
        "spec": spec,
    }


def _git_repository(gitops: GitOps, *, flux: Flux, flow_id: str) -> Obj:
    revision = gitops.revision
    if _COMMIT.match(revision):
        ref = {"commit": revision}
    elif revision.startswith("refs/"):
        ref = {"name": revision}
    else:
        ref = {"branch": revision}
    flow = names.label_value(flow_id)
    return {
        "apiVersion": FLUX_SOURCE_API,
        "kind": "GitRepository",
        "metadata": {
            "name": _source_name(flow_id),
            "namespace": flux.namespace,
            "labels": {
                "app.kubernetes.io/managed-by": "vf",
                "app.kubernetes.io/part-of": flow,
                "vf.dev/flow": flow,
            },
        },
        "spec": {"interval": "1m", "ref": ref, "url": gitops.repo_url},
    }
