"""Emit ``gitops/``: an Argo CD Application and a Flux Kustomization per environment.

Both point at ``overlays/<env>`` in the repository the tree is committed to, or the
Applications at ``manifests/<env>`` when ``vf.emit.manifests`` writes it; an environment
delivered in shards (``vf.emit.shards``) has one of each per shard. Deployments
that KEDA scales carry no ``spec.replicas``; the Applications also ignore that field on
them, so a controller never reports the autoscaler's work as drift.

``gitops/`` keeps itself in sync from Git (ADR 206): each environment has a *gitops root*,
the one object a user applies by hand. For Argo CD it is an Application over
``gitops/argocd`` that includes the environment's Application, its AppProject and
itself (app-of-apps); for Flux a Kustomization over ``gitops/flux`` that applies the
environment's Kustomizations or HelmRelease and its values ConfigMap, the source and
itself, and that the flow's own Kustomizations ``dependsOn``, so a revision's controller
objects are applied before the parts they describe reconcile.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import Any

from vf import names
from vf.emit.gitops.argocd_project import app_project
from vf.emit.gitops.files import FLUX_SOURCE_FILE, argocd_root_file, flux_root_file
from vf.emit.gitops.flux_helm import flux_access, flux_path, helm_release, values_file
from vf.emit.gitops.flux_parts import INFRA, OPTIONAL, WORKERS, deleting, part_spec
from vf.emit.gitops.retired_apps import argocd_retired_files, flux_retired_files
from vf.emit.gitops.shard_apps import argocd_shard_files, flux_shard_file, flux_shard_files
from vf.emit.manifests import reads_manifests, source_path
from vf.emit.retired import Retired
from vf.emit.shards import Shard, argocd_shards, flux_shards, shard_dir
from vf.ir.delivery import ArgoCD, Flux, GitOps
from vf.ir.plan import Plan
from vf.textio import yamlout
from vf.textio.objects import Obj
from vf_runtime.labels import (
    ENVIRONMENT_LABEL,
    FLOW_LABEL,
    MANAGED_BY,
    MANAGER,
    PART_OF,
    is_optional,
)

Tree = dict[str, str]
ARGOCD_API = "argoproj.io/v1alpha1"
FLUX_KUSTOMIZE_API = "kustomize.toolkit.fluxcd.io/v1"
FLUX_SOURCE_API = "source.toolkit.fluxcd.io/v1"
KUSTOMIZE_API = "kustomize.config.k8s.io/v1beta1"
IN_CLUSTER = "https://kubernetes.default.svc"  # Argo CD's own cluster
_COMMIT = re.compile(r"^[0-9a-f]{40}\Z")
_TAG = re.compile(r"^v?[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.-]+)?\Z")  # v1.2.0, 1.2.0-rc.1
_SEMVER_RANGE = re.compile(r"[<>=~^*]|(^|\.)[xX](\.|$)")  # >=1.0.0, ~1.2, 1.x
ARGOCD_SYNC_OPTIONS = (
    "ApplyOutOfSyncOnly=true",
    "CreateNamespace=true",
    "RespectIgnoreDifferences=true",
    "ServerSideApply=true",
)


def scaled_deployments(objects: Sequence[Mapping[str, Any]]) -> list[str]:
    """Names of the Deployments a ScaledObject targets (KEDA owns their replicas)."""
    return sorted(
        str(o["spec"]["scaleTargetRef"]["name"]) for o in objects if o["kind"] == "ScaledObject"
    )


def emit_gitops(
    gitops: GitOps | None,
    *,
    plans: Sequence[Plan],
    objects: Mapping[str, Sequence[Obj]],
    shards: Mapping[str, Sequence[Shard]],
    retired: Mapping[str, Retired] | None = None,
) -> Tree:
    """The ``gitops/argocd`` and ``gitops/flux`` files; nothing without ``gitops:``.
    ``shards``: those of each environment delivered in shards (``vf.emit.shards``);
    ``retired``: the committed shards of each environment that no longer is
    (``vf.emit.retired``)."""
    if gitops is None:
        return {}
    tree: Tree = {}
    retired = retired or {}
    if gitops.argocd is not None:
        manifests = reads_manifests(gitops)
        files: dict[str, Obj] = {}
        for plan in plans:
            count = len(objects[plan.environment])
            parts = shards.get(plan.environment) if argocd_shards(gitops, count=count) else None
            files.update(
                _argocd_files(
                    gitops,
                    argocd=gitops.argocd,
                    plan=plan,
                    objects=objects,
                    manifests=manifests,
                    shards=parts,
                    retired=retired.get(plan.environment),
                )
            )
        tree.update(_folder("gitops/argocd", files=files))
    if gitops.flux is not None:
        files = {}
        for plan in plans:
            env_objects = objects[plan.environment]
            count = len(env_objects)
            parts = shards.get(plan.environment) if flux_shards(gitops, count=count) else None
            old = retired.get(plan.environment)
            files.update(
                _flux_files(
                    gitops, flux=gitops.flux, plan=plan, objects=env_objects, shards=parts, old=old
                )
            )
        if gitops.flux.source is None:
            files[FLUX_SOURCE_FILE] = _git_repository(
                gitops, flux=gitops.flux, flow_id=plans[0].flow_id
            )
        # each release's values ConfigMap is written with the chart (vf.emit.delivery)
        made = [values_file(p.environment) for p in plans] if gitops.flux.helm_release else []
        tree.update(_folder("gitops/flux", files=files, made=made))
    return tree


def _folder(root: str, *, files: Mapping[str, Obj], made: Sequence[str] = ()) -> Tree:
    """One object per file, and a kustomization.yaml so ``kubectl apply -k`` takes them all
    (``made``: files written elsewhere)."""
    tree = {f"{root}/{name}": yamlout.dump(obj) for name, obj in files.items()}
    resources = sorted([*files, *made])
    index = {"apiVersion": KUSTOMIZE_API, "kind": "Kustomization", "resources": resources}
    tree[f"{root}/kustomization.yaml"] = yamlout.dump(index)
    return tree


def root_name(flow_id: str, *, env: str) -> str:
    """The name of an environment's gitops root, for Argo CD and Flux alike."""
    return names.k8s_name(flow_id, env, "gitops")


