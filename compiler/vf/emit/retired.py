"""Retired shards: a shard whose nodes the new compile delivers otherwise keeps its
Kustomization and Application, reading an empty folder (ADRs 0256, 0258).

Deleting a shard's Kustomization or Application deletes, by its finalizer, what it still
owns, and nothing makes that deletion wait for the nodes' new owner to apply them (ADR
0238); a shard's live Application, reading a folder its nodes left, prunes them before
the new owner applies them (ADR 0249). So when the committed tree (the output folder, as
the chart's version reads it) holds a shard that the new compile does not deliver (the
environment went back below ``SHARD_OVER``, or its bucket count changed, which numbers
every shard anew), the shard's controller object is written again under its own name,
*retired*: it reads ``shards/<env>/retired/``, a folder whose only file is a README (no
manifest: Argo CD's directory source and Flux's generated kustomization.yaml both read
``.yaml``/``.yml`` files only), so it applies nothing and, once the nodes' new owners
have applied them, owns nothing (``vf.emit.gitops.retired_apps``).

The committed tree records the shards by their controller objects' files,
``gitops/flux/kustomization-<env>-shard-<nn>[-optional].yaml`` and
``gitops/argocd/application-<env>-shard-<nn>.yaml``, live or retired alike: a compile
into a tree it wrote writes the same files again (``vf compile --check`` passes), and a
shard number the new compile delivers again is live again under the same name. A tree
that never held shards gets nothing of this.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from vf.emit.shards import SHARDS_DIR, Shard, argocd_shards, flux_shards
from vf.ir.delivery import GitOps
from vf.textio.objects import Obj

RETIRED = "retired"  # the empty folder a retired shard reads, beside the shard folders
README = "README.md"
_README = """\
# Retired shards of `{env}`

{why} Each retired shard's Argo CD Application and Flux Kustomization stays, under its
own name, and reads this folder, which holds no manifest: deleting them would delete the
nodes they held before their new owner applies them again.

- Flux: each retired Kustomization waits (`dependsOn`) for the environment's workers
  part (and a retired `-optional` one for each live shard's), then prunes what still
  carries its own labels: the objects of a node that the same commit removed. What the
  new owners applied is theirs.
- Argo CD: each retired Application says `Prune=false`: what a removed node left stays,
  listed by it as requiring pruning, until you delete it.

A retired shard whose number vf delivers again is live again. vf writes this folder; do
not edit it.
"""
_BELOW = "`{env}` was delivered in shards (`{shards}/{env}/<nn>/`) and is now below the threshold."
_RENUMBERED = (
    "`{env}`'s shards were numbered anew when their count changed: the nodes of the "
    "shards listed as retired (`gitops/`) are in the live shards (`{shards}/{env}/<nn>/`)."
)


@dataclass(frozen=True)
class Retired:
    """The shards of one environment whose controller objects are written retired: the
    numbers of its Flux Kustomizations (``optional``: those with an ``-optional`` twin)
    and of its Argo CD Applications; ``sharded``: the environment is still delivered in
    shards (their count changed)."""

    flux: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()
    argocd: tuple[str, ...] = ()
    sharded: bool = False

    def __bool__(self) -> bool:
        return bool(self.flux or self.argocd)


def retired_dir(env: str) -> str:
    """The folder every retired shard of ``env`` reads, from the tree's root."""
    return f"{SHARDS_DIR}/{env}/{RETIRED}"


def _numbers(folder: Path, pattern: re.Pattern[str]) -> list[tuple[str, str]]:
    if not folder.is_dir():
        return []
    found = (pattern.match(p.name) for p in folder.iterdir() if p.is_file())
    return sorted((m.group(1), m.group(2) or "") for m in found if m is not None)


def committed(out: Path, env: str) -> Retired:
    """The shards whose controller objects the committed tree at ``out`` holds for
    ``env``, live or retired."""
    name = re.escape(env)
    flux = _numbers(
        out / "gitops" / "flux",
        re.compile(rf"kustomization-{name}-shard-(\d+)(-optional)?\.yaml\Z"),
    )
    argocd = _numbers(
        out / "gitops" / "argocd", re.compile(rf"application-{name}-shard-(\d+)()\.yaml\Z")
    )
    return Retired(
        flux=tuple(n for n, twin in flux if not twin),
        optional=tuple(n for n, twin in flux if twin),
        argocd=tuple(n for n, _ in argocd),
    )


def retired_shards(
    gitops: GitOps | None,
    objects: Mapping[str, Sequence[Obj]],
    *,
    shards: Mapping[str, Sequence[Shard]],
    out: Path | None,
) -> dict[str, Retired]:
    """Each environment's committed shards (``out``) that each controller no longer
    delivers: none of them below the threshold, else those whose number the live
    ``shards`` lack. Flux retires only Kustomizations (a HelmRelease replaces them all)."""
    if gitops is None or out is None:
        return {}
    found: dict[str, Retired] = {}
    for env, objs in sorted(objects.items()):
        held = committed(out, env)
        live = {int(s.number) for s in shards.get(env, ())[1:]}
        flux = gitops.flux is not None and not gitops.flux.helm_release
        flux_live = live if flux_shards(gitops, count=len(objs)) else set()
        argocd_live = live if argocd_shards(gitops, count=len(objs)) else set()
        retired = Retired(
            flux=_gone(held.flux, flux_live) if flux else (),
            optional=_gone(held.optional, flux_live) if flux else (),
            argocd=_gone(held.argocd, argocd_live) if gitops.argocd is not None else (),
            sharded=bool(live),
        )
        if retired:
            found[env] = retired
    return found


def _gone(numbers: Sequence[str], live: set[int]) -> tuple[str, ...]:
    return tuple(n for n in numbers if int(n) not in live)


def retired_files(retired: Mapping[str, Retired]) -> Iterator[tuple[str, str]]:
    """The README of each environment's retired folder."""
    for env in sorted(retired):
        why = (_RENUMBERED if retired[env].sharded else _BELOW).format(env=env, shards=SHARDS_DIR)
        yield f"{retired_dir(env)}/{README}", _README.format(env=env, why=why)
