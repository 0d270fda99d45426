"""What keeps ``helm template`` of a large flow cheap (ADR 254), rendered with the real helm:
a worker's pod enters ``vf.pod`` (which copies and merges an override around vf's own
value) only where there is something to merge, and the pods it skips render the same
bytes as they would through it."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from vf.pipeline import CompileResult
from vf.tree.write import write_tree

EXAMPLES = (("batch_pipeline", "prod"), ("video_analytics", "lab"), ("realtime_cameras", "dev"))
# The line of vf.workerPod that decides whether a pod's fields go through vf.pod.
CUSTOM = (
    '{{- $custom := or $shared.overrides (pick $k "affinity" "env" "imagePullSecrets" '
    '"nodeSelector" "serviceAccount" "tolerations") -}}'
)
POD = '{{- define "vf.pod" -}}'


@pytest.fixture(scope="module")
def charts(
    compiled_examples: dict[str, CompileResult], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path]:
    out = {}
    for example, _ in EXAMPLES:
        root = tmp_path_factory.mktemp(example) / "deploy"
        write_tree(root, compiled_examples[example].tree)
        out[example] = root / "chart"
    return out


def _variant(chart: Path, work: Path, old: str, new: str) -> Path:
    """A copy of ``chart`` whose ``_helpers.tpl`` has ``old`` (which it must hold) as ``new``."""
    copy = work / f"{chart.parent.parent.name}-{abs(hash(new))}"
    shutil.copytree(chart, copy)
    helpers = copy / "templates" / "_helpers.tpl"
    text = helpers.read_text(encoding="utf-8")
    assert old in text, f"_helpers.tpl holds no {old!r}"
    helpers.write_text(text.replace(old, new, 1), encoding="utf-8")
    return copy


def _render(helm: str, chart: Path, env: str, *args: str) -> subprocess.CompletedProcess[str]:
    values = chart / f"values-{env}.yaml"
    argv = [helm, "template", "r", str(chart), "-n", "ns", "-f", str(values), *args]
    return subprocess.run(argv, capture_output=True, text=True, check=False)


@pytest.mark.parametrize(("example", "env"), EXAMPLES)
def test_a_worker_with_nothing_to_merge_never_enters_vf_pod(
    example: str, env: str, charts: dict[str, Path], helm: str, tmp_path: Path
) -> None:
    # vf.pod fails where a worker's pod calls it with no value of vf's own; with no
    # override set anywhere, nothing is there to merge, so the chart renders
    tripwire = (
        POD + '{{- if and (index . 2) (kindIs "invalid" (index . 3)) -}}'
        '{{- fail (printf "vf.pod %s for %s" (index . 1) (index . 2)) -}}{{- end -}}'
    )
    chart = _variant(charts[example], tmp_path, POD, tripwire)
    done = _render(helm, chart, env)
    assert done.returncode == 0, done.stderr
    assert "kind: Deployment" in done.stdout or "kind: Job" in done.stdout
    # an override set for every pod goes through vf.pod again
    tolerations = _render(helm, chart, env, "--set", "tolerations[0].key=dedicated")
    assert tolerations.returncode != 0 and "vf.pod" in tolerations.stderr


OVERRIDE_SETS = {
    "one node": {},
    "global": {
        "nodeSelector": {"pool": "batch"},
        "tolerations": [{"key": "dedicated", "operator": "Exists"}],
        "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}},
        "env": [{"name": "LOG_LEVEL", "value": "debug"}],
        "imagePullSecrets": [{"name": "registry-cred"}],
        "serviceAccount": {"name": "flows"},
    },
    "empty": {"nodeSelector": {}, "tolerations": [], "env": [], "serviceAccount": {"name": None}},
}


@pytest.mark.parametrize("overrides", sorted(OVERRIDE_SETS))
@pytest.mark.parametrize(("example", "env"), EXAMPLES)
def test_the_pods_vf_pod_skips_render_as_through_vf_pod(
    example: str, env: str, overrides: str, charts: dict[str, Path], helm: str, tmp_path: Path
) -> None:
    chart = charts[example]
    values = OVERRIDE_SETS[overrides]
    if overrides == "one node":  # one node's own override, the other pods plain
        nodes = YAML(typ="safe").load((chart / f"values-{env}.yaml").read_text())["nodes"]
        values = {"nodes": {min(nodes): {"nodeSelector": {"pool": "own"}, "env": []}}}
    path = tmp_path / "values.json"
    path.write_text(json.dumps(values), encoding="utf-8")
    always = _variant(chart, tmp_path, CUSTOM, "{{- $custom := true -}}")  # as before ADR 254
    shipped = _render(helm, chart, env, "-f", str(path))
    through = _render(helm, always, env, "-f", str(path))
    assert shipped.returncode == 0, shipped.stderr
    assert through.returncode == 0, through.stderr
    assert shipped.stdout == through.stdout


# one made-up value of each pod override a Helm user may set, globally or for one node
SAMPLES = {
    "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}},
    "env": [{"name": "LOG_LEVEL", "value": "debug"}],
    "imagePullSecrets": [{"name": "registry-cred"}],
    "nodeSelector": {"pool": "batch"},
    "podAnnotations": {"example.com/team": "media"},
    "podLabels": {"example.com/team": "media"},
    "serviceAccount": {"name": "flows"},
    "tolerations": [{"key": "dedicated", "operator": "Exists"}],
}


def test_each_override_alone_renders_as_through_vf_pod(
    charts: dict[str, Path], helm: str, tmp_path: Path
) -> None:
    """Every pod override the schema takes for a node, set alone (for every pod, then for
    one node), renders what sending every field through vf.pod renders: an override the
    worker templates' shortcut does not know of would be dropped."""
    chart = charts["realtime_cameras"]
    schema = json.loads((chart / "values.schema.json").read_text(encoding="utf-8"))
    node = schema["properties"]["nodes"]["additionalProperties"]["properties"]
    assert set(node) - {"replicas", "image", "resources"} == set(SAMPLES)
    nodes = YAML(typ="safe").load((chart / "values-dev.yaml").read_text())["nodes"]
    always = _variant(chart, tmp_path, CUSTOM, "{{- $custom := true -}}")
    for key, value in sorted(SAMPLES.items()):
        for values in ({key: value}, {"nodes": {min(nodes): {key: value}}}):
            path = tmp_path / "values.json"
            path.write_text(json.dumps(values), encoding="utf-8")
            shipped = _render(helm, chart, "dev", "-f", str(path))
            through = _render(helm, always, "dev", "-f", str(path))
            assert shipped.returncode == 0, shipped.stderr
            assert shipped.stdout == through.stdout, values
