"""What Argo CD (gitops-engine) decides about pruning and deletion (ADR 151).

- A sync runs its tasks wave by wave; a wave starts once every task of the previous one is
  Healthy, and a Job is Healthy only once it has completed (Degraded once it has failed,
  which fails the sync: no later wave runs).
- A prune task runs in the wave of the live object it removes (prune waves mirrored, so
  what was created last is pruned first); with ``PruneLast`` (the Application's sync
  option, or the live object's ``sync-options`` annotation) it runs in a wave after every
  other one. An object whose annotation says ``Prune=false`` is never pruned, nor one
  that says nothing of pruning when the Application's ``syncOptions`` say ``Prune=false``.
- Deleting an Application (its resources finalizer) deletes every object it manages except
  those that say ``Delete=false`` or carry Helm's ``resource-policy: keep``; deleting a
  Namespace deletes everything in it.
- An operation that ends Failed is retried as the Application's ``syncPolicy.retry`` says
  (an automated sync without one: five times), each retry a new operation on the same
  revision after ``duration * factor ** n`` (5 s and 2 unless said, at most
  ``maxDuration``, 3 min); with ``ApplyOutOfSyncOnly=true`` every operation leaves out
  what the cluster already holds as Git has it, so a retry starts at the first wave that
  still has something to apply, past a failed Job, which stays failed (ADR 214).
- An automated sync that prunes is not started while every resource of the Application
  requires pruning (its source renders nothing: a retired shard's, ADR 0256) unless the
  policy says ``allowEmpty``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vf.runtree.cluster import Cluster, wave_of
from vf.runtree.flux_sync import seconds
from vf.runtree.manifests import TreeEnvironment, key
from vf.textio.objects import Obj
from vf.textio.yaml_read import reader

Key = tuple[str, str, str]
SYNC_OPTIONS = "argocd.argoproj.io/sync-options"
OUT_OF_SYNC_ONLY = "ApplyOutOfSyncOnly=true"
# argo-cd pkg/apis/application/v1alpha1/application_defaults.go; controller/appcontroller.go
# autoSync: an automated operation retries five times unless the Application says otherwise
RETRY_LIMIT, RETRY_DURATION, RETRY_FACTOR, RETRY_MAX_DURATION = 5, 5.0, 2, 180.0
KUBERNETES_BACKOFF = 10.0  # the first pod back-off that run-tree's --backoff stands for


def application(tree: Path, *, env: str) -> Obj | None:
    """The Application vf wrote for ``env``, or None when the tree has none."""
    path = tree / "gitops" / "argocd" / f"application-{env}.yaml"
    if not path.is_file():
        return None
    loaded = reader("safe").load(path.read_text(encoding="utf-8"))
    return loaded if isinstance(loaded, dict) else None


def options(obj: Mapping[str, Any]) -> set[str]:
    """The object's ``argocd.argoproj.io/sync-options``."""
    text = str((obj.get("metadata", {}).get("annotations") or {}).get(SYNC_OPTIONS, ""))
    return {o.strip() for o in text.split(",") if o.strip()}


def app_options(app: Obj | None) -> set[str]:
    if app is None:
        return set()
    return set(((app.get("spec") or {}).get("syncPolicy") or {}).get("syncOptions") or [])


@dataclass(frozen=True)
class Retry:
    """An operation's retry strategy: ``limit`` retries (negative: no bound) and the wait
    before each, in Argo CD's seconds."""

    limit: int = 0
    duration: float = RETRY_DURATION
    factor: int = RETRY_FACTOR
    max_duration: float = RETRY_MAX_DURATION

    def wait(self, retry: int) -> float:
        """Seconds from the failure to retry number ``retry`` (1 for the first). The
        failed operation is marked for retry with its count already raised, and the retry
        is started once ``NextRetryAt(finishedAt, retryCount)`` has passed
        (``processRequestedAppOperation``): the first waits ``duration * factor``."""
        wait = self.duration * float(self.factor) ** retry
        return min(wait, self.max_duration) if self.max_duration > 0 else wait


def retry_of(app: Obj | None) -> Retry:
    """The retry of an operation on ``app``: its ``syncPolicy.retry``; without one, five
    retries for an automated sync (``autoSync``) and none for one started by hand."""
    policy = ((app or {}).get("spec") or {}).get("syncPolicy") or {}
    given = policy.get("retry")
    automated = policy.get("automated")
    if not isinstance(given, dict):
        on = isinstance(automated, dict) and automated.get("enabled", True) is not False
        return Retry(limit=RETRY_LIMIT if on else 0)
    backoff = given.get("backoff") or {}
    return Retry(
        limit=int(given.get("limit", 0)),
        duration=_duration(backoff.get("duration"), RETRY_DURATION),
        factor=int(backoff.get("factor", RETRY_FACTOR)),
        max_duration=_duration(backoff.get("maxDuration"), RETRY_MAX_DURATION),
    )


