"""What changed between two plans of one environment, in pipeline terms.

Reads the plans' JSON form (``plan/<env>.json``), so a tree committed by an earlier vf is
compared field by field where it has the field and silently otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from vf.plan.config_hash import PARENT_REPLICAS, restart_reason
from vf.textio.objects import Obj

INFO, WARNING, BREAKING = "info", "warning", "breaking"
# How much a channel profile keeps: live_latest may drop, the others retain and redeliver.
PROFILE_RANK = {"live_latest": 0, "reliable_work": 1, "durable_control": 1, "replay_archive": 2}
DELIVERY_RANK = {"best-effort": 0, "at-least-once": 1}
DLQ_RANK = {"off": 0, "sampled": 1, "full": 2}
BROKER_RANK = {"dev": 0, "durable": 1}
_DEFAULT_DELIVERY = {"batch": ("at-least-once", "full"), "realtime": ("best-effort", "sampled")}
_COVERED = frozenset(
    {
        "workloads", "channels", "warnings", "run_id", "run_id_source", "namespace",
        "flow_type", "gpu", "admission", "infra", "provision", "flow_labels", "run_labels",
        "broker_configmap", "network_policy", "version", "environment", "security",
        "generation",
    }
)  # fmt: skip


class _Check(Protocol):
    def __call__(self, old: Obj, *, new: Obj) -> list[Finding]: ...


@dataclass(frozen=True, kw_only=True)
class Finding:
    """One change, said the way a pipeline author thinks of it."""

    category: str
    subject: str
    message: str
    severity: str = INFO


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def ranked(
    where: tuple[str, str], *, what: str, old: Any, new: Any, rank: Mapping[Any, int]
) -> Finding:
    """A change of an ordered setting: weakened, strengthened or just changed.

    ``where`` is the finding's (category, subject)."""
    category, subject = where
    if old in rank and new in rank and rank[old] != rank[new]:
        weaker = rank[new] < rank[old]
        verb = "weakened" if weaker else "strengthened"
        severity = WARNING if weaker else INFO
    else:
        verb, severity = "changed", WARNING
    return Finding(
        category=category,
        subject=subject,
        message=f"{what} {verb}: {_text(old)} → {_text(new)}",
        severity=severity,
    )


def plan_findings(old: Obj, *, new: Obj) -> list[Finding]:
    """Every pipeline-level change from ``old`` to ``new`` (two plans of one environment)."""
    found: list[Finding] = []
    for check in _CHECKS:
        found.extend(check(old, new=new))
    return found


def _flow(old: Obj, *, new: Obj) -> list[Finding]:
    found = []
    if old.get("namespace") != new.get("namespace"):
        found.append(
            Finding(
                category="environment",
                subject="namespace",
                message=f"namespace {old.get('namespace')} → {new.get('namespace')}: every "
                "object moves (the old ones are pruned)",
                severity=BREAKING,
            )
        )
    if old.get("flow_type") != new.get("flow_type"):
        found.append(
            Finding(
                category="guarantee",
                subject="flow",
                message=f"flow type {old.get('flow_type')} → {new.get('flow_type')}: every "
                "channel and workload changes shape",
                severity=BREAKING,
            )
        )
    same_run = old.get("run_id") == new.get("run_id")
    if same_run and old.get("generation") != new.get("generation"):
        found.append(
            Finding(
                category="run",
                subject="generation",
                message=f"generation {old.get('generation')} → {new.get('generation')}: every "
                "Job of the flow is re-created and runs the whole batch again on fresh "
                "streams; the old generation's streams are reclaimed",
                severity=WARNING,
            )
        )
    if old.get("run_id") != new.get("run_id"):
        found.append(
            Finding(
                category="run",
                subject="streams",
                message=f"new run {old.get('run_id')} → {new.get('run_id')}: new streams and "
                "new Jobs; the old run's are superseded",
                severity=WARNING,
            )
        )
    return found


def _by(items: Any, *, key: str) -> dict[str, Obj]:
    return {str(i[key]): i for i in items or [] if isinstance(i, dict) and key in i}


def _nodes(old: Obj, *, new: Obj) -> list[Finding]:
    before, after = _by(old.get("workloads"), key="node"), _by(new.get("workloads"), key="node")
    found = []
    for node in sorted(set(after) - set(before)):
        w = after[node]
        found.append(
            Finding(
                category="node",
                subject=node,
                message=f"node added ({w.get('kind')} x{w.get('replicas')})",
            )
        )
    for node in sorted(set(before) - set(after)):
        found.append(
            Finding(category="node", subject=node, message="node removed", severity=WARNING)
        )
    for node in sorted(set(before) & set(after)):
        found.extend(
            _workload(node, old=before[node], new=after[node], flow=str(new.get("flow_type")))
        )
    return found


