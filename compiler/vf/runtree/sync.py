"""Apply a rendered tree the way a sync tool does: kubectl applies everything at once, Flux
as the tree's Kustomizations or HelmRelease say (``flux_sync``), Argo CD by sync wave, each
healthy before the next (a Job once it has completed), pruning each old object in its
wave or last as gitops-engine does (``argocd_sync``); Argo CD and Helm run Helm's
``post-install``/``post-upgrade`` hooks after the rest. Flux and Helm prune last (Helm:
what left the release; hooks are not part of a release, so never pruned); ``kubectl
apply`` without ``--prune`` leaves what left the tree in place.

An object of a kind the cluster does not serve (``Cluster.unserved``, ADR 0202): kubectl
applies the rest; Argo CD refuses the whole sync at its dry-run unless the object says
``SkipDryRunOnMissingResource=true``, and then fails in that object's wave, so no later
wave runs; kustomize-controller applies none of the Kustomization's objects, nor those of
the Kustomizations that depend on it; Helm applies none of the release. A refusal that
leaves every other object applied is logged, not returned: the flow runs without it.

An Argo CD operation that ends Failed is retried as the Application says
(``argocd_sync.retry_of``), after its wait scaled as ``--backoff`` scales a pod's back-off;
each retry leaves out what is in sync when the Application says ``ApplyOutOfSyncOnly``
(ADR 214). A failure that every retry would meet again (nothing new to apply) is logged
with the retries left, not waited out."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from vf.runtree import flux_gc
from vf.runtree.argocd_sync import (
    KUBERNETES_BACKOFF,
    OUT_OF_SYNC_ONLY,
    app_options,
    argocd_wave,
    held_application,
    not_permitted,
    options,
    out_of_sync,
    prune_waves,
    retry_of,
    wipes_out,
)
from vf.runtree.argocd_sync import prunes as argocd_prunes
from vf.runtree.cluster import Cluster, wave_of
from vf.runtree.flux_gc import never_pruned
from vf.runtree.flux_sync import healthy as flux_healthy
from vf.runtree.flux_sync import job_reader, part_objects, seconds, wait_set
from vf.runtree.gitops_state import ordered
from vf.runtree.images import ImageResolver
from vf.runtree.manifests import TreeEnvironment, render
from vf.runtree.shards import each_application, source_objects
from vf.runtree.teardown import finalize
from vf.textio.objects import Obj

Key = tuple[str, str, str]


HOOK_MODES = ("argocd", "helm")
PRUNE_MODES = ("argocd", "flux", "helm")


def _is_hook(obj: Obj, mode: str) -> bool:
    hooks = (obj["metadata"].get("annotations") or {}).get("helm.sh/hook", "")
    return mode in HOOK_MODES and bool({"post-install", "post-upgrade"} & set(hooks.split(",")))


def _delete_policy(obj: Obj) -> set[str]:
    policy = (obj["metadata"].get("annotations") or {}).get("helm.sh/hook-delete-policy", "")
    return {p.strip() for p in policy.split(",")}


@dataclass
class _Ended:
    """How one sync ended: ``errors`` refuse the run; ``failed`` is why an Argo CD
    operation ended Failed (None: Succeeded or still Running), ``repeats`` when every retry
    would meet the same failure (nothing was applied, or nothing new would be)."""

    errors: list[str] = field(default_factory=list)
    failed: str | None = None
    repeats: bool = False
    running: bool = False  # a wave not healthy in time: the operation is still Running


def _keys(objects: Sequence[Obj]) -> set[Key]:
    return {(o["kind"], o["metadata"]["namespace"], o["metadata"]["name"]) for o in objects}


def _healthy(cluster: Cluster, keys: set[Key], *, jobs: bool = True) -> bool:
    """Every workload among ``keys`` is healthy; Jobs only count with ``jobs``."""
    return all(
        c.healthy()
        for k, c in cluster.controllers.items()
        if k in keys and (jobs or c.kind != "Job")
    )


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


def _named(objects: Sequence[Obj]) -> str:
    return ", ".join(f"{o['kind']}/{o['metadata']['name']}" for o in objects)


def _unserved(cluster: Cluster, objects: Sequence[Obj]) -> list[Obj]:
    return [o for o in objects if cluster.unserved(o) is not None]


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
    """Apply the tree as ``mode`` does: kubectl at once; Argo CD by sync waves, each healthy
    before the next; Flux as the tree's HelmRelease or Kustomizations say
    (``vf.runtree.flux_sync``); Argo CD and Helm run Helm hooks after the rest;
    prune last."""
    for name, data in tree.run_secrets.items():  # as the operator created them beforehand
        cluster.extra_secrets.setdefault(name, dict(data))
    if mode in ("argocd", "flux"):  # the controllers' objects, as this commit leaves them
        cluster.gitops.reconcile(tree.tree, env=tree.env, mode=mode, log=cluster.log)
        finalize(cluster, cluster.gitops.pruned, app=app)
    if mode == "flux":
        held = cluster.gitops.held(env=tree.env, kind="HelmRelease")
        if held and tree.renderer == "helm":
            return _flux_release(cluster, tree, resolver, release=held[0], app=app, timeout=timeout)
        parts = ordered(cluster.gitops.held(env=tree.env, kind="Kustomization"))
        if parts and tree.renderer == "kustomize":
            return _flux_parts(cluster, tree, resolver, parts=parts, app=app, timeout=timeout)
    if mode == "argocd":
        return each_application(
            tree,
            cluster.gitops.held(env=tree.env, kind="Application"),
            app=app,
            operation=lambda part, owner: _argocd(
                cluster, part, resolver, app=owner, timeout=timeout
            ),
        )
    return _sync(cluster, tree, resolver, mode=mode, app=app, timeout=timeout).errors


def _argocd(
    cluster: Cluster, tree: TreeEnvironment, resolver: ImageResolver, *, app: str, timeout: float
) -> list[str]:
    """An Argo CD operation and, while it ends Failed, its retries (argo-cd
    ``controller/appcontroller.go``, ``processRequestedAppOperation``): each a new
    operation on the same revision, ``retry.limit`` of them at most. Each wait is the
    retry's, scaled by ``--backoff`` over Kubernetes' 10 s as the pods' back-off is. A
    failed Job stays failed: no retry applies it again, and its failure is the run's."""
    skipped = wipes_out(cluster, tree, owner=app)
    if skipped is not None:
        cluster.log(skipped)
        return []
    retry = retry_of(held_application(cluster, tree.env, tree.application))
    scale = cluster.options.backoff_base / KUBERNETES_BACKOFF
    attempt, previous = 0, None
    while True:
        refused = not_permitted(cluster, tree)
        if refused:
            ended = _Ended(refused, failed=refused[0].removeprefix("argocd: "), repeats=True)
        else:
            ended = _sync(cluster, tree, resolver, mode="argocd", app=app, timeout=timeout)
        if ended.failed is None:
            if attempt:
                phase = "still Running" if ended.running else "Succeeded"
                cluster.log(f"argocd: retry #{attempt} {phase}")
            return ended.errors
        retried = f" (retried {attempt} times)" if attempt else ""
        left = retry.limit - attempt if retry.limit >= 0 else None
        if left == 0:
            cluster.log(f"argocd: sync Failed: {ended.failed}{retried}")
            return ended.errors
        if ended.repeats or ended.failed == previous:
            retries = "every further retry" if left is None else f"the {left} retries left"
            cluster.log(
                f"argocd: sync Failed: {ended.failed}{retried}; {retries} would meet the "
                "same failure (the same revision, nothing new to apply): not waited out"
            )
            return ended.errors
        attempt, previous = attempt + 1, ended.failed
        wait = retry.wait(attempt)
        cluster.log(
            f"argocd: sync Failed: {ended.failed}; retry #{attempt} of "
            f"{retry.limit if retry.limit >= 0 else 'unbounded'} in {wait * scale:g}s "
            f"(Argo CD waits {wait:g}s)"
        )
        cluster.run_until(lambda: False, timeout=wait * scale)