def _duration(text: object, default: float) -> float:
    """Argo CD's ``parseStringToDuration``: a bare number is seconds, else a duration."""
    if text is None or text == "":
        return default
    value = str(text)
    return float(value) if value.isdigit() else seconds(value)


def out_of_sync(cluster: Cluster, objects: Iterable[Obj], *, owner: str) -> list[Obj]:
    """What an ``ApplyOutOfSyncOnly`` operation applies: every object the cluster does not
    hold as the tree has it, or holds as another Application's (gitops-engine
    ``filterOutOfSyncTasks`` leaves out a task with a live and a target object that the
    diff found unmodified; the target carries the Application's own tracking id, argo-cd
    ``controller/state.go`` ``CompareAppState``, so a live object another one applied
    differs)."""
    return [
        o
        for o in objects
        if cluster.objects.get(key(o)) != o or cluster.owner.get(key(o), owner) != owner
    ]


def prune_waves(
    live: Mapping[Key, Obj], *, app: Obj | None, apply_waves: Iterable[int]
) -> dict[int, list[Key]]:
    """The wave of each prune task: one per live object that left the tree. An object that
    says ``Prune=false`` is a task too, counted in the mirrored waves and then skipped
    (gitops-engine ``sync_context.go``: prune tasks are every live object without a target,
    their waves reversed; the option is read when the task runs); the caller deletes only
    what ``prunes`` allows."""
    waves = sorted({wave_of(o) for o in live.values()})
    mirrored = dict(zip(waves, reversed(waves), strict=True))
    wave = {k: mirrored[wave_of(o)] for k, o in live.items()}
    last = max([0, *apply_waves, *wave.values()]) + 1
    prune_last = "PruneLast=true" in app_options(app)
    out: dict[int, list[Key]] = {}
    for k, o in sorted(live.items()):
        at = last if prune_last or "PruneLast=true" in options(o) else wave[k]
        out.setdefault(at, []).append(k)
    return out


def prunes(obj: Mapping[str, Any], app: Obj | None = None) -> bool:
    """A prune task deletes its object unless the object says ``Prune=false``, or says
    nothing of pruning and the Application's ``syncOptions`` say ``Prune=false`` (argo-cd
    ``controller/sync.go`` passes the operation's ``Prune`` option as the default,
    gitops-engine ``pkg/sync/sync_context.go`` ``isPruningDisabled`` reads the live
    object's annotation first; an automated operation takes the Application's options,
    ``controller/appcontroller.go`` ``autoSync``)."""
    own = _prune_option(options(obj))
    chosen = own if own is not None else _prune_option(app_options(app))
    return chosen != "false"


def _prune_option(given: set[str]) -> str | None:
    values = [o.partition("=")[2] for o in given if o.partition("=")[0] == "Prune"]
    return values[0] if values else None


def deletable(obj: Mapping[str, Any]) -> bool:
    """What the Application's deletion removes: not ``Delete=false``, not Helm's keep."""
    annotations = obj.get("metadata", {}).get("annotations") or {}
    return "Delete=false" not in options(obj) and annotations.get("helm.sh/resource-policy") != (
        "keep"
    )


def delete_application(cluster: Cluster, app: str, *, timeout: float = 60.0) -> list[Key]:
    """Delete the Application ``app``: its objects, highest wave first, each wave's
    processes gone before the next; a deleted Namespace takes everything in it. Returns
    what was kept."""
    owned = {k: o for k, o in cluster.objects.items() if cluster.owner.get(k) == app}
    kept = sorted(k for k, o in owned.items() if not deletable(o))
    doomed = {k for k in owned if k not in kept}
    gone_namespaces = {k[2] for k in doomed if k[0] == "Namespace"}
    doomed |= {k for k in cluster.objects if k[1] in gone_namespaces}
    waves: dict[int, list[Key]] = {}
    for k in doomed:
        waves.setdefault(wave_of(cluster.objects[k]), []).append(k)
    for wave in sorted(waves, reverse=True):
        cluster.delete(waves[wave])
        cluster.run_until(cluster.drained, timeout=timeout)
    for k in kept:
        cluster.owner.pop(k, None)  # no longer managed by the deleted Application
    return kept


