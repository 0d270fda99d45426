"""The chart README's table of objects counts what the chart renders: each object of the
environments' overlays once, however many environments hold it, and an object whose name
carries a digest of its environment (a BATCH generation, a GPU claim's) once too. The
chart's Namespace is the release's: it has none of its own. A long-running worker's
PodDisruptionBudget counts whatever its environments' replicas: the template renders it
where a --set of the count is above one, and a count is not the chart's to show (the README
is the same file for every environment)."""

from __future__ import annotations

import re
from collections import Counter

import pytest
from ruamel.yaml import YAML

from vf.pipeline import CompileResult

# a name's digest of its environment: a generation (-g1a2b3c4) or a claim's (-c916afdb)
# or a REALTIME provision Job's topology (-t1a2b3c4)
_DIGEST = re.compile(r"-([gt][0-9a-f]{7}|[0-9a-f]{8})$")
_ROW = re.compile(r"^\| (\w+) \| (\d+) \|$", re.M)


def _overlay_kinds(result: CompileResult) -> Counter[str]:
    yaml = YAML(typ="safe", pure=True)
    seen: set[tuple[str, str]] = set()
    for path, text in result.tree.items():
        if _an_object(path):
            obj = yaml.load(str(text))
            seen.add((obj["kind"], _DIGEST.sub("", obj["metadata"]["name"])))
            if obj["kind"] in ("Deployment", "StatefulSet") and _a_worker(obj):
                seen.add(("PodDisruptionBudget", f"{obj['metadata']['name']}-pdb"))
    return Counter(kind for kind, _ in seen if kind != "Namespace")  # the release's


def _a_worker(obj: dict[str, object]) -> bool:
    metadata = obj["metadata"]
    assert isinstance(metadata, dict)
    return "vf.dev/node" in (metadata.get("labels") or {})


def _an_object(path: str) -> bool:
    """A file of the Kustomize tree that holds one object of an environment: an overlay's
    resource or a component's (the broker's and the store's, by profile)."""
    parts = path.split("/")
    if not path.endswith(".yaml") or parts[-1] == "kustomization.yaml":
        return False
    overlay = parts[0] == "overlays" and parts[2] == "resources"
    return overlay or parts[0] in ("base", "components")


@pytest.mark.parametrize(
    "example", ["batch_pipeline", "realtime_cameras", "thumbnails", "video_analytics"]
)
def test_the_readme_counts_every_object_once(
    compiled_examples: dict[str, CompileResult], example: str
) -> None:
    result = compiled_examples[example]
    table = dict(_ROW.findall(str(result.tree["chart/README.md"])))
    counted = {kind: int(n) for kind, n in table.items() if kind != "kind"}
    expected = _overlay_kinds(result)
    assert counted == dict(expected), (counted, expected)
