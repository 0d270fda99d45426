"""GPU decisions recorded in the plan: grants per workload, MIG geometry and DRA claims."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from vf.ir.records import AS_OBJECT, OMIT_IF_NONE

MomentName = Literal["planned", "autoscaled", "rollout"]
DailyMoment = Literal["planned", "autoscaled"]  # the moments that can last a day
DecisionKind = Literal["max-replicas", "no-surge"]


@dataclass(frozen=True, kw_only=True)
class GpuGrant:
    """What every pod of one GPU workload requests and where it may run."""

    node: str
    kind: str  # whole | mig-slice | dra
    count: int
    profile: str | None
    memory_gib: float | None
    resources: tuple[tuple[str, int], ...]
    hosts: tuple[str, ...]
    claim_template: str | None


@dataclass(frozen=True, kw_only=True)
class MigCard:
    index: int
    use: str  # unused | whole | mig
    devices: tuple[tuple[str, int], ...]


@dataclass(frozen=True, kw_only=True)
class MigNode:
    """One node's MIG geometry and the mig-parted config that produces it."""

    host: str
    family: str
    config_name: str
    cards: tuple[MigCard, ...]


@dataclass(frozen=True, kw_only=True)
class DraClaim:
    template: str
    device_class: str
    count: int
    selectors: tuple[str, ...]
    capacity_memory: str | None
    mps: bool


@dataclass(frozen=True, kw_only=True)
class GpuMoment:
    """The GPU pods of one moment of the flow's life, whether they fit, and what they cost.

    ``planned``: the planned replicas; ``autoscaled``: every autoscaled GPU worker at its
    (decided) maxReplicaCount together; ``rollout``: that, plus the surge pods of every GPU
    Deployment rolling at once (a sync rolls them all)."""

    name: MomentName
    replicas: tuple[tuple[str, int], ...] = field(metadata=AS_OBJECT)  # pods per GPU node
    surge: tuple[tuple[str, int], ...] = field(metadata=AS_OBJECT)  # of which surge pods
    gpus: int  # cards held: whole cards, cards split into its MIG slices, DRA devices
    slices: tuple[tuple[str, int], ...] = field(metadata=AS_OBJECT)  # MIG profile -> slices
    fits: str  # proven | unproven: ... | unknown: ...


@dataclass(frozen=True, kw_only=True)
class GpuHours:
    """What one moment costs a day if it is held all day: its cards (and its MIG slices)
    x 24. Recorded for ``planned`` (the floor) and ``autoscaled`` (the ceiling); a rollout
    lasts minutes, not a day."""

    moment: DailyMoment
    gpu_hours: int
    slice_hours: tuple[tuple[str, int], ...] = field(metadata=AS_OBJECT)  # MIG profile -> hours


@dataclass(frozen=True, kw_only=True)
class GpuDecision:
    """What vf changed so that a moment fits: a lower maxReplicaCount, or a rollout
    without surge (maxSurge 0, maxUnavailable 1); ``asked`` and ``chosen`` count replicas
    or surge pods, ``reason`` gives the arithmetic."""

    node: str
    kind: DecisionKind
    asked: int
    chosen: int
    reason: str


@dataclass(frozen=True, kw_only=True)
class GpuPlan:
    mode: str
    resource_name: str
    runtime_class: str | None
    feasibility: str
    grants: tuple[GpuGrant, ...]
    placements: tuple[tuple[str, int, str], ...]
    mig_nodes: tuple[MigNode, ...]
    mig_configmap: str | None
    claims: tuple[DraClaim, ...]
    notes: tuple[str, ...]
    moments: tuple[GpuMoment, ...] | None = field(default=None, metadata=OMIT_IF_NONE)
    decisions: tuple[GpuDecision, ...] | None = field(default=None, metadata=OMIT_IF_NONE)
    hours_per_day: tuple[GpuHours, ...] | None = field(default=None, metadata=OMIT_IF_NONE)

    def grant_for(self, node: str) -> GpuGrant | None:
        return next((g for g in self.grants if g.node == node), None)
