"""GPU grants for ``vf run-local``: which of this machine's devices each GPU worker gets.

Decided for every replica before any worker starts. ``shared`` (the default) walks the
visible devices in order and wraps around when the flow asks for more than there are, so
replicas may share devices; every grant says what it really got and whether it is
exclusive, and a warning says the cluster will not schedule the flow that way. ``strict``
refuses, naming every reason, a flow whose whole-device requests do not fit distinct idle
devices, or whose memory sharers (``gpu_memory_gib``) do not fit within the free memory of
a device less a headroom; it refuses a host it could not observe.

Each GPU worker gets ``CUDA_VISIBLE_DEVICES`` (UUIDs), ``VF_GPU_COUNT`` (the delivered
count) and ``VF_GPU_GRANT_JSON`` (the grant record, docs/local-gpus.md).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass

from vf.commands.run_local.gpus import MIB, HostGpus, LocalDevice, apply_mask
from vf.errors import EnvironmentProblem, Problem
from vf.ir.capabilities import Unknown
from vf.ir.graph import Graph
from vf.ir.plan import Plan

POLICIES = ("shared", "strict")
HEADROOM_ENV = "VF_GPU_HEADROOM_BYTES"
DEFAULT_HEADROOM = 1 << 30
Replica = tuple[str, int]


@dataclass(frozen=True, kw_only=True)
class GpuRequest:
    """One replica's GPU demand: ``count`` whole devices, or one device's ``memory_gib``."""

    node: str
    replica: int
    count: int
    memory_gib: float | None = None


@dataclass(frozen=True, kw_only=True)
class LocalGrants:
    """The environment to add to each GPU replica, and what to tell the user."""

    env: Mapping[Replica, Mapping[str, str]]
    warnings: tuple[str, ...]


def gpu_requests(plan: Plan, graph: Graph) -> list[GpuRequest]:
    """One request per replica of every GPU workload, in launch order."""
    return [
        GpuRequest(
            node=workload.node,
            replica=replica,
            count=workload.gpu_count,
            memory_gib=graph.node(workload.node).gpu_memory_gib,
        )
        for workload in plan.workloads
        if workload.device_type == "gpu" and workload.gpu_count > 0
        for replica in range(workload.replicas)
    ]


def headroom_bytes(environ: Mapping[str, str]) -> int:
    raw = environ.get(HEADROOM_ENV, "")
    return int(raw) if raw.strip().isdigit() else DEFAULT_HEADROOM


def _record(
    request: GpuRequest, *, policy: str, devices: list[LocalDevice] | None, exclusive: bool
) -> dict[str, str]:
    grant = {
        "policy": policy,
        "host": "unobserved" if devices is None else "observed",
        "requested": request.count,
        "delivered": None if devices is None else len(devices),
        "devices": [] if devices is None else [d.key for d in devices],
        "exclusive": exclusive,
        "memory_gib": request.memory_gib,
    }
    env = {"VF_GPU_GRANT_JSON": json.dumps(grant, sort_keys=True, separators=(",", ":"))}
    if devices is not None:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(d.key for d in devices)
        env["VF_GPU_COUNT"] = str(len(devices))
    return env


def grant_local_gpus(
    requests: list[GpuRequest],
    *,
    host: HostGpus,
    policy: str = "shared",
    environ: Mapping[str, str] | None = None,
) -> LocalGrants:
    """Every GPU replica's grant under ``policy``; raise when strict cannot honour the flow."""
    environ = os.environ if environ is None else environ
    if not requests:
        return LocalGrants(env={}, warnings=())
    if isinstance(host, Unknown):
        return _unobserved(requests, reason=host.reason, policy=policy)
    devices, warnings = apply_mask(host.value, environ.get("CUDA_VISIBLE_DEVICES"))
    if policy == "strict":
        env = _strict(requests, devices, headroom=headroom_bytes(environ))
        return LocalGrants(env=env, warnings=tuple(warnings))
    env, shared_warnings = _shared(requests, devices)
    return LocalGrants(env=env, warnings=tuple(warnings + shared_warnings))


def _unobserved(requests: list[GpuRequest], *, reason: str, policy: str) -> LocalGrants:
    if policy == "strict":
        raise EnvironmentProblem(
            "VF_LOCAL_GPU_UNOBSERVED",
            f"this machine's GPUs could not be observed ({reason}); strict policy grants "
            "nothing it cannot see",
            "fix nvidia-smi (is the NVIDIA driver loaded?), or run with --gpu-policy shared",
        )
    env = {
        (r.node, r.replica): _record(r, policy=policy, devices=None, exclusive=False)
        for r in requests
    }
    warning = (
        f"could not observe this machine's GPUs ({reason}): GPU workers start without a "
        "device mask and their grants say host=unobserved"
    )
    return LocalGrants(env=env, warnings=(warning,))


