"""Apply a rendered tree the way a sync tool does: kubectl and Flux apply everything at once,
Argo CD applies by sync wave, each healthy before the next, and Argo CD and Helm run Helm's
``post-install``/``post-upgrade`` hooks after the rest. Argo CD, Flux and Helm prune last
(Helm: what left the release; hooks are not part of a release, so never pruned); ``kubectl
apply`` without ``--prune`` leaves what left the tree in place."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from vf.commands.runtree.cluster import Cluster, wave_of
from vf.commands.runtree.images import ImageResolver
from vf.commands.runtree.manifests import TreeEnvironment

Obj = dict[str, Any]


HOOK_MODES = ("argocd", "helm")
PRUNE_MODES = ("argocd", "flux", "helm")


def _is_hook(obj: Obj, mode: str) -> bool:
    hooks = (obj["metadata"].get("annotations") or {}).get("helm.sh/hook", "")
    return mode in HOOK_MODES and bool({"post-install", "post-upgrade"} & set(hooks.split(",")))


def _delete_policy(obj: Obj) -> set[str]:
    policy = (obj["metadata"].get("annotations") or {}).get("helm.sh/hook-delete-policy", "")
    return {p.strip() for p in policy.split(",")}


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
            k = (hook["kind"], hook["metadata"]["namespace"], hook["metadata"]["name"])
            if "before-hook-creation" in _delete_policy(hook) and k in cluster.objects:
                cluster.delete([k])
                cluster.recreated.append(k[2])
                cluster.run_until(cluster.drained, timeout=timeout)
        errors += apply(group)
        cluster.run_until(functools.partial(_healthy, cluster, _keys(group)), timeout=timeout)
        done = [h for h in group if "hook-succeeded" in _delete_policy(h)]
        cluster.delete(k for k in _keys(done) if _complete(cluster, k))
    return errors


def _complete(cluster: Cluster, k: tuple[str, str, str]) -> bool:
    controller = cluster.controllers.get(k)
    return controller is not None and controller.status == "Complete"


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
    if mode in PRUNE_MODES:
        wanted = _keys(objects)
        cluster.delete(
            k
            for k, owner in cluster.owner.items()
            if owner == app and k not in wanted and not _is_hook(cluster.objects[k], mode)
        )
    return errors
