"""Workload options: mounts, rollout policy, supervision and the provision image."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.graph_sources import NODES
from vf.cli import cli
from vf.config.workload import parse_mount, pod_mounts
from vf.ir.records import Mount
from vf.pipeline import CompileResult


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/data", Mount(path="/data", read_only=False, source="/data")),
        ("/data:/in:ro", Mount(path="/in", read_only=True, source="/data")),
        ("/data/:/in/", Mount(path="/in", read_only=False, source="/data")),
        ("models:/models:ro", Mount(path="/models", read_only=True, claim="models")),
    ],
)
def test_mount_forms(text: str, expected: Mount) -> None:
    assert parse_mount(text, env="dev", key="mounts.*", source="vf.yaml") == (expected, [])


@pytest.mark.parametrize("text", ["data", "/a:b", "claim:rel", "/a:/b:/c", "claim:/x:/y", ":ro"])
def test_bad_mounts(text: str) -> None:
    mount, problems = parse_mount(text, env="dev", key="mounts.*", source="vf.yaml")
    assert mount is None
    assert [p.code for p in problems] == ["VF_CONFIG_WORKLOAD"]
    assert problems[0].what.startswith(f"environments.dev.mounts.*: {text!r}: ")
    assert problems[0].where == "vf.yaml (environment 'dev')"


def test_host_path_under_a_claim_is_served_by_the_claim() -> None:
    claim = Mount(path="/models", read_only=True, claim="models")
    inside = Mount(path="/models/cache", read_only=False, source="/models/cache")
    beside = Mount(path="/models-extra", read_only=False, source="/x")
    assert pod_mounts((claim, inside, beside)) == (claim, beside)


def _objects(result: CompileResult, env: str, kind: str) -> list[dict[str, Any]]:
    return [o for o in result.objects[env] if o["kind"] == kind]


def test_examples_render_mounts_rollout_and_supervision(
    compiled_examples: dict[str, CompileResult],
) -> None:
    cameras = compiled_examples["realtime_cameras"]
    detector = next(
        o
        for o in _objects(cameras, "prod", "Deployment")
        if o["metadata"]["name"].endswith("-detector")
    )
    pod = detector["spec"]["template"]["spec"]
    assert detector["spec"]["strategy"] == {"type": "Recreate"}
    assert [v["name"] for v in pod["volumes"]] == ["tmp", "vf-pvc-0"]
    others = [d for d in _objects(cameras, "prod", "Deployment") if d is not detector]
    assert all(
        d["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
        for d in others
        if "vf.dev/node" in d["metadata"]["labels"]
    )
    provision = next(
        j for j in _objects(cameras, "dev", "Job") if "provision" in j["metadata"]["name"]
    )
    assert [v["name"] for v in provision["spec"]["template"]["spec"]["volumes"]] == [
        "tmp",
        "topology",
    ]
    batch = compiled_examples["batch_pipeline"]
    jobs = _objects(batch, "prod", "Job")
    workers = [j for j in jobs if "provision" not in j["metadata"]["name"]]
    assert {j["spec"]["backoffLimit"] for j in workers} == {5}
    provision = next(j for j in jobs if "provision" in j["metadata"]["name"])
    container = provision["spec"]["template"]["spec"]["containers"][0]
    assert "batch-provision@sha256:" in container["image"]
    assert (
        container["imagePullPolicy"]
        == workers[0]["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"]
    )


def _selected_labels(value: Any) -> set[str]:
    """Every label key that a selector at or below ``value`` names."""
    found: set[str] = set()
    items: Any = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, list)
        else ()
    )
    for key, item in items:
        if isinstance(key, str) and key.lower().endswith("selector") and isinstance(item, dict):
            plain = {k for k in item if k not in ("matchLabels", "matchExpressions")}
            found |= plain | set(item.get("matchLabels") or {})
            found |= {e["key"] for e in item.get("matchExpressions") or ()}
        found |= _selected_labels(item)
    return found


def test_no_selector_rests_on_the_instance_label(
    compiled_examples: dict[str, CompileResult],
) -> None:
    """An Argo CD that tracks resources by ``app.kubernetes.io/instance`` rewrites it on
    each object (docs/gitops.md): vf selects by its own labels only."""
    selected: set[str] = set()
    for result in compiled_examples.values():
        for objects in result.objects.values():
            for obj in objects:
                selected |= _selected_labels(obj.get("spec"))
    assert "vf.dev/flow" in selected
    assert "app.kubernetes.io/instance" not in selected


GRAPH = (
    NODES
    + """

def build_flow():
    return Flow([Sink()(Work()(Src()))], flow_type=BATCH)
"""
)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ("mounts:\n  '*': ['/a:/x']\n  work: ['/b:/x']", "mounted twice"),
        ("mounts:\n  work: ['relative']", "is not absolute"),
        ("mounts:\n  ghost: ['/a']", "unknown node 'ghost'"),
        ("rollout:\n  work: drain", "runs as a Job"),
    ],
)
def test_bad_workload_options(options: str, message: str, write_graph: Callable[..., Path]) -> None:
    body = "".join(f"    {line}\n" for line in options.splitlines())
    config = "environments:\n  dev:\n    images:\n      default: r.io/a:1\n" + body
    result = CliRunner().invoke(cli, ["validate", str(write_graph(GRAPH, config))])
    assert result.exit_code == 2, result.output
    assert message in result.output
