"""What deleting a controller object, or a whole flow, deletes: the finalizers of Flux's
Kustomizations and HelmReleases and of Argo CD's Applications, ``helm uninstall`` and
``kubectl delete -k``, each sparing what says it outlives the flow."""

from __future__ import annotations

from vf.runtree import flux_gc
from vf.runtree.argocd_sync import deletable, delete_application
from vf.runtree.cluster import Cluster
from vf.runtree.gitops_state import is_root, of_env
from vf.runtree.manifests import key as state_key
from vf.runtree.shards import owner
from vf.textio.objects import Obj


def finalize(cluster: Cluster, pruned: list[Obj], *, app: str) -> None:
    """What a pruned controller object's finalizer deletes: a Kustomization what it applied
    that still carries its labels, as its ``deletionPolicy`` says (``flux_gc``); a
    HelmRelease its release (an uninstall); an Application with the resources finalizer
    what it manages (what its tracking still names: ``Cluster.owner``)."""
    for obj in pruned:
        kind, name = obj["kind"], obj["metadata"]["name"]
        if kind == "Kustomization":
            flux_gc.finalize(cluster, obj)
        elif kind == "HelmRelease":
            cluster.log(f"helmrelease/{name} deleted: helm-controller uninstalls the release")
            uninstall(cluster, app=app)
        elif kind == "Application" and "resources-finalizer.argocd.argoproj.io" in (
            obj["metadata"].get("finalizers") or []
        ):
            cluster.log(f"application/{name} deleted: its finalizer deletes what it manages")
            delete_application(cluster, owner(app, obj))


def uninstall(cluster: Cluster, *, app: str) -> None:
    """``helm uninstall``: the release's objects, but those that say ``keep``."""
    owned = [k for k, owner in cluster.owner.items() if owner == app]
    cluster.delete(k for k in owned if deletable(cluster.objects[k]))
    cluster.releases.pop(app, None)


def delete_flow(cluster: Cluster, *, env: str, mode: str, app: str, timeout: float = 60) -> None:
    """Delete an environment's flow as its delivery's user does: Argo CD and Flux, the
    environment's root (``kubectl delete``), whose finalizer deletes what it applied, and
    theirs what they applied; Helm, ``helm uninstall``; kubectl, ``kubectl delete -k``
    (everything the tree holds, the Namespace too)."""
    if mode in ("argocd", "flux"):
        state = cluster.gitops
        for root in [o for o in state.all() if is_root(o, mode=mode) and of_env(o, env)]:
            held = state.inventory.pop(state_key(root), set())
            state.objects.pop(state_key(root), None)
            pruned = [state.objects.pop(k) for k in sorted(held) if k in state.objects]
            cluster.log(f"{root['kind'].lower()}/{root['metadata']['name']} deleted by hand")
            finalize(cluster, pruned, app=app)
    elif mode == "helm":
        uninstall(cluster, app=app)
    else:
        cluster.delete_app(app, by_waves=False)
    cluster.run_until(cluster.drained, timeout=timeout)
