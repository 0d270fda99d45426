"""Auto-provisioned infrastructure: shapes match the capability records they are judged by."""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Any

import pytest
from ruamel.yaml import YAML

from vf.ir.capabilities import (
    INLINE_PAYLOAD_BYTES,
    REDIS_PROFILES,
    Known,
    nats_capabilities,
    redis_capabilities,
)
from vf.pipeline import CompileResult
from vf.render.infra import (
    NATS_PID_FILE,
    PARSED,
    component_files,
    component_objects,
    components_json,
    file_store_limit,
    nats_conf,
    parse_components,
)
from vf.resources import resource_dir

SIZES = {"KB": 1024, "MB": 1024**2, "GB": 1024**3}


def _redis_deployment(profile: str) -> dict[str, Any]:
    return next(o for o in component_objects(f"redis-{profile}") if o["kind"] == "Deployment")


def _capabilities_from_args(deployment: dict[str, Any]) -> dict[str, bool]:
    """What the rendered redis-server arguments and volumes actually promise."""
    pod = deployment["spec"]["template"]["spec"]
    args = pod["containers"][0]["args"]
    options = dict(zip(args[::2], args[1::2], strict=True))
    data = next(v for v in pod["volumes"] if v["name"] == "data")
    appendonly = options["--appendonly"] == "yes"
    policy = options["--maxmemory-policy"]
    return {
        "durable": appendonly and policy == "noeviction",
        "evictable": policy != "noeviction",
        "persistent_storage": "persistentVolumeClaim" in data,
    }


@pytest.mark.parametrize("profile", sorted(REDIS_PROFILES))
def test_redis_arguments_match_the_capability_record(profile: str) -> None:
    record = redis_capabilities(profile=profile)
    actual = _capabilities_from_args(_redis_deployment(profile))
    declared = {k: getattr(record, k) for k in actual}
    assert declared == {k: Known(v) for k, v in actual.items()}


@pytest.mark.parametrize("profile", ["dev", "durable"])
def test_nats_max_payload_matches_the_record_and_the_inline_threshold(profile: str) -> None:
    conf = next(o for o in component_objects(f"nats-{profile}") if o["kind"] == "ConfigMap")
    text = conf["data"]["nats.conf"]
    number, unit = re.search(r"max_payload: (\d+)(KB|MB|GB)", text).groups()  # type: ignore[union-attr]
    limit = int(number) * SIZES[unit]
    record = nats_capabilities(profile=profile, replicas=3)
    assert record.max_payload_bytes == Known(limit)
    assert limit > INLINE_PAYLOAD_BYTES


@pytest.mark.parametrize(("profile", "durable"), [("dev", False), ("durable", True)])
def test_shipped_nats_conf_is_what_vf_generates(profile: str, durable: bool) -> None:
    conf = next(o for o in component_objects(f"nats-{profile}") if o["kind"] == "ConfigMap")
    assert conf["data"]["nats.conf"] == nats_conf(durable=durable, replicas=3)


def test_durable_broker_is_a_routed_statefulset_with_claims(
    compiled_examples: dict[str, CompileResult],
) -> None:
    objects = compiled_examples["batch_pipeline"].objects["prod"]
    sts = next(
        o
        for o in objects
        if o["kind"] == "StatefulSet" and o["metadata"]["name"] == "vf-batch-demo-nats"
    )
    assert sts["spec"]["replicas"] == 3
    claim = sts["spec"]["volumeClaimTemplates"][0]["spec"]
    assert claim["storageClassName"] == "fast-ssd"
    assert claim["resources"]["requests"]["storage"] == "50Gi"
    broker = next(
        o for o in objects if o["kind"] == "ConfigMap" and "-broker" in o["metadata"]["name"]
    )
    assert broker["data"]["VF_STREAM_REPLICAS"] == "3"
    assert broker["data"]["VF_BLOB_REDIS_URL"] == "redis://vf-batch-demo-redis:6379/0"


def test_durable_claims_name_no_class_unless_vf_yaml_does(
    compiled_examples: dict[str, CompileResult],
) -> None:
    """Without storage_class the cluster's default StorageClass serves the claims: no
    class that one distribution ships (k3s's local-path) and a managed cluster lacks."""
    result = compiled_examples["video_analytics"]
    cloud = result.objects["cloud"]  # durable broker and store, no storage_class
    claims = [o["spec"] for o in cloud if o["kind"] == "PersistentVolumeClaim"]
    claims += [
        t["spec"]
        for o in cloud
        if o["kind"] == "StatefulSet" and "vf.dev/infra" in o["metadata"]["labels"]
        for t in o["spec"]["volumeClaimTemplates"]
    ]
    assert len(claims) == 2 and all("storageClassName" not in c for c in claims)
    # the chart's broker and store templates (the same in every chart) name a class only
    # where values hold one: this environment's do not
    text = "".join(str(v) for p, v in result.tree.items() if not p.startswith("chart/templates/"))
    assert (
        "storageClassName" not in text and "className" not in result.tree["chart/values-cloud.yaml"]
    )
    plans = compiled_examples["batch_pipeline"].plans
    plan = next(p for p in plans if p.environment == "prod")  # storage_class: fast-ssd
    assert plan.infra.broker_storage_class == plan.infra.store_storage_class == "fast-ssd"


