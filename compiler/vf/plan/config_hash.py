"""A worker's configuration hash: the pod annotation that restarts pods when it changes.

It is 16 hex digits in two parts, so the chart can recompute it from its values (a
``--set nodes.<node>.replicas`` restarts exactly what a recompile would):

- 12 of a digest of the worker's environment without its replica variables
  (``VF_NB_TASKS``, ``VF_PARENT_REPLICAS``);
- 4 of a digest of ``<own replicas>|<parents' replicas>``, where the own count is ``*`` for
  a worker that scales in place (so a replica change scales it instead of restarting it).

A worker scales in place when nothing depends on its own replica count beyond what the
running pods already tolerate under an autoscaler: a REALTIME Deployment that is not a
producer, not partitioned, and reads one parent (docs/gitops.md, section 6).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from vf.textio.jsontext import compact_json
from vf_runtime.constants import REALTIME

NB_TASKS = "VF_NB_TASKS"
PARENT_REPLICAS = "VF_PARENT_REPLICAS"
IN_PLACE = "*"


def scales_in_place(env: Mapping[str, str], *, kind: str) -> bool:
    """Whether a change of this worker's replica count leaves its pods running."""
    return (
        kind == "Deployment"
        and env.get("VF_FLOW_TYPE") == REALTIME
        and env.get("VF_NODE_KIND") != "producer"
        and "VF_PARTITION_BY" not in env
        and len([p for p in env.get("VF_PARENT_NAMES", "").split(",") if p]) == 1
    )


def restart_reason(env: Mapping[str, str], *, kind: str) -> str:
    """Why a change of this worker's replica count restarts its pods; empty when it does not."""
    if scales_in_place(env, kind=kind):
        return ""
    if kind == "Job":
        return "a Job's completions are part of its pod template's tag"
    if env.get("VF_FLOW_TYPE") != REALTIME:
        return "a BATCH flow counts every replica's end-of-stream"
    if "VF_PARTITION_BY" in env:
        return "its replicas own the partitions, so the count decides each one's share"
    if env.get("VF_NODE_KIND") == "producer":
        return "its children count its replicas' end-of-stream markers"
    return "it joins several parents, whose markers it counts per replica"


def static_part(env: Mapping[str, str]) -> str:
    """12 hex digits of everything but the replica variables."""
    rest = {k: v for k, v in env.items() if k not in (NB_TASKS, PARENT_REPLICAS)}
    text = compact_json(rest)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def replica_part(own: str, parents: str) -> str:
    """4 hex digits of the replica counts (the chart computes the same with sha256sum)."""
    return hashlib.sha256(f"{own}|{parents}".encode()).hexdigest()[:4]


def config_hash(env: Mapping[str, str], *, kind: str) -> str:
    """The ``vf.dev/config-hash`` of a worker's pods."""
    own = IN_PLACE if scales_in_place(env, kind=kind) else env.get(NB_TASKS, "")
    return static_part(env) + replica_part(own, env.get(PARENT_REPLICAS, ""))
