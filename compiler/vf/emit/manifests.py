"""``manifests/<env>/``: each environment's objects as plain files, for Argo CD to read.

kustomize's build grows with the square of the objects (ADR 180): past a few thousand
objects an overlay no longer builds within Argo CD's manifest-generation timeout. A folder
of plain object files is read by Argo CD as a directory source, without a build. vf writes
it when ``gitops.argocd.source`` asks for it, or (``auto``, the default) when an
environment has more than ``MANIFESTS_OVER`` objects, and points the Applications at it
(ADR 182). The files are the objects ``kubectl kustomize overlays/<env>`` gives, one per
file, named as in the overlays; the overlays and the chart are written as before.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from vf.emit.kustomize.tree import object_file
from vf.emit.ordering import with_sync_waves
from vf.ir.delivery import GitOps
from vf.textio import yamlout

Obj = dict[str, Any]
MANIFESTS_DIR = "manifests"
# An environment of more objects than this is read by Argo CD from manifests/<env>/: the
# 1,000-node benchmark tree (2,008 objects) took 14 CPU seconds to build on a 2-core machine,
# and the build grows with the square of the objects (ADR 180).
MANIFESTS_OVER = 2000


def reads_manifests(gitops: GitOps | None, *, counts: Mapping[str, int]) -> bool:
    """Whether the Argo CD Applications read ``manifests/<env>`` instead of the overlays:
    ``gitops.argocd.source`` says so, or is ``auto`` and an environment has more than
    ``MANIFESTS_OVER`` objects."""
    if gitops is None or gitops.argocd is None:
        return False
    source = gitops.argocd.source
    if source == "auto":
        return any(count > MANIFESTS_OVER for count in counts.values())
    return source == "manifests"


def flux_builds_too_many(gitops: GitOps | None, *, counts: Mapping[str, int]) -> bool:
    """Whether Flux Kustomizations build an overlay of more than ``MANIFESTS_OVER`` objects
    (kustomize-controller builds any path it is given; a HelmRelease renders with Helm)."""
    if gitops is None or gitops.flux is None or gitops.flux.helm_release:
        return False
    return any(count > MANIFESTS_OVER for count in counts.values())


def source_path(gitops: GitOps, *, env: str, manifests: bool) -> str:
    """What an environment's Application (or Flux Kustomization) reads, from the repository
    root: ``manifests/<env>`` or ``overlays/<env>`` below ``gitops.path``."""
    below = f"{MANIFESTS_DIR if manifests else 'overlays'}/{env}"
    return below if gitops.path == "." else f"{gitops.path}/{below}"


def manifest_files(objects: Mapping[str, Sequence[Obj]]) -> Iterator[tuple[str, str]]:
    """One file per object of each environment, with the sync waves the overlays carry."""
    for env in sorted(objects):
        for obj in objects[env]:
            yield f"{MANIFESTS_DIR}/{env}/{object_file(obj)}", yamlout.dump(with_sync_waves(obj))
