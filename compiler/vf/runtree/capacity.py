"""Whether a local run (``vf run-local``, ``vf run-tree``) can fit this machine, decided
before anything starts (ADR 0190).

A run is refused (``VF_LOCAL_CAPACITY``, exit 3) when it would start more than
``PROCESSES_PER_CORE`` processes a CPU core, or more processes than the available memory
holds at an idle worker's size; CPU requests beyond the cores, and memory requests or
limits beyond the available memory, are warnings (nothing here reserves them).
``--oversubscribe`` turns the refusal into a warning.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vf.errors import EnvironmentProblem

# On a 2-core machine, a BATCH flow's first item took 5.6 s with 64 worker processes,
# 18.6 s with 128 and 55.6 s with 256 (ADR 0190); 1,500 took 244 s to its first status.
PROCESSES_PER_CORE = 64
IDLE_WORKER = 26.4 * 2**20  # an idle worker's resident set (docs/performance.md)
GIB = 2.0**30

_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?)(m|k|[KMGTPE]i?)?\Z")
_FACTORS = {"": 1.0, "m": 1e-3, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_FACTORS |= {"P": 1e15, "E": 1e18}
_FACTORS |= {f"{k}i": 1024.0 ** (i + 1) for i, k in enumerate("KMGTPE")}


@dataclass(frozen=True, kw_only=True)
class Host:
    """What this machine offers a run: the CPU cores it may use and the memory available."""

    cores: int
    memory: float  # bytes

    @classmethod
    def this_machine(cls) -> Host:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 0
        return cls(cores=cores or os.cpu_count() or 1, memory=_available_memory())


@dataclass(frozen=True, kw_only=True)
class Demand:
    """What a run starts: processes (or containers) and what their resources ask for."""

    processes: int
    cpu: float = 0.0  # cores the requests ask for
    memory: float = 0.0  # bytes the requests ask for
    memory_limits: float = 0.0  # bytes, the sum of the limits that are set
    unit: str = "worker processes"


@dataclass(frozen=True, kw_only=True)
class Fit:
    """Why the run cannot fit (empty: it can), and what it may find short of."""

    refusals: tuple[str, ...]
    warnings: tuple[str, ...]


def quantity(text: Any) -> float:
    """A Kubernetes quantity (``500m``, ``64Mi``, ``2``) as a number; 0 when it is none."""
    match = _QUANTITY.match(str(text).strip()) if text is not None else None
    return float(match.group(1)) * _FACTORS[match.group(2) or ""] if match else 0.0


def demand(
    replicas: Iterable[tuple[int, Mapping[str, Any]]], *, unit: str = "worker processes"
) -> Demand:
    """The demand of ``(count, resources)`` pairs; ``resources`` as a pod spec writes them
    (``{"requests": {...}, "limits": {...}}``)."""
    processes, cpu, memory, limits = 0, 0.0, 0.0, 0.0
    for count, resources in replicas:
        requests = resources.get("requests") or {}
        limit = resources.get("limits") or {}
        processes += count
        cpu += count * quantity(requests.get("cpu"))
        memory += count * quantity(requests.get("memory") or limit.get("memory"))
        limits += count * quantity(limit.get("memory"))
    return Demand(processes=processes, cpu=cpu, memory=memory, memory_limits=limits, unit=unit)


def pod_demand(objects: Iterable[Mapping[str, Any]]) -> Demand:
    """The containers that the workloads among ``objects`` run at once, with their resources:
    a Deployment's or StatefulSet's replicas, a Job's parallelism (init containers end first)."""
    pairs = []
    for obj in objects:
        spec = obj.get("spec") or {}
        template = spec.get("template")
        if obj.get("kind") not in _RUNNING or not isinstance(template, dict):
            continue
        count = _running(str(obj["kind"]), spec)
        for container in (template.get("spec") or {}).get("containers") or ():
            pairs.append((count, container.get("resources") or {}))
    return demand(pairs, unit="containers")


_RUNNING = ("Deployment", "StatefulSet", "ReplicaSet", "DaemonSet", "Job")


def _running(kind: str, spec: Mapping[str, Any]) -> int:
    if kind == "DaemonSet":
        return 1  # one node here
    if kind != "Job":
        return _count(spec.get("replicas", 1))
    parallel = _count(spec.get("parallelism", 1))
    completions = spec.get("completions")
    return parallel if completions is None else min(parallel, _count(completions))


def _count(value: Any) -> int:
    """A replica count as written; what is no count (the sync refuses it) counts as one."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 1


def fit(need: Demand, host: Host) -> Fit:
    """Judge ``need`` against ``host`` (ADR 0190)."""
    refusals, warnings = [], []
    most = PROCESSES_PER_CORE * host.cores
    if need.processes > most:
        refusals.append(
            f"{need.processes} {need.unit} on {host.cores} CPU core(s), more than "
            f"{PROCESSES_PER_CORE} a core ({most} here): starting them alone would take "
            "tens of seconds to minutes"
        )
    if need.processes * IDLE_WORKER > host.memory:
        refusals.append(
            f"{need.processes} {need.unit} need at least {need.processes * IDLE_WORKER / GIB:.1f}"
            f" GiB (an idle worker holds {IDLE_WORKER / 2**20:.1f} MiB); this machine has "
            f"{host.memory / GIB:.1f} GiB available"
        )
    if need.cpu > host.cores:
        warnings.append(
            f"the CPU requests add up to {need.cpu:g} core(s); this machine has {host.cores}"
        )
    for what, total in (("requests", need.memory), ("limits", need.memory_limits)):
        if total > host.memory:
            warnings.append(
                f"the memory {what} add up to {total / GIB:.1f} GiB; this machine has "
                f"{host.memory / GIB:.1f} GiB available"
            )
    return Fit(refusals=tuple(refusals), warnings=tuple(warnings))


def check_fit(
    need: Demand,
    *,
    way_out: str,
    oversubscribe: bool,
    warn: Callable[[str], object],
    host: Host | None = None,
) -> None:
    """Refuse a run that cannot fit this machine (``VF_LOCAL_CAPACITY``), unless
    ``oversubscribe``; say what it may find short of. ``way_out``: the run's own fix."""
    judged = fit(need, host or Host.this_machine())
    if judged.refusals and not oversubscribe:
        raise EnvironmentProblem(
            "VF_LOCAL_CAPACITY",
            "this run cannot fit this machine: " + "; ".join(judged.refusals),
            f"{way_out}; or pass --oversubscribe to start it anyway",
        )
    for line in (*judged.refusals, *judged.warnings):
        warn(f"[vf] warning: {line}\n")


def _available_memory() -> float:
    """MemAvailable of /proc/meminfo, else the physical memory."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return float(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