def _flux_release(
    cluster: Cluster,
    tree: TreeEnvironment,
    resolver: ImageResolver,
    *,
    release: Obj,
    app: str,
    timeout: float,
) -> list[str]:
    """helm-controller: install or upgrade as Helm does, wait for the release (Jobs until
    they complete, unless ``disableWaitForJobs``) within its timeout, and remediate a
    failure as the release says: an install's only remediation is an uninstall."""
    spec, name = release["spec"], release["metadata"]["name"]
    # helm-controller renders the release it holds with the values the cluster holds
    tree = render(
        tree.tree,
        env=tree.env,
        renderer="helm",
        sync="flux",
        release=release,
        held=cluster.gitops.all(),
    )
    installed = app in cluster.owner.values()
    verb = "upgrade" if installed else "install"
    action = spec.get(verb) or {}
    jobs = not action.get("disableWaitForJobs", False)
    limit = min(seconds(str(action.get("timeout") or spec.get("timeout") or "5m")), timeout)
    errors = _sync(cluster, tree, resolver, mode="helm", app=app, timeout=limit, jobs=jobs).errors
    wanted = _keys([o for o in tree.objects if not _is_hook(o, "helm")])
    if _healthy(cluster, wanted, jobs=jobs):
        cluster.releases[app] = tree.objects  # the release a rollback returns to
        return errors
    failure = f"flux: HelmRelease {name}: {verb} failed: not ready within {limit:g}s"
    if jobs:
        failure += " (helm-controller waits for every Job to complete)"
    remediation = action.get("remediation") or {}
    if (action.get("strategy") or {}).get("name") == "RetryOnFailure":
        cluster.log(f"helmrelease/{name}: {verb} failed; retried in place, nothing uninstalled")
    elif not installed and int(remediation.get("retries", 0)) != 0:
        cluster.log(f"helmrelease/{name}: install failed; remediation uninstalls the release")
        cluster.delete_app(app, by_waves=False)
        failure += "; remediation uninstalled the release"
    elif installed and remediation.get("strategy") == "rollback" and app in cluster.releases:
        _roll_back(cluster, resolver, app=app, name=name, timeout=limit)
        failure += "; remediation rolled back to the previous release"
    return [*errors, failure]


