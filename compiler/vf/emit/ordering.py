"""Ordering hints for delivery tools: Argo CD sync waves in the Kustomize tree, Helm hooks
in the chart, never both in one tree.

Correctness never depends on these hints (workers ensure their own streams and consumers);
they only make a sync converge in fewer steps. Each emitter annotates its own copies of the
plan's objects, so the objects of the plan stay tool-neutral.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vf.textio.objects import Obj
from vf_runtime.labels import GENERATION_KEY, INFRA_LABEL, NODE_LABEL, is_optional, is_provision_job

SYNC_WAVE = "argocd.argoproj.io/sync-wave"
SYNC_OPTIONS = "argocd.argoproj.io/sync-options"
FLUX_FORCE = "kustomize.toolkit.fluxcd.io/force"
FLUX_PRUNE = "kustomize.toolkit.fluxcd.io/prune"
HELM_HOOK = "helm.sh/hook"
HELM_HOOK_WEIGHT = "helm.sh/hook-weight"
HELM_HOOK_DELETE = "helm.sh/hook-delete-policy"
HELM_RESOURCE_POLICY = "helm.sh/resource-policy"
PRUNE = "Prune=true"
KUSTOMIZE_ONLY = (SYNC_WAVE, SYNC_OPTIONS, FLUX_FORCE, FLUX_PRUNE)
HELM_ONLY = (HELM_HOOK, HELM_HOOK_WEIGHT, HELM_HOOK_DELETE, HELM_RESOURCE_POLICY)
TOOL_ANNOTATIONS = frozenset(KUSTOMIZE_ONLY + HELM_ONLY)

WAVE_INFRA = "-2"
WAVE_PROVISION = "-1"
WAVE_WORKERS = "0"
WAVE_AFTER = "1"
_WORKLOAD_KINDS = frozenset({"Deployment", "StatefulSet", "Job", "DaemonSet"})
_AFTER_KINDS = frozenset({"ScaledObject", "PodDisruptionBudget", "HorizontalPodAutoscaler"})
# What outlives the flow that writes it: other flows use it (the shared Namespace holds
# their objects, the API server's priority admission refuses a pod naming a PriorityClass
# that is gone). Never pruned, never deleted with the Application, never uninstalled.
KEPT_KINDS = frozenset({"Namespace", "PriorityClass"})


def sync_wave(obj: Mapping[str, Any]) -> str:
    """Infrastructure (-2) → provision Job (-1) → workers (0) → scalers, budgets, what the
    flow runs without and a REALTIME flow's finite producer (1, the last: a wave whose
    object fails ends the sync, ADR 0202; one not yet healthy does not hold it, ADR 206)."""
    kind = obj.get("kind")
    labels = obj.get("metadata", {}).get("labels") or {}
    if is_provision_job(obj):
        return WAVE_PROVISION
    if INFRA_LABEL in labels:  # the broker's budget guards it from its first pod on
        return WAVE_INFRA
    if kind in _AFTER_KINDS or is_optional(obj) or _finite_source_of_a_live_flow(obj):
        return WAVE_AFTER
    if kind in _WORKLOAD_KINDS and NODE_LABEL in labels:
        return WAVE_WORKERS
    return WAVE_INFRA


def _finite_source_of_a_live_flow(obj: Mapping[str, Any]) -> bool:
    """A REALTIME flow's finite producer: a worker Job whose pods name no generation (every
    BATCH worker's do). In wave 0 the operation would wait for it to complete before the
    ScaledObjects and budgets, and never create them if it failed (ADR 206)."""
    labels = obj.get("metadata", {}).get("labels") or {}
    if obj.get("kind") != "Job" or NODE_LABEL not in labels:
        return False
    template = (obj.get("spec") or {}).get("template") or {}
    return GENERATION_KEY not in ((template.get("metadata") or {}).get("annotations") or {})


def _named_by_generation(obj: Mapping[str, Any]) -> bool:
    """The BATCH broker ConfigMap: it carries the generation, and its name does too."""
    return obj.get("kind") == "ConfigMap" and "VF_GENERATION" in (obj.get("data") or {})


def _of_a_node(obj: Mapping[str, Any]) -> bool:
    return NODE_LABEL in (obj.get("metadata", {}).get("labels") or {})


def _annotated(obj: Mapping[str, Any], *, annotations: Mapping[str, str]) -> Obj:
    # Only metadata changes: share the rest of the object instead of copying it.
    out = dict(obj)
    meta = dict(out.get("metadata") or {})
    meta["annotations"] = {**(meta.get("annotations") or {}), **annotations}
    out["metadata"] = meta
    return out


def with_sync_waves(obj: Mapping[str, Any]) -> Obj:
    """A copy for the Kustomize tree: its Argo CD wave, and when Argo CD may remove it.

    Jobs need no force or replace rule: a Job whose pod template changes gets a new name
    (``plan_jobs``), so every tool creates the new one and prunes the old. Argo CD prunes an
    old Job in its own wave, as the new ones start (ADR 151): ``PruneLast`` would keep the
    old generation running until the new one has completed. The BATCH broker ConfigMap is
    named after its generation like the Jobs that read it, and is pruned the same way: a
    ``PruneLast`` object that a change prunes adds a wave after the workers', and an
    operation with a later wave waits for the workers' wave to be Healthy, every Job
    Complete, while auto-sync skips each newer commit (ADR 206). Everything else is
    pruned last.
    The Namespace and the PriorityClass are never pruned, nor deleted with the Application
    (``KEPT_KINDS``: other flows live in the one and name the other).
    An object no node owns says ``Prune=true``: it stays with the environment's own
    Application whether or not the environment is sharded, and that Application, when it
    is, prunes nothing else (ADR 0238).
    The workers' wave, 0, is Argo CD's default for an object without the annotation, so
    they carry none: one annotation a node less for every build of the overlay.
    """
    wave = sync_wave(obj)
    annotations = {} if wave == WAVE_WORKERS else {SYNC_WAVE: wave}
    if obj.get("kind") in KEPT_KINDS:
        annotations[SYNC_OPTIONS] = "Prune=false,Delete=false"
        annotations[FLUX_PRUNE] = "disabled"
    elif is_optional(obj):  # without its CRD (KEDA's, Prometheus') the rest still syncs
        annotations[SYNC_OPTIONS] = "PruneLast=true,SkipDryRunOnMissingResource=true"
    elif obj.get("kind") != "Job" and not _named_by_generation(obj):
        annotations[SYNC_OPTIONS] = "PruneLast=true"
    if obj.get("kind") not in KEPT_KINDS and not _of_a_node(obj):
        # what no node owns never moves between Applications: it is pruned even by one
        # whose own default is not to prune (a sharded environment's, ADR 0238)
        options = annotations.get(SYNC_OPTIONS)
        annotations[SYNC_OPTIONS] = f"{options},{PRUNE}" if options else PRUNE
    return _annotated(obj, annotations=annotations) if annotations else dict(obj)


def with_helm_hooks(obj: Mapping[str, Any]) -> Obj:
    """The chart's version: the provision Job becomes a post-install/upgrade hook.

    Post, not pre: a pre-install hook runs before the release's ConfigMaps exist, and the
    Job mounts them. Workers do not wait for it, so running it after them is safe.
    """
    if obj.get("kind") in KEPT_KINDS:  # uninstalling a release must not delete what others use
        return _annotated(obj, annotations={HELM_RESOURCE_POLICY: "keep"})
    if not is_provision_job(obj):
        return dict(obj)  # callers hand in their own copy; only the hook objects change
    hooks = {
        HELM_HOOK: "post-install,post-upgrade",
        HELM_HOOK_WEIGHT: "0",
        # Its name changes with its pod template (plan_jobs), and Helm never prunes hooks.
        HELM_HOOK_DELETE: "before-hook-creation,hook-succeeded",
    }
    return _annotated(obj, annotations=hooks)


def without_tool_annotations(obj: Mapping[str, Any]) -> Obj:
    """A copy with every delivery-tool annotation removed (how the trees are compared).

    The object and its metadata are new; everything else is shared with ``obj``, so
    callers may change the metadata but must copy deeper parts before changing them.
    """
    out = dict(obj)
    meta = dict(out.get("metadata") or {})
    out["metadata"] = meta
    annotations = {
        k: v for k, v in (meta.get("annotations") or {}).items() if k not in TOOL_ANNOTATIONS
    }
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    return out
