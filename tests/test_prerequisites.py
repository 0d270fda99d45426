"""The tree's README lists, per environment, what its objects assume of the cluster and
the vf.yaml setting that does without each; an optional kind (KEDA's ScaledObject) says
``SkipDryRunOnMissingResource=true`` so Argo CD syncs the rest without it (ADR 153)."""

from __future__ import annotations

from ruamel.yaml import YAML

from vf.emit.prerequisites import prerequisites
from vf.pipeline import CompileResult


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


def test_a_switched_off_feature_is_no_prerequisite(
    compiled_examples: dict[str, CompileResult],
) -> None:
    objects = compiled_examples["realtime_cameras"].objects["dev"]
    without = [o for o in objects if o["kind"] != "ScaledObject"]  # autoscaling off
    assert any("KEDA" in item for item in prerequisites(objects, env="dev"))
    assert not any("KEDA" in item for item in prerequisites(without, env="dev"))


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
