"""GPU placement at every moment of a flow's life, not only at the planned counts.

The plan places the planned replicas (``vf.plan.gpu.planner``). A flow also lives at two
other moments that need GPUs: KEDA may scale each autoscaled GPU worker up to its
``maxReplicaCount``, all of them together, and a rollout adds surge pods beside the old
replicas (a sync rolls every changed Deployment at once; Kubernetes rounds a 25 % surge
up, so a Deployment of 1 to 4 replicas surges by one pod). The same placement functions
judge each moment. Where one does not fit, vf decides, and records why:

- an autoscaled GPU worker's ``maxReplicaCount`` is lowered to what fits beside the plan,
  then further until every autoscaled GPU worker fits at its maximum together;
- a GPU Deployment that rolls with Kubernetes' default surge and has no room for its surge
  pods (counted from the autoscaling maximum, where a rollout may begin) rolls without
  surge: ``maxSurge: 0, maxUnavailable: 1``;
- what the user asked for explicitly and cannot fit, a ``surge`` rollout or a
  ``min_replicas``, is refused by name (``VF_GPU_HEADROOM``).

With ``mix`` the MIG geometry is fixed by mig-parted, so it is solved for the largest
moment, the rollout: every smaller moment takes a subset of its slices.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from vf.config.gpu import GpuNode
from vf.errors import Problem, raise_if
from vf.ir.gpu import DailyMoment, GpuDecision, GpuHours, GpuMoment, GpuPlan, MomentName
from vf.ir.graph import NodeIR
from vf.ir.plan import Plan, Scaler, Workload
from vf.plan.context import PlanContext
from vf.plan.gpu.mig import Family
from vf.plan.gpu.pack import Bin, MixResult, pack_whole, solve_mix
from vf.plan.gpu.planner import (
    dra_bins,
    eligible_nodes,
    gpu_pods,
    mix_nodes,
    mix_plan,
    split_pods,
    whole_bins,
)
from vf_runtime.constants import GPU

Counts = dict[str, int]
HOURS_PER_DAY = 24
DEFAULT_SURGE_PERCENT = 25  # Kubernetes' default maxSurge (and maxUnavailable) of a Deployment


def default_surge(replicas: int) -> int:
    """Surge pods of Kubernetes' default 25 % maxSurge: a percentage of surge rounds up."""
    return -(-replicas * DEFAULT_SURGE_PERCENT // 100)


@dataclass(frozen=True, kw_only=True)
class Placer:
    """The plan's placement function, callable with the counts of any moment."""

    mode: str
    nodes: tuple[NodeIR, ...]
    bins: tuple[Bin, ...] = ()
    mix: tuple[tuple[str, int, Family | None], ...] = ()

    def layout(self, counts: Mapping[str, int]) -> MixResult:
        return solve_mix(*split_pods(gpu_pods(self.nodes, counts)), list(self.mix))

    def fits(self, counts: Mapping[str, int]) -> bool:
        """True when every pod of ``counts`` is placed (a failure that is not a proof, on a
        large whole-card instance, counts as not fitting)."""
        if self.mode == "mix":
            return self.layout(counts).failed is None
        return pack_whole(gpu_pods(self.nodes, counts), list(self.bins)).hosts is not None


def placer_for(ctx: PlanContext, nodes: Sequence[NodeIR]) -> Placer | None:
    """The environment's placer; None without an inventory (nothing can be proven)."""
    target = ctx.env.gpu
    if target.inventory is None:
        return None
    if target.mode == "mix":
        return Placer(mode="mix", nodes=tuple(nodes), mix=tuple(mix_nodes(target)))
    bins = dra_bins(target) if target.mode == "dra" else whole_bins(target)
    return Placer(mode=target.mode, nodes=tuple(nodes), bins=tuple(bins))


def plan_moments(ctx: PlanContext, plan: Plan) -> Plan:
    """The plan with every GPU moment recorded, and the decisions that make each fit:
    capped scalers, no-surge rollouts, and for ``mix`` a geometry with room for them all.
    Raise with ``VF_GPU_HEADROOM`` when an explicit request cannot fit."""
    gpu = plan.gpu
    if gpu is None:
        return plan
    nodes = [n for n in ctx.graph.nodes if n.device_type == GPU]
    names = {n.name for n in nodes}
    workloads = {w.node: w for w in plan.workloads if w.node in names}
    scalers = {s.node: s for s in plan.autoscaling or () if s.node in names}
    planned = {n.name: ctx.replicas[n.name] for n in nodes}
    placer = placer_for(ctx, nodes) if gpu.feasibility.startswith("proven") else None
    job = _Moments(ctx, gpu=gpu, nodes=nodes, placer=placer, planned=planned)
    maxima = {name: s.max_replicas for name, s in scalers.items()}
    reserve = {w: 1 for w, load in workloads.items() if load.rollout == "surge"}
    if placer is not None:
        job.check_minima(scalers)
        maxima = job.cap(scalers, reserve)
    autoscaled = {**planned, **maxima}
    surges = {
        w: default_surge(autoscaled[w]) if load.rollout is None else reserve.get(w, 0)
        for w, load in workloads.items()
        if load.kind == "Deployment"
    }
    if placer is not None:
        surges = job.roll(autoscaled, surges, workloads)
    raise_if(job.problems)
    surges = {w: n for w, n in sorted(surges.items()) if n}
    rollout = {w: autoscaled[w] + surges.get(w, 0) for w in autoscaled}
    moments = (
        job.moment("planned", planned, {}),
        job.moment("autoscaled", autoscaled, {}),
        job.moment("rollout", rollout, surges),
    )
    if placer is not None and placer.mode == "mix" and rollout != planned:
        gpu = _envelope(ctx, nodes, placer, rollout, planned=planned, notes=gpu.notes)
    gpu = replace(
        gpu, moments=moments, decisions=tuple(job.decisions), hours_per_day=daily(moments)
    )
    return replace(
        plan,
        gpu=gpu,
        workloads=tuple(_rolled(w, job.no_surge) for w in plan.workloads),
        autoscaling=_capped(plan.autoscaling, maxima),
    )


def daily(moments: Sequence[GpuMoment]) -> tuple[GpuHours, ...]:
    """GPU-hours a day at the plan and at the autoscaling maximum: cards (slices) x 24."""
    by_name = {m.name: m for m in moments}
    daily: tuple[DailyMoment, ...] = ("planned", "autoscaled")
    return tuple(
        GpuHours(
            moment=name,
            gpu_hours=by_name[name].gpus * HOURS_PER_DAY,
            slice_hours=tuple((p, n * HOURS_PER_DAY) for p, n in by_name[name].slices),
        )
        for name in daily
        if name in by_name
    )


def _rolled(workload: Workload, no_surge: set[str]) -> Workload:
    return replace(workload, rollout="no-surge") if workload.node in no_surge else workload


def _capped(
    scalers: tuple[Scaler, ...] | None, maxima: Mapping[str, int]
) -> tuple[Scaler, ...] | None:
    if scalers is None:
        return None
    return tuple(
        replace(s, max_replicas=maxima[s.node]) if s.node in maxima else s for s in scalers
    )


def _envelope(
    ctx: PlanContext,
    nodes: Sequence[NodeIR],
    placer: Placer,
    counts: Mapping[str, int],
    *,
    planned: Mapping[str, int],
    notes: tuple[str, ...],
) -> GpuPlan:
    """The mix plan whose MIG geometry holds the largest moment: grants may use every host
    of it; the placements recorded are the planned replicas'."""
    result = placer.layout(counts)
    assert result.failed is None  # the rollout moment was proven to fit
    envelope = mix_plan(ctx, nodes, result)
    placements = tuple(p for p in envelope.placements if p[1] < planned[p[0]])
    note = "the MIG geometry has room for the autoscaling maximum and a rollout's surge pods"
    return replace(envelope, placements=placements, notes=(*notes, note))


class _Moments:
    """The arithmetic of one environment's moments, its decisions and its refusals."""

    def __init__(
        self,
        ctx: PlanContext,
        *,
        gpu: GpuPlan,
        nodes: Sequence[NodeIR],
        placer: Placer | None,
        planned: Counts,
    ) -> None:
        self.ctx = ctx
        self.gpu = gpu
        self.nodes = {n.name: n for n in nodes}
        self.placer = placer
        self.planned = planned
        self.problems: list[Problem] = []
        self.decisions: list[GpuDecision] = []
        self.no_surge: set[str] = set()

    # -- what is said ----------------------------------------------------------------------

    def unit(self, name: str) -> str:
        """One pod's share: a MIG profile, whole cards or a DRA claim."""
        node = self.nodes[name]
        grant = self.gpu.grant_for(name)
        if grant is not None and grant.profile is not None:
            return grant.profile
        if self.gpu.mode == "dra":
            count = 1 if node.gpu_memory_gib is not None else node.gpu_count
            return f"{count}-device claim"
        return f"{node.gpu_count}-GPU pod"

    def eligible(self) -> list[GpuNode]:
        """The inventory the placer may use, as the planner chose it."""
        target = self.ctx.env.gpu
        sharing = {"mix": ("physical",), "dra": ("dra-owned",)}.get(
            target.mode, ("physical", "time-sliced", "mig")
        )
        return eligible_nodes(target, sharing)

    def supply(self) -> str:
        """The eligible inventory: ``2 x A100-40GB``, by MIG family or product."""
        target = self.ctx.env.gpu
        eligible = self.eligible()
        cards: Counter[str] = Counter()
        for node in eligible:
            family = None
            if target.mode == "mix" and self.placer is not None:
                family = next((f for h, _, f in self.placer.mix if h == node.name), None)
            cards[family.name if family is not None else node.product] += node.cards
        text = ", ".join(f"{n} x {label}" for label, n in sorted(cards.items()))
        hosts = f" on {len(eligible)} nodes" if len(eligible) > 1 else ""
        return (text or "no eligible GPU node") + hosts

    def held(self, counts: Mapping[str, int]) -> str:
        gpus, _ = self.cost(counts)
        total = sum(n.cards for n in self.eligible())
        return f"{gpus} of {total} GPU(s) held"

    # -- what each moment costs ------------------------------------------------------------

    def cost(self, counts: Mapping[str, int]) -> tuple[int, tuple[tuple[str, int], ...]]:
        """Cards held (whole, split into MIG slices, or DRA devices) and MIG slices."""
        if self.placer is not None and self.placer.mode == "mix":
            layout = self.placer.layout(counts)
            slices = Counter(p for card in layout.cards for p in card.profiles)
            used = sum(card.use != "unused" for card in layout.cards)
            return used, tuple(sorted(slices.items()))
        gpus = 0
        for name, count in counts.items():
            node = self.nodes[name]
            gpus += count * (1 if node.gpu_memory_gib is not None else node.gpu_count)
        return gpus, ()

    def moment(self, name: MomentName, counts: Counts, surge: Counts) -> GpuMoment:
        gpus, slices = self.cost(counts)
        return GpuMoment(
            name=name,
            replicas=tuple(sorted(counts.items())),
            surge=tuple(sorted(surge.items())),
            gpus=gpus,
            slices=slices,
            fits="proven" if self.placer is not None else self.gpu.feasibility,
        )

    # -- decisions -------------------------------------------------------------------------

    def fits(self, counts: Mapping[str, int]) -> bool:
        assert self.placer is not None
        return self.placer.fits(counts)

    def most(self, counts: Counts, name: str, *, low: int, high: int) -> int:
        """The most replicas of ``name`` in [low, high] that fit beside ``counts``
        (``low`` when even that does not fit)."""
        best = low
        for count in range(low + 1, high + 1):
            if not self.fits({**counts, name: counts[name] - low + count}):
                break
            best = count
        return best

    def check_minima(self, scalers: Mapping[str, Scaler]) -> None:
        """An explicit ``min_replicas`` above the plan must fit: KEDA keeps it running."""
        raised = {w: s.min_replicas for w, s in scalers.items() if s.min_replicas > self.planned[w]}
        if not raised or self.fits({**self.planned, **raised}):
            return
        for name, minimum in sorted(raised.items()):
            fit = self.most(dict(self.planned), name, low=self.planned[name], high=minimum)
            self.problems.append(
                Problem(
                    code="VF_GPU_HEADROOM",
                    what=f"environment '{self.ctx.env.name}': autoscaling.min_replicas "
                    f"{minimum} for '{name}' asks for {minimum} x {self.unit(name)}, but "
                    f"{fit} fit beside the plan on {self.supply()}",
                    remedy=f"lower autoscaling.min_replicas to {fit} or less, "
                    "or declare more GPUs in gpu.inventory",
                    where=self.ctx.env.place_of("autoscaling"),
                )
            )

    def cap(self, scalers: Mapping[str, Scaler], reserve: Mapping[str, int]) -> Counts:
        """Each autoscaled GPU worker's maximum, lowered to what fits beside the plan (and
        the explicit surge pods), then until all fit at their maxima together."""
        low = {w: max(s.min_replicas, self.planned[w]) for w, s in scalers.items()}
        base = {w: self.planned[w] + reserve.get(w, 0) for w in self.planned}
        base.update({w: low[w] + reserve.get(w, 0) for w in low})
        alone = {
            w: self.most(base, w, low=low[w], high=max(s.max_replicas, low[w]))
            for w, s in sorted(scalers.items())
        }
        caps = dict(alone)

        def together() -> Counts:
            return {**base, **{w: caps[w] + reserve.get(w, 0) for w in caps}}

        while not self.fits(together()):
            lowerable = [w for w in caps if caps[w] > low[w]]
            if not lowerable:
                break  # the floor itself does not fit: the minima or the surge are refused
            caps[min(lowerable, key=lambda w: (low[w] - caps[w], w))] -= 1
        for name, scaler in sorted(scalers.items()):
            if caps[name] >= scaler.max_replicas:
                continue
            unit, planned = self.unit(name), self.planned[name]
            reason = f"{alone[name] - planned} x {unit} fit beside the plan"
            if reserve:
                reason += " and the surge pod of each surge rollout"
            reason += f" on {self.supply()}"
            if caps[name] < alone[name]:
                reason += (
                    f"; {caps[name] - planned} with every autoscaled GPU worker at its "
                    "maximum together"
                )
            reason += f": maxReplicaCount {scaler.max_replicas} → {caps[name]}"
            self.decisions.append(
                GpuDecision(
                    node=name,
                    kind="max-replicas",
                    asked=scaler.max_replicas,
                    chosen=caps[name],
                    reason=reason,
                )
            )
        return caps

    def roll(
        self, counts: Counts, surges: Mapping[str, int], workloads: Mapping[str, Workload]
    ) -> Counts:
        """The surge pods that fit beside ``counts`` with every GPU Deployment rolling at
        once: an explicit surge rollout first (refused when it cannot fit), then each
        default one (rolled without surge when it cannot)."""
        kept: Counts = {}
        explicit = [w for w in sorted(surges) if workloads[w].rollout == "surge"]
        default = [w for w in sorted(surges) if workloads[w].rollout is None and surges[w]]
        for name in [*explicit, *default]:
            trial = {**kept, name: surges[name]}
            if self.fits({w: c + trial.get(w, 0) for w, c in counts.items()}):
                kept = trial
                continue
            beside = f"{counts[name]} replica(s)"
            if counts[name] != self.planned[name]:
                beside += " at the autoscaling maximum"
            held = self.held({w: c + kept.get(w, 0) for w, c in counts.items()})
            room = f"beside {beside} on {self.supply()} ({held} during the rollout)"
            if name in explicit:
                self.problems.append(self._surge_refused(name, room))
                continue
            self.no_surge.add(name)
            self.decisions.append(
                GpuDecision(
                    node=name,
                    kind="no-surge",
                    asked=surges[name],
                    chosen=0,
                    reason=f"no room for {surges[name]} surge pod(s) ({self.unit(name)} each) "
                    f"{room}: maxSurge 25% → 0, maxUnavailable 25% → 1",
                )
            )
        return kept

    def _surge_refused(self, name: str, room: str) -> Problem:
        env = self.ctx.env
        entry = name if name in dict(env.workloads.rollout) else "*"
        return Problem(
            code="VF_GPU_HEADROOM",
            what=f"environment '{env.name}': rollout.{entry} is surge, but the surge pod of "
            f"'{name}' (1 x {self.unit(name)}) does not fit {room}",
            remedy=f"set rollout.{name}: drain (pods are replaced in place), lower its "
            "replicas or autoscaling.max_replicas, or declare more GPUs in gpu.inventory",
            where=env.place_of(f"rollout.{entry}"),
        )
