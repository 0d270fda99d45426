"""The overrides a Helm user expects of a workload chart, per node and for every pod:
``nodeSelector``, ``tolerations``, ``affinity``, extra ``env``, ``podAnnotations``,
``podLabels``, ``imagePullSecrets`` and ``serviceAccount``.

Each is a slot of the worker's (and the provision Job's) pod template whose text the
``vf.pod`` helper makes from the values: ``nodes.<node>.<name>`` and the global
``<name>``, combined with what vf itself wrote there (vf's own entries first and never
replaced: a selector label, a GPU toleration, a config hash). With the values empty the
chart renders the overlay's objects unchanged.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from vf.emit.helm.rows import Member
from vf.emit.helm.slots import POD_SPEC, Slot, ValueKey, blank, lookup
from vf.textio.objects import Obj
from vf_runtime.labels import is_provision_job

Path = tuple[str | int, ...]

POD = "$pod"  # ("$pod", name, how, node, *have): the text vf.pod makes
EXTRA, APPEND = "extra", "append"  # the user's keys beside vf's; the user's items after vf's
EXTRA_KEY = "$vf-extra"  # the marker's key among a map's own keys (never rendered)
_TEMPLATE_META: Path = ("spec", "template", "metadata")
_CONTAINER_ENV: Path = (*POD_SPEC, "containers", 0, "env")
# value name -> (path in the object, what it holds)
FIELDS: dict[str, tuple[Path, str]] = {
    "affinity": ((*POD_SPEC, "affinity"), "map"),
    "env": (_CONTAINER_ENV, "list"),
    "imagePullSecrets": ((*POD_SPEC, "imagePullSecrets"), "list"),
    "nodeSelector": ((*POD_SPEC, "nodeSelector"), "map"),
    "podAnnotations": ((*_TEMPLATE_META, "annotations"), "map"),
    "podLabels": ((*_TEMPLATE_META, "labels"), "map"),
    "serviceAccount": ((*POD_SPEC, "serviceAccountName"), "scalar"),
    "tolerations": ((*POD_SPEC, "tolerations"), "list"),
}
# every pod's, none set: the chart renders the overlay's objects
OVERRIDE_VALUES: dict[str, Any] = {
    "affinity": {},
    "env": [],
    "imagePullSecrets": [],
    "nodeSelector": {},
    "podAnnotations": {},
    "podLabels": {},
    "serviceAccount": {"name": None},
    "tolerations": [],
}
_STRINGS = {"type": "object", "additionalProperties": {"type": "string"}}
# vf's own keys are refused, each at its own path (Helm's validator reported a failed
# propertyNames at the values' first key: `--set podLabels.vf\.dev/x=y` read '/environment')
_NOT_VFS = {"patternProperties": {"^vf\\.dev/": False}}
_ENV_ITEM = {
    "type": "object",
    "required": ["name"],
    "properties": {"name": {"type": "string", "minLength": 1, "not": {"pattern": "^VF_"}}},
}
_NAMED = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name"],
    "properties": {"name": {"type": "string", "minLength": 1}},
}
_WHOSE = "of every worker and the provision Job (nodes.<node>.{0} adds to it for one node)"
OVERRIDE_SCHEMAS: dict[str, dict[str, Any]] = {
    "affinity": {"type": "object", "description": f"Pod affinity {_WHOSE.format('affinity')}."},
    "env": {
        "type": "array",
        "items": _ENV_ITEM,
        "description": f"Extra container variables {_WHOSE.format('env')}; VF_ names are vf's.",
    },
    "imagePullSecrets": {
        "type": "array",
        "items": _NAMED,
        "description": f"Pull Secrets {_WHOSE.format('imagePullSecrets')}.",
    },
    "nodeSelector": {**_STRINGS, "description": f"Node labels {_WHOSE.format('nodeSelector')}."},
    "podAnnotations": {
        **_STRINGS,
        **_NOT_VFS,
        "description": f"Pod annotations {_WHOSE.format('podAnnotations')}; vf's own win.",
    },
    "podLabels": {
        **_STRINGS,
        **_NOT_VFS,
        "description": f"Pod labels {_WHOSE.format('podLabels')}; vf's own win.",
    },
    "serviceAccount": {
        "type": "object",
        "additionalProperties": False,
        "properties": {"name": {"type": ["string", "null"], "minLength": 1}},
        "description": f"The ServiceAccount {_WHOSE.format('serviceAccount')}, by name.",
    },
    "tolerations": {
        "type": "array",
        "items": {"type": "object"},
        "description": f"Tolerations {_WHOSE.format('tolerations')}, after vf's own.",
    },
}


def pod_node(obj: Obj) -> str | None:
    """ "" for the provision Job, the diff path's one pod the overrides reach (a worker's
    are its role template's, ADR 241); None: no overrides."""
    return "" if obj.get("kind") == "Job" and is_provision_job(obj) else None


def with_overrides(member: Member) -> Member:
    """``member`` with a slot per override its pods take (unchanged when it makes none)."""
    node = pod_node(member.base)
    if node is None:
        return member
    slots = list(member.slots)
    paths = {s.path for s in slots}  # (no field's path lies below another's)
    base = member.base
    envs = blank(member.present)
    for name, (path, holds) in FIELDS.items():
        if _under_one(path, paths) or not _reachable(base, path[:-1]):
            continue  # a slot above it, or no such container: nothing to add to
        if path in paths:  # vf's own value differs by environment: merged with it
            inner = slots.pop(next(i for i, s in enumerate(slots) if s.path == path))
            key: ValueKey = (POD, name, holds, node, *inner.key)
            slots.append(Slot(path=path, values=inner.values, key=key))
            continue
        have = lookup(base, path)
        if have is None:
            slots.append(Slot(path=path, values=envs, key=(POD, name, holds, node)))
        elif holds == "map" and isinstance(have, dict):
            own = ",".join(sorted(have))
            key = (POD, name, EXTRA, node, own)
            slots.append(Slot(path=(*path, EXTRA_KEY), values=envs, key=key))
        elif holds == "list" and isinstance(have, list):
            base = _appended(base, path)
            slots.append(Slot(path=(*path, len(have)), values=envs, key=(POD, name, APPEND, node)))
        elif holds == "scalar" and isinstance(have, str):  # vf's own, the same everywhere
            key = (POD, name, holds, node, "$lit", str(have))
            slots.append(Slot(path=path, values=envs, key=key))
    return replace(member, base=base, slots=tuple(slots))


def _under_one(path: Path, paths: set[Path]) -> bool:
    """Whether ``path`` lies strictly below one of ``paths``."""
    return any(path[:depth] in paths for depth in range(1, len(path)))


def _reachable(obj: Any, path: Path) -> bool:
    return isinstance(lookup(obj, path), dict)


def _appended(base: Obj, path: Path) -> Obj:
    """A copy of ``base`` whose list at ``path`` has one more item (where the marker goes);
    only the containers on the way are copied."""
    root: Obj = dict(base)
    node: Any = root
    for part in path[:-1]:
        child = node[part]
        child = dict(child) if isinstance(child, dict) else list(child)
        node[part] = child
        node = child
    node[path[-1]] = [*node[path[-1]], None]
    return root
