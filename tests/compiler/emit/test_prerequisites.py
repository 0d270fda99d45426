"""The tree's README lists, per environment, what its objects assume of the cluster and
the vf.yaml setting that does without each; an optional kind (KEDA's ScaledObject) says
``SkipDryRunOnMissingResource=true`` so Argo CD syncs the rest without it (ADR 153)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kubernetes_validate
from ruamel.yaml import YAML

from tests.graph_sources import LIVE_CHAIN
from vf.pipeline import CompileRequest, CompileResult, compile_project

GRAPH = LIVE_CHAIN.format(flow_id="needs")
CONFIG = """environments:
  dev:
    namespace: needs-dev
    images: {{default: r.io/a:1}}
    autoscaling: {{enabled: {enabled}}}
    broker: {{auth: none}}  # else its credentials' Secret is listed (ADR 0212)
"""


def _section(readme: str, env: str) -> str:
    start = readme.index(f"### `{env}`")
    end = readme.find("### `", start + 1)
    return readme[start : end if end > 0 else len(readme)]


def test_each_environment_lists_what_its_cluster_must_provide(
    compiled_examples: dict[str, CompileResult],
) -> None:
    cameras = compiled_examples["realtime_cameras"].tree["README.md"]
    dev, prod = _section(cameras, "dev"), _section(cameras, "prod")
    assert "KEDA" in dev and "environments.dev.autoscaling.enabled: false" in dev
    assert "PriorityClass `realtime-critical`" in prod and "PriorityClass" not in dev
    video = compiled_examples["video_analytics"].tree["README.md"]
    cloud = _section(video, "cloud")
    assert "resource.k8s.io/v1" in cloud and "DeviceClass `gpu.nvidia.com`" in cloud
    assert "RuntimeClass `nvidia`" in cloud
    batch = compiled_examples["batch_pipeline"].tree["README.md"]
    print(_section(batch, "dev"))
    assert "KEDA" not in batch


def test_a_scaled_object_is_optional_to_argocd(
    compiled_examples: dict[str, CompileResult],
) -> None:
    yaml = YAML(typ="safe")
    tree = compiled_examples["realtime_cameras"].tree
    scaled = [
        yaml.load(text)
        for path, text in tree.items()
        if path.startswith("overlays/") and "kind: ScaledObject" in text
    ]
    assert scaled
    for obj in scaled:
        options = obj["metadata"]["annotations"]["argocd.argoproj.io/sync-options"]
        assert "SkipDryRunOnMissingResource=true" in options.split(",")


def test_the_vf_yaml_switch_takes_keda_off_the_list(
    write_graph: Callable[..., Path],
) -> None:
    for enabled in (True, False):
        config = CONFIG.format(enabled=str(enabled).lower())
        graph = write_graph(GRAPH, config)
        readme = compile_project(CompileRequest(graph=str(graph))).tree["README.md"]
        needs = _section(readme, "dev")
        print(f"autoscaling.enabled {enabled}: {needs.splitlines()[2:4]}")
        assert ("KEDA" in needs) is enabled
        assert ("needs nothing beyond Kubernetes" in needs) is not enabled


def test_a_batch_trees_readme_says_what_a_new_generation_does(
    compiled_examples: dict[str, CompileResult],
) -> None:
    batch = compiled_examples["batch_pipeline"].tree["README.md"]
    assert "a batch still\nrunning stops" in batch
    assert "Do not delete a finished Job" in batch
    assert (
        "Do not delete a finished Job"
        not in compiled_examples["realtime_cameras"].tree["README.md"]
    )


REFERENCES = """environments:
  dev:
    namespace: refs
    images: {default: r.io/a:1}
    autoscaling: {enabled: false}
    pods: {image_pull_secrets: [regcred]}
    mounts: {sink: ['results:/results'], work: ['models:/models:ro']}
    replicas: {work: 3}
    broker: {profile: external, url_secret: {name: nats-creds, key: url}}
    payload_store: {profile: external, url_secret: {name: store-creds, key: redis-url}}
