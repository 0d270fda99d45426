"""The values of the chart's checks before it renders (``templates/helm/chart/templates/
environment.yaml``, ADR 154, 176): ``values.yaml``'s own keys, which name no environment,
and each environment's planned count of every Job and partitioned worker.

Each environment's planned counts are in its own values file (``plannedReplicas``), not in
the schema every environment shares, so a change of one environment's counts changes no
file of another's. ``values.yaml`` holds no environment's values at all (ADR 188): every
other template renders only when the values name an environment, so a release without
``-f values-<env>.yaml`` is refused by the check's message, not by a template that finds
no values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from vf.emit.helm.overrides import IMAGE_TAG_VALUES, OVERRIDE_VALUES
from vf.textio.objects import Obj
from vf_runtime.labels import NODE_LABEL

PLANNED_REPLICAS = "plannedReplicas"  # per environment: counts a --set must keep


def neutral_values() -> Obj:
    """``values.yaml``'s own keys: no environment and the overrides' empty defaults, no
    environment's values (ADR 188)."""
    return {"environment": None, **IMAGE_TAG_VALUES, **OVERRIDE_VALUES}


_PINNED_KINDS = ("Job", "StatefulSet")


def planned_replicas(
    per_env: Mapping[str, Sequence[Obj]],
    values: Mapping[str, Obj],
    *,
    pinned: frozenset[str] = frozenset(),
) -> dict[str, dict[str, int]]:
    """Per environment, the planned count of each node whose workload is a Job or a
    StatefulSet, or whose node is in ``pinned``: a Job's count is part of its name's tag
    and its pods' indexes, a partitioned worker's of its parents' readers, the topology and
    the run id, also while it is one replica of a Deployment (ADR 154)."""
    out: dict[str, dict[str, int]] = {}
    for env, objects in per_env.items():
        nodes = values[env].get("nodes") or {}
        for obj in objects:
            node = str((obj["metadata"].get("labels") or {}).get(NODE_LABEL))
            if node not in nodes or (obj.get("kind") not in _PINNED_KINDS and node not in pinned):
                continue
            count = (nodes[node] or {}).get("replicas")
            if isinstance(count, int):
                out.setdefault(env, {})[node] = count
    return out