def test_infra_pods_follow_the_worker_defaults(compiled_examples: dict[str, CompileResult]) -> None:
    objects = compiled_examples["batch_pipeline"].objects["prod"]
    infra = [o for o in objects if o["metadata"]["labels"].get("vf.dev/infra")]
    pods = [o["spec"]["template"]["spec"] for o in infra if "template" in o.get("spec", {})]
    assert len(pods) == 2
    for pod in pods:
        assert pod["priorityClassName"] == "pipelines-high"
        assert pod["securityContext"]["runAsNonRoot"] is True
        container = pod["containers"][0]
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert container["imagePullPolicy"] == "Always"
        assert "readinessProbe" in container


def test_external_broker_renders_only_a_secret_reference(
    compiled_examples: dict[str, CompileResult],
) -> None:
    objects = compiled_examples["realtime_cameras"].objects["prod"]
    assert not [o for o in objects if o["metadata"]["labels"].get("vf.dev/infra") == "nats"]
    broker = next(o for o in objects if o["metadata"]["name"].endswith("-broker"))
    assert "VF_NATS_URL" not in broker["data"]
    worker = next(o for o in objects if o["kind"] == "Deployment")
    env = worker["spec"]["template"]["spec"]["containers"][0]["env"]
    ref = {"secretKeyRef": {"name": "cameras-nats", "key": "url"}}
    assert {"name": "VF_NATS_URL", "valueFrom": ref} in env


def test_components_are_the_shipped_shapes_named_for_the_flow(
    compiled_examples: dict[str, CompileResult],
) -> None:
    tree = compiled_examples["batch_pipeline"].tree
    for name in ("nats-dev", "nats-durable", "redis-dev", "redis-durable"):
        for file, text in component_files(name).items():
            if file == "kustomization.yaml":
                continue
            ours = f"components/{name}/{file.replace('vf-', 'vf-batch-demo-', 1)}"
            shipped, written = YAML(typ="safe").load(text), YAML(typ="safe").load(tree[ours])
            assert written["metadata"]["name"] == f"vf-batch-demo-{shipped['metadata']['name'][3:]}"
            assert written["metadata"]["labels"]["vf.dev/flow"] == "batch-demo"
            selector = (written.get("spec") or {}).get("selector") or {}
            if selector:  # a Service's, or a workload's matchLabels: this flow's pods only
                assert selector.get("matchLabels", selector)["vf.dev/flow"] == "batch-demo"
    assert '- "../../components/nats-durable"' in tree["overlays/prod/kustomization.yaml"]


def test_the_parsed_components_are_the_shipped_yaml() -> None:
    shipped = (resource_dir("kustomize") / PARSED).read_text(encoding="utf-8")
    assert shipped == components_json(parse_components()), (
        "kustomize/components.json is stale: regenerate it with "
        ".venv/bin/python -m vf.render.infra > kustomize/components.json"
    )
    for name, objects in parse_components().items():
        assert component_objects(name) == objects


def _named(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = next(o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name)
    return found


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector["matchLabels"].items())


