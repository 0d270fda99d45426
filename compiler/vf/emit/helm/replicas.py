"""``--set nodes.<node>.replicas``: what a worker's replica count decides follows the value.

``nodes.<node>.replicas`` is a value of every worker. The worker templates derive from it
what a count decides in a worker's own objects (``templates/helm/roles``, ADR 235/241);
here, the diff path's: the flow's replicas ConfigMap, which a worker that scales in place
reads its ``VF_NB_TASKS`` from. A hand ``--set`` therefore renders what a recompile with
that replica count renders.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from vf.emit.helm.slots import Slot, below, owner, shared
from vf.emit.helm.text import NB_TASKS_KEY
from vf.textio.objects import Obj
from vf_runtime.labels import COMPONENT, REPLICA_COUNTS, labels_of

_WORKLOADS = frozenset({"Deployment", "StatefulSet", "Job"})


def worker_envs(per_env: Mapping[str, Sequence[Obj]]) -> dict[str, Mapping[str, str]]:
    """Each node's worker environment (the values of its worker container's ``env``) in the
    first environment that has the node; what the chart needs of it (parents, flow type) is
    the same in all."""
    out: dict[str, Mapping[str, str]] = {}
    for env in sorted(per_env):
        for obj in per_env[env]:
            if obj.get("kind") not in _WORKLOADS or owner(obj) is None:
                continue
            entries = obj["spec"]["template"]["spec"]["containers"][0].get("env")
            if not isinstance(entries, list):
                continue
            values = {str(e["name"]): str(e["value"]) for e in entries if "value" in e}
            if "VF_NODE_NAME" in values:
                out.setdefault(values["VF_NODE_NAME"], values)
    return out


def with_replica_slots(slots: list[Slot], *, versions: Mapping[str, Obj]) -> list[Slot]:
    """``slots`` with each count of the flow's replicas ConfigMap read from
    ``nodes.<node>.replicas`` (the workers' own objects are role templates, ADR 241)."""
    first = versions[sorted(versions)[0]]
    if first.get("kind") == "ConfigMap" and labels_of(first).get(COMPONENT) == REPLICA_COUNTS:
        return _counts_slots(slots, versions=versions)
    return slots


def _replace(slots: list[Slot], news: list[Slot]) -> list[Slot]:
    """``slots`` with each of ``news`` in place of any slot at its path, in turn; a new
    slot is left out when a slot above it makes a whole section a value (no new slot lies
    below another)."""
    paths = [s.path for s in slots]
    news = [n for n in news if not below(n.path, paths)]
    if not news:
        return slots
    replaced = {n.path for n in news}
    return [s for s in slots if s.path not in replaced] + news


def _counts_slots(slots: list[Slot], *, versions: Mapping[str, Obj]) -> list[Slot]:
    """The replicas ConfigMap: each count a node's ``nodes.<node>.replicas``, where every
    environment has it (elsewhere the plan's numbers stay values of their own)."""
    datas = {e: v.get("data") or {} for e, v in versions.items()}
    nodes = set.intersection(*(set(d) for d in datas.values()))
    news = [
        Slot(
            path=("data", node),
            values=shared({e: int(d[node]) for e, d in datas.items()}),
            key=(NB_TASKS_KEY, node),
        )
        for node in sorted(nodes)
    ]
    return _replace(slots, news)