def _roll_back(
    cluster: Cluster, resolver: ImageResolver, *, app: str, name: str, timeout: float
) -> None:
    """helm-controller's rollback remediation: Helm applies the previous release's
    manifest again and deletes what only the failed one had (helm ``pkg/action/
    rollback.go``), Jobs of it included, which run again."""
    previous = list(cluster.releases[app])
    cluster.log(f"helmrelease/{name}: upgrade failed; remediation rolls back")
    cluster.apply(previous, app=app, resolver=resolver, mode="helm", prune=False)
    _prune(cluster, previous, app=app, mode="helm")
    cluster.run_until(functools.partial(_healthy, cluster, _keys(previous)), timeout=timeout)


def _flux_parts(
    cluster: Cluster,
    tree: TreeEnvironment,
    resolver: ImageResolver,
    *,
    parts: list[Obj],
    app: str,
    timeout: float,
) -> list[str]:
    """kustomize-controller: each Kustomization applies its part once those it depends on
    are Ready, prunes what its inventory held that the part no longer has right after the
    apply, before any health check (``internal/controller/kustomization_controller.go``:
    ``apply``, then ``prune``, then ``checkHealth``), and is Ready once its wait set is
    healthy (the Job reader Flux puts first unless it impersonates) within its timeout.
    A health check on an object that is not there is never Current (fluxcd/pkg
    ``ssa/manager_wait.go``)."""
    errors: list[str] = []
    for kustomization in parts:
        spec, name = kustomization["spec"], kustomization["metadata"]["name"]
        part = part_objects(spec, source_objects(tree, str(spec.get("path", ""))))
        unserved = _unserved(cluster, part)
        if unserved:  # its dry-run of every object fails: none of them is applied
            failure = (
                f"flux: Kustomization {name} is not Ready: dry-run failed: {_named(unserved)}: "
                f"{cluster.unserved(unserved[0])}; none of its objects is applied"
            )
            if len(unserved) == len(part) and kustomization is parts[-1]:
                cluster.log(f"{failure}; nothing depends on it")  # the flow runs without it
                cluster.refused += [
                    f"{str(o['kind']).lower()}/{o['metadata']['name']}" for o in unserved
                ]
            else:
                errors.append(failure)
            break  # what depends on it is not applied
        errors += cluster.apply(part, app=app, resolver=resolver, mode="flux", prune=False)
        flux_gc.labelled(cluster, name, _keys(part))
        flux_gc.prune(cluster, name, wanted=_keys(part))
        keys, reader = wait_set(spec, part), job_reader(spec)
        limit = min(seconds(str(spec.get("timeout", "5m"))), timeout)
        listed = not spec.get("wait")  # healthChecks name objects that must exist

        def ready(keys: set[Key] = keys, reader: str = reader, listed: bool = listed) -> bool:
            missing = listed and any(k not in cluster.objects for k in keys)
            return not missing and all(
                flux_healthy(c, reader=reader) for k, c in cluster.controllers.items() if k in keys
            )

        if not cluster.run_until(ready, timeout=limit):
            absent = sorted(k[2] for k in keys if k not in cluster.objects) if listed else []
            cluster.log(f"kustomization/{name}: not Ready: health check timed out")
            errors.append(
                f"flux: Kustomization {name} is not Ready: its health checks did not pass "
                f"within {limit:g}s (Job health read by the {reader!r} reader)"
                + (f"; not found: {', '.join(absent)}" if absent else "")
            )
            break  # what depends on it is not applied
    return errors


