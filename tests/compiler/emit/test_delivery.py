"""Autoscaling, the GitOps manifests and the tree side of apply-order independence."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from tests.support import EXAMPLE_NAMES, EXAMPLES, example_graph
from vf.emit.ordering import SYNC_OPTIONS, SYNC_WAVE, is_provision_job, sync_wave
from vf.errors import VfError
from vf.pipeline import CompileRequest, CompileResult, compile_project
from vf.render.objects import render_plan
from vf_runtime.labels import NODE_LABEL

Obj = dict[str, Any]


def _kind(objects: list[Obj], kind: str) -> list[Obj]:
    return [o for o in objects if o["kind"] == kind]


def _node(obj: Obj) -> str:
    return str(obj["metadata"]["labels"]["vf.dev/node"])


def _yaml(text: str) -> Obj:
    loaded: Obj = YAML(typ="safe").load(text)
    return loaded


def test_scaled_objects_cover_only_unpartitioned_single_input_workers(
    compiled_examples: dict[str, CompileResult],
) -> None:
    objects = compiled_examples["realtime_cameras"].objects
    # dev: GPU workers are not opted in; prod opts them in.
    assert sorted(_node(o) for o in _kind(objects["dev"], "ScaledObject")) == ["alerts", "archive"]
    assert sorted(_node(o) for o in _kind(objects["prod"], "ScaledObject")) == [
        "alerts",
        "archive",
        "detector",
    ]
    for env in ("dev", "prod"):
        for obj in _kind(objects[env], "ScaledObject"):
            assert _node(obj) not in {"tracker", "cam-front", "cam-back"}
    assert _kind(compiled_examples["batch_pipeline"].objects["prod"], "ScaledObject") == []


def test_scaled_deployments_leave_replicas_to_keda(
    compiled_examples: dict[str, CompileResult],
) -> None:
    result = compiled_examples["realtime_cameras"]
    for env, objects in result.objects.items():
        scaled = {o["spec"]["scaleTargetRef"]["name"] for o in _kind(objects, "ScaledObject")}
        for deployment in _kind(objects, "Deployment"):
            has_replicas = "replicas" in deployment["spec"]
            assert has_replicas == (deployment["metadata"]["name"] not in scaled), env
        app = _yaml(result.tree[f"gitops/argocd/application-{env}.yaml"])
        ignored = {d["name"] for d in app["spec"]["ignoreDifferences"]}
        assert ignored == scaled
        assert all(
            d["jsonPointers"] == ["/spec/replicas"] for d in app["spec"]["ignoreDifferences"]
        )


def test_the_plan_records_autoscaling_and_the_renderer_acts_on_it_alone(
    compiled_examples: dict[str, CompileResult],
) -> None:
    result = compiled_examples["realtime_cameras"]
    for plan in result.plans:
        assert plan.autoscaling, plan.environment
        recorded = {scaler.deployment for scaler in plan.autoscaling}
        rendered = render_plan(plan)  # the plan only: no graph, no vf.yaml
        assert rendered == result.objects[plan.environment]
        scaled = {o["spec"]["scaleTargetRef"]["name"] for o in _kind(rendered, "ScaledObject")}
        assert scaled == recorded
        document = json.loads(result.tree[f"plan/{plan.environment}.json"])
        assert [s["deployment"] for s in document["autoscaling"]] == [
            s.deployment for s in plan.autoscaling
        ]
    batch = compiled_examples["batch_pipeline"]
    assert all(plan.autoscaling is None for plan in batch.plans)
    assert "autoscaling" not in json.loads(batch.tree["plan/prod.json"])


def test_triggers_watch_the_workers_own_durable_on_its_parent_stream(
    compiled_examples: dict[str, CompileResult],
) -> None:
    result = compiled_examples["realtime_cameras"]
    for plan in result.plans:
        channels = {c.node: c for c in plan.channels}
        for obj in _kind(result.objects[plan.environment], "ScaledObject"):
            workload = next(w for w in plan.workloads if w.name == obj["metadata"]["name"])
            node = result.graph.node(workload.node)
            (trigger,) = obj["spec"]["triggers"]
            channel = channels[node.parents[0]]
            assert trigger["metadata"]["stream"] == channel.stream
            assert trigger["metadata"]["consumer"] in channel.readers
            assert obj["spec"]["minReplicaCount"] == workload.replicas
    dev = _kind(result.objects["dev"], "ScaledObject")[0]
    endpoint = dev["spec"]["triggers"][0]["metadata"]["natsServerMonitoringEndpoint"]
    assert endpoint == "vf-cameras-nats.cameras-dev.svc:8222"


CAMERAS = (EXAMPLES / "realtime_cameras" / "vf.yaml").read_text(encoding="utf-8")


def _compile_cameras(tmp_path: Path, config: str) -> CompileResult:
    path = tmp_path / "vf.yaml"
    path.write_text(config, encoding="utf-8")
    return compile_project(
        CompileRequest(graph=example_graph("realtime_cameras"), config=str(path))
    )


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            "      max_replicas: 3\n",
            "      max_replicas: 3\n      nodes: [tracker]\n",
            "partitioned",
        ),
        (
            "      max_replicas: 3\n",
            "      max_replicas: 3\n      nodes: [cam-front]\n",
            "producer",
        ),
        (
            "      max_replicas: 3\n",
            "      max_replicas: 3\n      nodes: [detector]\n",
            "gpu_nodes",
        ),
        ("      max_replicas: 3\n", "      max_replicas: 3\n      nodes: [nope]\n", "unknown node"),
        ("      max_replicas: 3\n", "      max_replicas: 3\n      min_replicas: 5\n", "above"),
        ("      monitoring_endpoint: nats.messaging.svc:8222\n", "", "monitoring endpoint"),
    ],
)
def test_autoscaling_refuses_what_it_cannot_honour(
    tmp_path: Path, old: str, new: str, message: str
) -> None:
    assert CAMERAS.count(old) == 1
    with pytest.raises(VfError) as caught:
        _compile_cameras(tmp_path, CAMERAS.replace(old, new))
    assert caught.value.code == "VF_CONFIG_AUTOSCALING"
    assert caught.value.exit_code == 2
    assert message in caught.value.render()


def test_autoscaling_disabled_renders_no_scalers(tmp_path: Path) -> None:
    config = CAMERAS.replace(
        "      max_replicas: 8\n", "      enabled: false\n      max_replicas: 8\n"
    )
    result = _compile_cameras(tmp_path, config)
    assert _kind(result.objects["prod"], "ScaledObject") == []
    assert "ignoreDifferences" not in result.tree["gitops/argocd/application-prod.yaml"]


@pytest.mark.parametrize(
    ("old", "new", "code"),
    [
        (
            "  flux:\n    interval: 5m\n",
            "  flux:\n    interval: 5m\n  environments:\n    qa: {}\n",
            "VF_CONFIG_UNKNOWN_ENV",
        ),
        (
            "https://git.example.com/vision/cameras-deploy.git",
            "git@git.example.com:v/c.git",
            "VF_CONFIG_GITOPS",
        ),
        (
            "  argocd:\n    project: vision\n    app_project: true"
            '       # emit the AppProject "vision", locked to this flow\n'
            "  flux:\n    interval: 5m\n",
            "",
            "VF_CONFIG_SCHEMA",
        ),
        ("  path: deploy/cameras\n", "  path: ../elsewhere\n", "VF_CONFIG_SCHEMA"),
    ],
)
def test_bad_gitops_blocks_are_named(tmp_path: Path, old: str, new: str, code: str) -> None:
    assert CAMERAS.count(old) == 1
    with pytest.raises(VfError) as caught:
        _compile_cameras(tmp_path, CAMERAS.replace(old, new))
    assert caught.value.code == code
    assert caught.value.exit_code == 2


def test_gitops_manifests_point_at_the_overlays(
    compiled_examples: dict[str, CompileResult],
) -> None:
    cameras = compiled_examples["realtime_cameras"].tree
    for env in ("dev", "prod"):
        app = _yaml(cameras[f"gitops/argocd/application-{env}.yaml"])
        assert app["spec"]["source"]["path"] == f"deploy/cameras/overlays/{env}"
        assert "ApplyOutOfSyncOnly=true" in app["spec"]["syncPolicy"]["syncOptions"]
        flux = _yaml(cameras[f"gitops/flux/kustomization-{env}.yaml"])
        assert flux["spec"]["path"] == f"./deploy/cameras/overlays/{env}"
        assert flux["spec"]["sourceRef"] == {"kind": "GitRepository", "name": "cameras-deploy"}
        assert flux["spec"]["wait"] is False  # its Deployments are in healthChecks, no Job
        assert {c["kind"] for c in flux["spec"]["healthChecks"]} <= {"Deployment", "StatefulSet"}
    assert _yaml(cameras["gitops/flux/gitrepository.yaml"])["spec"]["ref"] == {"branch": "main"}
    batch = compiled_examples["batch_pipeline"].tree
    assert "gitops/flux/gitrepository.yaml" not in batch
    prod = _yaml(batch["gitops/flux/kustomization-prod.yaml"])
    assert prod["spec"]["sourceRef"] == {"kind": "GitRepository", "name": "batch-deploy"}
    assert prod["spec"]["kubeConfig"] == {"secretRef": {"name": "prod-kubeconfig"}}
    assert prod["spec"]["dependsOn"] == [
        {"name": "batch-demo-prod-gitops"},  # this revision's controller objects first
        {"name": "batch-demo-prod-infra"},
    ]
    root = _yaml(batch["gitops/flux/kustomization-prod-gitops.yaml"])
    assert root["spec"]["path"] == "./deploy/batch/gitops/flux" and root["spec"]["prune"] is True
    assert "kubeConfig" not in root["spec"]  # it applies beside itself, never remotely
    dest = _yaml(batch["gitops/argocd/application-prod.yaml"])["spec"]["destination"]
    assert dest == {"namespace": "pipelines", "server": "https://prod.k8s.example.com:6443"}
    assert not any(p.startswith("gitops/") for p in compiled_examples["video_analytics"].tree)


@pytest.mark.parametrize("example", EXAMPLE_NAMES)
def test_no_job_carries_a_ttl(example: str, compiled_examples: dict[str, CompileResult]) -> None:
    for path, text in compiled_examples[example].tree.items():
        assert "ttlSecondsAfterFinished" not in text, path


@pytest.mark.parametrize("example", EXAMPLE_NAMES)
def test_sync_waves_order_infra_then_provision_then_workers(
    example: str, compiled_examples: dict[str, CompileResult]
) -> None:
    for objects in compiled_examples[example].objects.values():
        waves = {(o["kind"], o["metadata"]["name"]): int(sync_wave(o)) for o in objects}
        provision = [int(sync_wave(o)) for o in objects if is_provision_job(o)]
        assert provision == [-1]
        for obj in objects:
            wave = waves[(obj["kind"], obj["metadata"]["name"])]
            if obj["kind"] == "ConfigMap" or "vf.dev/infra" in obj["metadata"].get("labels", {}):
                assert wave < -1
            if "vf.dev/node" in obj["metadata"].get("labels", {}) and obj["kind"] in {
                "Deployment",
                "StatefulSet",
                "Job",
            }:
                assert wave == 0
    for path, text in compiled_examples[example].tree.items():
        written = path.startswith(("base/", "overlays/")) and "/resources/" in f"/{path}"
        if written or (path.startswith("base/") and not path.endswith("kustomization.yaml")):
            obj = YAML(typ="safe").load(text)
            annotations = obj["metadata"].get("annotations") or {}
            # Argo CD's wave for an object without the annotation is 0: the workers' own.
            assert int(annotations.get(SYNC_WAVE, "0")) == int(sync_wave(obj)), path
            assert (SYNC_WAVE in annotations) is (sync_wave(obj) != "0"), path


@pytest.mark.parametrize("example", EXAMPLE_NAMES)
def test_what_no_node_owns_says_argo_cd_prunes_it(
    example: str, compiled_examples: dict[str, CompileResult]
) -> None:
    """A sharded environment's own Application prunes only what says Prune=true: every
    object without a node, never one of a node (which may move to a shard), never what
    outlives the flow (ADR 0238)."""
    for path, text in compiled_examples[example].tree.items():
        if not (path.startswith(("base/", "overlays/")) and "/resources/" in f"/{path}"):
            continue
        obj = YAML(typ="safe").load(text)
        options = str((obj["metadata"].get("annotations") or {}).get(SYNC_OPTIONS, ""))
        prune = {o for o in options.split(",") if o.startswith("Prune=")}
        if obj["kind"] in ("Namespace", "PriorityClass"):
            assert prune == {"Prune=false"}, path
        else:
            assert (prune == {"Prune=true"}) is (NODE_LABEL not in obj["metadata"]["labels"]), path
            assert prune <= {"Prune=true"}, path


@pytest.mark.parametrize("example", EXAMPLE_NAMES)
def test_workers_need_nothing_from_the_provision_job(
    example: str, compiled_examples: dict[str, CompileResult]
) -> None:
    """Applied all at once, each worker can create its own stream and durables."""
    result = compiled_examples[example]
    for plan in result.plans:
        objects = result.objects[plan.environment]
        topology = set(plan.provision.topology_configmaps)
        readers = {c.node: len(c.readers) for c in plan.channels}
        for workload in plan.workloads:
            text = json.dumps(next(o for o in objects if o["metadata"]["name"] == workload.name))
            assert plan.provision.job not in text and not any(t in text for t in topology)
            assert "initContainers" not in text
            pod = json.loads(text)["spec"]["template"]["spec"]
            env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
            for var in ("VF_FLOW_ID", "VF_RUN_ID", "VF_NODE_NAME", "VF_PARENT_NAMES"):
                assert var in env, (workload.node, var)
            if workload.node in readers:  # a BATCH producer waits for this many durables
                assert int(env["VF_BLOB_READERS"]) == readers[workload.node]


ADDED_NODE = """
from batch_nodes import Merge, RecordReader, ResultStore, Scale