def _shared(
    requests: list[GpuRequest], devices: tuple[LocalDevice, ...]
) -> tuple[dict[Replica, dict[str, str]], list[str]]:
    warnings: list[str] = []
    if not devices:
        warnings.append("no GPU is visible on this machine: GPU workers run without devices")
    picks: dict[Replica, list[LocalDevice]] = {}
    cursor = 0
    for request in requests:
        wanted = request.count if request.memory_gib is None else 1
        chosen: list[LocalDevice] = []
        for step in range(wanted if devices else 0):
            device = devices[(cursor + step) % len(devices)]
            if device not in chosen:
                chosen.append(device)
        cursor += wanted
        picks[(request.node, request.replica)] = chosen
        if devices and len(chosen) < wanted:
            warnings.append(
                f"node '{request.node}' replica {request.replica} asked for {wanted} GPU(s) "
                f"and gets {len(chosen)}: this machine shows only {len(devices)}"
            )
    holders: dict[str, int] = {}
    for chosen in picks.values():
        for device in chosen:
            holders[device.key] = holders.get(device.key, 0) + 1
    env: dict[Replica, dict[str, str]] = {}
    for request in requests:
        chosen = picks[(request.node, request.replica)]
        alone = bool(chosen) and all(holders[d.key] == 1 for d in chosen)
        env[(request.node, request.replica)] = _record(
            request, policy="shared", devices=chosen, exclusive=alone
        )
    demand = sum(r.count if r.memory_gib is None else 1 for r in requests)
    if devices and demand > len(devices):
        warnings.append(
            f"the flow asks for {demand} GPU grant(s) and this machine shows {len(devices)}: "
            "replicas share devices here (shared policy), but a cluster schedules each "
            "replica on devices of its own, so it will not run this way there"
        )
    return env, warnings


def _strict(
    requests: list[GpuRequest], devices: tuple[LocalDevice, ...], *, headroom: int
) -> dict[Replica, dict[str, str]]:
    problems: list[str] = []
    idle = [d for d in devices if d.busy is False]
    for device in devices:
        if device.busy is None:
            problems.append(f"cannot tell whether other processes use {device.key}")
    free = list(idle)
    picks: dict[Replica, list[LocalDevice]] = {}
    for request in (r for r in requests if r.memory_gib is None):
        if len(free) < request.count:
            problems.append(
                f"node '{request.node}' replica {request.replica} needs {request.count} "
                f"whole GPU(s) of its own; {len(free)} idle device(s) remain"
            )
            continue
        picks[(request.node, request.replica)] = free[: request.count]
        free = free[request.count :]
    _place_sharers(requests, free, headroom=headroom, picks=picks, problems=problems)
    if problems:
        raise EnvironmentProblem.collect(
            Problem(
                code="VF_LOCAL_GPU_STRICT",
                what=f"strict GPU policy: {problem}",
                remedy="free or add GPUs, lower replicas or gpu_count, or run with "
                "--gpu-policy shared (devices are then shared)",
            )
            for problem in problems
        )
    return {
        (r.node, r.replica): _record(
            r,
            policy="strict",
            devices=picks[(r.node, r.replica)],
            exclusive=r.memory_gib is None,
        )
        for r in requests
    }


def _place_sharers(
    requests: list[GpuRequest],
    free: list[LocalDevice],
    *,
    headroom: int,
    picks: dict[Replica, list[LocalDevice]],
    problems: list[str],
) -> None:
    """First fit: a sharer goes on the first device whose free memory holds every declared
    peak placed there plus the headroom."""
    placed: dict[str, int] = {}
    for request in (r for r in requests if r.memory_gib is not None):
        need = int(float(request.memory_gib or 0) * 1024 * MIB)
        for device in free:
            if device.used_mib is None:
                continue
            available = (device.memory_mib - device.used_mib) * MIB - headroom
            if placed.get(device.key, 0) + need <= available:
                placed[device.key] = placed.get(device.key, 0) + need
                picks[(request.node, request.replica)] = [device]
                break
        else:
            rooms = "; ".join(
                _room(d, placed=placed.get(d.key, 0), headroom=headroom) for d in free
            )
            problems.append(
                f"node '{request.node}' replica {request.replica} declares "
                f"{request.memory_gib:g} GiB and no idle device has that much free beyond "
                f"the {headroom / MIB:g} MiB headroom ({HEADROOM_ENV}): {rooms or 'none idle'}"
            )


def _room(device: LocalDevice, *, placed: int, headroom: int) -> str:
    """A device's memory arithmetic for a refusal: its size, what is in use and placed."""
    name = f"GPU {device.ordinal}" + (f" MIG {device.profile}" if device.profile else "")
    if device.used_mib is None:
        return f"{name} ({device.name}): its memory in use cannot be read"
    gib = 1024 * MIB
    left = device.memory_mib * MIB - device.used_mib * MIB - headroom - placed
    return (
        f"{name} ({device.name}): {device.memory_mib * MIB / gib:.1f} GiB, "
        f"{device.used_mib * MIB / gib:.1f} in use, {placed / gib:.1f} placed, "
        f"{max(left, 0) / gib:.1f} left"
    )
