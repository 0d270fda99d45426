"""The controller objects of a retired shard (``vf.emit.retired``, ADRs 0256, 0258): each
old shard's Kustomization or Application, under its own name, reading the environment's
empty ``shards/<env>/retired/`` folder.

Flux: made from the environment's workers part (the same source, interval, timeout and
access), ``prune: true``, nothing to wait for, and ``dependsOn`` the gitops root and the
part that now holds what the shard held: the workers part, or for a shard's
``-optional`` twin the environment's optional part (the workers part when it has none),
and each live shard's ``-optional`` twin. In a sharded environment the workers part
itself depends on every live shard. kustomize-controller reconciles it only once those
are Ready at the same revision, i.e. have applied every moved object and written their
own owner labels on it; its prune then deletes only what still carries the shard's
labels (``DeleteOptions.Inclusions``): the objects of a node the same commit removed.

Argo CD: made from the environment's Application, with the shard's sync wave and
``Prune=false`` appended to its ``syncOptions``: no Application waits for another, so
what it still tracks is never pruned before the environment's Application takes it.
What a removed node left stays, listed as requiring pruning.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

from vf.emit.gitops.flux_helm import flux_path
from vf.emit.gitops.shard_apps import (
    SHARD_WAVE,
    SYNC_WAVE,
    argocd_shard_file,
    flux_shard_file,
    shard_name,
)
from vf.emit.retired import RETIRED, Retired, retired_dir
from vf.emit.shards import shard_path
from vf.ir.delivery import Flux, GitOps
from vf.names import k8s_name
from vf.textio.objects import Obj
from vf_runtime.labels import SHARD_HOLDS_KEY, SHARD_KEY

RETIRED_PRUNE = "Prune=false"


def _holds(held_by: str) -> str:
    return f"nothing: retired; its nodes are {held_by}'s"


def _annotate(obj: Obj, number: str, *, held_by: str, **more: str) -> None:
    annotations = obj["metadata"].setdefault("annotations", {})
    annotations[SHARD_KEY] = number
    annotations[SHARD_HOLDS_KEY] = _holds(held_by)
    annotations.update(more)


def argocd_retired_files(
    gitops: GitOps, *, app: Obj, flow_id: str, env: str, retired: Retired
) -> dict[str, Obj]:
    """One retired Application per shard number, made from the environment's ``app``."""
    held_by = "the live shards" if retired.sharded else str(app["metadata"]["name"])
    files: dict[str, Obj] = {}
    for number in retired.argocd:
        obj = copy.deepcopy(app)
        spec = obj["spec"]
        spec.pop("ignoreDifferences", None)
        spec["source"]["path"] = shard_path(gitops, env=env, number=RETIRED)
        spec["source"]["directory"] = {"recurse": False}
        options = spec["syncPolicy"]["syncOptions"]
        if RETIRED_PRUNE not in options:  # a sharded environment's Application says it
            spec["syncPolicy"]["syncOptions"] = [*options, RETIRED_PRUNE]
        obj["metadata"]["name"] = shard_name(flow_id, env=env, number=number)
        _annotate(obj, number, held_by=held_by, **{SYNC_WAVE: SHARD_WAVE})
        files[argocd_shard_file(env, number)] = obj
    return files


def flux_retired_files(
    gitops: GitOps,
    *,
    flux: Flux,
    workers: Obj,
    optional: Obj | None,
    twins: Sequence[str],
    flow_id: str,
    env: str,
    retired: Retired,
) -> dict[str, Obj]:
    """One retired Kustomization per shard number, and per ``-optional`` twin, made from
    the environment's ``workers`` part; ``optional``: its optional part, if it has one;
    ``twins``: the live shards' ``-optional`` Kustomizations."""
    root = workers["spec"]["dependsOn"][0]
    files: dict[str, Obj] = {}
    for number, twin in [(n, False) for n in retired.flux] + [(n, True) for n in retired.optional]:
        heir = optional if twin and optional is not None else workers
        part = copy.deepcopy(workers)
        spec = part["spec"]
        for field in ("patches", "healthChecks"):
            spec.pop(field, None)
        spec["wait"] = False
        spec["prune"] = True
        spec["path"] = flux_path(gitops, flux=flux, below=retired_dir(env))
        spec["dependsOn"] = [dict(root), {"name": heir["metadata"]["name"]}]
        spec["dependsOn"] += [{"name": t} for t in twins] if twin else []
        name = shard_name(flow_id, env=env, number=number)
        part["metadata"]["name"] = k8s_name(name, "optional") if twin else name
        held_by = "the live shards" if retired.sharded else str(heir["metadata"]["name"])
        _annotate(part, number, held_by=held_by)
        files[flux_shard_file(env, number, optional=twin)] = part
    return dict(sorted(files.items()))
