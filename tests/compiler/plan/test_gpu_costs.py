"""What is left of GPUs at every moment (ADR 0217): a node's warm-up sets its startup
budget and paces its autoscaling; each environment's GPU-hours a day at the plan and at
the autoscaling maximum; ``vf diff`` says by how much a change moves each GPU moment."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner

from tests.compiler.plan.test_gpu_moments import SHARER, _compile, _config
from tests.compiler.verify.test_crd_schemas import UPSTREAM, _errors, own_schema, upstream_schema
from vf.cli import cli
from vf.commands.explain.text import explain
from vf.errors import VfError
from vf.pipeline import CompileResult
from vf.resources import resource_dir
from vf.tree.write import write_tree

Obj = dict[str, Any]
LONG_CALLS = (
    "delivery=DeliveryPolicy(delivery='best-effort', dlq='sampled', call_timeout_seconds=900)"
)


def _graph(tmp_path: Path, fields: str) -> Path:
    path = tmp_path / "graph.py"
    text = SHARER.replace("FIELDS", fields).replace(
        "from vf import GPU,", "from vf import GPU, DeliveryPolicy,"
    )
    path.write_text(text, encoding="utf-8")
    return path


def _autoscaling(max_replicas: int = 4, **extra: Any) -> Obj:
    scaling = {"gpu_nodes": True, "nodes": ["infer"], "max_replicas": max_replicas}
    return {"autoscaling": {**scaling, **extra}}


def _objects(result: CompileResult, kind: str) -> list[Obj]:
    return [o for o in result.objects["lab"] if o["kind"] == kind]


def _worker(result: CompileResult) -> Obj:
    deployment = next(o for o in _objects(result, "Deployment") if "infer" in o["metadata"]["name"])
    container: Obj = deployment["spec"]["template"]["spec"]["containers"][0]
    return container


# --- warm-up ------------------------------------------------------------------------------


def test_a_warm_up_sets_the_startup_budget_and_paces_keda(tmp_path: Path) -> None:
    # open() runs under the bound of a node call, so a 600 s load needs a longer bound
    graph = _graph(tmp_path, f"gpu_count=1, warmup_seconds=600, {LONG_CALLS}")
    result = _compile(tmp_path, graph, _config("exclusive", "two-a100-40", _autoscaling()))
    container = _worker(result)
    # twice the warm-up at one probe every 2 s: 2 x 600 / 2 = 600 failures
    assert container["startupProbe"] == {
        "httpGet": {"path": "/readyz", "port": "health"},
        "periodSeconds": 2,
        "failureThreshold": 600,
    }
    # gated by the startup probe: readiness and liveness keep their timing
    assert container["readinessProbe"]["initialDelaySeconds"] == 2
    assert container["livenessProbe"]["initialDelaySeconds"] == 10
    (scaled,) = _objects(result, "ScaledObject")
    assert scaled["spec"]["cooldownPeriod"] == 600  # the declared 300 is below one warm-up
    assert scaled["spec"]["advanced"] == {
        "horizontalPodAutoscalerConfig": {
            "behavior": {
                "scaleUp": {
                    "stabilizationWindowSeconds": 600,
                    "policies": [{"type": "Percent", "value": 100, "periodSeconds": 600}],
                },
                "scaleDown": {"stabilizationWindowSeconds": 600},
            }
        }
    }
    assert _errors(own_schema(scaled), scaled) == []
    if UPSTREAM.is_dir():
        assert _errors(upstream_schema(scaled), scaled) == []
    (plan,) = result.plans
    (scaler,) = plan.autoscaling or ()
    assert scaler.behavior is not None and scaler.behavior.warmup_seconds == 600
    text = explain(result)
    assert "warm-up infer: 600 s; the startup probe allows 1200 s; KEDA scales up on lag" in text
    assert "by at most 100% per 600 s, and down after 600 s without it (cooldown 600 s)" in text


def test_a_warm_up_longer_than_the_call_bound_is_named(tmp_path: Path) -> None:
    graph = _graph(tmp_path, "gpu_count=1, warmup_seconds=600")  # the bound: 300 s
    with pytest.raises(VfError) as caught:
        _compile(tmp_path, graph, _config("exclusive", "two-a100-40", {}))
    (problem,) = caught.value.problems
    assert problem.code == "VF_GRAPH_WARMUP"
    assert "longer than the bound of a node call (call_timeout_seconds=300)" in problem.what
    assert "DeliveryPolicy(call_timeout_seconds=600)" in problem.remedy
    unbounded = _graph(
        tmp_path, "gpu_count=1, warmup_seconds=600, " + LONG_CALLS.replace("=900", "=0")
    )
    _compile(tmp_path, unbounded, _config("exclusive", "two-a100-40", {}))


def test_a_short_warm_up_keeps_the_floors(tmp_path: Path) -> None:
    graph = _graph(tmp_path, "gpu_count=1, warmup_seconds=30")
    extra = _autoscaling(cooldown_seconds=900)
    result = _compile(tmp_path, graph, _config("exclusive", "two-a100-40", extra))
    assert _worker(result)["startupProbe"]["failureThreshold"] == 60  # 120 s at least
    (scaled,) = _objects(result, "ScaledObject")
    assert scaled["spec"]["cooldownPeriod"] == 900  # the declared one, longer than 30 s
    behavior = scaled["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert behavior["scaleDown"] == {"stabilizationWindowSeconds": 300}  # Kubernetes' default
    assert behavior["scaleUp"]["stabilizationWindowSeconds"] == 30


def test_without_a_warm_up_nothing_changes(tmp_path: Path) -> None:
    graph = _graph(tmp_path, "gpu_count=1")
    result = _compile(tmp_path, graph, _config("exclusive", "two-a100-40", _autoscaling()))
    assert _worker(result)["startupProbe"]["failureThreshold"] == 60
    (scaled,) = _objects(result, "ScaledObject")
    assert "advanced" not in scaled["spec"] and scaled["spec"]["cooldownPeriod"] == 300
    document = json.loads(result.tree["plan/lab.json"])
    assert "behavior" not in document["autoscaling"][0]
    assert all("warmup_seconds" not in w for w in document["workloads"])


@pytest.mark.parametrize("value", ["0", "-5", "1801", "2.5", "True", "'60'"])
def test_a_bad_warm_up_is_named(tmp_path: Path, value: str) -> None:
    graph = _graph(tmp_path, f"gpu_count=1, warmup_seconds={value}")
    with pytest.raises(VfError) as caught:
        _compile(tmp_path, graph, _config("exclusive", "two-a100-40", {}))
    assert [p.code for p in caught.value.problems] == ["VF_GRAPH_WARMUP"]
    assert caught.value.problems[0].what.startswith("warmup_seconds=")
    assert "node 'infer'" in caught.value.problems[0].where


def test_the_warm_up_is_recorded_in_the_plan(tmp_path: Path) -> None:
    graph = _graph(tmp_path, "gpu_count=1, warmup_seconds=240")
    result = _compile(tmp_path, graph, _config("exclusive", "two-a100-40", _autoscaling()))
    document = json.loads(result.tree["plan/lab.json"])
    schema = json.loads((resource_dir("schemas") / "plan.v1.schema.json").read_text())
    jsonschema.validate(document, schema)
    infer = next(w for w in document["workloads"] if w["node"] == "infer")
    assert infer["warmup_seconds"] == 240
    assert document["autoscaling"][0]["behavior"] == {
        "warmup_seconds": 240,
        "scale_up_window": 240,
        "scale_up_percent": 100,
        "scale_up_period": 240,
        "scale_down_window": 300,
    }


# --- GPU-hours a day ----------------------------------------------------------------------


def test_gpu_hours_a_day_at_the_plan_and_the_maximum(tmp_path: Path) -> None:
    graph = _graph(tmp_path, "gpu_count=1")
    result = _compile(tmp_path, graph, _config("exclusive", "twelve-h100", _autoscaling(5)))
    document = json.loads(result.tree["plan/lab.json"])
    assert document["gpu"]["hours_per_day"] == [
        {"moment": "planned", "gpu_hours": 24, "slice_hours": {}},
        {"moment": "autoscaled", "gpu_hours": 120, "slice_hours": {}},
    ]
    assert "gpu-hours a day: planned 24; autoscaling maximum 120 (GPUs x 24)" in explain(result)
    cell = "1 / 5 / 7 GPUs (planned / autoscaled / rollout); 24 / 120 GPU-hours a day"
    assert cell in result.tree["README.md"]


def test_mig_slices_are_counted_in_slice_hours(tmp_path: Path) -> None:
    graph = _graph(tmp_path, "gpu_memory_gib=18")
    result = _compile(tmp_path, graph, _config("mix", "two-a100-40", _autoscaling(3)))
    gpu = result.plans[0].gpu
    assert gpu is not None and gpu.moments is not None and gpu.hours_per_day is not None
    for moment, hours in zip(gpu.moments, gpu.hours_per_day, strict=False):
        assert hours.moment == moment.name
        assert hours.gpu_hours == 24 * moment.gpus
        assert dict(hours.slice_hours) == {p: 24 * n for p, n in moment.slices}
        assert sum(dict(hours.slice_hours).values()) == 24 * dict(moment.replicas)["infer"]
    assert [h.moment for h in gpu.hours_per_day] == ["planned", "autoscaled"]
    assert " 3g.20gb slice-hours)" in explain(result)


# --- vf diff ------------------------------------------------------------------------------


def test_vf_diff_says_how_much_a_change_moves_each_gpu_moment(tmp_path: Path) -> None:
    graph = _graph(tmp_path, "gpu_count=1")
    out = tmp_path / "deploy"
    before = _compile(tmp_path, graph, _config("exclusive", "twelve-h100", _autoscaling(2)))
    write_tree(out, before.tree)
    (tmp_path / "vf.yaml").write_text(
        _config("exclusive", "twelve-h100", _autoscaling(5)), encoding="utf-8"
    )
    args = ["diff", str(graph), "--config", str(tmp_path / "vf.yaml"), "--out", str(out)]
    text = CliRunner().invoke(cli, args)
    assert text.exit_code == 1, text.output
    raised = (
        "GPUs at the autoscaling maximum raised by 3: 2 → 5 (infer 2 → 5 pods), +72 GPU-hours a day"
    )
    assert raised in text.output
    # 25 % surge, rounded up: 2 + 1 → 5 + 2; a rollout lasts minutes, not a day
    assert "GPUs during a rollout raised by 4: 3 → 7 (infer 3 → 7 pods)\n" in text.output
    assert "GPUs at the plan" not in text.output  # the plan did not move
    document = json.loads(CliRunner().invoke(cli, [*args, "--format", "json"]).stdout)
    findings = [f for e in document["environments"] for f in e["findings"]]
    peak = next(f for f in findings if f["subject"] == "autoscaled")
    assert peak["category"] == "gpu" and peak["severity"] == "warning"
    assert peak["message"] == raised
    markdown = CliRunner().invoke(cli, [*args, "--format", "markdown"]).output
    assert raised in markdown
    # and back down: the same change, lowered, is not a warning
    write_tree(
        out, _compile(tmp_path, graph, _config("exclusive", "twelve-h100", _autoscaling(5))).tree
    )
    (tmp_path / "vf.yaml").write_text(
        _config("exclusive", "twelve-h100", _autoscaling(2)), encoding="utf-8"
    )
    lowered = json.loads(CliRunner().invoke(cli, [*args, "--format", "json"]).stdout)
    findings = [f for e in lowered["environments"] for f in e["findings"]]
    peak = next(f for f in findings if f["subject"] == "autoscaled")
    assert peak["severity"] == "info"
    assert peak["message"].startswith("GPUs at the autoscaling maximum lowered by 3: 5 → 2")