def project_name(argocd: ArgoCD, *, env: str) -> str:
    """The project of an environment's Application: vf's own per environment with
    ``app_project: true`` (each root keeps its own, so no object has two managers)."""
    return names.k8s_name(argocd.project, env) if argocd.app_project else argocd.project


def _argocd_files(
    gitops: GitOps,
    *,
    argocd: ArgoCD,
    plan: Plan,
    objects: Mapping[str, Sequence[Obj]],
    manifests: bool,
    shards: Sequence[Shard] | None = None,
    retired: Retired | None = None,
) -> dict[str, Obj]:
    """One environment's Argo CD objects: its Application (with ``shards``, one per shard,
    ``vf.emit.gitops.shard_apps``; with ``retired``, one per retired shard,
    ``vf.emit.gitops.retired_apps``), its AppProject when vf writes one, and the root
    Application that keeps those and itself in sync with Git."""
    env = plan.environment
    env_objects = objects[env]
    app = _application(
        gitops,
        argocd=argocd,
        plan=plan,
        scaled=scaled_deployments(env_objects),
        manifests=manifests,
    )
    files: dict[str, Obj] = {f"application-{env}.yaml": app}
    if shards:
        files.update(
            argocd_shard_files(gitops, shared_app=app, flow_id=plan.flow_id, env=env, shards=shards)
        )
    if retired:
        files.update(
            argocd_retired_files(gitops, app=app, flow_id=plan.flow_id, env=env, retired=retired)
        )
    if argocd.app_project:
        files[f"appproject-{env}.yaml"] = app_project(
            gitops,
            argocd=argocd,
            plan=plan,
            objects=env_objects,
            name=project_name(argocd, env=env),
        )
    files[argocd_root_file(env)] = _argocd_root(
        gitops, argocd=argocd, plan=plan, include=sorted([*files, argocd_root_file(env)])
    )
    return files


def _argocd_root(gitops: GitOps, *, argocd: ArgoCD, plan: Plan, include: Sequence[str]) -> Obj:
    """An Application over ``gitops/argocd`` that syncs only ``include`` (this environment's
    files, itself among them) into Argo CD's own namespace: app-of-apps. It lives in the
    ``default`` project, since a project locked to the flow admits none of these kinds."""
    path = "gitops/argocd" if gitops.path == "." else f"{gitops.path}/gitops/argocd"
    sync = _sync_policy(argocd, options=["ServerSideApply=true"])
    return {
        "apiVersion": ARGOCD_API,
        "kind": "Application",
        "metadata": {
            "name": root_name(plan.flow_id, env=plan.environment),
            "namespace": argocd.namespace,
            "labels": _labels(plan),
            "finalizers": ["resources-finalizer.argocd.argoproj.io"],
        },
        "spec": {
            "project": "default",
            "source": {
                "repoURL": gitops.repo_url,
                "targetRevision": gitops.revision,
                "path": path,
                # plain files, these only: the folder's kustomization.yaml lists every
                # environment's, and a directory source never builds it
                "directory": {"include": "{" + ",".join(include) + "}"},
            },
            "destination": {"server": IN_CLUSTER, "namespace": argocd.namespace},
            "syncPolicy": sync,
        },
    }


