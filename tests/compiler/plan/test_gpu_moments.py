"""GPU placement at every moment of a flow's life (ADR 0210): planned, every autoscaled GPU
worker at its maxReplicaCount, and a rollout's surge pods, in the three GPU modes.

Each accepted plan is checked by a placement written here, independently of the planner:
whole cards and DRA devices by backtracking over the declared hosts, MIG slices against
the geometry the plan configures (each card checked against NVIDIA's table by
``tests.compiler.plan.test_gpu._independent_fits``). Each refusal is named, and each
decision says its arithmetic."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.compiler.plan.test_gpu import _independent_fits
from tests.support import REPO
from vf.cli import cli
from vf.errors import VfError
from vf.ir.gpu import GpuPlan
from vf.ir.plan import Plan
from vf.pipeline import CompileRequest, CompileResult, compile_project
from vf.plan.gpu.mig import family_of

Obj = dict[str, Any]
EXAMPLES = REPO / "examples"

SHARER = """
from vf import GPU, REALTIME, Consumer, Flow, Processor, Producer


class Src(Producer):
    def next(self):
        return 1


class Infer(Processor):
    def process(self, x):
        return x


class Sink(Consumer):
    def consume(self, x):
        pass


def build_flow():
    work = Infer(name="infer", device_type=GPU, FIELDS)(Src())
    return Flow([Sink()(work)], flow_type=REALTIME, flow_id="moments")
"""

# name: [(host, product, cards)]
INVENTORIES = {
    "two-a100-40": [("gpu-a", "NVIDIA-A100-SXM4-40GB", 2)],
    "a100-and-h100": [("gpu-a", "NVIDIA-A100-SXM4-40GB", 2), ("gpu-h", "NVIDIA-H100-80GB-HBM3", 1)],
    "twelve-h100": [("gpu-1", "NVIDIA-H100-80GB-HBM3", 6), ("gpu-2", "NVIDIA-H100-80GB-HBM3", 6)],
}


def _gpu_block(mode: str, inventory: str) -> Obj:
    sharing = "dra-owned" if mode == "dra" else "physical"
    block: Obj = {
        "mode": mode,
        "inventory": [
            {"name": h, "product": p, "cards": c, "memory_gib": 80, "sharing": sharing}
            for h, p, c in INVENTORIES[inventory]
        ],
    }
    if mode == "dra":
        block["dra"] = {
            "device_class": "gpu.nvidia.com",
            "driver_features": ["consumable-capacity"],
            "feature_gates": {"DRAConsumableCapacity": True},
        }
    return block


def _config(mode: str, inventory: str, extra: Obj) -> str:
    env: Obj = {
        "namespace": "lab",
        "kubernetes_version": "1.35",
        "images": {"default": "registry.example.com/vf/x:1"},
        "gpu": _gpu_block(mode, inventory),
        **extra,
    }
    return json.dumps({"environments": {"lab": env}}, indent=1)  # JSON is YAML


def _compile(tmp_path: Path, graph: Path, config: str) -> CompileResult:
    path = tmp_path / "vf.yaml"
    path.write_text(config, encoding="utf-8")
    request = CompileRequest(graph=str(graph), config=str(path), warn=lambda _: None)
    return compile_project(request)


def _graph(tmp_path: Path, name: str) -> Path:
    if name in ("video_analytics", "realtime_cameras"):
        return EXAMPLES / name / "graph.py"
    fields = {"sharer": "gpu_memory_gib=18", "spanner": "gpu_count=2"}[name]
    path = tmp_path / f"{name}.py"
    path.write_text(SHARER.replace("FIELDS", fields), encoding="utf-8")
    return path


# --- an independent placement -------------------------------------------------------------


def _assign(pods: list[int], free: dict[str, int]) -> bool:
    """Each pod's cards on one host (backtracking, largest first)."""
    if not pods:
        return True
    first, rest = pods[0], pods[1:]
    tried = set()
    for host, room in free.items():
        if room >= first and room not in tried:
            tried.add(room)
            free[host] -= first
            if _assign(rest, free):
                free[host] += first
                return True
            free[host] += first
    return False


