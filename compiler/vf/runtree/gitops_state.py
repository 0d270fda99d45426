"""The controllers' own objects as the cluster holds them, not as the newest commit says
(ADR 206).

Argo CD's Applications and AppProjects, Flux's Kustomizations, HelmReleases, sources and
the ConfigMaps a HelmRelease reads its values from are objects in the cluster like any
other; each controller reads them there (argo-cd ``controller/appcontroller.go`` gets the
Application and its project from the informer, helm-controller reads ``valuesFrom`` with
a client ``Get``, fluxcd/pkg ``chartutil/values.go``). A commit reaches them only through
whatever applies ``gitops/``:

- the first sync applies what the tree README tells a user to apply by hand: the
  environment's root (an Application over ``gitops/argocd``, a Kustomization over
  ``gitops/flux``, with the GitRepository it reads), or, in a tree without roots, every
  controller object of the environment, once;
- at every later commit, each root the cluster holds applies its part of ``gitops/`` from
  that commit (Argo CD: the files its ``directory.include`` names; Flux: the build less
  what its delete patches match) and prunes what left it. A root read with its own older
  spec may name files the commit changed, so this repeats until nothing changes, as the
  root's own refresh after it updated itself does. Without a root nothing changes: the
  cluster keeps the first commit's objects.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from vf.names import label_value
from vf.runtree.flux_sync import part_objects
from vf.runtree.manifests import key
from vf.textio.objects import Obj
from vf.textio.yaml_read import reader
from vf_runtime.labels import ENVIRONMENT_LABEL

Key = tuple[str, str, str]
Found = list[tuple[str, Obj]]  # (file name in the gitops folder, object)
_INDEX_API = "kustomize.config.k8s.io/v1beta1"
_ROUNDS = 4  # a root updating its own spec settles in two; more means a loop


def folder(mode: str) -> str:
    return "argocd" if mode == "argocd" else "flux"


def tree_objects(tree: Path, *, mode: str) -> Found:
    """Every controller object the commit holds under ``gitops/<argocd|flux>``."""
    found: Found = []
    for path in sorted((tree / "gitops" / folder(mode)).glob("*.yaml")):
        for doc in reader("safe").load_all(path.read_text(encoding="utf-8")):
            if isinstance(doc, dict) and doc.get("kind") and doc.get("apiVersion") != _INDEX_API:
                found.append((path.name, doc))
    return found


def of_env(obj: Obj, env: str) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels.get(ENVIRONMENT_LABEL) == label_value(env)


def is_root(obj: Obj, *, mode: str) -> bool:
    """An object that applies ``gitops/`` itself."""
    spec = obj.get("spec") or {}
    if mode == "argocd":
        path = str((spec.get("source") or {}).get("path", ""))
        return obj.get("kind") == "Application" and path.endswith("gitops/argocd")
    return obj.get("kind") == "Kustomization" and str(spec.get("path", "")).rstrip("/").endswith(
        "gitops/flux"
    )


def _braces(pattern: str) -> list[str]:
    """``{a,b}`` alternatives, as Argo CD's include globs write a list of files."""
    if pattern.startswith("{") and pattern.endswith("}"):
        return [p.strip() for p in pattern[1:-1].split(",") if p.strip()]
    return [pattern]


def root_part(root: Obj, found: Found, *, mode: str) -> Found:
    """What the root applies of the commit's ``gitops/`` folder."""
    if mode == "argocd":
        include = str(
            ((root["spec"].get("source") or {}).get("directory") or {}).get("include", "*")
        )
        patterns = _braces(include)
        return [(f, o) for f, o in found if any(fnmatch.fnmatch(f, p) for p in patterns)]
    kept = {id(o) for o in part_objects(root["spec"], [o for _, o in found])}
    return [(f, o) for f, o in found if id(o) in kept]


def _bootstrap(found: Found, *, env: str, mode: str) -> list[Obj]:
    """What a user applies by hand, once: the environment's root and the GitRepository it
    reads; a tree without roots, every controller object of the environment."""
    roots = [o for _, o in found if is_root(o, mode=mode) and of_env(o, env)]
    if roots:
        sources = [o for _, o in found if o.get("kind") == "GitRepository"]
        return [*sources, *roots]
    return [o for _, o in found if of_env(o, env) or o.get("kind") == "GitRepository"]


class GitopsState:
    """The controller objects one cluster holds, and what each root applied."""

    def __init__(self) -> None:
        self.objects: dict[Key, Obj] = {}
        self.inventory: dict[Key, set[Key]] = {}
        self.pruned: list[Obj] = []  # what the last reconcile pruned, for its finalizers

    def held(self, *, env: str, kind: str) -> list[Obj]:
        """The environment's objects of ``kind`` the cluster holds, roots aside."""
        mode = "argocd" if kind in ("Application", "AppProject") else "flux"
        return [
            o
            for k, o in sorted(self.objects.items())
            if k[0] == kind and of_env(o, env) and not is_root(o, mode=mode)
        ]

    def find(self, kind: str, namespace: str, name: str) -> Obj | None:
        return self.objects.get((kind, namespace, name))

    def all(self) -> list[Obj]:
        return [o for _, o in sorted(self.objects.items())]

    def reconcile(self, tree: Path, *, env: str, mode: str, log: Any = None) -> list[str]:
        """Bring the cluster's controller objects to what ``tree`` gives them; returns what
        changed, in words."""
        found = tree_objects(tree, mode=mode)
        changes: list[str] = []
        self.pruned = []
        if not any(of_env(o, env) for o in self.objects.values()):
            for obj in _bootstrap(found, env=env, mode=mode):
                self.objects[key(obj)] = obj
                changes.append(f"applied by hand: {obj['kind']} {key(obj)[2]}")
        for _ in range(_ROUNDS):
            roots = [
                k
                for k, o in sorted(self.objects.items())
                if is_root(o, mode=mode) and of_env(o, env)
            ]
            step = [c for r in roots if r in self.objects for c in self._root_applies(r, found)]
            if not step:
                break
            changes += step
        if log is not None:
            for change in changes:
                log(f"gitops: {change}")
        return changes

    def _root_applies(self, root: Key, found: Found) -> list[str]:
        obj = self.objects[root]
        mode = "argocd" if obj["kind"] == "Application" else "flux"
        part = [o for _, o in root_part(obj, found, mode=mode)]
        changes = [
            f"{root[2]} applies {o['kind']} {key(o)[2]}"
            for o in part
            if self.objects.get(key(o)) != o
        ]
        for o in part:
            self.objects[key(o)] = o
        wanted = {key(o) for o in part}
        for gone in sorted(self.inventory.get(root, set()) - wanted):
            pruned = self.objects.pop(gone, None)
            if pruned is not None:
                self.pruned.append(pruned)
                changes.append(f"{root[2]} prunes {gone[0]} {gone[2]}")
        self.inventory[root] = wanted if root in self.objects else set()
        return changes


def ordered(kustomizations: Iterable[Obj]) -> list[Obj]:
    """Kustomizations, each after those it depends on."""
    pending = {o["metadata"]["name"]: o for o in kustomizations}
    out: list[Obj] = []
    while pending:
        ready = sorted(
            n
            for n, o in pending.items()
            if not {str(d.get("name")) for d in o["spec"].get("dependsOn") or []} & set(pending)
        )
        if not ready:  # a cycle: Flux never applies these either
            break
        for name in ready:
            out.append(pending.pop(name))
    return out