def test_durable_broker_starts_on_the_full_check_and_stops_in_lame_duck(
    compiled_examples: dict[str, CompileResult],
) -> None:
    """The NATS chart's day-two choices (ADR 200): started once /healthz passes (streams
    recovered), Ready while it takes clients, restarted only when JetStream is off; a
    lame-duck preStop through the configured pid file inside a 60 s grace; and at most one
    server of the cluster disrupted at a time."""
    objects = compiled_examples["batch_pipeline"].objects["prod"]
    sts = _named(objects, "StatefulSet", "vf-batch-demo-nats")
    pod = sts["spec"]["template"]["spec"]
    container = pod["containers"][0]
    paths = {
        k: container[k]["httpGet"]["path"]
        for k in ("startupProbe", "readinessProbe", "livenessProbe")
    }
    assert paths == {
        "startupProbe": "/healthz",
        "readinessProbe": "/healthz?js-server-only=true",
        "livenessProbe": "/healthz?js-enabled-only=true",
    }
    startup = container["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 15 * 60
    assert all(container[k]["httpGet"]["port"] == "monitor" for k in paths)
    assert container["lifecycle"]["preStop"]["exec"]["command"] == [
        "nats-server",
        f"-sl=ldm={NATS_PID_FILE}",
    ]
    assert pod["terminationGracePeriodSeconds"] == 60
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts["pid"] == str(PurePosixPath(NATS_PID_FILE).parent)
    assert {"name": "pid", "emptyDir": {}} in pod["volumes"]
    conf = _named(objects, "ConfigMap", "vf-batch-demo-nats-config")["data"]["nats.conf"]
    assert f"pid_file: {NATS_PID_FILE}\n" in conf
    # The lame duck ends inside the pod's grace (20 s left for the shutdown itself).
    grace, duration = (
        int(re.search(rf"{k}: (\d+)s", conf).group(1))  # type: ignore[union-attr]
        for k in ("lame_duck_grace_period", "lame_duck_duration")
    )
    assert grace + duration + 20 <= pod["terminationGracePeriodSeconds"]
    budget = _named(objects, "PodDisruptionBudget", "vf-batch-demo-nats")
    assert budget["spec"] == {"maxUnavailable": 1, "selector": budget["spec"]["selector"]}
    assert budget["metadata"]["namespace"] == sts["metadata"]["namespace"]
    assert _selects(budget["spec"]["selector"], sts["spec"]["template"]["metadata"]["labels"])
    assert budget["spec"]["selector"] == sts["spec"]["selector"]
    others = [
        o["spec"]["template"]["metadata"]["labels"]
        for o in objects
        if "template" in o.get("spec", {}) and o is not sts
    ]
    assert not [labels for labels in others if _selects(budget["spec"]["selector"], labels)]


def test_dev_broker_keeps_its_single_pod_shape() -> None:
    """The dev profile is one pod on an emptyDir: nothing to drain carefully, no pid file."""
    deployment = next(o for o in component_objects("nats-dev") if o["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert "startupProbe" not in container and "lifecycle" not in container
    assert not [o for o in component_objects("nats-dev") if o["kind"] == "PodDisruptionBudget"]
    assert "pid_file" not in nats_conf(durable=False, replicas=1)


def test_durable_store_has_no_budget_and_probes_that_pass_while_it_loads(
    compiled_examples: dict[str, CompileResult],
) -> None:
    """The durable store is one pod (``Recreate`` on a ReadWriteOnce claim): a budget of
    ``maxUnavailable: 1`` would allow every eviction and ``minAvailable: 1`` would block
    every drain, so it has none. Its liveness is a TCP connect, which a Redis-compatible
    server accepts while it loads its append-only file (answering ``LOADING``), so a long
    load is not killed and needs no startup probe (ADR 200)."""
    objects = compiled_examples["batch_pipeline"].objects["prod"]
    deployment = _named(objects, "Deployment", "vf-batch-demo-redis")
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    budgets = [o for o in objects if o["kind"] == "PodDisruptionBudget"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert not [b for b in budgets if _selects(b["spec"]["selector"], labels)]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert set(container["livenessProbe"]) - {"initialDelaySeconds", "periodSeconds"} == {
        "tcpSocket"
    }


def test_run_tree_names_the_prestop_it_does_not_run() -> None:
    """``vf run-tree`` stops a pod with SIGTERM at once (a clean nats-server shutdown, not
    the lame duck) and says so at start, as for every kubelet feature it leaves out."""
    from vf.runtree.notice import not_emulated

    line = "preStop hooks (a stopping pod's containers get SIGTERM at once)"
    assert line in not_emulated(component_objects("nats-durable"))
    assert line not in not_emulated(component_objects("nats-dev"))


@pytest.mark.parametrize(
    ("size", "limit"), [("10Gi", "9216MB"), ("50Gi", "46080MB"), ("500Mi", "450MB")]
)
def test_the_durable_brokers_file_store_stays_inside_its_volume(size: str, limit: str) -> None:
    """ADR 0208: max_file_store is 90 % of broker.storage_size, so JetStream refuses
    publishes (10023, recoverable) before the volume fills (JetStream shut down)."""
    assert file_store_limit(size) == limit
    text = nats_conf(durable=True, replicas=3, max_file_store=file_store_limit(size))
    assert f"max_file_store: {limit}\n" in text


def test_the_compiled_durable_broker_follows_its_storage_size(
    compiled_examples: dict[str, CompileResult],
) -> None:
    """The batch example's prod broker has a 50Gi claim: its server may fill 45 GiB of it."""
    result = compiled_examples["batch_pipeline"]
    conf = next(
        o
        for o in result.objects["prod"]
        if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-nats-config")
    )
    assert "max_file_store: 46080MB\n" in conf["data"]["nats.conf"]
    assert "max_file_store: 10GB" not in conf["data"]["nats.conf"]
