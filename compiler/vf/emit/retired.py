"""Retired shards: an environment that goes back below ``SHARD_OVER`` keeps its shards'
Kustomizations and Applications, reading an empty folder (ADR 0256).

Deleting a shard's Kustomization or Application deletes, by its finalizer, what it still
owns, and nothing makes that deletion wait for the environment's own part to apply the
nodes again (ADR 0238). So when the committed tree (the output folder, as the chart's
version reads it) delivers an environment in shards and the new compile of that
environment does not, each old shard's controller object is written again under its own
name, *retired*: it reads ``shards/<env>/retired/``, a folder whose only file is a
README (no manifest: Argo CD's directory source and Flux's generated kustomization.yaml
both read ``.yaml``/``.yml`` files only), so it applies nothing and, once the
environment's part has applied the nodes, owns nothing (``vf.emit.gitops.retired_apps``).

The committed tree records the shards by their controller objects' files,
``gitops/flux/kustomization-<env>-shard-<nn>[-optional].yaml`` and
``gitops/argocd/application-<env>-shard-<nn>.yaml``, live or retired alike: a compile
into a tree it wrote writes the same files again (``vf compile --check`` passes), and an
environment that grows past the threshold again makes each retired shard live under the
same name. A tree that never held shards gets nothing of this.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from vf.emit.shards import SHARDS_DIR, argocd_shards, flux_shards
from vf.ir.delivery import GitOps
from vf.textio.objects import Obj

RETIRED = "retired"  # the empty folder a retired shard reads, beside the shard folders
README = "README.md"
_README = """\
# Retired shards of `{env}`

`{env}` was delivered in shards (`{shards}/{env}/<nn>/`) and is now below the threshold.
Each shard's Argo CD Application and Flux Kustomization stays, under its own name, and
reads this folder, which holds no manifest: deleting them would delete the nodes they
held before the environment's own Application or Kustomization applies them again.

- Flux: each retired Kustomization waits (`dependsOn`) for the environment's workers
  part, then prunes what still carries its own labels: the objects of a node that the
  commit which went below the threshold removed. What the workers part applied is its.
- Argo CD: each retired Application says `Prune=false`: what a removed node left stays,
  listed by it as requiring pruning, until you delete it.

They become live shards again if `{env}` grows past the threshold. vf writes this folder;
do not edit it.
"""


@dataclass(frozen=True)
class Retired:
    """The shards of one environment whose controller objects are written retired: the
    numbers of its Flux Kustomizations (``optional``: those with an ``-optional`` twin)
    and of its Argo CD Applications."""

    flux: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()
    argocd: tuple[str, ...] = ()

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
    gitops: GitOps | None, objects: Mapping[str, Sequence[Obj]], *, out: Path | None
) -> dict[str, Retired]:
    """The environments not delivered in shards now whose committed tree (``out``) holds
    shards: each controller's old shards, retired. Flux retires only Kustomizations (a
    HelmRelease replaces them all); an environment delivered in shards has none retired."""
    if gitops is None or out is None:
        return {}
    found: dict[str, Retired] = {}
    for env, objs in sorted(objects.items()):
        held = committed(out, env)
        flux = gitops.flux is not None and not gitops.flux.helm_release
        keep_flux = flux and not flux_shards(gitops, count=len(objs))
        keep_argocd = gitops.argocd is not None and not argocd_shards(gitops, count=len(objs))
        retired = Retired(
            flux=held.flux if keep_flux else (),
            optional=held.optional if keep_flux else (),
            argocd=held.argocd if keep_argocd else (),
        )
        if retired:
            found[env] = retired
    return found


def retired_files(retired: Mapping[str, Retired]) -> Iterator[tuple[str, str]]:
    """The README of each environment's retired folder."""
    for env in sorted(retired):
        yield f"{retired_dir(env)}/{README}", _README.format(env=env, shards=SHARDS_DIR)
