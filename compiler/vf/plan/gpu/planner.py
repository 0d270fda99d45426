"""Plan an environment's GPUs: exclusive cards, MIG slices (mix) or DRA claims, checked
against the declared inventory when there is one."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import replace

from vf import names
from vf.config.gpu import GpuNode, GpuTarget
from vf.errors import Problem
from vf.ir.gpu import DraClaim, GpuGrant, GpuPlan, MigCard, MigNode
from vf.ir.graph import NodeIR
from vf.ir.plan import record_to_json
from vf.plan.context import PlanContext
from vf.plan.gpu.dra import judge_features
from vf.plan.gpu.mig import Family, family_of
from vf.plan.gpu.pack import Bin, Card, MixResult, Packing, Pod, pack_whole, solve_mix
from vf.plan.jobs import tagged_name
from vf_runtime.constants import GPU

UNKNOWN = "unknown: no inventory declared, feasibility was not checked"


def _problem(ctx: PlanContext, what: str, remedy: str, where: str = "") -> Problem:
    return Problem(
        code="VF_GPU_INFEASIBLE",
        what=f"environment '{ctx.env.name}': {what}",
        remedy=remedy,
        where=where or ctx.env.place_of("gpu"),
    )


def plan_gpu(ctx: PlanContext, problems: list[Problem]) -> GpuPlan | None:
    """GPU decisions for every GPU node of the flow; None when the flow uses no GPU."""
    gpu_nodes = [n for n in ctx.graph.nodes if n.device_type == GPU]
    if not gpu_nodes:
        return None
    target = ctx.env.gpu
    if target.mode == "mix":
        return _plan_mix(ctx, gpu_nodes, problems)
    if target.mode == "dra":
        return _plan_dra(ctx, gpu_nodes, problems)
    return _plan_exclusive(ctx, gpu_nodes, problems)


def gpu_pods(nodes: Sequence[NodeIR], counts: Mapping[str, int]) -> list[Pod]:
    """One pod per replica of each GPU node, at ``counts`` replicas (the plan's, or those
    of another moment: the autoscaling maximum, a rollout's surge)."""
    return [
        Pod(
            workload=n.name,
            replica=i,
            cards=n.gpu_count if n.gpu_memory_gib is None else 1,
            memory_gib=n.gpu_memory_gib,
        )
        for n in nodes
        for i in range(counts[n.name])
    ]


def whole_bins(target: GpuTarget) -> list[Bin]:
    """The hosts whole-card pods of ``exclusive`` may use (shared units take one-card pods)."""
    return [
        Bin(host=n.name, cards=n.cards, whole_only=n.sharing != "physical")
        for n in eligible_nodes(target, ("physical", "time-sliced", "mig"))
    ]


def dra_bins(target: GpuTarget) -> list[Bin]:
    """The hosts whose devices a DRA driver owns."""
    return [Bin(host=n.name, cards=n.cards) for n in eligible_nodes(target, ("dra-owned",))]


def mix_nodes(target: GpuTarget) -> list[tuple[str, int, Family | None]]:
    """The physical hosts ``mix`` may split, with each one's MIG family."""
    return [(n.name, n.cards, family_of(n.product)) for n in eligible_nodes(target, ("physical",))]


def split_pods(pods: list[Pod]) -> tuple[list[Pod], list[Pod]]:
    """Spanners (whole cards) and sharers (one MIG slice each)."""
    return [p for p in pods if p.memory_gib is None], [p for p in pods if p.memory_gib is not None]


def eligible_nodes(target: GpuTarget, sharing: tuple[str, ...]) -> list[GpuNode]:
    """The declared nodes of these sharing kinds that gpu.nodes (when set) allows."""
    inventory = target.inventory or ()
    return [
        n
        for n in inventory
        if n.sharing in sharing and (not target.nodes or n.name in target.nodes)
    ]


def _base_plan(ctx: PlanContext, **fields: object) -> GpuPlan:
    target = ctx.env.gpu
    defaults: dict[str, object] = {
        "mode": target.mode,
        "resource_name": target.resource_name,
        "runtime_class": target.runtime_class,
        "feasibility": UNKNOWN,
        "grants": (),
        "placements": (),
        "mig_nodes": (),
        "mig_configmap": None,
        "claims": (),
        "notes": (),
    }
    defaults.update(fields)
    return GpuPlan(**defaults)  # type: ignore[arg-type]


def _check_units(ctx: PlanContext, nodes: list[NodeIR], problems: list[Problem]) -> None:
    """gpu_count > 1 can never be met by time-sliced or MIG units."""
    target = ctx.env.gpu
    shared = eligible_nodes(target, ("time-sliced", "mig"))
    physical = eligible_nodes(target, ("physical",))
    for node in nodes:
        if node.gpu_count > 1 and shared and not physical:
            problems.append(
                _problem(
                    ctx,
                    f"node '{node.name}' asks for gpu_count={node.gpu_count}, but the GPU pool "
                    "offers only time-sliced or MIG units, which are never combined",
                    "set gpu_count=1, or add nodes with sharing: physical",
                    node.site,
                )
            )


def _plan_exclusive(ctx: PlanContext, nodes: list[NodeIR], problems: list[Problem]) -> GpuPlan:
    target = ctx.env.gpu
    grants = tuple(
        GpuGrant(
            node=n.name,
            kind="whole",
            count=n.gpu_count,
            profile=None,
            memory_gib=None,
            resources=((target.resource_name, n.gpu_count),),
            hosts=target.nodes,
            claim_template=None,
        )
        for n in nodes
    )
    if target.inventory is None:
        return _base_plan(ctx, grants=grants)
    _check_units(ctx, nodes, problems)
    bins = whole_bins(target)
    packing = pack_whole(gpu_pods(nodes, ctx.replicas), bins)
    if packing.hosts is None and packing.proven:
        problems.append(_unplaceable(ctx, nodes, bins, packing))
        return _base_plan(ctx, grants=grants, feasibility="infeasible (proven)")
    if packing.hosts is None:
        return _base_plan(
            ctx,
            grants=grants,
            feasibility="unproven: first-fit-decreasing found no packing and the instance is "
            f"too large to search exhaustively ({len(bins)} nodes)",
        )
    placements = tuple(sorted((w, r, h) for (w, r), h in packing.hosts.items()))
    return _base_plan(
        ctx,
        grants=grants,
        feasibility="proven: every replica fits on one node",
        placements=placements,
    )


def _unplaceable(
    ctx: PlanContext, nodes: list[NodeIR], bins: list[Bin], packing: Packing
) -> Problem:
    demand = ", ".join(f"{n.name} {ctx.replicas[n.name]}x{n.gpu_count}" for n in nodes)
    supply = ", ".join(f"{b.host}:{b.cards}" for b in bins) or "no eligible node"
    asked = sum(ctx.replicas[n.name] * n.gpu_count for n in nodes)
    held = sum(b.cards for b in bins)
    stuck = ""
    if packing.stuck is not None:
        pod = packing.stuck
        stuck = (
            f"; placing the largest first, replica {pod.replica} of '{pod.workload}' "
            f"({pod.cards} card(s)) found no node after {packing.placed} replica(s) were placed"
        )
    return _problem(
        ctx,
        f"the GPU pods ({demand}) cannot be packed onto the nodes ({supply}); "
        f"{asked} card(s) asked in all, {held} declared; "
        f"every replica's cards must sit on one node{stuck}",
        "lower replicas or gpu_count, or add GPU nodes to gpu.inventory",
    )


def _plan_mix(ctx: PlanContext, nodes: list[NodeIR], problems: list[Problem]) -> GpuPlan:
    target = ctx.env.gpu
    if target.inventory is None:
        problems.append(
            _problem(
                ctx,
                "gpu.mode mix needs gpu.inventory to choose MIG profiles and place them",
                "declare the GPU nodes (name, product, cards, memory_gib) under gpu.inventory",
            )
        )
        return _base_plan(ctx)
    pods = gpu_pods(nodes, ctx.replicas)
    result = solve_mix(*split_pods(pods), mix_nodes(target))
    if result.failed is not None:
        pod = result.failed
        kind = (
            f"a {pod.memory_gib} GiB MIG slice" if pod.memory_gib else f"{pod.cards} whole card(s)"
        )
        problems.append(
            _problem(
                ctx,
                f"no MIG layout fits: replica {pod.replica} of '{pod.workload}' needs {kind} "
                "and no card has room under NVIDIA's placement rules; "
                + _mix_arithmetic(result, total=len(pods)),
                "lower replicas or gpu_memory_gib, "
                "or add MIG-capable nodes (A30, A100, H100, H200)",
            )
        )
        return _base_plan(ctx, feasibility="infeasible (no layout)")
    return mix_plan(ctx, nodes, result)


def _mix_arithmetic(result: MixResult, *, total: int) -> str:
    """What the cards hold when a layout fails: each node's cards and memory, how each
    card is used, and how many replicas were placed before the one that did not fit."""
    per_host: dict[str, list[str]] = {}
    for card in result.cards:
        family = card.family
        size = f"{family.name} {family.memory_gib} GiB" if family else "no MIG (whole only)"
        use = {"unused": "free", "whole": "whole-card pod"}.get(card.use, "")
        if card.use == "mig":
            use = "MIG " + "+".join(card.profiles)
        per_host.setdefault(card.host, []).append(f"card {card.index} ({size}): {use}")
    cards = "; ".join(f"{host}: {', '.join(items)}" for host, items in per_host.items())
    placed = len(result.hosts)
    return f"placed {placed} of {total} replica(s) before it; cards: {cards or 'none eligible'}"


def mix_plan(ctx: PlanContext, nodes: Sequence[NodeIR], result: MixResult) -> GpuPlan:
    """The GPU plan of a MIG layout: grants (one profile per workload, the hosts its
    replicas were placed on), placements and each node's geometry."""
    cards, hosts, profiles = result.cards, result.hosts, result.profiles
    target = ctx.env.gpu
    grants = []
    for node in nodes:
        used = tuple(sorted({h for (w, _), h in hosts.items() if w == node.name}))
        if node.gpu_memory_gib is None:
            resources = ((target.resource_name, node.gpu_count),)
            grants.append(
                GpuGrant(
                    node=node.name,
                    kind="whole",
                    count=node.gpu_count,
                    profile=None,
                    memory_gib=None,
                    resources=resources,
                    hosts=used,
                    claim_template=None,
                )
            )
            continue
        profile = profiles[node.name]
        grants.append(
            GpuGrant(
                node=node.name,
                kind="mig-slice",
                count=1,
                profile=profile,
                memory_gib=node.gpu_memory_gib,
                resources=(("nvidia.com/mig-" + profile.replace("+", "."), 1),),
                hosts=used,
                claim_template=None,
            )
        )
    mig_nodes = _mig_nodes(ctx, cards)
    return _base_plan(
        ctx,
        grants=tuple(grants),
        feasibility="proven: every replica has a card or a MIG slice "
        "under NVIDIA's placement rules",
        placements=tuple(sorted((w, r, h) for (w, r), h in hosts.items())),
        mig_nodes=mig_nodes,
        mig_configmap=names.k8s_name("vf", ctx.flow_id, ctx.run_id, "mig-parted")
        if mig_nodes
        else None,
        notes=("MIG slices are advertised only with the device plugin's mixed strategy",),
    )


def _mig_nodes(ctx: PlanContext, cards: list[Card]) -> tuple[MigNode, ...]:
    out = []
    for host in sorted({c.host for c in cards if c.use == "mig"}):
        mine = [c for c in cards if c.host == host]
        layout = tuple(
            MigCard(
                index=c.index,
                use=c.use,
                devices=tuple(sorted((p, c.profiles.count(p)) for p in set(c.profiles))),
            )
            for c in mine
        )
        out.append(
            MigNode(
                host=host,
                family=mine[0].family.name,
                cards=layout,
                config_name=names.k8s_name("vf", ctx.flow_id, host),
            )
        )
    return tuple(out)


def _plan_dra(ctx: PlanContext, nodes: list[NodeIR], problems: list[Problem]) -> GpuPlan:
    target = ctx.env.gpu
    dra = target.dra
    features = dra.driver_features
    for reason in judge_features(features, ctx.env.kubernetes_version, dict(dra.feature_gates)):
        problems.append(
            _problem(
                ctx,
                f"gpu.mode dra: {reason}",
                "raise kubernetes_version, enable the gate, or drop the feature",
            )
        )
    claims, grants = [], []
    for node in nodes:
        claim = _claim(ctx, node, "", problems)
        # A ResourceClaimTemplate's spec is immutable: its name carries a digest of it, so a
        # changed claim is a new template (and the pods that use it roll onto it).
        tag = "c" + hashlib.sha256(json.dumps(record_to_json(claim)).encode()).hexdigest()[:7]
        template = tagged_name("vf", ctx.flow_id, ctx.run_id, node.name, "gpu", tag=tag)
        claim = replace(claim, template=template)
        claims.append(claim)
        grants.append(
            GpuGrant(
                node=node.name,
                kind="dra",
                count=claim.count,
                profile=None,
                memory_gib=node.gpu_memory_gib,
                resources=(),
                hosts=target.nodes,
                claim_template=template,
            )
        )
    feasibility = UNKNOWN
    if target.inventory is not None:
        bins = dra_bins(target)
        packing = pack_whole(gpu_pods(nodes, ctx.replicas), bins)
        if packing.hosts is None and packing.proven:
            problems.append(_unplaceable(ctx, nodes, bins, packing))
        feasibility = "proven: every claim fits on one node" if packing.hosts else "not proven"
    return _base_plan(ctx, grants=tuple(grants), claims=tuple(claims), feasibility=feasibility)


def _claim(ctx: PlanContext, node: NodeIR, template: str, problems: list[Problem]) -> DraClaim:
    dra = ctx.env.gpu.dra
    features = dra.driver_features
    selectors: tuple[str, ...] = ()
    capacity = None
    if node.gpu_memory_gib is not None:
        gib = f"{node.gpu_memory_gib:g}Gi"
        if "consumable-capacity" in features:
            capacity = gib
        elif "dynamic-mig" in features:
            selectors = (
                f'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("{gib}")) >= 0',
            )
        elif "mps" not in features:
            problems.append(
                _problem(
                    ctx,
                    f"node '{node.name}' shares a GPU (gpu_memory_gib) but the DRA driver offers "
                    "no sharing feature",
                    "add dynamic-mig, consumable-capacity or mps to gpu.dra.driver_features",
                    node.site,
                )
            )
    return DraClaim(
        template=template,
        device_class=dra.device_class,
        count=1 if node.gpu_memory_gib is not None else node.gpu_count,
        selectors=selectors,
        capacity_memory=capacity,
        mps=node.gpu_memory_gib is not None and "mps" in features,
    )
