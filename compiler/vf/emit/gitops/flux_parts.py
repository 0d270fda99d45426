"""Flux delivers each environment in two parts, the infrastructure first, then the workers,
and a third for what the flow runs without, when the environment has any.

Every Kustomization builds the same overlay; Flux's own ``patches`` delete, by label, what
belongs to the other part (a ``$patch: delete`` per selector), so the overlay stays one tree
for Argo CD and ``kubectl apply -k``. The parts are complementary by construction:

- *infra*: the Namespace, the broker and the store (``vf.dev/infra``), their config, claims
  and policies, the broker ConfigMap the workers read, and the flow's policy: everything
  that is neither a worker (``vf.dev/node``) nor the provision Job and its topology;
- *workers*: the workers and the provision Job, with ``dependsOn`` the infra part, so Flux
  applies them once the broker and store are Ready;
- *optional*: the objects of an API the cluster may lack (``vf.dev/optional``: KEDA's
  ScaledObjects, a ServiceMonitor), out of the other two and ``dependsOn`` the workers
  part. kustomize-controller dry-runs every object of a Kustomization before it applies
  any, so one kind the cluster does not serve fails the whole part (ADR 0202): here that
  leaves the broker, the store and the workers running, and only this part not Ready.

Health: the infra part waits for every object (the broker's and store's rollouts). The
workers part waits for its Deployments and StatefulSets only (``wait: false`` and a
``healthChecks`` entry each), never for a Job (every worker of a BATCH flow, a finite
producer, the provision Job): which status reader judges a Job depends on whether the
controller impersonates (ADR 150), and Flux's own reader holds a running Job InProgress
until it completes, so a batch longer than ``timeout`` would fail the Kustomization.
"""

from __future__ import annotations

from collections.abc import Sequence

from vf.textio.objects import Obj
from vf_runtime.labels import COMPONENT, NODE_LABEL, OPTIONAL_LABEL, PROVISION

INFRA, WORKERS, OPTIONAL = "infra", "workers", "optional"
WORKER_SELECTORS = (NODE_LABEL, f"{COMPONENT}={PROVISION}")
INFRA_SELECTOR = f"!{NODE_LABEL},{COMPONENT}!={PROVISION}"
OPTIONAL_SELECTOR = OPTIONAL_LABEL
REQUIRED_SELECTOR = f"!{OPTIONAL_LABEL}"
_DELETE = "$patch: delete\napiVersion: v1\nkind: Unused\nmetadata:\n  name: unused\n"
_READY_KINDS = ("Deployment", "StatefulSet")


def deleting(selector: str) -> Obj:
    """A Flux ``patches`` entry that deletes from the build what ``selector`` matches."""
    return {"patch": _DELETE, "target": {"labelSelector": selector}}


def _is_worker(obj: Obj) -> bool:
    labels = obj["metadata"].get("labels") or {}
    return NODE_LABEL in labels or labels.get(COMPONENT) == PROVISION


def part_spec(part: str, *, objects: Sequence[Obj]) -> Obj:
    """The spec fields that make a Kustomization one part, with its health signal."""
    if part == OPTIONAL:  # nothing to wait for: applied is all it can be
        return {"patches": [deleting(REQUIRED_SELECTOR)], "wait": False}
    if part == INFRA:
        selectors = (*WORKER_SELECTORS, OPTIONAL_SELECTOR)
        return {"patches": [deleting(s) for s in selectors], "wait": True}
    spec: Obj = {
        "patches": [deleting(INFRA_SELECTOR), deleting(OPTIONAL_SELECTOR)],
        "wait": False,
    }
    checks = [
        {
            "apiVersion": o["apiVersion"],
            "kind": o["kind"],
            "name": o["metadata"]["name"],
            "namespace": o["metadata"]["namespace"],
        }
        for o in objects
        if o["kind"] in _READY_KINDS and _is_worker(o)
    ]
    if checks:
        spec["healthChecks"] = sorted(checks, key=lambda c: (c["kind"], c["name"]))
    return spec
