"""An environment delivered in shards (ADR 220), as the controllers read it.

Each Argo CD Application and Flux Kustomization of such an environment reads one folder
``shards/<env>/<nn>/`` of plain files: Argo CD parses the folder's files (a directory
source), kustomize-controller builds the kustomization.yaml it generates over them. Here
both read the folder's objects, with the namespace the overlay's render gives them. The
folder a retired shard reads, ``shards/<env>/retired/`` (ADR 0256), holds no manifest, so
both read no object from it.

Argo CD: each Application is its own operation, its own prune and its own deletion, so
what it applied is owned by it (the environment's own Application keeps the run's
owner). The operations run one after another in the order of the root's sync waves, the
shared Application first: one order the real controller, which runs them side by side,
can take, and the one the waves ask for.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from vf.runtree.cluster import wave_of
from vf.runtree.manifests import TreeEnvironment, parse_objects
from vf.textio.objects import Obj
from vf.textio.safe_read import read_regular
from vf_runtime.labels import SHARD_KEY

_SHARD_PATH = re.compile(r"(?:^|/)(shards/[^/]+/[^/]+)/*\Z")
_FILE_BYTES = 64 * 1024 * 1024


def shard_folder(tree: Path, path: str) -> Path | None:
    """The tree's folder a controller path names when it is a shard's, else None."""
    found = _SHARD_PATH.search(path)
    return None if found is None else tree / found.group(1)


def folder_objects(tree: TreeEnvironment, folder: Path) -> tuple[Obj, ...]:
    """The objects of a shard folder's files, as the overlay's render gives them."""
    objects: list[Obj] = []
    for path in sorted(folder.glob("*.y*ml")):
        text = read_regular(path, limit=_FILE_BYTES).decode("utf-8")
        objects += parse_objects(text, source=str(path))
    for obj in objects:
        obj.setdefault("metadata", {}).setdefault("namespace", tree.plan["namespace"])
    return tuple(objects)


def source_objects(tree: TreeEnvironment, path: str) -> tuple[Obj, ...]:
    """What a controller reading ``path`` gets: a shard's objects, else the render's."""
    folder = shard_folder(tree.tree, path)
    return tree.objects if folder is None else folder_objects(tree, folder)


def owner(app: str, application: Obj) -> str:
    """Who owns what an Application applied: the run's owner for the environment's own
    Application, the run's and the shard's for a shard's."""
    number = (application["metadata"].get("annotations") or {}).get(SHARD_KEY)
    if number is None or not str(number).strip("0"):
        return app
    return f"{app}#shard-{number}"


def each_application(
    tree: TreeEnvironment,
    held: list[Obj],
    *,
    app: str,
    operation: Callable[[TreeEnvironment, str], list[str]],
) -> list[str]:
    """Run ``operation`` (an Argo CD operation and its retries) for each Application the
    cluster holds for the environment, in the root's wave order, on what that Application
    reads; with one Application (or none), on the whole render."""
    if len(held) <= 1:
        return operation(tree, app)
    errors: list[str] = []
    for application in sorted(held, key=lambda a: (wave_of(a), a["metadata"]["name"])):
        path = str((application["spec"].get("source") or {}).get("path", ""))
        part = replace(
            tree,
            objects=source_objects(tree, path),
            application=str(application["metadata"]["name"]),
        )
        errors += operation(part, owner(app, application))
    return errors
