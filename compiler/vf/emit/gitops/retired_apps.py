"""The controller objects of a retired shard (``vf.emit.retired``, ADR 0256): each old
shard's Kustomization or Application, under its own name, reading the environment's
empty ``shards/<env>/retired/`` folder.

Flux: made from the environment's workers part (the same source, interval, timeout and
access), ``prune: true``, nothing to wait for, and ``dependsOn`` the gitops root and the
part that now holds what the shard held: the workers part, or for a shard's
``-optional`` twin the environment's optional part (the workers part when it has none).
kustomize-controller reconciles it only once that part is Ready at the same revision,
i.e. has applied every moved object and written its own owner labels on it; its prune
then deletes only what still carries the shard's labels (``DeleteOptions.Inclusions``):
the objects of a node the same commit removed.

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
    return f"nothing: retired below the threshold; its nodes are {held_by}'s"


def _annotate(obj: Obj, number: str, *, held_by: str, **more: str) -> None:
    annotations = obj["metadata"].setdefault("annotations", {})
    annotations[SHARD_KEY] = number
    annotations[SHARD_HOLDS_KEY] = _holds(held_by)
    annotations.update(more)


def argocd_retired_files(
    gitops: GitOps, *, app: Obj, flow_id: str, env: str, numbers: Sequence[str]
) -> dict[str, Obj]:
    """One retired Application per shard number, made from the environment's ``app``."""
    files: dict[str, Obj] = {}
    for number in numbers:
        retired = copy.deepcopy(app)
        spec = retired["spec"]
        spec.pop("ignoreDifferences", None)
        spec["source"]["path"] = shard_path(gitops, env=env, number=RETIRED)
        spec["source"]["directory"] = {"recurse": False}
        spec["syncPolicy"]["syncOptions"] = [*spec["syncPolicy"]["syncOptions"], RETIRED_PRUNE]
        retired["metadata"]["name"] = shard_name(flow_id, env=env, number=number)
        _annotate(retired, number, held_by=str(app["metadata"]["name"]), **{SYNC_WAVE: SHARD_WAVE})
        files[argocd_shard_file(env, number)] = retired
    return files


def flux_retired_files(
    gitops: GitOps,
    *,
    flux: Flux,
    workers: Obj,
    optional: Obj | None,
    flow_id: str,
    env: str,
    retired: Retired,
) -> dict[str, Obj]:
    """One retired Kustomization per shard number, and per ``-optional`` twin, made from
    the environment's ``workers`` part; ``optional``: its optional part, if it has one."""
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
        name = shard_name(flow_id, env=env, number=number)
        part["metadata"]["name"] = k8s_name(name, "optional") if twin else name
        _annotate(part, number, held_by=str(heir["metadata"]["name"]))
        files[flux_shard_file(env, number, optional=twin)] = part
    return dict(sorted(files.items()))
