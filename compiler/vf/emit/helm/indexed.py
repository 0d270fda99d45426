"""A worker Job's completion mode and ``VF_REPLICA_ID``, derived from its replica count.

The plan makes a worker's Job Indexed exactly when it runs more than one replica, and only
then gives its pods ``VF_REPLICA_ID`` (the completion index). Compared across
environments, those two fields were verbatim while every environment ran one replica and
values under ``generated`` once one ran several, so a dev-only count changed the chart's
templates, the schema and every other environment's values. Here they are always two
slots that the template derives from ``nodes.<node>.replicas``: a count changes only its
own environment's values (ADR 177).

Both slots exist whatever the environments hold. The environments' ``env`` lists are lined
up with one more, made-up, version of the Job in the other mode (``flipped``), so each list
has a place for ``VF_REPLICA_ID``; the made-up version is then dropped, the slots are found
among the environments alone, and the two slots are set at their paths (``derived``).
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from typing import Any

from vf.emit.helm.envlist import aligned
from vf.emit.helm.slots import ABSENT, INDEXED, POD_SPEC, REPLICA_ID, TEMPLATE_NODE, Slot, lookup
from vf.textio.objects import Obj

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
        env.append(REPLICA_ID_ITEM)  # read and dropped with the version: never changed
        env.sort(key=lambda e: str(e.get("name")) if isinstance(e, dict) else "")
    return out


def lined_up(versions: Mapping[str, Obj]) -> tuple[dict[str, Obj], int]:
    """``versions`` lined up by ``aligned`` as if one more held the other mode, and the
    index ``VF_REPLICA_ID`` has in every one of their ``env`` lists (the item or ABSENT)."""
    lined = aligned({**versions, OTHER: flipped(versions[sorted(versions)[0]])})
    lists = [lookup(v, _ENV) for v in lined.values()]
    indexes = {_replica_id_index(env) for env in lists} - {None}
    if len(indexes) != 1 or len({len(env) for env in lists}) != 1:
        raise AssertionError("a worker's variables: unique names, one order in every version")
    del lined[OTHER]
    index = indexes.pop()
    assert index is not None
    return lined, index


def _replica_id_index(env: list[Any]) -> int | None:
    for index, item in enumerate(env):
        if isinstance(item, dict) and item.get("name") == "VF_REPLICA_ID":
            return index
    return None


def derived(slots: list[Slot], *, versions: Mapping[str, Obj], index: int, node: str) -> list[Slot]:
    """``slots`` of ``versions`` (as ``lined_up`` gave them) with the mode and the variable at
    ``index`` each one slot derived from the node's count, in path order."""
    item_path = (*_ENV, index)
    mode = Slot(
        path=_MODE,
        values={e: v["spec"].get("completionMode", ABSENT) for e, v in versions.items()},
        key=(INDEXED, node),
    )
    item = Slot(
        path=item_path,
        values={e: lookup(v, _ENV)[index] for e, v in versions.items()},
        key=(REPLICA_ID, node),
    )
    out = [s for s in slots if s.path != _MODE and s.path[: len(item_path)] != item_path]
    for slot in (mode, item):
        out.insert(bisect.bisect([s.path for s in out], slot.path), slot)
    return out
