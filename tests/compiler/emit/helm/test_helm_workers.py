"""The workers' role templates (ADR 235): a worker's Deployment is one hand-written template,
the same bytes in every flow's chart, over the plan's readable values (``workers.<node>``,
``nodes.<node>``, ``workerPod``); what a Helm user sets there changes what renders, and
the schema refuses what is not a worker's entry. Rendered with the real ``helm``."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from tests.support import EXAMPLES, helm_lint, helm_template, rendered_by_name
from vf.pipeline import CompileRequest, CompileResult, compile_project
from vf.tree.write import write_tree

pytestmark = pytest.mark.slow  # real servers, renders or long runs: make test-fast skips it

SHIPPED = ("chart/templates/worker-deployment.yaml", "chart/templates/worker-statefulset.yaml")
DETECTOR = ("Deployment", "vf-cameras-rce2b7c1-detector")


@pytest.fixture(scope="module")
def cameras(
    compiled_examples: dict[str, CompileResult], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    root = tmp_path_factory.mktemp("cameras") / "deploy"
    write_tree(root, compiled_examples["realtime_cameras"].tree)
    return root / "chart"


def test_every_flows_chart_ships_the_same_worker_templates(
    compiled_examples: dict[str, CompileResult],
) -> None:
    texts = {path: {str(r.tree[path]) for r in compiled_examples.values()} for path in SHIPPED}
    assert all(len(seen) == 1 for seen in texts.values()), texts
    tree = compiled_examples["realtime_cameras"].tree
    made = [p for p in tree if p.startswith("chart/templates/") and "deployment" in p]
    # one template renders every worker's Deployment: no worker has a template of its own
    assert made == ["chart/templates/worker-deployment.yaml"], made


def _objects(helm: str, chart: Path, *args: str) -> dict[tuple[str, str], Any]:
    return rendered_by_name(helm, chart, "values-prod.yaml", *args, namespace="cams")


def _env(obj: Any) -> dict[str, Any]:
    entries = obj["spec"]["template"]["spec"]["containers"][0]["env"]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in entries}


def test_a_workers_variables_come_from_its_readable_values(cameras: Path, helm: str) -> None:
    plain = _objects(helm, cameras)[DETECTOR]
    assert _env(plain)["VF_NODE_CLASS"] == "camera_nodes.Detector"
    tuned = _objects(
        helm,
        cameras,
        "--set",
        "workers.detector.class=camera_nodes.Other",
        "--set-json",
        'workers.detector.params="{\\"threshold\\":0.9}"',
    )[DETECTOR]
    env = _env(tuned)
    assert (env["VF_NODE_CLASS"], env["VF_NODE_PARAMS_JSON"]) == (
        "camera_nodes.Other",
        '{"threshold":0.9}',
    )
    assert env["VF_PARENT_REPLICAS"] == "cam-front=1"
    more = _objects(helm, cameras, "--set", "nodes.cam-front.replicas=3")[DETECTOR]
    assert _env(more)["VF_PARENT_REPLICAS"] == "cam-front=3"
    hashes = [o["spec"]["template"]["metadata"]["annotations"] for o in (plain, more)]
    assert hashes[0]["vf.dev/config-hash"][:12] == hashes[1]["vf.dev/config-hash"][:12]
    assert hashes[0]["vf.dev/config-hash"] != hashes[1]["vf.dev/config-hash"]


@pytest.mark.parametrize(
    "setting",
    [
        "workers.nosuchnode.kind=Deployment",  # not a node of the flow
        "workers.detector.klass=x",  # a typo
        "workers.detector.configHash=xyz",  # not 12 hex digits
        "workerPod.broker=",  # no ConfigMap
    ],
)
def test_the_schema_refuses_what_is_no_workers_value(
    cameras: Path, helm: str, setting: str
) -> None:
    done = helm_template(
        helm, cameras, "-n", "cams", "-f", str(cameras / "values-prod.yaml"), "--set", setting
    )
    assert done.returncode != 0
    assert "values don't meet the specifications of the schema" in done.stderr, done.stderr


def test_a_partitioned_workers_statefulset_is_the_role_templates(
    cameras: Path, helm: str, compiled_examples: dict[str, CompileResult]
) -> None:
    tree = compiled_examples["realtime_cameras"].tree
    assert not [p for p in tree if p.startswith("chart/templates/statefulset-vf-cameras-r")]
    tracker = ("StatefulSet", "vf-cameras-rce2b7c1-tracker")
    plain = _objects(helm, cameras)[tracker]
    assert plain["spec"]["serviceName"] == "vf-cameras-rce2b7c1-tracker-hl"
    assert plain["spec"]["podManagementPolicy"] == "Parallel"
    assert _env(plain)["POD_NAME"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    tuned = _objects(helm, cameras, "--set", "workers.tracker.class=camera_nodes.Other")[tracker]
    assert _env(tuned)["VF_NODE_CLASS"] == "camera_nodes.Other"


def test_a_native_component_beside_a_shared_class_passes_the_schema(
    tmp_path: Path, helm: str
) -> None:
    """A flow whose most common node class is a Python class of its own, with a native
    component (no class): the component's entry says ``class: ""`` (none of its own), which
    the schema takes, and its Deployment has no ``VF_NODE_CLASS``."""
    project = tmp_path / "thumbnails"
    shutil.copytree(EXAMPLES / "thumbnails", project)
    graph = project / "graph.py"
    text = graph.read_text(encoding="utf-8")
    one = '    store = ThumbnailStore(directory="/archive/thumbs", name="store")(thumbs)\n'
    two = '    spare = ThumbnailStore(directory="/archive/spare", name="spare")(thumbs)\n'
    assert one in text and "Flow([store]" in text
    graph.write_text(text.replace(one, one + two).replace("Flow([store]", "Flow([store, spare]"))
    result = compile_project(CompileRequest(graph=str(graph)))
    write_tree(tmp_path / "deploy", result.tree)
    chart = tmp_path / "deploy" / "chart"
    shared = YAML(typ="safe").load((chart / "values.yaml").read_text(encoding="utf-8"))
    assert shared["workers"]["thumbnailer"]["class"] == ""
    for values in sorted(chart.glob("values-*.yaml")):
        done = helm_lint(helm, chart, values)
        assert done.returncode == 0, done.stdout + done.stderr
    objects = rendered_by_name(helm, chart, "values-prod.yaml", namespace="thumbs")
    pod = objects[("Deployment", "vf-thumbnails-" + _run(objects) + "-thumbnailer")]
    assert "VF_NODE_CLASS" not in _env(pod)


def _run(objects: dict[tuple[str, str], Any]) -> str:
    """The run id of the flow's workers' names."""
    names = [name for kind, name in objects if kind == "Deployment" and name.endswith("-store")]
    return names[0].removeprefix("vf-thumbnails-").removesuffix("-store")