"""


def _run(kubectl: str, command: str) -> dict[str, Any]:
    """What a README command creates: a Secret by the real kubectl without a cluster (a
    client dry run); a claim piped to ``kubectl apply`` (which needs the server's API
    discovery) checked against the Kubernetes schema instead."""
    pipe, _, rest = command.rpartition("| ")
    words = shlex.split(rest)
    assert words[0] == "kubectl", command
    if pipe:
        made: dict[str, Any] = json.loads(shlex.split(pipe)[1])
        assert words[1:] == ["apply", "-n", words[3], "-f", "-"], command
        kubernetes_validate.validate(made, "1.33", strict=True)
        made["metadata"]["namespace"] = words[3]
        return made
    done = subprocess.run(
        [kubectl, *words[1:], "--dry-run=client", "-o", "json"],
        capture_output=True,
        text=True,
        env={**os.environ, "KUBECONFIG": os.devnull},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    made = json.loads(done.stdout)
    return made


def test_every_secret_and_claim_the_tree_lacks_is_listed_with_its_command(
    write_graph: Callable[..., Path], kubectl: str
) -> None:
    graph = write_graph(GRAPH, REFERENCES)
    readme = compile_project(CompileRequest(graph=str(graph))).tree["README.md"]
    lines = [
        line
        for line in _section(readme, "dev").splitlines()
        if line.startswith(("- The Secret", "- The PersistentVolumeClaim"))
    ]
    print("\n".join(lines))
    made = {}
    for line in lines:
        command = re.findall(r"`([^`]*kubectl [^`]*)`", line)[-1]
        obj = _run(kubectl, command)
        assert obj["metadata"]["namespace"] == "refs"
        made[(obj["kind"], obj["metadata"]["name"])] = obj
    assert sorted(made) == [
        ("PersistentVolumeClaim", "models"),
        ("PersistentVolumeClaim", "results"),
        ("Secret", "nats-creds"),
        ("Secret", "regcred"),
        ("Secret", "store-creds"),
    ]
    assert set(made["Secret", "nats-creds"]["data"]) == {"url"}
    assert set(made["Secret", "store-creds"]["data"]) == {"redis-url"}
    assert made["Secret", "regcred"]["type"] == "kubernetes.io/dockerconfigjson"
    assert made["PersistentVolumeClaim", "models"]["spec"]["accessModes"] == ["ReadWriteMany"]
    assert made["PersistentVolumeClaim", "results"]["spec"]["accessModes"] == ["ReadWriteOnce"]


def test_what_the_tree_creates_is_not_listed(
    compiled_examples: dict[str, CompileResult],
) -> None:
    """A durable store's claim and the flow's own objects are in the tree; only what the
    pods name beyond it is listed."""
    video = compiled_examples["video_analytics"].tree["README.md"]
    assert "- The PersistentVolumeClaim" not in video
    secrets = re.findall(r"- The Secret `([^`]+)`", video)  # only the servers' credentials
    assert secrets and all(
        s.endswith(("-nats-auth", "-nats-routes", "-redis-auth")) for s in secrets
    )
    cameras = compiled_examples["realtime_cameras"].tree["README.md"]
    assert "- The Secret `cameras-nats`" not in _section(cameras, "dev")
    assert "--from-literal=url=VALUE" in _section(cameras, "prod")


def test_helm_users_are_told_to_label_the_namespace_the_chart_leaves_out(
    compiled_examples: dict[str, CompileResult],
) -> None:
    """The chart has no Namespace (Helm cannot adopt the one it installs into), so a Helm
    delivery makes it without the Pod Security labels the overlay gives it (ADR 206); the
    README names the labels to put on, exactly those of the overlay's Namespace."""
    result = compiled_examples["batch_pipeline"]
    for env, objects in result.objects.items():
        (namespace,) = [o for o in objects if o["kind"] == "Namespace"] or [None]
        readme = result.tree["README.md"]
        section = readme[readme.index(f"### `{env}`") :].split("\n### ")[0]
        if namespace is None:
            assert "kubectl label namespace" not in section
            continue
        name = namespace["metadata"]["name"]
        (command,) = re.findall(rf"`(kubectl label namespace {name} [^`]*)`", section)
        given = dict(word.split("=", 1) for word in shlex.split(command)[5:])
        wanted = {
            k: v
            for k, v in namespace["metadata"]["labels"].items()
            if k.startswith("pod-security.kubernetes.io/")
        }
        assert given == wanted and wanted
