"""``--set nodes.<node>.replicas``: what a worker's replica count decides follows the value.

``nodes.<node>.replicas`` is a value of every worker. The chart derives from it, instead
of copying the plan's numbers: the workload's replicas (``completions``/``parallelism`` of
a Job), the worker's ``VF_NB_TASKS`` (in its pod template, or in the flow's replicas
ConfigMap for a worker that scales in place), every child's ``VF_PARENT_REPLICAS``, and the
replica part of the pods' ``vf.dev/config-hash`` (``vf.plan.config_hash``). A hand
``--set`` therefore renders what a recompile with that replica count renders for those
fields, and a join never waits for fewer end-of-stream markers than its parents' replicas
send.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from vf.emit.helm.slots import (
    ABSENT,
    PARENT_REPLICAS_KEY,
    POD_SPEC,
    Slot,
    ValueKey,
    below,
    generated_key,
    owner,
    shared,
)
from vf.emit.helm.text import CONFIG_HASH, HASH_IN_PLACE, HASH_RESTART, LITERAL, NB_TASKS_KEY
from vf.plan.config_hash import NB_TASKS, PARENT_REPLICAS, scales_in_place
from vf.textio.objects import Obj
from vf_runtime.labels import COMPONENT, CONFIG_HASH_KEY, REPLICA_COUNTS, labels_of

Path = tuple[str | int, ...]
HASH_PATH: Path = ("spec", "template", "metadata", "annotations", CONFIG_HASH_KEY)
ENV_PATH: Path = (*POD_SPEC, "containers", 0, "env")  # vf's worker is the pod's one container
REPLICA_PATHS: dict[str, tuple[Path, ...]] = {
    "Deployment": (("spec", "replicas"),),
    "StatefulSet": (("spec", "replicas"),),
    "Job": (("spec", "completions"), ("spec", "parallelism")),
}


def worker_envs(per_env: Mapping[str, Sequence[Obj]]) -> dict[str, Mapping[str, str]]:
    """Each node's worker environment (the values of its worker container's ``env``) in the
    first environment that has the node; what the chart needs of it (parents, flow type) is
    the same in all."""
    out: dict[str, Mapping[str, str]] = {}
    for env in sorted(per_env):
        for obj in per_env[env]:
            if obj.get("kind") not in REPLICA_PATHS or owner(obj) is None:
                continue
            entries = _at(obj, ENV_PATH)
            if not isinstance(entries, list):
                continue
            values = {str(e["name"]): str(e["value"]) for e in entries if "value" in e}
            if "VF_NODE_NAME" in values:
                out.setdefault(values["VF_NODE_NAME"], values)
    return out


def with_replica_slots(
    slots: list[Slot], *, versions: Mapping[str, Obj], workers: Mapping[str, Mapping[str, str]]
) -> list[Slot]:
    """``slots`` with the fields a worker's replica count decides derived from the values."""
    first = versions[sorted(versions)[0]]
    if first.get("kind") == "ConfigMap" and labels_of(first).get(COMPONENT) == REPLICA_COUNTS:
        return _counts_slots(slots, versions=versions)
    base = owner(first)
    if base is None or base[0] != "nodes":
        return slots
    node = base[1]
    env = workers.get(node)
    if env is None or first.get("kind") not in REPLICA_PATHS:
        return slots
    slots = _env_slots(slots, versions=versions, node=node, parents=_parents(env))
    return _workload_slots(slots, versions=versions, node=node, env=env)


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
        found = isinstance(obj, dict) and part in obj
        if not (found or (isinstance(obj, list) and isinstance(part, int) and part < len(obj))):
            return ABSENT
        obj = obj[part]
    return obj


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


def _entry(versions: Mapping[str, Obj], name: str) -> int | None:
    """The index of the worker's ``env`` entry ``name`` with a value, the same in every
    environment (the chart aligns the entries by name, ``vf.emit.helm.envlist``)."""
    found = set()
    for version in versions.values():
        entries = _at(version, ENV_PATH)
        if not isinstance(entries, list):
            return None
        at = [i for i, e in enumerate(entries) if isinstance(e, dict) and e.get("name") == name]
        if len(at) != 1 or "value" not in entries[at[0]]:
            return None
        found.add(at[0])
    return found.pop() if len(found) == 1 else None


def _env_slots(
    slots: list[Slot], *, versions: Mapping[str, Obj], node: str, parents: str
) -> list[Slot]:
    news: list[Slot] = []
    nb = _entry(versions, NB_TASKS)
    if nb is not None:
        path = (*ENV_PATH, nb, "value")
        counts = {e: int(_at(v, path)) for e, v in versions.items()}
        news.append(Slot(path=path, values=shared(counts), key=(NB_TASKS_KEY, node)))
    theirs = _entry(versions, PARENT_REPLICAS) if parents else None
    if theirs is not None:
        path = (*ENV_PATH, theirs, "value")
        seen = {e: _at(v, path) for e, v in versions.items()}
        key: ValueKey = (PARENT_REPLICAS_KEY, parents)
        news.append(Slot(path=path, values=shared(seen), key=key))
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
