"""The chart as Flux builds it for a HelmRelease (``gitops.flux.helm_release: true``).

source-controller does not pass ``chart.spec.valuesFiles`` to Helm as ``-f`` files: it
merges them, in order, into one map (nested maps merge, anything else the later file
replaces) and packages the chart with that map *as* its ``values.yaml``; the chart's own
``values.yaml`` counts only when the list names it (ADR 150). ``render`` then runs
``helm template`` on that chart without ``-f``, which is what helm-controller installs.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vf.errors import VfError
from vf.textio.yaml_read import reader

Obj = dict[str, Any]


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


def packaged_chart(tree: Path, *, release: Obj, into: Path) -> Path:
    """A copy of ``chart/`` whose ``values.yaml`` is the merge of the release's
    ``valuesFiles``, as source-controller packages it."""
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
