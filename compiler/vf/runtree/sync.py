"""Apply a rendered tree the way a sync tool does: kubectl and Flux apply everything at once,
Argo CD applies by sync wave, each healthy before the next, and Argo CD and Helm run Helm's
``post-install``/``post-upgrade`` hooks after the rest. Pruning comes last."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from vf.runtree.cluster import Cluster, wave_of
from vf.runtree.images import ImageResolver
from vf.runtree.manifests import TreeEnvironment

Obj = dict[str, Any]


HOOK_MODES = ("argocd", "helm")


def _is_hook(obj: Obj, mode: str) -> bool:
    hooks = (obj["metadata"].get("annotations") or {}).get("helm.sh/hook", "")
    return mode in HOOK_MODES and bool({"post-install", "post-upgrade"} & set(hooks.split(",")))


def _keys(objects: Sequence[Obj]) -> set[tuple[str, str, str]]:
    return {(o["kind"], o["metadata"]["namespace"], o["metadata"]["name"]) for o in objects}


def _healthy(cluster: Cluster, keys: set[tuple[str, str, str]]) -> bool:
    return all(c.healthy() for k, c in cluster.controllers.items() if k in keys)


def _run_hooks(
    cluster: Cluster, hooks: list[Obj], *, apply: Callable[[list[Obj]], list[str]], timeout: float
) -> list[str]:
    """Helm post-install/post-upgrade hooks, by weight; ``before-hook-creation`` deletes the
    previous hook object first, so the hook runs on every sync."""
    errors: list[str] = []
    weights: dict[int, list[Obj]] = {}
    for hook in hooks:
        annotations = hook["metadata"].get("annotations") or {}
        weights.setdefault(int(annotations.get("helm.sh/hook-weight", 0)), []).append(hook)
    for weight in sorted(weights):
        group = weights[weight]
        for hook in group:
            policy = (hook["metadata"].get("annotations") or {}).get(
                "helm.sh/hook-delete-policy", ""
            )
            k = (hook["kind"], hook["metadata"]["namespace"], hook["metadata"]["name"])
            if "before-hook-creation" in policy and k in cluster.objects:
                cluster.delete([k])
                cluster.recreated.append(k[2])
                cluster.run_until(cluster.drained, timeout=timeout)
        errors += apply(group)
        cluster.run_until(functools.partial(_healthy, cluster, _keys(group)), timeout=timeout)
    return errors


def sync(
    cluster: Cluster,
    tree: TreeEnvironment,
    resolver: ImageResolver,
    *,
    mode: str,
    app: str,
    timeout: float,
) -> list[str]:
    """Apply the tree as ``mode`` does: kubectl and Flux at once; Argo CD by sync waves, each
    healthy before the next; Argo CD and Helm run Helm hooks after the rest; prune last."""
    objects = list(tree.objects)
    hooks = [o for o in objects if _is_hook(o, mode)]
    plain = [o for o in objects if not _is_hook(o, mode)]

    def apply(group: list[Obj]) -> list[str]:
        return cluster.apply(group, app=app, resolver=resolver, mode=mode, prune=False)

    errors: list[str] = []
    waves: dict[int, list[Obj]] = {}
    for obj in plain:
        waves.setdefault(wave_of(obj) if mode == "argocd" else 0, []).append(obj)
    for wave in sorted(waves):
        errors += apply(waves[wave])
        if mode == "argocd" or hooks:
            healthy = functools.partial(_healthy, cluster, _keys(waves[wave]))
            cluster.run_until(healthy, timeout=timeout)
    errors += _run_hooks(cluster, hooks, apply=apply, timeout=timeout)
    wanted = _keys(objects)
    cluster.delete([k for k, owner in cluster.owner.items() if owner == app and k not in wanted])
    return errors