def _workload(node: str, *, old: Obj, new: Obj, flow: str) -> list[Finding]:
    found = []
    if old.get("kind") != new.get("kind"):
        found.append(
            Finding(
                category="node",
                subject=node,
                message=f"workload {old.get('kind')} → {new.get('kind')}: the old one is "
                "deleted and a new one created",
                severity=WARNING,
            )
        )
    for field, label in (("replicas", "replicas"), ("image", "image"), ("resources", "resources")):
        if field in old and field in new and old[field] != new[field]:
            message = f"{label} {_text(old[field])} → {_text(new[field])}"
            if field == "replicas":
                message += _scaling(new)
            found.append(Finding(category=field, subject=node, message=message))
    counted = [(w.get("env") or {}).get(PARENT_REPLICAS, "") for w in (old, new)]
    if counted[0] != counted[1] and old.get("kind") == new.get("kind"):
        message = (
            "restarts its pods: it counts its parents' replicas "
            f"({PARENT_REPLICAS} {counted[0] or '-'} → {counted[1] or '-'})"
        )
        found.append(Finding(category="replicas", subject=node, message=message))
    for field in ("device_type", "gpu_count"):
        if field in old and field in new and old[field] != new[field]:
            message = f"{field} {_text(old[field])} → {_text(new[field])}"
            found.append(Finding(category="gpu", subject=node, message=message, severity=WARNING))
    found.extend(_delivery(node, old=old.get("env") or {}, new=new.get("env") or {}, flow=flow))
    return found


def _scaling(workload: Obj) -> str:
    """What a replica change does to the running pods (vf.plan.config_hash)."""
    reason = restart_reason(workload.get("env") or {}, kind=str(workload.get("kind")))
    if not reason:
        return ": scales in place, its pods keep running"
    return f": restarts its pods ({reason})"


def _delivery(node: str, *, old: Obj, new: Obj, flow: str) -> list[Finding]:
    delivery, dlq = _DEFAULT_DELIVERY.get(flow, ("", ""))
    pairs = (
        ("VF_DELIVERY", "delivery", delivery, DELIVERY_RANK),
        ("VF_DLQ", "dead letters", dlq, DLQ_RANK),
    )
    found = []
    for var, what, default, rank in pairs:
        before, after = old.get(var, default), new.get(var, default)
        if before != after:
            found.append(ranked(("guarantee", node), what=what, old=before, new=after, rank=rank))
    found.extend(
        _counted(
            ("guarantee", node),
            what="retries",
            old=old.get("VF_MAX_RETRIES"),
            new=new.get("VF_MAX_RETRIES"),
        )
    )
    return found


def _counted(where: tuple[str, str], *, what: str, old: Any, new: Any) -> list[Finding]:
    """A numeric setting where fewer is weaker (retries, stream replicas)."""
    if old is None or new is None or str(old) == str(new):
        return []
    try:
        rank = {old: int(str(old)), new: int(str(new))}
    except ValueError:
        rank = {}
    return [ranked(where, what=what, old=old, new=new, rank=rank)]


def _channels(old: Obj, *, new: Obj) -> list[Finding]:
    before, after = _by(old.get("channels"), key="node"), _by(new.get("channels"), key="node")
    found = []
    for node in sorted(set(before) & set(after)):
        a, b = before[node].get("profile"), after[node].get("profile")
        if a != b:
            found.append(
                ranked(
                    ("guarantee", f"channel {node}"),
                    what="profile",
                    old=a,
                    new=b,
                    rank=PROFILE_RANK,
                )
            )
    statuses = [_by((p.get("admission") or {}).get("findings"), key="subject") for p in (old, new)]
    for subject in sorted(set(statuses[0]) & set(statuses[1])):
        a, b = statuses[0][subject].get("status"), statuses[1][subject].get("status")
        if a != b:
            message = f"admission {a} → {b}: {statuses[1][subject].get('reason', '')}"
            found.append(
                Finding(category="guarantee", subject=subject, message=message, severity=WARNING)
            )
    return found


def _infra(old: Obj, *, new: Obj) -> list[Finding]:
    a, b = old.get("infra") or {}, new.get("infra") or {}
    found = []
    if a.get("broker_profile") != b.get("broker_profile") and a and b:
        found.append(
            ranked(
                ("guarantee", "broker"),
                what="broker profile",
                old=a.get("broker_profile"),
                new=b.get("broker_profile"),
                rank=BROKER_RANK,
            )
        )
    found.extend(
        _counted(
            ("guarantee", "broker"),
            what="stream replicas",
            old=a.get("stream_replicas"),
            new=b.get("stream_replicas"),
        )
    )
    return found


