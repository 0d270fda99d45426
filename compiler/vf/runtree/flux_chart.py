"""The chart and values as Flux hands them to Helm for a HelmRelease
(``gitops.flux.helm_release: true``), and when helm-controller upgrades the release.

- source-controller does not pass ``chart.spec.valuesFiles`` to Helm as ``-f`` files: it
  merges them, in order, into one map (nested maps merge, anything else the later file
  replaces) and packages the chart with that map *as* its ``values.yaml``; the chart's own
  ``values.yaml`` counts only when the list names it (ADR 150). It builds the chart again
  only when the chart's version or the HelmChart's spec changes; otherwise it serves the
  chart it built before, values and all.
- helm-controller composes the release's values from ``valuesFrom`` (each ConfigMap's or
  Secret's key, merged in order) and ``values``, and gives them to Helm as ``-f`` values
  are given. It upgrades a deployed release when the chart's name or version differs from
  the release's, or the digest of those values does (ADR 188); the chart's own values are
  not compared.

``render`` runs ``helm template`` on the packaged chart with the composed values.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vf.errors import VfError
from vf.textio.objects import Obj
from vf.textio.yaml_read import reader


def helm_release(tree: Path, *, env: str) -> Obj | None:
    """The HelmRelease vf wrote for ``env``, or None when the tree delivers no chart."""
    path = tree / "gitops" / "flux" / f"helmrelease-{env}.yaml"
    if not path.is_file():
        return None
    loaded = reader("safe").load(path.read_text(encoding="utf-8"))
    return loaded if isinstance(loaded, dict) else None


def merge_values(base: Mapping[str, Any], overlay: Mapping[str, Any]) -> Obj:
    """One values file over another: maps merge key by key, anything else is replaced."""
    merged: Obj = dict(base)
    for key, value in overlay.items():
        old = merged.get(key)
        if isinstance(old, Mapping) and isinstance(value, Mapping):
            merged[key] = merge_values(old, value)
        else:
            merged[key] = value
    return merged


def _in_tree(tree: Path, *, path: str, chart: str) -> Path:
    """A path of the source artifact as a path in the tree: the chart's path in the source
    is ``<prefix>/chart``, and the tree is ``<prefix>``."""
    prefix = chart.removesuffix("chart")
    if not path.startswith(prefix) or ".." in Path(path).parts:
        raise VfError(
            "VF_RUN_TREE_RENDER",
            f"the HelmRelease's values file {path!r} is not inside the tree ({prefix})",
            "recompile the tree; never edit generated files",
            str(tree / "gitops" / "flux"),
        )
    return tree / path.removeprefix(prefix)


@dataclass(frozen=True, kw_only=True)
class FluxChart:
    """The chart source-controller packaged, and the values helm-controller gives Helm."""

    chart: Path
    values: Path


def flux_chart(
    tree: Path, *, release: Obj, into: Path, held: Sequence[Obj] | None = None
) -> FluxChart:
    """The release's chart and values file, written below ``into``; ``held``: the
    controller objects the cluster holds, where helm-controller reads the values."""
    chart = packaged_chart(tree, release=release, into=into)
    values = into / "release-values.json"
    composed = release_values(tree, release=release, held=held)
    values.write_text(json.dumps(composed), encoding="utf-8")
    return FluxChart(chart=chart, values=values)


def packaged_chart(tree: Path, *, release: Obj, into: Path) -> Path:
    """A copy of ``chart/`` whose ``values.yaml`` is the merge of the release's
    ``valuesFiles``, as source-controller packages it (the chart as it is without any)."""
    spec = release["spec"]["chart"]["spec"]
    chart = str(spec["chart"])
    files = [str(f) for f in spec.get("valuesFiles") or []]
    target = into / "chart"
    shutil.copytree(tree / "chart", target)
    if not files or [f.rsplit("/", 1)[-1] for f in files] == ["values.yaml"]:
        return target
    merged: Obj = {}
    for name in files:
        found = _in_tree(tree, path=name, chart=chart)
        if not found.is_file():
            raise VfError(
                "VF_RUN_TREE_RENDER",
                f"no values file found at path {name!r}: source-controller refuses the chart",
                "recompile the tree; never edit generated files",
                str(found),
            )
        loaded = reader("safe").load(found.read_text(encoding="utf-8")) or {}
        merged = merge_values(merged, loaded)
    (target / "values.yaml").write_text(json.dumps(merged, sort_keys=True), encoding="utf-8")
    return target


def _flux_objects(tree: Path) -> list[Obj]:
    objects: list[Obj] = []
    for path in sorted((tree / "gitops" / "flux").glob("*.yaml")):
        for doc in reader("safe").load_all(path.read_text(encoding="utf-8")):
            if isinstance(doc, dict) and doc.get("kind"):
                objects.append(doc)
    return objects


def _refused(what: str, *, tree: Path) -> VfError:
    return VfError(
        "VF_RUN_TREE_RENDER",
        f"{what}: helm-controller refuses the release",
        "recompile the tree; never edit generated files",
        str(tree / "gitops" / "flux"),
    )


def release_values(tree: Path, *, release: Obj, held: Sequence[Obj] | None = None) -> Obj:
    """The values helm-controller gives Helm: each ``valuesFrom`` reference's key, read
    from the ConfigMaps and Secrets in the release's namespace (those the cluster holds,
    ``held``, else the tree's ``gitops/flux`` objects) and merged in order, then
    ``spec.values``."""
    spec = release["spec"]
    namespace = release["metadata"].get("namespace")
    found = {
        (
            o["kind"],
            (o.get("metadata") or {}).get("namespace"),
            (o.get("metadata") or {}).get("name"),
        ): o
        for o in (_flux_objects(tree) if held is None else held)
        if o.get("kind") in ("ConfigMap", "Secret")
    }
    merged: Obj = {}
    for ref in spec.get("valuesFrom") or []:
        if ref.get("targetPath"):
            raise _refused(
                f"valuesFrom {ref.get('name')!r} sets a targetPath vf never writes", tree=tree
            )
        source = found.get((ref.get("kind"), namespace, ref.get("name")))
        data = ((source or {}).get("data") or {}).get(ref.get("valuesKey") or "values.yaml")
        if data is None:
            if ref.get("optional"):
                continue
            raise _refused(
                f"no {ref.get('kind')} {namespace}/{ref.get('name')} with its values", tree=tree
            )
        merged = merge_values(merged, reader("safe").load(str(data)) or {})
    return merge_values(merged, spec.get("values") or {})


@dataclass(frozen=True, kw_only=True)
class ReleaseInputs:
    """What helm-controller compares with the deployed release to decide on an upgrade."""

    chart: str  # name and version, as source-controller built it
    values: str  # digest of the composed values


def release_inputs(tree: Path, *, release: Obj) -> ReleaseInputs:
    """The chart version source-controller builds for the release (``+<spec digest>`` when
    ``valuesFiles`` are set: it appends the HelmChart's generation, which a change of the
    release's chart spec increases) and the digest of the release's values."""
    spec = release["spec"]["chart"]["spec"]
    meta = reader("safe").load((tree / "chart" / "Chart.yaml").read_text(encoding="utf-8"))
    version = str(meta["version"])
    if spec.get("valuesFiles"):
        version += "+" + _digest(spec)[:8]
    values = _digest(release_values(tree, release=release))
    return ReleaseInputs(chart=f"{meta['name']}-{version}", values=values)


def _digest(data: Any) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def upgrade_reason(deployed: ReleaseInputs, wanted: ReleaseInputs) -> str | None:
    """Why helm-controller upgrades a deployed release, or None when it leaves it alone."""
    if deployed.chart != wanted.chart:
        return f"chart {deployed.chart} -> {wanted.chart}"
    if deployed.values != wanted.values:
        return "its values changed"
    return None
