"""A Flux HelmRelease per environment, for teams that deliver the chart instead of the
overlays (``gitops.flux.helm_release: true``)."""

from __future__ import annotations

from typing import Any

from vf import names
from vf.ir.delivery import Flux, GitOps
from vf.ir.plan import Plan
from vf_runtime.constants import BATCH
from vf_runtime.labels import ENVIRONMENT_LABEL, FLOW_LABEL, MANAGED_BY, MANAGER, PART_OF

Obj = dict[str, Any]
FLUX_HELM_API = "helm.toolkit.fluxcd.io/v2"


def flux_path(gitops: GitOps, *, flux: Flux, below: str) -> str:
    """A path in the source: an OCI artifact holds the tree itself (``flux push artifact
    --path=<out>``), a Git repository or bucket the tree at ``gitops.path``."""
    oci = flux.source is not None and flux.source.kind == "OCIRepository"
    return "./" + (below if oci or gitops.path == "." else f"{gitops.path}/{below}")


def helm_release(gitops: GitOps, *, flux: Flux, plan: Plan, source: Obj) -> Obj:
    """The chart at ``<path>/chart`` with ``values.yaml`` then ``values-<env>.yaml`` (ADR
    150), released into the environment's namespace, rebuilt only when the chart's version
    changes; a BATCH release never waits for its Jobs, and no failure uninstalls a flow."""
    chart = flux_path(gitops, flux=flux, below="chart")
    flow = names.label_value(plan.flow_id)
    batch = plan.flow_type == BATCH
    spec: Obj = {
        "interval": flux.interval,
        "releaseName": names.k8s_name(plan.flow_id, limit=53),
        "targetNamespace": plan.namespace,
        "storageNamespace": plan.namespace,
        "chart": {
            "spec": {
                "chart": chart,
                "sourceRef": source,
                # source-controller replaces values.yaml with the merge of this list
                "valuesFiles": [f"{chart}/values.yaml", f"{chart}/values-{plan.environment}.yaml"],
                # the chart's version increases with every change of the chart, and only then
                "reconcileStrategy": "ChartVersion",
            }
        },
        "install": {"createNamespace": True, **_on_failure(batch=batch, upgrade=False)},
        "upgrade": _on_failure(batch=batch, upgrade=True),
        "timeout": flux.timeout,
    }
    flux_access(spec, flux, gitops, environment=plan.environment)
    return {
        "apiVersion": FLUX_HELM_API,
        "kind": "HelmRelease",
        "metadata": {
            "name": names.k8s_name(plan.flow_id, plan.environment),
            "namespace": flux.namespace,
            "labels": {
                MANAGED_BY: MANAGER,
                PART_OF: flow,
                ENVIRONMENT_LABEL: names.label_value(plan.environment),
                FLOW_LABEL: flow,
            },
        },
        "spec": spec,
    }


def _on_failure(*, batch: bool, upgrade: bool) -> Obj:
    """What a failed install or upgrade does. An install is retried in place, never
    remediated (helm-controller's only install remediation is an uninstall, which deletes
    the broker, the store and every Job). A REALTIME upgrade rolls back; a BATCH upgrade is
    retried in place, since a rollback would re-create the previous generation's Jobs."""
    action: Obj = {}
    if batch:
        action["disableWaitForJobs"] = True  # a Job is Ready to Helm only once it has finished
    if upgrade and not batch:
        action["remediation"] = {"retries": 3, "strategy": "rollback"}
    else:
        action["strategy"] = {"name": "RetryOnFailure", "retryInterval": "2m"}
    return action


def flux_access(spec: dict[str, Any], flux: Flux, gitops: GitOps, *, environment: str) -> None:
    """Who Flux applies as, and where: its service account and a remote cluster's kubeconfig."""
    if flux.service_account is not None:
        spec["serviceAccountName"] = flux.service_account
    secret = gitops.destination(environment).kubeconfig_secret
    if secret is not None:
        spec["kubeConfig"] = {"secretRef": {"name": secret}}
