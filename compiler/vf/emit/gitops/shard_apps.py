"""The controller objects of an environment delivered in shards (``vf.emit.shards``, ADR 220).

Argo CD: the environment's Application reads shard 00, what the workers share, and each
other shard gets an Application of its own, ``<flow>-<env>-shard-<nn>``, made from it:
the same project, destination, sync policy and retry, its own source folder and the
``ignoreDifferences`` of its own scaled Deployments. The environment's root includes them
all; the shards carry a later sync wave than the shared Application, so a root's sync
creates the shared part first. Each Application has its own health and sync status.
The shared Application's own default is ``Prune=false``, and what shard 00 holds says
``Prune=true`` (``vf.emit.ordering``): the nodes it held before the environment crossed
the threshold are left for the shards to take, not pruned before they have (ADR 0238).

Flux: the infra, workers and optional Kustomizations read shard 00 and split it as they
split an overlay (``vf.emit.gitops.flux_parts``); each other shard gets a Kustomization,
``dependsOn`` the root and the infra part, pruning on, waiting for its own Deployments
and StatefulSets, and, where the shard holds objects of an API the cluster may lack, a
twin ``-optional`` Kustomization over the same folder that applies only those (ADR 202).
An object that moves between Kustomizations must be applied by its new owner before the
old one collects it (ADR 0225): the workers part, which held every node before the
environment crossed the threshold, ``dependsOn`` every shard. No node moves between
live shards: a change of the bucket count numbers every shard anew and retires the old
ones (ADR 0258, ``vf.emit.gitops.retired_apps``).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

from vf import names
from vf.emit.gitops.flux_parts import OPTIONAL, OPTIONAL_SELECTOR, WORKERS, deleting, part_spec
from vf.emit.shards import Shard, shard_path
from vf.ir.delivery import GitOps
from vf.textio.objects import Obj
from vf_runtime.labels import SHARD_HOLDS_KEY, SHARD_KEY, is_optional

SYNC_WAVE = "argocd.argoproj.io/sync-wave"
SHARED_PRUNE = "Prune=false"  # the shared Application's default, ADR 0238
SHARD_WAVE = "1"  # after the shared Application (wave 0) and the AppProject (-1)


def shard_name(flow_id: str, *, env: str, number: str) -> str:
    """``<flow>-<env>-shard-<nn>``: the Application and Kustomization of one shard."""
    return names.k8s_name(flow_id, env, f"shard-{number}")


def argocd_shard_file(env: str, number: str) -> str:
    return f"application-{env}-shard-{number}.yaml"


def flux_shard_file(env: str, number: str, *, optional: bool = False) -> str:
    return f"kustomization-{env}-shard-{number}{'-optional' if optional else ''}.yaml"


def _annotate(obj: Obj, shard: Shard, **more: str) -> None:
    annotations = obj["metadata"].setdefault("annotations", {})
    annotations[SHARD_KEY] = shard.number
    annotations[SHARD_HOLDS_KEY] = shard.holds()
    annotations.update(more)


def _ignored(shard: Shard) -> list[Obj]:
    scaled = sorted(
        str(o["spec"]["scaleTargetRef"]["name"])
        for o in shard.objects
        if o["kind"] == "ScaledObject"
    )
    return [
        {"group": "apps", "kind": "Deployment", "name": name, "jsonPointers": ["/spec/replicas"]}
        for name in scaled
    ]


def argocd_shard_files(
    gitops: GitOps, *, shared_app: Obj, flow_id: str, env: str, shards: Sequence[Shard]
) -> dict[str, Obj]:
    """Shard 00's Application (``shared_app``, annotated here, its ``ignoreDifferences``
    its own) and one Application per other shard, made from it."""
    files: dict[str, Obj] = {}
    for shard in shards:
        app = shared_app if shard is shards[0] else copy.deepcopy(shared_app)
        spec = app["spec"]
        spec["source"]["path"] = shard_path(gitops, env=env, number=shard.number)
        spec["source"]["directory"] = {"recurse": False}  # plain files: no kustomize build
        spec.pop("ignoreDifferences", None)
        if _ignored(shard):
            spec["ignoreDifferences"] = _ignored(shard)
        if shard is shards[0]:
            _annotate(app, shard)
            continue
        app["metadata"]["name"] = shard_name(flow_id, env=env, number=shard.number)
        _annotate(app, shard, **{SYNC_WAVE: SHARD_WAVE})
        files[argocd_shard_file(env, shard.number)] = app
    # The shared Application prunes only what says Prune=true (what no node owns): on the
    # commit that crosses the threshold it held every node, and nothing orders its prune
    # after the shard Applications' first sync (ADR 0238).
    shared_app["spec"]["syncPolicy"]["syncOptions"].append(SHARED_PRUNE)
    return files


def flux_shard_files(
    gitops: GitOps,
    *,
    workers: Obj,
    infra_name: str,
    flow_id: str,
    env: str,
    shards: Sequence[Shard],
) -> dict[str, Obj]:
    """A Kustomization per shard past 00, made from the workers part (``workers``), and a
    twin for a shard's optional objects. Each reads its folder beside shard 00's, which
    the workers part reads."""
    files: dict[str, Obj] = {}
    root = workers["spec"]["dependsOn"][0]
    base = str(workers["spec"]["path"]).rpartition("/")[0]
    for shard in shards[1:]:
        part = copy.deepcopy(workers)
        name = shard_name(flow_id, env=env, number=shard.number)
        spec = part["spec"]
        for field in ("patches", "healthChecks", "wait"):
            spec.pop(field, None)
        spec.update(_shard_spec(shard))
        spec["path"] = f"{base}/{shard.number}"
        spec["dependsOn"] = [dict(root), {"name": infra_name}]
        part["metadata"]["name"] = name
        _annotate(part, shard)
        files[flux_shard_file(env, shard.number)] = part
        if any(is_optional(o) for o in shard.objects):
            twin = copy.deepcopy(part)
            for field in ("patches", "healthChecks", "wait"):
                twin["spec"].pop(field, None)
            twin["spec"].update(part_spec(OPTIONAL, objects=shard.objects))
            twin["spec"]["dependsOn"] = [dict(root), {"name": name}]
            twin["metadata"]["name"] = names.k8s_name(name, "optional")
            files[flux_shard_file(env, shard.number, optional=True)] = twin
    workers["spec"]["dependsOn"] += [
        {"name": shard_name(flow_id, env=env, number=s.number)} for s in shards[1:]
    ]
    return files


def _shard_spec(shard: Shard) -> Obj:
    """A shard's part: the workers part's health checks, less the patch that removes the
    shared objects (a shard holds none); its optional objects removed when it has any."""
    spec = part_spec(WORKERS, objects=shard.objects)
    del spec["patches"]
    if any(is_optional(o) for o in shard.objects):
        spec["patches"] = [deleting(OPTIONAL_SELECTOR)]
    return spec
