"""Read a committed vf tree back: each environment's plan and the objects its overlay builds.

Only the Kustomize features vf itself writes are understood (resources, components,
JSON 6902 patch files with a kind/name target, namespace); anything else is refused by
name, so ``vf diff`` never reports on a build it only guessed.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any

from ruamel.yaml.error import YAMLError

from vf.errors import VfError
from vf.textio.objects import Obj
from vf.textio.safe_read import load_json
from vf.textio.yaml_guard import amplified
from vf.textio.yaml_read import reader

Files = Mapping[str, str]
_KNOWN_KEYS = frozenset({"apiVersion", "kind", "resources", "components", "patches", "namespace"})


def _unreadable(where: str, *, why: str) -> VfError:
    return VfError(
        "VF_DIFF_TREE",
        f"cannot read the committed tree at {where}: {why}",
        "recompile the tree with this vf (vf compile GRAPH --out DIR), or use "
        "vf compile --check for a plain text diff",
        where,
    )


def yaml_documents(files: Files, *, path: str) -> list[Any]:
    """Every document of the tree file ``path``; VF_DIFF_TREE when it cannot be read."""
    if path not in files:
        raise _unreadable(path, why="the file is missing")
    try:
        docs = [d for d in reader("safe").load_all(files[path]) if d is not None]
    except YAMLError as exc:
        raise _unreadable(path, why=f"invalid YAML ({str(exc).splitlines()[0]})") from None
    except RecursionError:
        raise _unreadable(path, why="it nests deeper than vf writes") from None
    if amplified(docs, text_length=len(files[path])):
        raise _unreadable(path, why="its aliases expand it beyond its size; vf writes none")
    return docs


def committed_plan(files: Files, *, env: str) -> Obj | None:
    """``plan/<env>.json`` as committed, or None when the environment is new."""
    text = files.get(f"plan/{env}.json")
    if text is None:
        return None
    try:
        loaded = load_json(text)
    except ValueError as exc:
        raise _unreadable(f"plan/{env}.json", why=f"invalid JSON: {exc}") from None
    if not isinstance(loaded, dict):
        raise _unreadable(f"plan/{env}.json", why="not a JSON object")
    return loaded


def committed_environments(files: Files) -> list[str]:
    return sorted(
        PurePosixPath(p).stem for p in files if p.startswith("plan/") and p.endswith(".json")
    )


def build_overlay(files: Files, *, env: str) -> list[Obj]:
    """The objects ``kubectl kustomize overlays/<env>`` gives, namespace left out."""
    if f"overlays/{env}/kustomization.yaml" not in files:
        return []
    return _build(files, folder=f"overlays/{env}", component=False)


def _build(files: Files, *, folder: str, component: bool) -> list[Obj]:
    where = f"{folder}/kustomization.yaml"
    docs = yaml_documents(files, path=where)
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise _unreadable(where, why="expected one kustomization document")
    spec: Obj = docs[0]
    unknown = sorted(set(spec) - _KNOWN_KEYS)
    if unknown:
        raise _unreadable(where, why=f"unsupported field(s) {', '.join(unknown)}")
    objects: list[Obj] = []
    for entry in spec.get("resources") or []:
        path = posixpath.normpath(posixpath.join(folder, str(entry)))
        if f"{path}/kustomization.yaml" in files:
            objects.extend(_build(files, folder=path, component=False))
        else:
            objects.extend(yaml_documents(files, path=path))
    for entry in spec.get("components") or []:
        path = posixpath.normpath(posixpath.join(folder, str(entry)))
        objects.extend(_build(files, folder=path, component=True))
    for patch in spec.get("patches") or []:
        _apply_patch(files, folder=folder, patch=patch, objects=objects)
    for obj in objects:
        obj.get("metadata", {}).pop("namespace", None)
    return objects


def _apply_patch(files: Files, *, folder: str, patch: Any, objects: Sequence[Obj]) -> None:
    where = f"{folder}/kustomization.yaml"
    if not isinstance(patch, dict) or set(patch) != {"path", "target"}:
        raise _unreadable(where, why="only patches with a path and a kind/name target are read")
    target = patch["target"]
    path = posixpath.normpath(posixpath.join(folder, str(patch["path"])))
    ops = yaml_documents(files, path=path)
    if len(ops) != 1 or not isinstance(ops[0], list):
        raise _unreadable(path, why="expected a JSON 6902 patch (a list of operations)")
    matches = [
        o
        for o in objects
        if o.get("kind") == target.get("kind")
        and o.get("metadata", {}).get("name") == target.get("name")
    ]
    if len(matches) != 1:
        raise _unreadable(path, why=f"its target {target} matches {len(matches)} objects")
    for op in ops[0]:
        apply_operation(matches[0], op=op, where=path)


def _parts(pointer: str) -> list[str]:
    return [p.replace("~1", "/").replace("~0", "~") for p in pointer.split("/")[1:]]


def apply_operation(doc: Obj, *, op: Obj, where: str) -> None:
    """One RFC 6902 ``add``/``remove``/``replace`` operation, in place."""
    kind = op.get("op")
    parts = _parts(str(op.get("path", "")))
    if kind not in ("add", "remove", "replace") or not parts:
        raise _unreadable(where, why=f"unsupported patch operation {op!r}")
    parent: Any = doc
    try:
        for part in parts[:-1]:
            parent = parent[int(part)] if isinstance(parent, list) else parent[part]
        last = parts[-1]
        if isinstance(parent, list):
            index = len(parent) if last == "-" else int(last)
            if kind == "remove":
                del parent[index]
            elif kind == "add":
                parent.insert(index, op["value"])
            else:
                parent[index] = op["value"]
        elif kind == "remove":
            del parent[last]
        else:
            parent[last] = op["value"]
    except (KeyError, IndexError, ValueError, TypeError):
        raise _unreadable(
            where, why=f"operation {op.get('op')} {op.get('path')} does not apply"
        ) from None
