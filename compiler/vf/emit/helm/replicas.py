"""``--set nodes.<node>.replicas``: what a worker's replica count decides follows the value.

``nodes.<node>.replicas`` is a value of every worker. The chart derives from it, instead
of copying the plan's numbers: the workload's replicas (``completions``/``parallelism`` of
a Job), the worker's ``VF_NB_TASKS``, every child's ``VF_PARENT_REPLICAS`` (present when a
parent runs more than one replica, as the plan writes it), and the replica part of the
pods' ``vf.dev/config-hash`` (``vf.plan.config_hash``). A hand ``--set`` therefore renders what
a recompile with that replica count renders for those fields, and a join never waits for
fewer end-of-stream markers than its parents' replicas send.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from vf.emit.helm.slots import (
    ABSENT,
    PARENT_REPLICAS_KEY,
    Slot,
    ValueKey,
    below,
    generated_key,
    owner,
    shared,
)
from vf.emit.helm.text import CONFIG_HASH, HASH_IN_PLACE, HASH_RESTART, LITERAL, NB_TASKS_KEY
from vf.plan.config_hash import NB_TASKS, PARENT_REPLICAS, scales_in_place
from vf_runtime.labels import CONFIG_HASH_KEY

Obj = dict[str, Any]
Path = tuple[str | int, ...]
HASH_PATH: Path = ("spec", "template", "metadata", "annotations", CONFIG_HASH_KEY)
REPLICA_PATHS: dict[str, tuple[Path, ...]] = {
    "Deployment": (("spec", "replicas"),),
    "StatefulSet": (("spec", "replicas"),),
    "Job": (("spec", "completions"), ("spec", "parallelism")),
}


def worker_envs(per_env: Mapping[str, Sequence[Obj]]) -> dict[str, Mapping[str, str]]:
    """Each node's worker environment (its env ConfigMap's data) in the first environment
    that has the node; what the chart needs of it (parents, flow type) is the same in all."""
    out: dict[str, Mapping[str, str]] = {}
    for env in sorted(per_env):
        for obj in per_env[env]:
            data = obj.get("data") or {}
            if obj.get("kind") == "ConfigMap" and NB_TASKS in data and "VF_NODE_NAME" in data:
                out.setdefault(str(data["VF_NODE_NAME"]), data)
    return out


def with_replica_slots(
    slots: list[Slot], *, versions: Mapping[str, Obj], workers: Mapping[str, Mapping[str, str]]
) -> list[Slot]:
    """``slots`` with the fields a worker's replica count decides derived from the values."""
    first = versions[sorted(versions)[0]]
    base = owner(first)
    if base is None or base[0] != "nodes":
        return slots
    node = base[1]
    env = workers.get(node)
    if env is None:
        return slots
    kind = str(first.get("kind"))
    if kind == "ConfigMap" and (first.get("data") or {}).get("VF_NODE_NAME") == node:
        return _env_slots(slots, versions=versions, node=node, parents=_parents(env))
    if kind in REPLICA_PATHS:
        return _workload_slots(slots, versions=versions, node=node, env=env)
    return slots


def _parents(env: Mapping[str, str]) -> str:
    return str(env.get("VF_PARENT_NAMES", ""))


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


def _at(obj: Any, path: Path) -> Any:
    for part in path:
        if not isinstance(obj, dict) or part not in obj:
            return ABSENT
        obj = obj[part]
    return obj


def _env_slots(
    slots: list[Slot], *, versions: Mapping[str, Obj], node: str, parents: str
) -> list[Slot]:
    nb = {e: int(_at(v, ("data", NB_TASKS))) for e, v in versions.items()}
    news = [Slot(path=("data", NB_TASKS), values=shared(nb), key=(NB_TASKS_KEY, node))]
    if parents:
        seen = {e: _at(v, ("data", PARENT_REPLICAS)) for e, v in versions.items()}
        key: ValueKey = (PARENT_REPLICAS_KEY, parents)
        news.append(Slot(path=("data", PARENT_REPLICAS), values=shared(seen), key=key))
    return _replace(slots, news)


def _workload_slots(
    slots: list[Slot], *, versions: Mapping[str, Obj], node: str, env: Mapping[str, str]
) -> list[Slot]:
    first = versions[sorted(versions)[0]]
    kind = str(first["kind"])
    news: list[Slot] = []
    replicas: ValueKey = ("nodes", node, "replicas")  # one key for both of a Job's counts
    for path in REPLICA_PATHS[kind]:
        counts = {e: _at(v, path) for e, v in versions.items()}
        if all(c is ABSENT for c in counts.values()):
            continue  # an autoscaler owns the count
        key = replicas
        if any(c is ABSENT for c in counts.values()):
            key = generated_key(first, path=path)  # scaled somewhere: the plan's numbers
        news.append(Slot(path=path, values=shared(counts), key=key))
    hashes = {e: _at(v, HASH_PATH) for e, v in versions.items()}
    if any(not isinstance(h, str) for h in hashes.values()):
        return _replace(slots, news)
    heads = {e: h[:12] for e, h in hashes.items()}
    head: ValueKey = (LITERAL, heads[sorted(heads)[0]])
    if len(set(heads.values())) > 1:
        head = ("nodes", node, "configHash")
    mode = HASH_IN_PLACE if scales_in_place(env, kind=kind) else HASH_RESTART
    key = (CONFIG_HASH, mode, node, _parents(env), *head)
    return _replace(slots, [*news, Slot(path=HASH_PATH, values=heads, key=key)])
