"""One cluster node → one ``gpu.inventory`` entry: GPU Feature Discovery labels, allocatable
GPU resources, MIG geometry, occupancy, and how its GPUs are shared."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vf.ir.capabilities import Known, Unknown

GFD = "nvidia.com/"
RECORDED_LABELS = tuple(
    GFD + key
    for key in (
        "gpu.count",
        "gpu.family",
        "gpu.memory",
        "gpu.product",
        "gpu.replicas",
        "gpu.sharing-strategy",
        "mig.capable",
        "mig.config",
        "mig.config.state",
        "mig.strategy",
    )
)
GPU_RESOURCE = re.compile(r"^nvidia\.com/(gpu(\.shared)?|mig-[0-9a-z.+-]+)\Z")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?)?\Z")
_PRODUCT = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?\Z")
MIG_PREFIX = "nvidia.com/mig-"
Pairs = tuple[tuple[str, int], ...]
Held = Known[dict[str, dict[str, int]]] | Unknown


@dataclass(frozen=True, kw_only=True)
class ObservedNode:
    """One GPU node as the cluster reports it, in the shape of ``gpu.inventory``."""

    name: str
    product: str
    cards: int
    memory_gib: float
    sharing: str
    labels: tuple[tuple[str, str], ...]
    allocatable: Pairs
    mig_devices: Pairs
    in_use: Known[Pairs] | Unknown


def quantity(value: Any) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0


def gpu_resources(resources: Any) -> dict[str, int]:
    """The GPU extended resources of a resource list, with their positive unit counts."""
    if not isinstance(resources, Mapping):
        return {}
    found = {str(k): quantity(v) for k, v in resources.items() if GPU_RESOURCE.match(str(k))}
    return {k: v for k, v in found.items() if v > 0}


def _sharing(
    labels: Mapping[str, str],
    allocatable: dict[str, int],
    classes: Known[tuple[str, ...]] | Unknown,
) -> str | None:
    """physical, time-sliced, mig or dra-owned; None when it cannot be told."""
    product = labels.get(GFD + "gpu.product", "")
    if any(k.startswith(MIG_PREFIX) for k in allocatable) or (
        labels.get(GFD + "mig.strategy") == "single" and "-MIG-" in product
    ):
        return "mig"
    if (
        labels.get(GFD + "gpu.sharing-strategy") in ("time-slicing", "mps")
        or product.endswith("-SHARED")
        or quantity(labels.get(GFD + "gpu.replicas", "1")) > 1
        or GFD + "gpu.shared" in allocatable
    ):
        return "time-sliced"
    if allocatable:
        return "physical"
    if isinstance(classes, Known) and any(c.endswith("nvidia.com") for c in classes.value):
        return "dra-owned"
    return None


def node_entry(
    item: Mapping[str, Any],
    *,
    held: Held,
    classes: Known[tuple[str, ...]] | Unknown,
    notes: list[str],
) -> ObservedNode | None:
    """The inventory entry of ``item``; None (with a note when it has GPUs) otherwise."""
    name = str((item.get("metadata") or {}).get("name", ""))
    raw = (item.get("metadata") or {}).get("labels") or {}
    labels = {str(k): str(v) for k, v in raw.items()} if isinstance(raw, Mapping) else {}
    allocatable = gpu_resources((item.get("status") or {}).get("allocatable"))
    product = labels.get(GFD + "gpu.product")
    memory = quantity(labels.get(GFD + "gpu.memory", "0"))
    cards = quantity(labels.get(GFD + "gpu.count", "0"))
    if product is None and not allocatable:
        return None  # not a GPU node
    if product is None or memory <= 0 or cards <= 0 or not _PRODUCT.match(product):
        notes.append(
            f"node {name}: advertises {_describe(allocatable)} but lacks GPU Feature Discovery "
            "labels (nvidia.com/gpu.product, gpu.count, gpu.memory); not recorded"
        )
        return None
    sharing = _sharing(labels, allocatable, classes)
    if sharing is None:
        why = (
            "DeviceClasses are unknown, so whether a DRA driver owns them cannot be told"
            if isinstance(classes, Unknown)
            else "no GPU DeviceClass is served either (is the device plugin running?)"
        )
        notes.append(f"node {name}: has GPUs but advertises no GPU resource; {why}; not recorded")
        return None
    return ObservedNode(
        name=name,
        product=product,
        cards=cards,
        memory_gib=round(memory / 1024, 1),
        sharing=sharing,
        labels=tuple(
            sorted(
                (k, labels[k]) for k in RECORDED_LABELS if _LABEL_VALUE.match(labels.get(k, "!"))
            )
        ),
        allocatable=tuple(sorted(allocatable.items())),
        mig_devices=tuple(
            sorted(
                (k[len(MIG_PREFIX) :], v)
                for k, v in allocatable.items()
                if k.startswith(MIG_PREFIX)
            )
        ),
        in_use=held
        if isinstance(held, Unknown)
        else Known(tuple(sorted(held.value.get(name, {}).items()))),
    )


def _describe(allocatable: dict[str, int]) -> str:
    if not allocatable:
        return "GPUs"
    return ", ".join(f"{units} {resource}" for resource, units in sorted(allocatable.items()))
