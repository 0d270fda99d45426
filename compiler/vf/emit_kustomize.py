"""Emit the Kustomize tree: ``base/`` shared by every environment, ``overlays/<env>/`` patches.

An object identical in every environment (namespace aside) goes to ``base/`` as is;
a field that differs becomes a JSON 6902 patch in the overlays; an object present in
only some environments lives in those overlays. Building an overlay therefore gives
exactly the objects of that environment's plan.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from vf import yamlout

Obj = dict[str, Any]
Tree = dict[str, str]
KUSTOMIZE_API = "kustomize.config.k8s.io/v1beta1"


def object_file(obj: Mapping[str, Any]) -> str:
    """``<kind>-<name>.yaml``: unique within one environment."""
    return f"{str(obj['kind']).lower()}-{obj['metadata']['name']}.yaml"


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    return (str(obj["kind"]), str(obj["metadata"]["name"]))


def _without_namespace(obj: Obj) -> Obj:
    out = copy.copy(obj)
    meta = dict(obj["metadata"])
    meta.pop("namespace", None)
    out["metadata"] = meta
    return out


def emit_kustomize(per_env: Mapping[str, Sequence[Obj]], namespaces: Mapping[str, str]) -> Tree:
    """The ``base/`` and ``overlays/`` files for every environment, keyed by relative path."""
    envs = sorted(per_env)
    indexed = {env: {_key(o): _without_namespace(o) for o in per_env[env]} for env in envs}
    first = indexed[envs[0]]
    common = [k for k in first if all(k in indexed[e] for e in envs)]
    tree: Tree = {}
    base_files = []
    for key in common:
        obj = first[key]
        name = object_file(obj)
        tree[f"base/{name}"] = yamlout.dump(obj)
        base_files.append(name)
    tree["base/kustomization.yaml"] = yamlout.dump(
        {"apiVersion": KUSTOMIZE_API, "kind": "Kustomization", "resources": sorted(base_files)}
    )
    for env in envs:
        tree.update(_overlay(env, indexed[env], first, common, namespaces[env]))
    return tree


def _overlay(
    env: str,
    objects: Mapping[tuple[str, str], Obj],
    base: Mapping[tuple[str, str], Obj],
    common: Sequence[tuple[str, str]],
    namespace: str,
) -> Tree:
    root = f"overlays/{env}"
    tree: Tree = {}
    shared = set(common)
    resources = ["../../base"]
    for key, obj in objects.items():
        if key not in shared:
            name = object_file(obj)
            tree[f"{root}/resources/{name}"] = yamlout.dump(obj)
            resources.append(f"resources/{name}")
    patches = []
    for key in common:
        ops = json_patch(base[key], objects[key])
        if ops:
            name = object_file(objects[key])
            tree[f"{root}/patches/{name}"] = yamlout.dump_sequence(ops)
            patches.append({"path": f"patches/{name}", "target": {"kind": key[0], "name": key[1]}})
    kustomization: Obj = {
        "apiVersion": KUSTOMIZE_API,
        "kind": "Kustomization",
        "namespace": namespace,
        "resources": resources[:1] + sorted(resources[1:]),
    }
    if patches:
        kustomization["patches"] = sorted(patches, key=lambda p: str(p["path"]))
    tree[f"{root}/kustomization.yaml"] = yamlout.dump(kustomization)
    return tree


def _pointer(parts: Sequence[str | int]) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def json_patch(old: Any, new: Any, path: tuple[str | int, ...] = ()) -> list[Obj]:
    """RFC 6902 operations turning ``old`` into ``new``; lists of unequal length are replaced."""
    if isinstance(old, dict) and isinstance(new, dict):
        ops: list[Obj] = []
        for key in sorted(set(old) | set(new)):
            if key not in new:
                ops.append({"op": "remove", "path": _pointer((*path, key))})
            elif key not in old:
                ops.append({"op": "add", "path": _pointer((*path, key)), "value": new[key]})
            else:
                ops.extend(json_patch(old[key], new[key], (*path, key)))
        return ops
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        ops = []
        for index, (a, b) in enumerate(zip(old, new, strict=True)):
            ops.extend(json_patch(a, b, (*path, index)))
        return ops
    if old == new and type(old) is type(new):
        return []
    return [{"op": "replace", "path": _pointer(path), "value": new}]
