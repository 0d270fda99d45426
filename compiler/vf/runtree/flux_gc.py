"""Flux's garbage collection: what a Kustomization deletes when an object leaves its build
and when the Kustomization itself is deleted (ADR 0225).

kustomize-controller labels every object it applies with the Kustomization's name and
namespace (``kustomize.toolkit.fluxcd.io/name`` and ``/namespace``,
``ResourceManager.SetOwnerLabels``) and deletes an object of its old inventory only
while the live object still carries its own labels: ``deleteObjects`` passes them as
``DeleteOptions.Inclusions`` and fluxcd/pkg ``ssa/manager_delete.go`` skips an object
whose labels do not match, and one that says ``prune: disabled``. So an object another
Kustomization applied in the meantime is that one's, and survives the old owner's prune
and its deletion. Deleting a Kustomization deletes its inventory only as its
``deletionPolicy`` says (``finalizerShouldDeleteResources``): ``MirrorPrune`` (the
default) when it prunes, ``Delete`` and ``WaitForTermination`` always, ``Orphan`` never.
"""

from __future__ import annotations

from collections.abc import Iterable

from vf.runtree.argocd_sync import options
from vf.runtree.cluster import Cluster
from vf.textio.objects import Obj

Key = tuple[str, str, str]
OWNER_LABEL = "kustomize.toolkit.fluxcd.io/name"


def never_pruned(obj: Obj) -> bool:
    """Argo CD's ``Prune=false``, Flux's ``prune: disabled`` or Helm's ``keep``."""
    annotations = obj["metadata"].get("annotations") or {}
    return (
        "Prune=false" in options(obj)
        or annotations.get("kustomize.toolkit.fluxcd.io/prune") == "disabled"
        or annotations.get("helm.sh/resource-policy") == "keep"
    )


def labelled(cluster: Cluster, name: str, keys: Iterable[Key]) -> None:
    """What Kustomization ``name`` applied now carries its ownership labels."""
    for k in keys:
        if k in cluster.objects:
            cluster.labelled[k] = name


def collect(cluster: Cluster, name: str, keys: Iterable[Key]) -> list[Key]:
    """Delete what of ``keys`` (objects Kustomization ``name`` held) is still its own and
    may be pruned; return what another Kustomization's labels kept."""
    doomed: list[Key] = []
    taken: list[Key] = []
    for k in sorted(keys):
        if k not in cluster.objects or never_pruned(cluster.objects[k]):
            continue
        (doomed if cluster.labelled.get(k, name) == name else taken).append(k)
    if taken:
        owners = sorted({cluster.labelled[k] for k in taken})
        cluster.log(
            f"kustomization/{name}: garbage collection skips {len(taken)} objects now "
            f"labelled for {', '.join(owners)}"
        )
    cluster.delete(doomed)
    return taken


def prune(cluster: Cluster, name: str, *, wanted: set[Key]) -> None:
    """After an apply: delete what the inventory held that the build no longer has, and
    keep the build as the inventory."""
    collect(cluster, name, cluster.inventory.get(name, set()) - wanted)
    cluster.inventory[name] = set(wanted)


def deletes_inventory(kustomization: Obj) -> bool:
    """Whether deleting the Kustomization deletes what it applied."""
    spec = kustomization.get("spec") or {}
    policy = spec.get("deletionPolicy") or "MirrorPrune"
    if policy == "MirrorPrune":
        return bool(spec.get("prune"))
    return policy in ("Delete", "WaitForTermination")


def finalize(cluster: Cluster, kustomization: Obj) -> None:
    """A deleted Kustomization's finalizer, as its deletion policy says."""
    name = kustomization["metadata"]["name"]
    held = cluster.inventory.pop(name, set())
    if deletes_inventory(kustomization):
        cluster.log(f"kustomization/{name} deleted: its finalizer deletes what it applied")
        collect(cluster, name, held)
