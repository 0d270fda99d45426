"""The flow-wide role templates (ADR 236): hand-written, the same bytes in every flow's chart,
over values built from the plan; what a Helm user sets there changes what renders, and the
schema refuses what no template reads. Rendered with the real ``helm``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support import helm_template, rendered_by_name
from vf.pipeline import CompileResult
from vf.tree.write import write_tree

pytestmark = pytest.mark.slow  # real servers, renders or long runs: make test-fast skips it

ROLE_FILES = (
    "chart/templates/resourceclaimtemplate.yaml",
    "chart/templates/networkpolicy.yaml",
    "chart/templates/configmap.yaml",
)
# objects of these kinds no longer have a diff-path template of their own
ROLE_PREFIXES = (
    "chart/templates/resourceclaimtemplate-",
    "chart/templates/rows/resourceclaim",
    "chart/templates/networkpolicy-",
    "chart/templates/rows/networkpolicy",
    "chart/templates/configmap-vf-batch-demo-re49dac6-broker",
    "chart/templates/configmap-vf-video-analytics-r8cd423d-mig-parted",
)


@pytest.fixture(scope="module")
def video(
    compiled_examples: dict[str, CompileResult], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    root = tmp_path_factory.mktemp("video") / "deploy"
    write_tree(root, compiled_examples["video_analytics"].tree)
    return root / "chart"


def test_every_flows_chart_ships_the_same_flow_role_templates(
    compiled_examples: dict[str, CompileResult],
) -> None:
    texts = {path: {str(r.tree[path]) for r in compiled_examples.values()} for path in ROLE_FILES}
    assert all(len(seen) == 1 for seen in texts.values()), texts
    for result in compiled_examples.values():
        assert not [p for p in result.tree if p.startswith(ROLE_PREFIXES)]


@pytest.fixture(scope="module")
def batch(
    compiled_examples: dict[str, CompileResult], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    root = tmp_path_factory.mktemp("batch") / "deploy"
    write_tree(root, compiled_examples["batch_pipeline"].tree)
    return root / "chart"


def _objects(helm: str, chart: Path, env: str, *args: str) -> dict[tuple[str, str], Any]:
    return rendered_by_name(helm, chart, f"values-{env}.yaml", *args, namespace="ns")


def test_a_claims_values_are_what_a_helm_user_sets(video: Path, helm: str) -> None:
    name = ("ResourceClaimTemplate", "vf-video-analytics-r8cd423d-reranker-gpu-c916afdb")
    plain = _objects(helm, video, "cloud")[name]["spec"]["spec"]["devices"]["requests"][0]
    assert plain["exactly"]["count"] == 2
    tuned = _objects(
        helm,
        video,
        "cloud",
        "--set",
        "resourceClaimTemplates.reranker.count=1",
        "--set",
        "resourceClaimTemplates.reranker.memory=40Gi",
    )[name]["spec"]["spec"]["devices"]["requests"][0]
    assert tuned["exactly"]["count"] == 1
    assert tuned["exactly"]["capacity"] == {"requests": {"memory": "40Gi"}}
    # the lab environment's workers take MIG slices: no claim there
    assert not [k for k in _objects(helm, video, "lab") if k[0] == "ResourceClaimTemplate"]


def test_a_services_policy_follows_its_ports(video: Path, helm: str) -> None:
    name = ("NetworkPolicy", "vf-video-analytics-nats")
    plain = _objects(helm, video, "cloud")[name]["spec"]
    tuned = _objects(
        helm,
        video,
        "cloud",
        "--set",
        "networkPolicies.infra.nats.clientPort=4223",
        "--set",
        "networkPolicies.infra.nats.clusterPort=6223",
    )[name]["spec"]
    ports = [[p["port"] for p in rule["ports"]] for rule in tuned["ingress"]]
    assert ports == [[4223], [6223]]
    assert [r["from"] for r in tuned["ingress"]] == [r["from"] for r in plain["ingress"]]
    assert tuned["egress"][0] == {
        **plain["egress"][0],
        "ports": [{"port": 6223, "protocol": "TCP"}],
    }
    assert tuned["egress"][1:] == plain["egress"][1:]  # DNS


def test_the_broker_config_follows_its_values(batch: Path, helm: str) -> None:
    objects = _objects(helm, batch, "prod")
    (name,) = [k for k in objects if k[0] == "ConfigMap" and "-broker-" in k[1]]
    plain = objects[name]["data"]
    assert plain["VF_STREAM_MAX_BYTES"] == "5368709120"  # no exponent
    assert plain["VF_STREAM_REPLICAS"] == "3"
    tuned = _objects(
        helm,
        batch,
        "prod",
        "--set",
        "brokerConfig.streamReplicas=5",
        "--set",
        "brokerConfig.streamMaxBytes=1073741824",
    )[name]["data"]
    assert tuned == {**plain, "VF_STREAM_REPLICAS": "5", "VF_STREAM_MAX_BYTES": "1073741824"}


def test_the_mig_config_is_the_environments(video: Path, helm: str) -> None:
    name = ("ConfigMap", "vf-video-analytics-r8cd423d-mig-parted")
    assert name not in _objects(helm, video, "cloud")
    text = _objects(helm, video, "lab")[name]["data"]["config.yaml"]
    assert text.startswith("mig-configs:\n") and "mig-enabled: true" in text


@pytest.mark.parametrize(
    "setting",
    [
        "brokerConfig.streamReplicas=1",  # one copy is no VF_STREAM_REPLICAS
        "brokerConfig.replicas=3",  # a typo
        "migParted.configs=x",  # not a key of the mig-parted ConfigMap
        "networkPolicies.infra.nats.clientPort=0",  # no port
        "networkPolicies.infra.nats.clientPorts=4222",  # a typo
        "networkPolicies.flows.name=x",  # no such policy
        "resourceClaimTemplates.nosuchnode.count=1",  # not a node of the flow
        "resourceClaimTemplates.reranker.counts=1",  # a typo
        "resourceClaimTemplates.reranker.count=0",  # a claim of no device
    ],
)
def test_the_schema_refuses_what_is_no_flow_roles_value(
    video: Path, helm: str, setting: str
) -> None:
    done = helm_template(
        helm, video, "-n", "video", "-f", str(video / "values-cloud.yaml"), "--set", setting
    )
    assert done.returncode != 0
    assert "values don't meet the specifications of the schema" in done.stderr, done.stderr