from vf import BATCH, Flow


def build_flow() -> Flow:
    reader = RecordReader(count=1000)
    double = Scale(factor=2, name="double")(reader)
    triple = Scale(factor=3, name="triple")(reader)
    merge = Merge(nb_tasks=2, partition_by="trace_id")(double, triple)
    audit = ResultStore(path="/tmp/audit.jsonl", name="audit")(merge)
    store = ResultStore(path="/tmp/results.jsonl", idempotent=True)(merge)
    return Flow([store, audit], flow_type=BATCH)
"""


def test_a_changed_flow_gets_new_job_names(
    compiled_examples: dict[str, CompileResult], write_graph: Callable[..., Path]
) -> None:
    """Jobs are run-scoped: a new topology creates new Jobs, never patches immutable ones."""
    folder = EXAMPLES / "batch_pipeline"
    graph = write_graph(ADDED_NODE, (folder / "vf.yaml").read_text(encoding="utf-8"))
    (graph.parent / "batch_nodes.py").write_text(
        (folder / "batch_nodes.py").read_text(encoding="utf-8"), encoding="utf-8"
    )
    changed = compile_project(CompileRequest(graph=str(graph)))
    before = compiled_examples["batch_pipeline"]
    for env in ("dev", "prod"):
        old = {o["metadata"]["name"] for o in _kind(before.objects[env], "Job")}
        new = {o["metadata"]["name"] for o in _kind(changed.objects[env], "Job")}
        assert old.isdisjoint(new)
        run = next(p.run_id for p in changed.plans if p.environment == env)
        assert all(run in name for name in new)


@pytest.mark.parametrize("example", EXAMPLE_NAMES)
def test_every_job_is_named_by_its_pod_template_and_needs_no_replace_rule(
    example: str, compiled_examples: dict[str, CompileResult]
) -> None:
    """A Job's template is immutable: a changed Job must be a new name, never a replace."""
    result = compiled_examples[example]
    for plan in result.plans:
        jobs = [o for o in result.objects[plan.environment] if o["kind"] == "Job"]
        assert jobs
        for job in jobs:
            tag = job["metadata"]["name"].rsplit("-", 1)[1]
            assert tag == plan.generation if plan.generation else tag.startswith("t"), tag
            assert len(job["metadata"]["name"]) <= 63
    for path, text in result.tree.items():
        assert "Replace=true" not in text and "toolkit.fluxcd.io/force" not in text, path