# A failed operation is retried as Argo CD retries an automated one by default (ADR 214),
# written out so that a sync started by hand (``auto_sync: false``) retries too: with
# ApplyOutOfSyncOnly a retry starts past a failed Job, at the first wave still to apply.
ARGOCD_RETRY: Obj = {
    "limit": 5,
    "backoff": {"duration": "5s", "factor": 2, "maxDuration": "3m"},
}


def _sync_policy(argocd: ArgoCD, *, options: list[str]) -> Obj:
    sync: Obj = {"syncOptions": options}
    if argocd.auto_sync:
        sync["automated"] = {"prune": True, "selfHeal": True}
    sync["retry"] = {"limit": ARGOCD_RETRY["limit"], "backoff": dict(ARGOCD_RETRY["backoff"])}
    return sync


def _labels(plan: Plan) -> dict[str, str]:
    flow = names.label_value(plan.flow_id)
    return {
        MANAGED_BY: MANAGER,
        PART_OF: flow,
        ENVIRONMENT_LABEL: names.label_value(plan.environment),
        FLOW_LABEL: flow,
    }


def _application(
    gitops: GitOps, *, argocd: ArgoCD, plan: Plan, scaled: list[str], manifests: bool
) -> Obj:
    dest = gitops.destination(plan.environment)
    destination: Obj = {"namespace": plan.namespace}
    if dest.cluster is not None:
        destination["name"] = dest.cluster
    else:
        destination["server"] = dest.server or argocd.server
    sync = _sync_policy(argocd, options=list(ARGOCD_SYNC_OPTIONS))
    source: Obj = {
        "repoURL": gitops.repo_url,
        "targetRevision": gitops.revision,
        "path": source_path(gitops, env=plan.environment, manifests=manifests),
    }
    if manifests:
        source["directory"] = {"recurse": False}  # plain files: no kustomize build
    spec: Obj = {
        "project": project_name(argocd, env=plan.environment),
        "source": source,
        "destination": destination,
        "syncPolicy": sync,
    }
    if scaled:
        spec["ignoreDifferences"] = [
            {
                "group": "apps",
                "kind": "Deployment",
                "name": name,
                "jsonPointers": ["/spec/replicas"],
            }
            for name in scaled
        ]
    return {
        "apiVersion": ARGOCD_API,
        "kind": "Application",
        "metadata": {
            "name": names.k8s_name(plan.flow_id, plan.environment),
            "namespace": argocd.namespace,
            "labels": _labels(plan),
            "annotations": {"argocd.argoproj.io/compare-options": "ServerSideDiff=true"},
            "finalizers": ["resources-finalizer.argocd.argoproj.io"],
        },
        "spec": spec,
    }


def _source_name(flow_id: str) -> str:
    return names.k8s_name(flow_id, "deploy")


def _flux_files(
    gitops: GitOps,
    *,
    flux: Flux,
    plan: Plan,
    objects: Sequence[Obj],
    shards: Sequence[Shard] | None = None,
    old: Retired | None = None,
) -> dict[str, Obj]:
    """One environment's Flux objects: a HelmRelease, or the infrastructure Kustomization,
    the workers' Kustomization that depends on it, and one for the objects the flow runs
    without (``vf.emit.gitops.flux_parts``), when the environment has any, after those.
    With ``shards`` these read shard 00, and each other shard has its own
    (``vf.emit.gitops.shard_apps``); with ``old``, its retired shards have theirs
    (``vf.emit.gitops.retired_apps``)."""
    env = plan.environment
    root = {flux_root_file(env): _flux_root(gitops, flux=flux, plan=plan)}
    if flux.helm_release:
        release = helm_release(gitops, flux=flux, plan=plan, source=_flux_source(flux, plan=plan))
        return {f"helmrelease-{env}.yaml": release, **root}
    below = f"overlays/{env}"
    if shards:
        below, objects = shard_dir(env, shards[0].number), shards[0].objects
    part = functools.partial(
        _flux_kustomization, gitops, flux=flux, plan=plan, objects=objects, below=below
    )
    infra, workers = part(part=INFRA), part(part=WORKERS)
    files = {
        f"kustomization-{env}-infra.yaml": infra,
        f"kustomization-{env}.yaml": workers,
        **root,
    }
    if any(is_optional(o) for o in objects):
        files[f"kustomization-{env}-optional.yaml"] = part(part=OPTIONAL)
    live: dict[str, Obj] = {}
    if shards:
        live = flux_shard_files(
            gitops,
            workers=workers,
            infra_name=str(infra["metadata"]["name"]),
            flow_id=plan.flow_id,
            env=env,
            shards=shards,
        )
    if old:
        files_of_twins = (flux_shard_file(env, s.number, optional=True) for s in shards or ())
        twins = [str(live[f]["metadata"]["name"]) for f in files_of_twins if f in live]
        files.update(
            flux_retired_files(
                gitops,
                flux=flux,
                workers=workers,
                optional=files.get(f"kustomization-{env}-optional.yaml"),
                twins=sorted(twins),
                flow_id=plan.flow_id,
                env=env,
                retired=old,
            )
        )
    return {**files, **live}


