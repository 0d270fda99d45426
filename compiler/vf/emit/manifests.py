"""``manifests/<env>/``: each environment's objects as plain files, for Argo CD to read.

kustomize's build grows with the square of the objects (ADR 180). A folder of plain object
files is read by Argo CD as a directory source, without a build. vf writes it when
``gitops.argocd.source: manifests`` asks for it and points the Applications at it (ADR
182); ``auto``, the default, delivers an environment past ``vf.emit.shards.SHARD_OVER``
objects in shards instead (ADR 220), since Argo CD refuses a directory of more than 10 MB.
The files are the objects ``kubectl kustomize overlays/<env>`` gives, one per file, named
as in the overlays; the overlays and the chart are written as before.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from vf.emit.kustomize.tree import object_file
from vf.emit.ordering import with_sync_waves
from vf.ir.delivery import GitOps
from vf.textio import yamlout
from vf.textio.objects import Obj

MANIFESTS_DIR = "manifests"


def reads_manifests(gitops: GitOps | None) -> bool:
    """Whether the Argo CD Applications read ``manifests/<env>`` instead of the overlays:
    ``gitops.argocd.source`` says so (``auto`` delivers a large environment in shards
    instead, ``vf.emit.shards``)."""
    if gitops is None or gitops.argocd is None:
        return False
    return gitops.argocd.source == "manifests"


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