def _whole_fits(plan: Plan, counts: dict[str, int], inventory: str) -> bool:
    per_pod = {w.node: w.gpu_count for w in plan.workloads if w.device_type == "gpu"}
    gpu = plan.gpu
    assert gpu is not None
    for grant in gpu.grants:
        if grant.kind == "dra":
            per_pod[grant.node] = next(
                c.count for c in gpu.claims if c.template == grant.claim_template
            )
        if grant.memory_gib is not None:
            per_pod[grant.node] = 1
    pods = sorted((per_pod[w] for w, n in counts.items() for _ in range(n)), reverse=True)
    return _assign(pods, {h: c for h, _, c in INVENTORIES[inventory]})


def _mix_fits(gpu: GpuPlan, counts: dict[str, int], inventory: str) -> bool:
    """Against the configured geometry: sharers take slices of their profile on their
    grant's hosts, spanners whole cards no MIG config splits."""
    products = {h: p for h, p, _ in INVENTORIES[inventory]}
    slots: Counter[tuple[str, str | None]] = Counter()
    whole = {h: c for h, _, c in INVENTORIES[inventory]}
    for node in gpu.mig_nodes:
        family = family_of(products[node.host])
        assert family is not None and len(node.cards) == whole[node.host]
        for card in node.cards:
            profiles = [p for p, n in card.devices for _ in range(n)]
            assert _independent_fits(family, profiles), (node.host, card)
            for profile in profiles:
                slots[(node.host, profile)] += 1
            whole[node.host] -= card.use == "mig"
    spanners: list[int] = []
    sharers: list[tuple[str | None, tuple[str, ...]]] = []
    for grant in gpu.grants:
        for _ in range(counts[grant.node]):
            if grant.kind == "whole":
                spanners.append(grant.count)
            else:
                sharers.append((grant.profile, grant.hosts))

    def take(index: int) -> bool:
        if index == len(sharers):
            return True
        profile, hosts = sharers[index]
        for host in hosts:
            if slots[(host, profile)] > 0:
                slots[(host, profile)] -= 1
                if take(index + 1):
                    return True
                slots[(host, profile)] += 1
        return False

    return take(0) and _assign(sorted(spanners, reverse=True), whole)


def _fits(plan: Plan, counts: dict[str, int], inventory: str) -> bool:
    assert plan.gpu is not None
    if plan.gpu.mode == "mix":
        return _mix_fits(plan.gpu, counts, inventory)
    return _whole_fits(plan, counts, inventory)


def _objects(result: CompileResult, kind: str) -> dict[str, Obj]:
    return {
        o["metadata"]["labels"].get("vf.dev/node", o["metadata"]["name"]): o
        for o in result.objects["lab"]
        if o["kind"] == kind
    }


