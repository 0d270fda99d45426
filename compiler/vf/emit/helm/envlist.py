"""A container's ``env`` as the chart compares it: entries lined up by name.

A worker's variables are its pod template's ``env`` (ADR 183), sorted by name, and some of
them exist in one environment only (an Indexed Job's ``VF_REPLICA_ID``, a GPU grant's
variables, a URL read from a Secret). Compared by position, one extra entry would shift
every later one and make the whole list a value. Lined up by name, each environment's list
holds every name of any of them, ``ABSENT`` where it lacks one: an entry present
everywhere is verbatim or a slot of its own, and an entry some environment lacks is one
optional list item in the template. The provision Job's list is not sorted (a URL read
from a Secret comes first); lined up in the order the lists agree on, it too keeps its
Secret reference under ``secretRefs`` (ADR 192).
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Mapping
from typing import Any

from vf.emit.helm.slots import ABSENT, POD_SPEC
from vf.textio.objects import Obj

_WORKLOADS = frozenset({"Deployment", "StatefulSet", "Job", "DaemonSet"})


def aligned(versions: Mapping[str, Obj]) -> dict[str, Obj]:
    """``versions`` with each container's ``env`` lined up by name, where the lists
    differ in their names, each has unique names and they agree on an order; the objects
    given are left unchanged (the paths changed are copies)."""
    out = dict(versions)
    first = out[sorted(out)[0]]
    if len(out) < 2 or first.get("kind") not in _WORKLOADS:
        return out
    counts = {len(_containers(v)) for v in out.values()}
    if len(counts) != 1:
        return out
    for index in range(counts.pop()):
        lists = {e: _containers(v)[index].get("env") for e, v in out.items()}
        names = {e: _names(entries) for e, entries in lists.items()}
        known = [tuple(n) for n in names.values() if n is not None]
        if len(known) < len(names) or len(set(known)) == 1:
            continue
        union = _merged(known)
        if union is None:
            continue
        for env, entries in lists.items():
            by_name = {str(e["name"]): e for e in entries or ()}
            out[env] = _with_env(out[env], index=index, env=[by_name.get(n, ABSENT) for n in union])
    return out


def _containers(obj: Obj) -> list[Obj]:
    node: Any = obj
    for part in (*POD_SPEC, "containers"):
        node = node.get(part) if isinstance(node, dict) else None
    return node if isinstance(node, list) else []


def _names(entries: Any) -> list[str] | None:
    """The entries' names when they are unique, else None."""
    if not isinstance(entries, list) or not all(
        isinstance(e, dict) and isinstance(e.get("name"), str) for e in entries
    ):
        return None
    names = [str(e["name"]) for e in entries]
    return names if len(set(names)) == len(names) else None


def _merged(lists: list[tuple[str, ...]]) -> list[str] | None:
    """Every name of ``lists`` in an order each list keeps its own in: the sorted names
    where every list is sorted (a worker's variables), else the first name by name whose
    predecessors are placed (the provision Job puts a Secret's variable first); None when
    the lists disagree on an order."""
    if all(list(names) == sorted(names) for names in lists):
        return sorted({name for names in lists for name in names})
    after: dict[str, set[str]] = {}
    before: dict[str, int] = {}
    for names in lists:
        for name in names:
            after.setdefault(name, set())
            before.setdefault(name, 0)
        for a, b in itertools.pairwise(names):
            if b not in after[a]:
                after[a].add(b)
                before[b] += 1
    ready = sorted(n for n, count in before.items() if count == 0)
    out: list[str] = []
    while ready:
        name = ready.pop(0)
        out.append(name)
        for b in after[name]:
            before[b] -= 1
            if before[b] == 0:
                bisect.insort(ready, b)
    return out if len(out) == len(before) else None


def _with_env(obj: Obj, *, index: int, env: list[Any]) -> Obj:
    """``obj`` with container ``index``'s env replaced; only the path to it is copied."""
    top = dict(obj)
    node = top
    for part in POD_SPEC:
        child = dict(node[str(part)])
        node[str(part)] = child
        node = child
    containers = list(node["containers"])
    containers[index] = {**containers[index], "env": env}
    node["containers"] = containers
    return top