def held_application(cluster: Cluster, env: str, name: str = "") -> Obj | None:
    """The environment's Application the cluster holds (``name``: that one of several)."""
    held = cluster.gitops.held(env=env, kind="Application")
    if name:
        held = [a for a in held if a["metadata"]["name"] == name]
    return held[0] if held else None


def wipes_out(cluster: Cluster, tree: TreeEnvironment, *, owner: str) -> str | None:
    """Why an automated operation is not started: its Application's source renders nothing
    while it still tracks live objects (a retired shard's, ADR 0256), so every resource it
    has requires pruning, and its automated policy prunes without ``allowEmpty`` (argo-cd
    ``controller/appcontroller.go``, ``autoSync``: "auto-sync will wipe out all
    resources", a SyncError condition, no operation). None: the operation runs."""
    app = held_application(cluster, tree.env, tree.application)
    automated = (((app or {}).get("spec") or {}).get("syncPolicy") or {}).get("automated")
    if not isinstance(automated, dict) or automated.get("enabled", True) is False:
        return None
    if not automated.get("prune") or automated.get("allowEmpty") or tree.objects:
        return None
    tracked = sorted(k[2] for k, o in cluster.owner.items() if o == owner)
    if not tracked:
        return None  # nothing to prune: Synced, and an automated sync starts only OutOfSync
    name = (app or {}).get("metadata", {}).get("name")
    return (
        f"argocd: {name}: auto-sync will wipe out all resources: not started; "
        f"{len(tracked)} objects stay, requiring pruning ({', '.join(tracked[:3])}"
        f"{', ...' if len(tracked) > 3 else ''})"
    )


def not_permitted(cluster: Cluster, tree: TreeEnvironment) -> list[str]:
    """Argo CD checks every resource of a sync against the Application's project, as the
    cluster holds it; one refusal fails the whole operation (argo-cd ``controller/sync.go``:
    a failed permission check invalidates the task list). Only vf's own projects are
    modelled; another project admits everything here."""
    app = held_application(cluster, tree.env, tree.application)
    if app is None:
        return []
    name = str(app["spec"].get("project", "default"))
    project = cluster.gitops.find("AppProject", str(app["metadata"].get("namespace")), name)
    if project is None:
        return []
    refused = sorted(
        {f"{o['kind']} {o['metadata']['name']}" for o in tree.objects if not permits(project, o)}
    )
    if not refused:
        return []
    cluster.log(f"argocd: project {name} refuses {', '.join(refused)}")
    return [
        f"argocd: sync failed: resource {refused[0]} is not permitted in project {name}"
        + (f" (and {len(refused) - 1} more)" if len(refused) > 1 else "")
    ]


def permits(project: Obj, obj: Obj) -> bool:
    """An AppProject's whitelists admit the object's group and kind."""
    spec = project.get("spec") or {}
    group = str(obj["apiVersion"]).rpartition("/")[0]
    cluster_scoped = obj["kind"] in ("Namespace", "PriorityClass")
    listed = spec.get(
        "clusterResourceWhitelist" if cluster_scoped else "namespaceResourceWhitelist"
    )
    if listed is None:
        return not cluster_scoped  # Argo CD's defaults: every namespaced kind, no cluster kind
    return any(
        entry.get("group") in (group, "*") and entry.get("kind") in (obj["kind"], "*")
        for entry in listed
    )


def argocd_wave(cluster: Cluster, keys: set[Key], *, wave: int, timeout: float) -> str | None:
    """Wait for the wave's tasks to be Healthy, or Degraded (a failed Job). None: the next
    wave may start; "": the operation is still Running after ``timeout`` (later waves
    wait); else why it ended Failed (no later wave runs in it)."""
    if not cluster.run_until(functools.partial(settled, cluster, keys), timeout=timeout):
        cluster.log(f"argocd: wave {wave} not healthy after {timeout:g}s; sync Running")
        return ""
    failed = failed_jobs(cluster, keys)
    return f"sync failed in wave {wave}: Job {failed[0]} failed" if failed else None


def settled(cluster: Cluster, keys: set[Key]) -> bool:
    """No task of the wave is still running: every workload is Healthy or a failed Job
    (gitops-engine waits while a task is Progressing, and fails the operation only then)."""
    return all(
        c.healthy() or (c.kind == "Job" and c.status == "Failed")
        for k, c in cluster.controllers.items()
        if k in keys
    )


def failed_jobs(cluster: Cluster, keys: set[Key]) -> list[str]:
    return sorted(
        c.name
        for k, c in cluster.controllers.items()
        if k in keys and c.kind == "Job" and c.status == "Failed"
    )