def _check(result: CompileResult, inventory: str) -> None:
    """Every moment fits, and the rendered objects are the moments the plan proved."""
    (plan,) = result.plans
    gpu = plan.gpu
    assert gpu is not None and gpu.moments is not None and gpu.decisions is not None
    moments = {m.name: m for m in gpu.moments}
    assert [m.fits for m in gpu.moments] == ["proven"] * 3
    for moment in gpu.moments:
        assert _fits(plan, dict(moment.replicas), inventory), moment
    planned = dict(moments["planned"].replicas)
    autoscaled = dict(moments["autoscaled"].replicas)
    surge = dict(moments["rollout"].surge)
    assert dict(moments["rollout"].replicas) == {
        w: n + surge.get(w, 0) for w, n in autoscaled.items()
    }
    scaled = {
        s["spec"]["scaleTargetRef"]["name"]: s for s in _objects(result, "ScaledObject").values()
    }
    decided = {(d.node, d.kind): d for d in gpu.decisions}
    for workload in plan.workloads:
        if workload.device_type != "gpu":
            continue
        node = workload.node
        assert planned[node] == workload.replicas
        if workload.name in scaled:
            maximum = scaled[workload.name]["spec"]["maxReplicaCount"]
            assert autoscaled[node] == maximum
            cap = decided.get((node, "max-replicas"))
            if cap is not None:
                assert cap.chosen == maximum < cap.asked
                assert f"maxReplicaCount {cap.asked} → {cap.chosen}" in cap.reason
                assert " fit beside the plan" in cap.reason
                # the cap is tight: one replica more (with an explicit surge pod) does not fit
                trial = dict(autoscaled)
                trial[node] += 1 + (workload.rollout == "surge")
                assert not _fits(plan, trial, inventory)
        else:
            assert autoscaled[node] == planned[node]
        if workload.kind != "Deployment":
            assert node not in surge
            continue
        deployment = _objects(result, "Deployment")[node]
        strategy = deployment["spec"].get("strategy")
        no_surge = decided.get((node, "no-surge"))
        if strategy is None:  # Kubernetes' default: 25 % surge, rounded up
            assert surge.get(node, 0) == math.ceil(autoscaled[node] / 4) and no_surge is None
        elif strategy["type"] == "Recreate":
            assert node not in surge
        elif strategy["rollingUpdate"] == {"maxSurge": 0, "maxUnavailable": 1}:
            assert node not in surge and no_surge is not None
            assert "maxSurge 25% → 0, maxUnavailable 25% → 1" in no_surge.reason
            # the decision is needed: one more surge pod does not fit
            trial = {w: n + surge.get(w, 0) for w, n in autoscaled.items()}
            trial[node] += no_surge.asked
            assert not _fits(plan, trial, inventory)
        else:
            assert strategy["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
            assert surge[node] == 1


# name: (graph, vf.yaml extras)
CASES: dict[str, tuple[str, Obj]] = {
    "video_analytics": ("video_analytics", {}),
    "cameras-autoscaled": (
        "realtime_cameras",
        {"replicas": {"detector": 1}, "autoscaling": {"gpu_nodes": True, "max_replicas": 8}},
    ),
    "cameras-surge": (
        "realtime_cameras",
        {
            "replicas": {"detector": 1},
            "autoscaling": {"gpu_nodes": True, "max_replicas": 8},
            "rollout": {"detector": "surge"},
        },
    ),
    "cameras-drain": (
        "realtime_cameras",
        {
            "replicas": {"detector": 2},
            "autoscaling": {"gpu_nodes": True, "max_replicas": 8},
            "rollout": {"detector": "drain"},
        },
    ),
    "cameras-minimum": (
        "realtime_cameras",
        {
            "replicas": {"detector": 1},
            "autoscaling": {"gpu_nodes": True, "max_replicas": 8, "min_replicas": 3},
        },
    ),
    "sharer-autoscaled": ("sharer", {"autoscaling": {"gpu_nodes": True, "max_replicas": 8}}),
    "spanner-rolling": ("spanner", {"replicas": {"infer": 2}}),
}


@pytest.mark.parametrize("inventory", sorted(INVENTORIES))
@pytest.mark.parametrize("mode", ["exclusive", "mix", "dra"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_moment_fits_or_is_refused_by_name(
    case: str, mode: str, inventory: str, tmp_path: Path
) -> None:
    graph, extra = CASES[case]
    config = _config(mode, inventory, extra)
    try:
        result = _compile(tmp_path, _graph(tmp_path, graph), config)
    except VfError as error:
        codes = {p.code for p in error.problems}
        assert codes <= {"VF_GPU_INFEASIBLE", "VF_GPU_HEADROOM"}, error
        if "VF_GPU_HEADROOM" in codes:  # only where vf.yaml asked for it explicitly
            assert "rollout" in extra or "min_replicas" in extra.get("autoscaling", {})
        return
    _check(result, inventory)


# --- the named decisions ------------------------------------------------------------------


def _explain(write_graph: Callable[..., Path], fields: str, env: str) -> tuple[int, str]:
    config = "environments:\n  dev:\n    kubernetes_version: '1.35'\n"
    config += "    images:\n      default: r.io/a:1\n"
    config += "".join(f"    {line}\n" for line in env.strip("\n").splitlines())
    path = write_graph(SHARER.replace("FIELDS", fields), config)
    result = CliRunner().invoke(cli, ["explain", str(path)])
    return result.exit_code, " ".join(result.output.split())


TWO_A100 = """
gpu:
  mode: MODE
  inventory:
  - {name: gpu-a, product: NVIDIA-A100-SXM4-40GB, cards: 2, memory_gib: 40, sharing: SHARING}
  dra: {driver_features: [consumable-capacity], feature_gates: {DRAConsumableCapacity: true}}
"""


def _two_a100(mode: str) -> str:
    sharing = "dra-owned" if mode == "dra" else "physical"
    return TWO_A100.replace("MODE", mode).replace("SHARING", sharing)


def test_a_mig_flow_caps_keda_to_the_slices_left(write_graph: Callable[..., Path]) -> None:
    """Two A100-40GB cards hold four 3g.20gb slices: one is planned, three more fit, so
    maxReplicaCount 8 becomes 4; at 4 no slice is left for a surge pod."""
    env = _two_a100("mix") + "autoscaling: {gpu_nodes: true, max_replicas: 8}"
    code, output = _explain(write_graph, "gpu_memory_gib=18", env)
    assert code == 0, output
    assert "3 x 3g.20gb fit beside the plan on 2 x A100-40GB: maxReplicaCount 8 → 4" in output
    assert (
        "no room for 1 surge pod(s) (3g.20gb each) beside 4 replica(s) at the autoscaling "
        "maximum on 2 x A100-40GB (2 of 2 GPU(s) held during the rollout): "
        "maxSurge 25% → 0, maxUnavailable 25% → 1" in output
    )
    assert (
        "gpu cost: planned 1 GPU(s) (1x3g.20gb); autoscaling maximum 2 GPU(s) (4x3g.20gb); "
        "rollout 2 GPU(s) (4x3g.20gb)" in output
    )
    # the geometry configured holds the maximum: both cards split
    assert "card 0: 2x3g.20gb; card 1: 2x3g.20gb" in output


@pytest.mark.parametrize(("mode", "unit"), [("exclusive", "1-GPU pod"), ("dra", "1-device claim")])
def test_whole_cards_and_claims_are_capped_too(
    mode: str, unit: str, write_graph: Callable[..., Path]
) -> None:
    env = _two_a100(mode) + "autoscaling: {gpu_nodes: true, max_replicas: 8}"
    code, output = _explain(write_graph, "gpu_count=1", env)
    assert code == 0, output
    assert (
        f"1 x {unit} fit beside the plan on 2 x NVIDIA-A100-SXM4-40GB: maxReplicaCount 8 → 2"
        in output
    )
    assert "maxSurge 25% → 0, maxUnavailable 25% → 1" in output


def test_a_rollout_with_room_keeps_its_surge(write_graph: Callable[..., Path]) -> None:
    code, output = _explain(write_graph, "gpu_count=1", _two_a100("exclusive"))
    assert code == 0, output
    assert "gpu decision" not in output
    assert (
        "planned 1 GPU(s); autoscaling maximum 1 GPU(s); rollout 2 GPU(s) with surge infer +1"
        in output
    )


def test_an_explicit_surge_on_a_full_inventory_is_refused(write_graph: Callable[..., Path]) -> None:
    env = _two_a100("exclusive") + "replicas: {infer: 2}\nrollout: {infer: surge}"
    code, output = _explain(write_graph, "gpu_count=1", env)
    assert code == 2, output
    assert "error[VF_GPU_HEADROOM]" in output
    assert (
        "rollout.infer is surge, but the surge pod of 'infer' (1 x 1-GPU pod) does not fit"
        in output
    )
    assert "set rollout.infer: drain" in output


def test_an_explicit_surge_is_reserved_below_the_cap(write_graph: Callable[..., Path]) -> None:
    env = (
        _two_a100("mix") + "autoscaling: {gpu_nodes: true, max_replicas: 8}\nrollout: {'*': surge}"
    )
    code, output = _explain(write_graph, "gpu_memory_gib=18", env)
    assert code == 0, output
    assert (
        "and the surge pod of each surge rollout on 2 x A100-40GB: maxReplicaCount 8 → 3" in output
    )
    assert "rollout 2 GPU(s) (4x3g.20gb) with surge infer +1" in output


def test_an_explicit_minimum_above_the_inventory_is_refused(
    write_graph: Callable[..., Path],
) -> None:
    env = _two_a100("dra") + "autoscaling: {gpu_nodes: true, max_replicas: 8, min_replicas: 3}"
    code, output = _explain(write_graph, "gpu_count=1", env)
    assert code == 2, output
    assert "error[VF_GPU_HEADROOM]" in output
    assert "autoscaling.min_replicas 3 for 'infer' asks for 3 x 1-device claim, but 2 fit" in output


def test_without_inventory_the_moments_are_costed_not_proven(
    write_graph: Callable[..., Path],
) -> None:
    env = "gpu: {mode: exclusive}\nautoscaling: {gpu_nodes: true, max_replicas: 5}"
    code, output = _explain(write_graph, "gpu_count=2", env)
    assert code == 0, output
    assert (
        "planned 2 GPU(s); autoscaling maximum 10 GPU(s); rollout 14 GPU(s) with surge infer +2"
        in output
    )
    assert "(unknown: no inventory declared" in output
    assert "gpu decision" not in output
