"""Every overlay builds with the real kubectl, equals its plan's objects, and is schema-valid."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from ruamel.yaml import YAML

from tests.support import EXAMPLE_ENVS, example_graph, kustomize_build
from vf.emit.ordering import without_tool_annotations
from vf.pipeline import CompileRequest, CompileResult, compile_project
from vf.tree.write import write_tree

pytestmark = pytest.mark.slow  # real servers, renders or long runs: make test-fast skips it

K8S_VERSIONS = ("1.31", "1.32", "1.33", "1.34", "1.35")
DRA_V1 = "1.34"
CUSTOM_GROUPS = ("keda.sh/",)


def _parse(text: str) -> list[dict[str, Any]]:
    return [doc for doc in YAML(typ="safe").load_all(text) if doc is not None]


def _by_identity(objects: list[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {
        (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in objects
    }


@pytest.fixture(scope="module")
def built(
    compiled_examples: dict[str, CompileResult],
    kubectl: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """``kubectl kustomize overlays/<env>`` for every example and environment."""
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for example, result in compiled_examples.items():
        root = tmp_path_factory.mktemp(example) / "deploy"
        write_tree(root, result.tree)
        for plan in result.plans:
            overlay = root / "overlays" / plan.environment
            out[(example, plan.environment)] = _parse(kustomize_build(kubectl, overlay))
    return out


@pytest.mark.parametrize(("example", "env"), EXAMPLE_ENVS)
def test_overlay_build_equals_the_plans_objects(
    example: str,
    env: str,
    built: dict[tuple[str, str], list[dict[str, Any]]],
    compiled_examples: dict[str, CompileResult],
) -> None:
    expected = _by_identity(compiled_examples[example].objects[env])
    actual = _by_identity(built[(example, env)])
    assert sorted(actual) == sorted(expected)
    for key, obj in expected.items():
        assert without_tool_annotations(actual[key]) == obj, key


@pytest.mark.parametrize(("example", "env"), EXAMPLE_ENVS)
@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_overlay_validates_strictly(
    example: str, env: str, version: str, built: dict[tuple[str, str], list[dict[str, Any]]]
) -> None:
    for obj in built[(example, env)]:
        if obj["apiVersion"] == "resource.k8s.io/v1" and version < DRA_V1:
            continue  # resource.k8s.io/v1 is served from 1.34; vf refuses dra below it
        if obj["apiVersion"].startswith(CUSTOM_GROUPS):
            continue  # custom resources: checked against their CRD schemas (test_crd_schemas.py)
        kubernetes_validate.validate(obj, version, strict=True)


def test_overlays_differ_only_where_the_environments_do(
    compiled_examples: dict[str, CompileResult],
) -> None:
    tree = compiled_examples["batch_pipeline"].tree
    # each object names its namespace: no namespace transformer to run (ADR 180)
    assert "namespace:" not in tree["overlays/dev/kustomization.yaml"]
    resources = [p for p in tree if p.startswith("overlays/dev/resources/")]
    assert resources
    assert all("  namespace: pipelines-dev\n" in tree[p] for p in resources)
    patches = [tree[p] for p in tree if p.startswith("overlays/dev/patches/")]
    assert any("path: /metadata/namespace\n" in p for p in patches), "components"
    assert any(path.startswith("overlays/prod/patches/") for path in tree)  # components
    # several environments: each overlay holds its own objects, base/ none (test_churn.py)
    assert [path for path in tree if path.startswith("base/")] == ["base/kustomization.yaml"]
    assert any(path.startswith("overlays/prod/resources/job-") for path in tree)


def test_shared_components_are_resources_not_kustomize_components(
    compiled_examples: dict[str, CompileResult],
) -> None:
    """A kustomize Component re-adds every object built so far to a new map; the folders
    under components/ only hold objects, so the overlays list them as resources (ADR 186)."""
    tree = compiled_examples["video_analytics"].tree
    folders = [p for p in tree if p.startswith("components/") and p.endswith("/kustomization.yaml")]
    assert folders
    for path in folders:
        assert "kind: Kustomization\n" in tree[path], path
    for path in (p for p in tree if p.startswith("overlays/") and p.count("/") == 2):
        if path.endswith("/kustomization.yaml"):
            assert "components:" not in tree[path], path
            assert '- "../../components/' in tree[path], path


def test_one_environment_keeps_its_objects_in_its_overlay(kubectl: str, tmp_path: Path) -> None:
    """One environment is laid out as several are: its objects in its overlay, base/ empty,
    so kustomize adds each object to the build once (ADR 185)."""
    request = CompileRequest(graph=example_graph("batch_pipeline"), environments=("dev",))
    result = compile_project(request)
    assert [p for p in result.tree if p.startswith("base/")] == ["base/kustomization.yaml"]
    assert "resources: []" in result.tree["base/kustomization.yaml"]
    jobs = [p for p in result.tree if p.startswith("overlays/dev/resources/job-")]
    assert len(jobs) == len([o for o in result.objects["dev"] if o["kind"] == "Job"])
    write_tree(tmp_path / "deploy", result.tree)
    built = _by_identity(_parse(kustomize_build(kubectl, tmp_path / "deploy/overlays/dev")))
    expected = _by_identity(result.objects["dev"])
    assert sorted(built) == sorted(expected)
    for key, obj in expected.items():
        assert without_tool_annotations(built[key]) == obj, key


def test_write_creates_every_overlay(
    compiled_examples: dict[str, CompileResult], tmp_path: Path
) -> None:
    result = compiled_examples["realtime_cameras"]
    write_tree(tmp_path / "out", result.tree)
    for plan in result.plans:
        assert (tmp_path / "out" / "overlays" / plan.environment / "kustomization.yaml").is_file()
        assert (tmp_path / "out" / "plan" / f"{plan.environment}.json").is_file()
