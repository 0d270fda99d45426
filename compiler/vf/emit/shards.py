"""``shards/<env>/<nn>/``: a large environment's objects in groups that each controller
renders on its own (ADR 220).

Past ``SHARD_OVER`` objects an environment is delivered in shards, not as one overlay:
Argo CD cannot read a directory of more than 10 MB (argocd-repo-server's
``--max-combined-directory-manifests-size``), an Application of thousands of objects keeps
a status of thousands of entries, and kustomize's build grows with the square of the
objects (ADR 180). Shard ``00`` holds what the workers share (everything without a
``vf.dev/node`` label: the Namespace, the broker, the store, their config and policies,
the provision Job and its topology); each other shard holds the objects of the nodes a
hash of their name assigns to it, one file per object, named as in the overlays and with
their sync waves, and no kustomization.yaml (Argo CD reads a directory source; Flux
generates one).

The assignment is stable: a node's shard is its name's SHA-256 modulo the bucket count,
``SHARD_BUCKETS`` whatever the environment's size (ADR 249), doubled only while a shard
would hold more than ``SHARD_MAX_OBJECTS`` objects or ``SHARD_MAX_BYTES`` of files (past
about 24,000 nodes). Adding, changing or removing a node touches its own shard (and shard
00 where the shared objects name it); only a change of the bucket count moves nodes, and
then every node moves: the ``SHARD_BUCKETS`` buckets are numbered from 01, and ``n``
buckets past that from ``n + 1`` to ``2n``, so no shard number holds nodes under two
counts, and the old shards' folders are gone from the commit that changes it. Their
controller objects stay, retired (ADR 258, ``vf.emit.retired``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vf.emit.kustomize.tree import object_file
from vf.emit.ordering import with_sync_waves
from vf.ir.delivery import GitOps
from vf.textio import yamlout
from vf.textio.objects import Obj
from vf_runtime.labels import NODE_LABEL

SHARDS_DIR = "shards"
SHARED = "00"
# An environment of more objects than this is delivered in shards (ADR 246): from about
# 750 objects up, building the shards costs kustomize less than building the one overlay
# (its build grows with the square of the objects), and from 1,000 up a third less or more.
SHARD_OVER = 1000
# The node shards of every sharded environment: a fixed count, so that a growing flow's
# nodes never move between shards (a move is a delete and a create under Argo CD, ADR 249)
SHARD_BUCKETS = 16
SHARD_MAX_OBJECTS = 2000  # no shard holds more: an Application's status stays small
SHARD_MAX_BYTES = 5_000_000  # half of Argo CD's default directory limit (10M)
_NAMED = 8  # nodes named in a shard's description


@dataclass(frozen=True)
class Shard:
    """One shard of an environment: its number, its objects' files and its nodes."""

    number: str
    files: tuple[tuple[str, str], ...]  # (file name, text), sorted by name
    objects: tuple[Obj, ...]
    nodes: tuple[str, ...]

    @property
    def size(self) -> int:
        return sum(len(text.encode("utf-8")) for _, text in self.files)

    def holds(self) -> str:
        """What the shard holds, in words a reviewer reads on its Application."""
        if self.number == SHARED:
            return f"what the workers share: {len(self.objects)} objects"
        shown = ", ".join(self.nodes[:_NAMED])
        more = f" and {len(self.nodes) - _NAMED} more" if len(self.nodes) > _NAMED else ""
        nodes = f"{len(self.nodes)} node{'s' if len(self.nodes) != 1 else ''}"
        return f"{nodes}, {len(self.objects)} objects: {shown}{more}"


def argocd_shards(gitops: GitOps | None, *, count: int) -> bool:
    """Whether the Argo CD Applications of an environment of ``count`` objects read
    shards: ``gitops.argocd.source`` is ``auto`` (the default) and the count is past
    ``SHARD_OVER``."""
    if gitops is None or gitops.argocd is None:
        return False
    return gitops.argocd.source == "auto" and count > SHARD_OVER


def flux_shards(gitops: GitOps | None, *, count: int) -> bool:
    """Whether the Flux Kustomizations of an environment of ``count`` objects read shards
    (a HelmRelease renders the chart whatever its size)."""
    if gitops is None or gitops.flux is None or gitops.flux.helm_release:
        return False
    return count > SHARD_OVER


def sharded(gitops: GitOps | None, *, count: int) -> bool:
    """Whether the environment is written in shards, for either controller."""
    return argocd_shards(gitops, count=count) or flux_shards(gitops, count=count)


def _node(obj: Mapping[str, Any]) -> str | None:
    labels = obj.get("metadata", {}).get("labels") or {}
    node = labels.get(NODE_LABEL)
    return None if node is None else str(node)


def bucket(node: str, *, buckets: int) -> int:
    """The bucket of a node: its name's SHA-256, modulo the bucket count."""
    return int.from_bytes(hashlib.sha256(node.encode("utf-8")).digest()[:8], "big") % buckets


def _files(objects: Sequence[Obj]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((object_file(o), yamlout.dump(with_sync_waves(o))) for o in objects))


def _fits(shard: Shard) -> bool:
    return len(shard.objects) <= SHARD_MAX_OBJECTS and shard.size <= SHARD_MAX_BYTES


def shards_of(objects: Sequence[Obj]) -> list[Shard]:
    """An environment's shards: ``00`` with the shared objects, then each non-empty bucket
    of nodes, numbered from 01, or from ``n + 1`` for ``n`` buckets past ``SHARD_BUCKETS``
    (an empty bucket keeps its number, unused)."""
    shared = [o for o in objects if _node(o) is None]
    by_node: dict[str, list[Obj]] = {}
    for obj in objects:
        node = _node(obj)
        if node is not None:
            by_node.setdefault(node, []).append(obj)
    buckets = SHARD_BUCKETS
    while True:
        groups: dict[int, list[str]] = {}
        for node in sorted(by_node):
            groups.setdefault(bucket(node, buckets=buckets), []).append(node)
        first = 1 if buckets <= SHARD_BUCKETS else buckets + 1
        width = max(2, len(str(first + buckets - 1)))
        shards = [Shard(SHARED.zfill(width), _files(shared), tuple(shared), ())]
        for index in sorted(groups):
            held = [o for n in groups[index] for o in by_node[n]]
            number = str(first + index).zfill(width)
            shards.append(Shard(number, _files(held), tuple(held), tuple(groups[index])))
        if all(_fits(s) for s in shards[1:]) or buckets >= max(1, len(by_node)):
            return shards
        buckets *= 2


def shard_dir(env: str, number: str) -> str:
    """A shard's folder, from the tree's root."""
    return f"{SHARDS_DIR}/{env}/{number}"


def shard_path(gitops: GitOps, *, env: str, number: str) -> str:
    """A shard's folder from the repository root, as an Application reads it."""
    below = shard_dir(env, number)
    return below if gitops.path == "." else f"{gitops.path}/{below}"


def shard_files(shards: Mapping[str, Sequence[Shard]]) -> Iterator[tuple[str, str]]:
    """Every shard's files, environment by environment."""
    for env in sorted(shards):
        for shard in shards[env]:
            for name, text in shard.files:
                yield f"{shard_dir(env, shard.number)}/{name}", text


def environment_shards(
    gitops: GitOps | None, objects: Mapping[str, Sequence[Obj]]
) -> dict[str, list[Shard]]:
    """The shards of each environment delivered in shards (none: an empty map)."""
    return {
        env: shards_of(objs)
        for env, objs in sorted(objects.items())
        if sharded(gitops, count=len(objs))
    }
