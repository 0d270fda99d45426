"""A long-running worker's PodDisruptionBudget, rendered where ``nodes.<node>.replicas`` is
above one.

The plan gives a Deployment or a StatefulSet a budget only above one replica
(``vf.plan.planner``: ``minAvailable: 1`` would block every drain of a single pod). The
chart held the budgets the environments had, so a dev count 1 → 2 added a template (or a
row) and a count of ``--set`` left the budget as planned. The chart now holds the budget
of every long-running worker in every environment (the plan's where there is one, else the
one the plan would make) and renders it when the node's count is above one, as the plan
decides (ADR 193). Where an environment's values would not render exactly the plan's
budgets, the node's budget stays as the plan has it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from vf import names
from vf.emit.helm.rows import Member
from vf.emit.helm.slots import owner
from vf.emit.helm.text import values_key
from vf.textio.objects import Obj
from vf_runtime.labels import FLOW_LABEL, NODE_LABEL, RUN_LABEL

Key = tuple[str, str]
BUDGET = "PodDisruptionBudget"
_LONG_RUNNING = frozenset({"Deployment", "StatefulSet"})


def _budget(workload: Obj) -> Obj | None:
    """The budget the plan makes for ``workload`` above one replica."""
    meta = workload["metadata"]
    labels = meta.get("labels") or {}
    selector = (workload.get("spec") or {}).get("selector", {}).get("matchLabels")
    if not (isinstance(selector, dict) and FLOW_LABEL in labels and RUN_LABEL in labels):
        return None
    name = names.k8s_name("vf", labels[FLOW_LABEL], labels[RUN_LABEL], labels[NODE_LABEL], "pdb")
    return {
        "apiVersion": "policy/v1",
        "kind": BUDGET,
        "metadata": {"labels": dict(labels), "name": name},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": dict(selector)}},
    }


def with_budgets(
    prepared: Mapping[str, dict[Key, Obj]], *, namespaced: set[Key]
) -> tuple[dict[Key, str], dict[str, set[Key]]]:
    """Every long-running worker's budget added to each environment that has the worker
    and not the budget (in place); the budgets' keys with their nodes, and each
    environment's added keys."""
    nodes: dict[str, Key] = {}  # a node's budget, the plan's in some environment
    for objects in prepared.values():
        for key, obj in objects.items():
            node = (obj["metadata"].get("labels") or {}).get(NODE_LABEL)
            if key[0] == BUDGET and isinstance(node, str):
                nodes.setdefault(node, key)
    budgets: dict[Key, str] = {}
    added: dict[str, set[Key]] = {env: set() for env in prepared}
    for env, objects in prepared.items():
        for key, obj in list(objects.items()):
            base = owner(obj)
            if key[0] not in _LONG_RUNNING or base is None or base[0] != "nodes":
                continue
            made = _budget(obj)
            if made is None:
                continue
            node = base[1]
            budget = nodes.setdefault(node, (BUDGET, made["metadata"]["name"]))
            budgets[budget] = node
            if budget not in objects:
                objects[budget] = made
                added[env].add(budget)
                if key in namespaced:
                    namespaced.add(budget)
    return budgets, added


def _counts(templates: Sequence[Member]) -> dict[str, Mapping[str, Any]]:
    """Each node's ``nodes.<node>.replicas`` in every environment that holds it."""
    out: dict[str, Mapping[str, Any]] = {}
    for member in templates:
        for slot in member.slots:
            key = values_key(slot.key)
            if key is not None and len(key) == 3 and key[0] == "nodes" and key[2] == "replicas":
                out.setdefault(key[1], slot.values)
    return out


def guarded_budgets(
    templates: Sequence[Member],
    *,
    budgets: Mapping[Key, str],
    added: Mapping[str, set[Key]],
    rebuild: Callable[[Key, tuple[str, ...]], Member],
) -> list[Member]:
    """``templates`` with each budget rendered above its node's count of one, where that
    renders in every environment exactly the plan's budgets; elsewhere the plan's budgets
    alone (``rebuild``), as before."""
    counts = _counts(templates) if budgets else {}
    out: list[Member] = []
    for member in templates:
        node = budgets.get(member.key)
        if node is None:
            out.append(member)
            continue
        seen = counts.get(node, {})
        planned = tuple(e for e in member.present if member.key not in added[e])
        if all(_above_one(seen.get(env)) == (env in planned) for env in member.present):
            out.append(replace(member, above_one=node))
        elif planned:
            out.append(rebuild(member.key, planned))
    return out


def _above_one(count: Any) -> bool | None:
    if type(count) is not int:
        return None  # never equal to a bool: the budget stays the plan's
    return count > 1
