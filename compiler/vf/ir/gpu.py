"""GPU decisions recorded in the plan: grants per workload, MIG geometry and DRA claims."""

from __future__ import annotations

from dataclasses import dataclass


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

    def grant_for(self, node: str) -> GpuGrant | None:
        return next((g for g in self.grants if g.node == node), None)
