"""The chart's role templates (ADR 229): one hand-written template per object role, the same
bytes in every flow's chart, over readable values built from the plan; the values a Helm
user sets there change what renders, and the schema refuses what is not a node's entry.
Rendered with the real ``helm``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import helm_template, parse_docs, rendered_by_name
from vf.pipeline import CompileResult
from vf.tree.write import write_tree

pytestmark = pytest.mark.slow  # real servers, renders or long runs: make test-fast skips it

ROLE_FILES = ("chart/templates/poddisruptionbudget.yaml", "chart/templates/scaledobject.yaml")


@pytest.fixture(scope="module")
def cameras(
    compiled_examples: dict[str, CompileResult], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    root = tmp_path_factory.mktemp("cameras") / "deploy"
    write_tree(root, compiled_examples["realtime_cameras"].tree)
    return root / "chart"


def test_every_flows_chart_ships_the_same_role_templates(
    compiled_examples: dict[str, CompileResult],
) -> None:
    texts = {path: {str(r.tree[path]) for r in compiled_examples.values()} for path in ROLE_FILES}
    assert all(len(seen) == 1 for seen in texts.values()), texts
    for result in compiled_examples.values():  # the objects are the roles', not the diff's
        assert not [p for p in result.tree if p.startswith("chart/templates/scaledobject-")]
        assert not [p for p in result.tree if p.startswith("chart/templates/rows/poddisruption")]


def _objects(helm: str, chart: Path, *args: str) -> dict[tuple[str, str], dict[str, object]]:
    return rendered_by_name(helm, chart, "values-prod.yaml", *args, namespace="cams")


def test_autoscaling_values_are_what_a_helm_user_sets(cameras: Path, helm: str) -> None:
    name = ("ScaledObject", "vf-cameras-rce2b7c1-alerts")
    plain = _objects(helm, cameras)[name]["spec"]
    assert isinstance(plain, dict)
    assert (plain["minReplicaCount"], plain["maxReplicaCount"]) == (2, 8)
    tuned = _objects(
        helm,
        cameras,
        "--set",
        "autoscaling.alerts.maxReplicas=12",
        "--set",
        "autoscaling.alerts.lagThreshold=75",
    )[name]["spec"]
    assert isinstance(tuned, dict)
    assert tuned["maxReplicaCount"] == 12
    assert [t["metadata"]["lagThreshold"] for t in tuned["triggers"]] == ["75"]
    assert {k: v for k, v in tuned.items() if k not in ("maxReplicaCount", "triggers")} == {
        k: v for k, v in plain.items() if k not in ("maxReplicaCount", "triggers")
    }


def test_a_cluster_without_keda_gets_no_scaled_object(cameras: Path, helm: str) -> None:
    done = helm_template(
        helm, cameras, "-n", "cams", "-f", str(cameras / "values-prod.yaml"), apis=()
    )
    assert done.returncode == 0, done.stderr
    kinds = {d["kind"] for d in parse_docs(done.stdout)}
    assert "ScaledObject" not in kinds and "PodDisruptionBudget" in kinds


@pytest.mark.parametrize(
    "setting",
    [
        "autoscaling.nosuchnode.maxReplicas=3",  # not a node of the flow
        "autoscaling.alerts.maxReplica=3",  # a typo
        "autoscaling.alerts.maxReplicas=0",  # below the least KEDA scales to
        "podDisruptionBudgets.tracker.minAvailable=2",  # not a key of a budget
    ],
)
def test_the_schema_refuses_what_is_no_roles_value(cameras: Path, helm: str, setting: str) -> None:
    done = helm_template(
        helm, cameras, "-n", "cams", "-f", str(cameras / "values-prod.yaml"), "--set", setting
    )
    assert done.returncode != 0
    assert "values don't meet the specifications of the schema" in done.stderr, done.stderr