def _sync(
    cluster: Cluster,
    tree: TreeEnvironment,
    resolver: ImageResolver,
    *,
    mode: str,
    app: str,
    timeout: float,
    jobs: bool = True,
) -> _Ended:
    objects = list(tree.objects)
    app_obj = held_application(cluster, tree.env, tree.application) if mode == "argocd" else None
    hooks, plain = _tasks(cluster, objects, mode=mode, app=app_obj, owner=app)
    left_out = len(plain) + len(hooks) < len(objects)
    dry_run = [*plain, *hooks] if left_out else objects
    refusal = _refused_up_front(cluster, dry_run, mode=mode, app=app_obj)
    if refusal:
        return _Ended([refusal], failed=refusal.removeprefix("argocd: "), repeats=True)

    def apply(group: list[Obj]) -> list[str]:
        return cluster.apply(group, app=app, resolver=resolver, mode=mode, prune=False)

    errors: list[str] = []
    waves = _waves(plain, mode=mode)
    prunes = _argocd_prunes(cluster, objects, app=app, app_obj=app_obj, waves=waves, mode=mode)
    order = sorted(set(waves) | set(prunes))
    for wave in order:
        doomed = [k for k in prunes.get(wave, []) if argocd_prunes(cluster.objects[k], app_obj)]
        if doomed:
            cluster.log(f"wave {wave}: prunes {', '.join(k[2] for k in doomed)}")
            cluster.delete(doomed)
        if wave not in waves:
            continue
        errors += apply(waves[wave])
        ended = _wave_failed(cluster, waves, wave=wave, hooks=hooks, mode=mode)
        if ended is not None:
            return _Ended([*errors, *ended.errors], failed=ended.failed, repeats=True)
        if mode == "argocd" and wave == order[-1] and not hooks:
            # gitops-engine ends the operation once its last wave is applied, healthy or not
            cluster.log(f"argocd: wave {wave} applied, the last: sync Succeeded")
            break
        keys = _keys(waves[wave])
        if mode == "argocd":
            stopped = argocd_wave(cluster, keys, wave=wave, timeout=timeout)
            if stopped is not None:
                return _Ended(errors, failed=stopped or None, running=not stopped)
        elif hooks:
            healthy = functools.partial(_healthy, cluster, keys, jobs=jobs)
            cluster.run_until(healthy, timeout=timeout)
    errors += _run_hooks(cluster, hooks, apply=apply, timeout=timeout)
    if mode in PRUNE_MODES and mode != "argocd":
        _prune(cluster, objects, app=app, mode=mode)
    return _Ended(errors)


