"""The ``gpu`` section of an environment in vf.yaml: strategy, inventory and DRA driver."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

GPU_MODES = ("exclusive", "mix", "dra")
SHARING = ("physical", "time-sliced", "mig", "dra-owned")
DRA_FEATURES = ("dynamic-mig", "mps", "consumable-capacity")
DEFAULT_RESOURCE = "nvidia.com/gpu"
DEFAULT_DEVICE_CLASS = "gpu.nvidia.com"


@dataclass(frozen=True, kw_only=True)
class GpuNode:
    """One GPU node of the declared inventory."""

    name: str
    product: str
    cards: int
    memory_gib: float
    sharing: str = "physical"
    labels: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, kw_only=True)
class DraTarget:
    device_class: str = DEFAULT_DEVICE_CLASS
    driver_features: tuple[str, ...] = ()
    feature_gates: tuple[tuple[str, bool], ...] = ()


@dataclass(frozen=True, kw_only=True)
class GpuTarget:
    """How GPU nodes get their devices in one environment."""

    mode: str = "exclusive"
    resource_name: str = DEFAULT_RESOURCE
    runtime_class: str | None = None
    nodes: tuple[str, ...] = ()
    inventory: tuple[GpuNode, ...] | None = None
    dra: DraTarget = DraTarget()


def parse_gpu(raw: dict[str, Any] | None) -> GpuTarget:
    """Build the GPU target from a schema-valid mapping (types are already checked)."""
    data = raw or {}
    inventory = data.get("inventory")
    dra = data.get("dra") or {}
    return GpuTarget(
        mode=data.get("mode", "exclusive"),
        resource_name=data.get("resource_name", DEFAULT_RESOURCE),
        runtime_class=data.get("runtime_class"),
        nodes=tuple(sorted(data.get("nodes") or ())),
        inventory=None
        if inventory is None
        else tuple(
            sorted(
                (
                    GpuNode(
                        name=n["name"],
                        product=n["product"],
                        cards=n["cards"],
                        memory_gib=n["memory_gib"],
                        sharing=n.get("sharing", "physical"),
                        labels=tuple(sorted((n.get("labels") or {}).items())),
                    )
                    for n in inventory
                ),
                key=lambda node: node.name,
            )
        ),
        dra=DraTarget(
            device_class=dra.get("device_class", DEFAULT_DEVICE_CLASS),
            driver_features=tuple(sorted(set(dra.get("driver_features") or ()))),
            feature_gates=tuple(sorted((dra.get("feature_gates") or {}).items())),
        ),
    )