def _security(old: Obj, *, new: Obj) -> list[Finding]:
    """Pod Security level, namespace labels and network reach: opening is a warning."""
    a, b = old.get("security") or {}, new.get("security") or {}
    if not (a and b):
        return []
    where = ("security", "pod security")
    found = []
    if a.get("pod_security_level") != b.get("pod_security_level"):
        before, after = a.get("pod_security_level"), b.get("pod_security_level")
        rank = {"privileged": 0, "restricted": 1}
        found.append(ranked(where, what="pod security level", old=before, new=after, rank=rank))
    if a.get("namespace_labels") != b.get("namespace_labels"):
        state = "now" if b.get("namespace_labels") else "no longer"
        found.append(
            Finding(
                category="security",
                subject="namespace",
                message=f"vf {state} labels the namespace for Pod Security",
                severity=WARNING,
            )
        )
    if a.get("worker_egress") != b.get("worker_egress"):
        found.append(
            Finding(
                category="security",
                subject="egress",
                message="the flow's egress rules changed",
                severity=WARNING,
            )
        )
    readers = [
        [
            (p.get("name"), peer)
            for p in s.get("infra_policies", [])
            for peer in p["monitoring_from"]
        ]
        for s in (a, b)
    ]
    if readers[0] != readers[1]:
        opened = any(peer not in readers[0] for peer in readers[1])
        found.append(
            Finding(
                category="security",
                subject="monitoring",
                message=f"monitoring readers {'widened' if opened else 'narrowed'}",
                severity=WARNING if opened else INFO,
            )
        )
    return found


def _gpu(old: Obj, *, new: Obj) -> list[Finding]:
    a, b = old.get("gpu") or {}, new.get("gpu") or {}
    found = []
    if a.get("mode") != b.get("mode"):
        message = f"GPU mode {a.get('mode')} → {b.get('mode')}"
        found.append(Finding(category="gpu", subject="gpu", message=message, severity=WARNING))
    grants = [_by(g.get("grants"), key="node") for g in (a, b)]
    for node in sorted(set(grants[0]) | set(grants[1])):
        before, after = grants[0].get(node), grants[1].get(node)
        if before != after:
            message = f"GPU grant {_grant(before)} → {_grant(after)}"
            found.append(Finding(category="gpu", subject=node, message=message, severity=WARNING))
    for field, what in (("mig_nodes", "MIG layout"), ("placements", "GPU placement")):
        if a.get(field) != b.get(field) and (a.get(field) or b.get(field)):
            message = f"{what} changed (see gpu.{field} in the plan)"
            found.append(Finding(category="gpu", subject="gpu", message=message, severity=WARNING))
    found.extend(_peaks(a, b))
    return found


_AT = {
    "planned": "at the plan",
    "autoscaled": "at the autoscaling maximum",
    "rollout": "during a rollout",
}
HOURS_PER_DAY = 24


def _peaks(old: Obj, new: Obj) -> list[Finding]:
    """Each moment whose GPUs rose or fell (a plan of an earlier vf records no moments:
    nothing is said):
    by how much, which nodes' pods changed, and for a moment that can last a day the
    GPU-hours a day."""
    before, after = _moments(old), _moments(new)
    found = []
    for name, at in _AT.items():
        a, b = before.get(name), after.get(name)
        if a is None or b is None:
            continue
        gpus_a, gpus_b = a.get("gpus"), b.get("gpus")
        if not isinstance(gpus_a, int) or not isinstance(gpus_b, int) or gpus_a == gpus_b:
            continue
        delta = gpus_b - gpus_a
        verb = "raised" if delta > 0 else "lowered"
        message = f"GPUs {at} {verb} by {abs(delta)}: {gpus_a} → {gpus_b}"
        pods = _pods(a.get("replicas"), b.get("replicas"))
        if pods:
            message += f" ({pods})"
        if name != "rollout":
            message += f", {delta * HOURS_PER_DAY:+d} GPU-hours a day"
        severity = WARNING if delta > 0 else INFO
        found.append(Finding(category="gpu", subject=name, message=message, severity=severity))
    return found


def _moments(gpu: Obj) -> dict[Any, Obj]:
    """The moments by name; a plan without GPU nodes (no ``gpu`` section) holds none at
    every moment."""
    if not gpu:
        return {name: {"gpus": 0, "replicas": {}} for name in _AT}
    return {m.get("name"): m for m in gpu.get("moments") or () if isinstance(m, dict)}


def _pods(old: Any, new: Any) -> str:
    """``ocr 2 → 4 pods``: the GPU nodes whose pods changed at one moment."""
    a = old if isinstance(old, dict) else {}
    b = new if isinstance(new, dict) else {}
    return ", ".join(
        f"{node} {a.get(node, 0)} → {b.get(node, 0)} pods"
        for node in sorted(set(a) | set(b))
        if a.get(node, 0) != b.get(node, 0)
    )


def _grant(grant: Obj | None) -> str:
    if grant is None:
        return "none"
    profile = f" {grant['profile']}" if grant.get("profile") else ""
    return f"{grant.get('kind')}{profile} x{grant.get('count')}"


def _rest(old: Obj, *, new: Obj) -> list[Finding]:
    """Any other plan field that changed (new plan fields are reported without a reading)."""
    return [
        Finding(category="plan", subject=key, message=f"{key} changed")
        for key in sorted((set(old) | set(new)) - _COVERED)
        if old.get(key) != new.get(key)
    ]


_CHECKS: tuple[_Check, ...] = (
    _flow,
    _nodes,
    _channels,
    _infra,
    _gpu,
    _security,
    _rest,
)