def _flux_root(gitops: GitOps, *, flux: Flux, plan: Plan) -> Obj:
    """The Kustomization over ``gitops/flux`` that applies this environment's controller
    objects (and the source, and itself) in Flux's own cluster: every other environment's
    are deleted from its build by label, as the flow's parts split the overlay. It applies
    as the controller itself (no impersonation, no remote kubeconfig), since its objects
    live beside it; pruning on, so what leaves Git leaves the cluster."""
    env_label = names.label_value(plan.environment)
    others = f"{ENVIRONMENT_LABEL},{ENVIRONMENT_LABEL}!={env_label}"
    return {
        "apiVersion": FLUX_KUSTOMIZE_API,
        "kind": "Kustomization",
        "metadata": {
            "name": root_name(plan.flow_id, env=plan.environment),
            "namespace": flux.namespace,
            "labels": _labels(plan),
        },
        "spec": {
            "interval": flux.interval,
            "retryInterval": flux.retry_interval,
            "path": flux_path(gitops, flux=flux, below="gitops/flux"),
            "prune": True,
            "sourceRef": _flux_source(flux, plan=plan),
            "timeout": flux.timeout,
            "patches": [deleting(others)],
            "wait": False,
        },
    }


def _flux_source(flux: Flux, *, plan: Plan) -> Obj:
    if flux.source is None:
        return {"kind": "GitRepository", "name": _source_name(plan.flow_id)}
    source = {"kind": flux.source.kind, "name": flux.source.name}
    if flux.source.namespace is not None:
        source["namespace"] = flux.source.namespace
    return source


def _flux_kustomization(
    gitops: GitOps, *, flux: Flux, plan: Plan, objects: Sequence[Obj], part: str, below: str
) -> Obj:
    """The Kustomization of one part of an environment's overlay (``vf.emit.gitops.flux_parts``)
    or shard 00; ``below``: the folder it reads, from the tree's root."""
    spec: Obj = {
        "interval": flux.interval,
        "retryInterval": flux.retry_interval,
        "path": flux_path(gitops, flux=flux, below=below),
        "prune": True,
        "sourceRef": _flux_source(flux, plan=plan),
        "timeout": flux.timeout,
        **part_spec(part, objects=objects),
    }
    # a revision's controller objects (this one among them) are applied first
    spec["dependsOn"] = [{"name": root_name(plan.flow_id, env=plan.environment)}]
    if part == WORKERS:
        spec["dependsOn"].append({"name": _kustomization_name(plan, part=INFRA)})
    elif part == OPTIONAL:
        spec["dependsOn"].append({"name": _kustomization_name(plan, part=WORKERS)})
    flux_access(spec, flux, gitops, environment=plan.environment)
    return {
        "apiVersion": FLUX_KUSTOMIZE_API,
        "kind": "Kustomization",
        "metadata": {
            "name": _kustomization_name(plan, part=part),
            "namespace": flux.namespace,
            "labels": _labels(plan),
        },
        "spec": spec,
    }


def _kustomization_name(plan: Plan, *, part: str) -> str:
    if part in (INFRA, OPTIONAL):
        return names.k8s_name(plan.flow_id, plan.environment, part)
    return names.k8s_name(plan.flow_id, plan.environment)


def git_ref(revision: str, *, kind: str | None) -> dict[str, str]:
    """A GitRepository ``ref``: the declared kind, else what the revision looks like."""
    if kind is None:
        if _COMMIT.match(revision):
            kind = "commit"
        elif revision.startswith("refs/"):
            kind = "name"
        elif _TAG.match(revision):
            kind = "tag"
        elif _SEMVER_RANGE.search(revision):
            kind = "semver"
        else:
            kind = "branch"
    return {kind: revision}


def _git_repository(gitops: GitOps, *, flux: Flux, flow_id: str) -> Obj:
    ref = git_ref(gitops.revision, kind=flux.revision_type)
    flow = names.label_value(flow_id)
    return {
        "apiVersion": FLUX_SOURCE_API,
        "kind": "GitRepository",
        "metadata": {
            "name": _source_name(flow_id),
            "namespace": flux.namespace,
            "labels": {
                MANAGED_BY: MANAGER,
                PART_OF: flow,
                FLOW_LABEL: flow,
            },
        },
        "spec": {
            "interval": "1m",
            "ref": ref,
            "url": gitops.repo_url,
            **({"secretRef": {"name": flux.secret_ref}} if flux.secret_ref else {}),
        },
    }