def _tasks(
    cluster: Cluster, objects: list[Obj], *, mode: str, app: Obj | None, owner: str
) -> tuple[list[Obj], list[Obj]]:
    """The hooks and the other objects a sync applies. With the Application's
    ``ApplyOutOfSyncOnly`` no task is made for what the cluster holds as Git has it; hooks
    (and prunes) always run (gitops-engine ``filterOutOfSyncTasks``)."""
    hooks = [o for o in objects if _is_hook(o, mode)]
    plain = [o for o in objects if not _is_hook(o, mode)]
    if mode == "argocd" and OUT_OF_SYNC_ONLY in app_options(app):
        plain = out_of_sync(cluster, plain, owner=owner)
        if not plain and not hooks:
            cluster.log("argocd: every object in sync (ApplyOutOfSyncOnly): nothing to apply")
    return hooks, plain


def _waves(objects: list[Obj], *, mode: str) -> dict[int, list[Obj]]:
    """The objects by Argo CD sync wave; every other tool applies them as one."""
    waves: dict[int, list[Obj]] = {}
    for obj in objects:
        waves.setdefault(wave_of(obj) if mode == "argocd" else 0, []).append(obj)
    return waves


def _wave_failed(
    cluster: Cluster, waves: dict[int, list[Obj]], *, wave: int, hooks: list[Obj], mode: str
) -> _Ended | None:
    """Argo CD ends the operation Failed in a wave whose object of an unserved kind failed
    to apply: its errors when a later wave is left undone, none when it was the last
    (logged), None when the wave applied (or the tool has no waves)."""
    unserved = _unserved(cluster, waves[wave]) if mode == "argocd" else []
    if not unserved:
        return None
    failure = f"sync failed in wave {wave}: {_named(unserved)} failed to apply"
    if any(w > wave for w in waves) or hooks:
        return _Ended([f"argocd: {failure}; no later wave runs"], failed=failure)
    cluster.log(f"argocd: {failure}; every other object is applied")
    return _Ended([], failed=failure)


def _refused_up_front(
    cluster: Cluster, objects: Sequence[Obj], *, mode: str, app: Obj | None
) -> str | None:
    """What refuses the whole sync before anything is applied: Argo CD's dry-run of an
    object of an unserved kind that does not say ``SkipDryRunOnMissingResource=true``;
    Helm's build of the release's objects, any of an unserved kind."""
    unserved = _unserved(cluster, objects)
    if mode == "argocd":
        skip = "SkipDryRunOnMissingResource=true"
        unserved = [o for o in unserved if skip not in options(o) | app_options(app)]
        if unserved:
            return (
                "argocd: one or more synchronization tasks are not valid: "
                f"{_named(unserved)}: {cluster.unserved(unserved[0])}; nothing is applied"
            )
    if mode == "helm" and unserved:
        return (
            "helm: unable to build kubernetes objects from release manifest: "
            f"{_named(unserved)}: {cluster.unserved(unserved[0])}; nothing is applied"
        )
    return None


def _argocd_prunes(
    cluster: Cluster,
    objects: list[Obj],
    *,
    app: str,
    app_obj: Obj | None,
    waves: dict[int, list[Obj]],
    mode: str,
) -> dict[int, list[Key]]:
    """Argo CD's prune tasks by wave: each in its wave, or last (``vf.runtree.argocd_sync``)."""
    if mode != "argocd":
        return {}
    live = {k: cluster.objects[k] for k in _left_the_tree(cluster, objects, app=app, mode=mode)}
    return prune_waves(live, app=app_obj, apply_waves=waves)


def _left_the_tree(cluster: Cluster, objects: list[Obj], *, app: str, mode: str) -> list[Key]:
    """What ``app`` applied that left the tree, less hooks."""
    wanted = _keys(objects)
    return [
        k
        for k, owner in cluster.owner.items()
        if owner == app and k not in wanted and not _is_hook(cluster.objects[k], mode)
    ]


def _prunable(cluster: Cluster, objects: list[Obj], *, app: str, mode: str) -> list[Key]:
    """What ``app`` applied that left the tree, less hooks and what says never to prune it
    (Argo CD's ``Prune=false``, Flux's ``prune: disabled``, Helm's ``keep``)."""
    left = _left_the_tree(cluster, objects, app=app, mode=mode)
    return [k for k in left if not never_pruned(cluster.objects[k])]


def _prune(cluster: Cluster, objects: list[Obj], *, app: str, mode: str) -> None:
    cluster.delete(_prunable(cluster, objects, app=app, mode=mode))
