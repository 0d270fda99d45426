"""A worker Job's completion mode and ``VF_REPLICA_ID``, derived from its replica count.

The plan makes a worker's Job Indexed exactly when it runs more than one replica, and only
then gives its pods ``VF_REPLICA_ID`` (the completion index). Compared across
environments, those two fields were verbatim while every environment ran one replica and
values under ``generated`` once one ran several, so a dev-only count changed the chart's
templates, the schema and every other environment's values. Here they are always two
slots that the template derives from ``nodes.<node>.replicas``: a count changes only its
own environment's values (ADR 177).

The slots are found by comparing the environments with one more, made up, version of the
Job whose mode is the other one (``flipped``), so they exist whatever the environments
hold; that version is dropped from every slot before anything else reads them.
"""

from __future__ import annotations

import copy
from typing import Any

from vf.emit.helm.slots import INDEXED, POD_SPEC, REPLICA_ID, TEMPLATE_NODE, Slot, lookup

Obj = dict[str, Any]
OTHER = "~other-mode"  # the made-up version's name: sorts after every environment's
_MODE = ("spec", "completionMode")
_ENV = (*POD_SPEC, "containers", 0, "env")
_INDEX_PATH = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
REPLICA_ID_ITEM: Obj = {
    "name": "VF_REPLICA_ID",
    "valueFrom": {"fieldRef": {"fieldPath": _INDEX_PATH}},
}


def worker_job_node(obj: Obj) -> str | None:
    """The node of a worker's Job (its pods are the node's), else None."""
    if obj.get("kind") != "Job" or not isinstance(lookup(obj, _ENV), list):
        return None
    node = lookup(obj, TEMPLATE_NODE)
    return node if isinstance(node, str) else None


def flipped(obj: Obj) -> Obj:
    """``obj`` in the other completion mode: Indexed with ``VF_REPLICA_ID``, or neither.

    Only the mappings and lists on the way to the two fields are copies; the rest is
    shared with ``obj``, which is left unchanged (the version is read, then dropped)."""
    out = {**obj, "spec": {**obj["spec"]}}
    template = out["spec"]["template"] = {**out["spec"]["template"]}
    pod = template["spec"] = {**template["spec"]}
    containers = pod["containers"] = list(pod["containers"])
    container = containers[0] = {**containers[0]}
    env = container["env"] = list(container["env"])
    if out["spec"].get("completionMode") == "Indexed":
        del out["spec"]["completionMode"]
        env[:] = [e for e in env if not (isinstance(e, dict) and e.get("name") == "VF_REPLICA_ID")]
    else:
        out["spec"]["completionMode"] = "Indexed"
        env.append(copy.deepcopy(REPLICA_ID_ITEM))
        env.sort(key=lambda e: str(e.get("name")) if isinstance(e, dict) else "")
    return out


def derived(slots: list[Slot], *, node: str) -> list[Slot]:
    """``slots`` without the made-up version's values, the mode and the variable derived."""
    out = []
    for slot in slots:
        values = {e: v for e, v in slot.values.items() if e != OTHER}
        key = slot.key
        if slot.path == _MODE:
            key = (INDEXED, node)
        elif slot.path[: len(_ENV)] == _ENV and len(slot.path) == len(_ENV) + 1:
            item = [v for v in slot.values.values() if isinstance(v, dict)]
            if item and item[0].get("name") == "VF_REPLICA_ID":
                key = (REPLICA_ID, node)
        out.append(Slot(path=slot.path, values=values, key=key))
    return out
