"""DRA feature gates per Kubernetes minor, and which driver features they unlock."""

from __future__ import annotations

DRA_GA_MINOR = 34
# gate: {minor: (stage, enabled by default)}; a minor absent from a row means the gate
# does not exist there. Later minors reuse the last known row.
GATES: dict[str, dict[int, tuple[str, bool]]] = {
    "DRAPartitionableDevices": {
        33: ("alpha", False),
        34: ("alpha", False),
        35: ("alpha", False),
        36: ("beta", True),
        37: ("beta", True),
    },
    "DRAConsumableCapacity": {
        34: ("alpha", False),
        35: ("alpha", False),
        36: ("beta", True),
        37: ("beta", True),
    },
    "DRAPrioritizedList": {
        33: ("alpha", False),
        34: ("beta", True),
        35: ("beta", True),
        36: ("stable", True),
        37: ("stable", True),
    },
    "DRAAdminAccess": {
        32: ("alpha", False),
        33: ("alpha", False),
        34: ("beta", True),
        35: ("beta", True),
        36: ("stable", True),
        37: ("stable", True),
    },
    "DRADeviceTaints": {
        33: ("alpha", False),
        34: ("alpha", False),
        35: ("alpha", False),
        36: ("beta", True),
        37: ("stable", True),
    },
}
FEATURE_GATES = {
    "dynamic-mig": "DRAPartitionableDevices",
    "consumable-capacity": "DRAConsumableCapacity",
}
INCOMPATIBLE = (("mps", "dynamic-mig"), ("mps", "consumable-capacity"))
LAST_KNOWN_MINOR = 37


def minor_of(version: str) -> int:
    """``"1.34"`` → 34."""
    return int(version.split(".")[1])


def gate_state(gate: str, minor: int, overrides: dict[str, bool]) -> tuple[bool, str]:
    """Whether ``gate`` is on at ``minor`` (operator overrides win), and why."""
    row = GATES[gate]
    known = min(minor, LAST_KNOWN_MINOR)
    if known not in row:
        return False, f"{gate} does not exist in Kubernetes 1.{minor}"
    stage, default = row[known]
    if gate in overrides:
        state = "on" if overrides[gate] else "off"
        return overrides[gate], f"{gate} is {stage} in 1.{minor}, turned {state} by the operator"
    return default, f"{gate} is {stage} in 1.{minor}, {'on' if default else 'off'} by default"


def judge_features(
    features: tuple[str, ...], version: str, overrides: dict[str, bool]
) -> list[str]:
    """Every reason the requested driver features cannot work on this cluster (empty: fine)."""
    minor = minor_of(version)
    problems = []
    if minor < DRA_GA_MINOR:
        problems.append(
            f"Kubernetes {version} has no resource.k8s.io/v1 (DRA is GA from 1.{DRA_GA_MINOR})"
        )
    for first, second in INCOMPATIBLE:
        if first in features and second in features:
            problems.append(f"driver features {first} and {second} cannot be used together")
    for feature in features:
        gate = FEATURE_GATES.get(feature)
        if gate is None:
            continue
        enabled, why = gate_state(gate, minor, overrides)
        if not enabled:
            problems.append(f"driver feature {feature} needs {gate}, but {why}")
    return problems
