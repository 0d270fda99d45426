"""A Flux HelmRelease per environment, for teams that deliver the chart instead of the
overlays (``gitops.flux.helm_release: true``), and the ConfigMap its values come from.

Every environment's release builds the same chart, whose version counts only what every
environment reads; each release reads its own environment's values from a ConfigMap that
holds ``values-<env>.yaml`` (``valuesFrom``), so a change of one environment's values
upgrades that environment's release and no other (ADR 188).
"""

from __future__ import annotations

from typing import Any

from vf import names
from vf.errors import VfError
from vf.ir.delivery import Flux, GitOps
from vf.ir.plan import Plan
from vf.textio import yamlout
from vf.textio.objects import Obj
from vf_runtime.labels import ENVIRONMENT_LABEL, FLOW_LABEL, MANAGED_BY, MANAGER, PART_OF

FLUX_HELM_API = "helm.toolkit.fluxcd.io/v2"
VALUES_KEY = "values.yaml"
# helm-controller watches a ConfigMap a release reads only when it carries this label
# (its default --watch-configs-label-selector); without it a change waits for `interval`
WATCH_LABEL = "reconcile.fluxcd.io/watch"
CONFIG_MAP_BYTES = 1024 * 1024  # the API server refuses a ConfigMap whose data is larger


def values_file(env: str) -> str:
    """The ``gitops/flux`` file of the ConfigMap that holds ``env``'s values."""
    return f"configmap-{env}-values.yaml"


def values_name(flow_id: str, *, env: str) -> str:
    return names.k8s_name(flow_id, env, "values")


def flux_path(gitops: GitOps, *, flux: Flux, below: str) -> str:
    """A path in the source: an OCI artifact holds the tree itself (``flux push artifact
    --path=<out>``), a Git repository or bucket the tree at ``gitops.path``."""
    oci = flux.source is not None and flux.source.kind == "OCIRepository"
    return "./" + (below if oci or gitops.path == "." else f"{gitops.path}/{below}")


def helm_release(gitops: GitOps, *, flux: Flux, plan: Plan, source: Obj) -> Obj:
    """The chart at ``<path>/chart`` as it is, rebuilt only when its version changes, with
    the environment's values from its ConfigMap (ADR 188), released into the environment's
    namespace; a release never waits for its Jobs, and no failure uninstalls a flow."""
    chart = flux_path(gitops, flux=flux, below="chart")
    flow = names.label_value(plan.flow_id)
    # a Job is Ready to Helm only once it has finished; a rollback re-creates the previous
    # release's Jobs, which runs a finite producer's items again
    jobs = any(w.kind == "Job" for w in plan.workloads)
    spec: Obj = {
        "interval": flux.interval,
        "releaseName": names.k8s_name(plan.flow_id, limit=53),
        "targetNamespace": plan.namespace,
        "storageNamespace": plan.namespace,
        "chart": {
            "spec": {
                "chart": chart,
                "sourceRef": source,
                # the version increases with every change of what every environment reads,
                # and only then; no valuesFiles: the chart's own values.yaml, as it is
                "reconcileStrategy": "ChartVersion",
            }
        },
        # helm-controller upgrades when these values' digest changes (or the version)
        "valuesFrom": [
            {
                "kind": "ConfigMap",
                "name": values_name(plan.flow_id, env=plan.environment),
                "valuesKey": VALUES_KEY,
            }
        ],
        # the overlays' deliveries correct drift; without this helm-controller never looks
        # (it compares the cluster with the release's manifest by a server-side dry-run,
        # only the fields the chart sets: KEDA's replicas are not among them)
        "driftDetection": {"mode": "enabled"},
        # the chart's test Pod checks that the broker and the store answer (ADR 196); run
        # after every install and upgrade, a failure is remediated as the action's is
        "test": {"enable": True},
        "install": {"createNamespace": True, **_on_failure(jobs=jobs, upgrade=False)},
        "upgrade": _on_failure(jobs=jobs, upgrade=True),
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


def _on_failure(*, jobs: bool, upgrade: bool) -> Obj:
    """What a failed install or upgrade does. An install is retried in place, never
    remediated (helm-controller's only install remediation is an uninstall, which deletes
    the broker, the store and every Job). An upgrade of a flow without Jobs rolls back; one
    with Jobs (every BATCH flow, a REALTIME flow with a finite producer) is retried in place,
    since a rollback would re-create the previous release's Jobs and run them again. Helm
    never waits for a Job to finish: a batch, or a finite source feeding a live flow, may
    run far past any timeout."""
    action: Obj = {}
    if jobs:
        action["disableWaitForJobs"] = True  # a Job is Ready to Helm only once it has finished
    if upgrade and not jobs:
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


def values_config_map(values: str, *, flux: Flux, flow_id: str, env: str) -> str:
    """The ConfigMap a release reads its values from: ``values-<env>.yaml``'s text under
    ``values.yaml``, a literal block, so a review sees the same lines change as in the
    values file. Refused when the API server would refuse it."""
    size = len(values.encode("utf-8"))
    if size > CONFIG_MAP_BYTES:
        raise VfError(
            "VF_CONFIG_GITOPS",
            f"gitops.flux.helm_release: values-{env}.yaml is {size} bytes, more than the "
            f"{CONFIG_MAP_BYTES} a ConfigMap holds, and the HelmRelease reads it from one",
            "deliver the overlays instead (remove helm_release), or install the chart with "
            f"helm install -f values-{env}.yaml",
            f"gitops/flux/{values_file(env)}",
        )
    flow = names.label_value(flow_id)
    head = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": values_name(flow_id, env=env),
            "namespace": flux.namespace,
            "labels": {
                MANAGED_BY: MANAGER,
                PART_OF: flow,
                ENVIRONMENT_LABEL: names.label_value(env),
                FLOW_LABEL: flow,
                WATCH_LABEL: "Enabled",
            },
        },
    }
    body = "".join(f"    {line}\n" if line else "\n" for line in values.splitlines())
    return f"{yamlout.dump(head)}data:\n  {VALUES_KEY}: |\n{body}"
