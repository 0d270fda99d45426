"""The flow as a diagram: one box per node, one arrow per channel reader, every environment.

Built from the plans' JSON form (``plan/<env>.json``), the record ``vf diff`` also reads
from a committed tree, so a fresh compile and a committed tree are drawn by one function.
Each environment is first reduced to an ``EnvView``; ``diagram_of`` merges the views and
writes a fact once when every environment agrees, per environment where they differ.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Obj = Mapping[str, Any]
WARNED = ("warning", "rejected")


@dataclass(frozen=True, kw_only=True)
class NodeView:
    """What one environment's plan says about one node."""

    name: str
    node_kind: str
    workload: str
    replicas: int
    parents: tuple[str, ...]
    partition_by: str | None
    join: str | None
    gpu: str | None
    native: str | None


@dataclass(frozen=True, kw_only=True)
class EnvView:
    """One environment's plan, reduced to what a diagram and the tree's README show."""

    environment: str
    namespace: str
    kubernetes_version: str
    flow_id: str
    flow_type: str
    broker_profile: str
    store_profile: str
    gpu_mode: str | None
    nodes: tuple[NodeView, ...]
    profiles: tuple[tuple[str, str], ...]  # channel (its node) → messaging profile
    verdicts: tuple[tuple[str, str], ...]  # channel → warning | rejected, where not admitted
    # GPUs held planned / at the autoscaling maximum / during a rollout, and GPU-hours a day
    # planned / at the maximum ("" when unrecorded)
    gpu_cost: str = ""
    # who may use the broker and store (ADR 0212): "auth: none", "auth: <Secret>", or ""
    broker_auth: str = ""
    store_auth: str = ""
    # TLS on the flow's connections (ADR 0222): "tls: <Secret>", or "" (plaintext)
    broker_tls: str = ""
    store_tls: str = ""
    # each TLS Secret of a server vf runs, with the DNS names its certificate must carry
    tls_certs: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True, kw_only=True)
class Box:
    node: str
    kind: str
    native: bool
    facts: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class Arrow:
    source: str
    target: str
    label: str
    verdict: str | None  # "warning" or "rejected" where admission did not simply admit
    note: str


@dataclass(frozen=True, kw_only=True)
class Diagram:
    flow_id: str
    flow_type: str
    boxes: tuple[Box, ...]
    arrows: tuple[Arrow, ...]


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(value: Any, default: str = "") -> str:
    return value if isinstance(value, str) else default


def _items(value: Any) -> list[Obj]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def _grant(grant: Obj | None, mode: str) -> str | None:
    if grant is None:
        return None
    count, kind = grant.get("count"), _text(grant.get("kind"))
    if kind == "mig-slice":
        what = f"{count}x MIG {_text(grant.get('profile'), '?')}"
    elif kind == "dra":
        what = f"DRA claim of {count}"
    else:
        what = f"{count} whole GPU"
    return f"{what} ({mode})"


def _join(env: Mapping[str, Any], parents: tuple[str, ...]) -> str | None:
    if len(parents) < 2:
        return None
    try:
        mode = json.loads(_text(env.get("VF_JOIN_POLICY_JSON"), "{}")).get("mode")
    except (ValueError, AttributeError):
        mode = None
    return f"join of {len(parents)}" + (f" ({mode})" if isinstance(mode, str) else "")


def _node(workload: Obj, *, grants: Mapping[str, Obj], mode: str) -> NodeView:
    env = _mapping(workload.get("env"))
    parents = tuple(p for p in _text(env.get("VF_PARENT_NAMES")).split(",") if p)
    name = _text(workload.get("node"))
    component = workload.get("component")
    partition = env.get("VF_PARTITION_BY")
    replicas = workload.get("replicas")
    return NodeView(
        name=name,
        node_kind=_text(workload.get("node_kind"), "node"),
        workload=_text(workload.get("kind"), "?"),
        replicas=replicas if isinstance(replicas, int) else 0,
        parents=parents,
        partition_by=partition if isinstance(partition, str) else None,
        join=_join(env, parents),
        gpu=_grant(grants.get(name), mode),
        native=_short_ref(component.get("ref")) if isinstance(component, Mapping) else None,
    )


def _short_ref(ref: Any) -> str:
    """A component reference with its digest cut to 12 hex digits, enough to tell it apart."""
    name, sep, digest = _text(ref).partition("@sha256:")
    return f"{name}@sha256:{digest[:12]}" if sep else name


def _gpu_cost(gpu: Obj) -> str:
    """``1 / 2 / 2 GPUs (planned / autoscaled / rollout)`` from the plan's GPU moments."""
    moments = _items(gpu.get("moments"))
    if not moments:
        return ""
    counts = " / ".join(str(m.get("gpus", "?")) for m in moments)
    names = " / ".join(_text(m.get("name")) for m in moments)
    text = f"{counts} GPUs ({names})"
    hours = _items(gpu.get("hours_per_day"))
    if hours:
        per_day = " / ".join(str(h.get("gpu_hours", "?")) for h in hours)
        text += f"; {per_day} GPU-hours a day ({' / '.join(_text(h.get('moment')) for h in hours)})"
    return text


def _tls_certs(infra: Mapping[str, Any], namespace: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The TLS Secrets of the broker and store vf runs, each with the names its clients
    (and the durable broker's routes, which reach each pod by name) check it against."""
    found = []
    for service, profile in (("broker", "broker_profile"), ("store", "store_profile")):
        secret = _mapping(infra.get(f"{service}_tls")).get("secret")
        name = _text(infra.get(f"{service}_name"))
        if not secret or infra.get(profile) in ("external", "none"):
            continue
        names = [name, f"{name}.{namespace}.svc"]
        if service == "broker" and infra.get(profile) == "durable":
            names += [f"*.{name}-headless", f"*.{name}-headless.{namespace}.svc"]
        found.append((_text(secret), tuple(names)))
    return tuple(found)


def _tls(raw: Any) -> str:
    secret = _mapping(raw).get("secret")
    return f"tls: {_text(secret)}" if secret else ""


def _auth(raw: Any) -> str:
    """A plan's credential choice in a few words: the Secret, or that vf.yaml said none."""
    auth = _mapping(raw)
    if auth.get("secret"):
        return f"auth: {_text(auth.get('secret'))}"
    return "auth: none" if auth.get("declared") else ""


def env_view(plan: Obj) -> EnvView:
    """The facts of one plan document that the diagram and the README need."""
    gpu = _mapping(plan.get("gpu"))
    mode = _text(gpu.get("mode"))
    grants = {_text(g.get("node")): g for g in _items(gpu.get("grants"))}
    infra = _mapping(plan.get("infra"))
    findings = _items(_mapping(plan.get("admission")).get("findings"))
    return EnvView(
        environment=_text(plan.get("environment")),
        namespace=_text(plan.get("namespace")),
        kubernetes_version=_text(plan.get("kubernetes_version")),
        flow_id=_text(plan.get("flow_id")),
        flow_type=_text(plan.get("flow_type")),
        broker_profile=_text(infra.get("broker_profile"), "?"),
        store_profile=_text(infra.get("store_profile"), "?"),
        gpu_mode=mode or None,
        gpu_cost=_gpu_cost(gpu),
        broker_auth=_auth(infra.get("broker_auth")),
        store_auth=_auth(infra.get("store_auth")),
        broker_tls=_tls(infra.get("broker_tls")),
        store_tls=_tls(infra.get("store_tls")),
        tls_certs=_tls_certs(infra, _text(plan.get("namespace"))),
        nodes=tuple(_node(w, grants=grants, mode=mode) for w in _items(plan.get("workloads"))),
        profiles=tuple(
            (_text(c.get("node")), _text(c.get("profile"), "?"))
            for c in _items(plan.get("channels"))
        ),
        verdicts=tuple(
            (_text(f.get("subject")).removeprefix("channel "), _text(f.get("status")))
            for f in findings
            if _text(f.get("subject")).startswith("channel ") and f.get("status") in WARNED
        ),
    )


def per_env(values: Sequence[tuple[str, str]]) -> str:
    """``value`` when every environment agrees, else ``env: value, env: value``."""
    if len({v for _, v in values}) <= 1:
        return values[0][1] if values else ""
    return ", ".join(f"{env}: {value}" for env, value in values)


def _fact(
    views: Sequence[EnvView], nodes: Sequence[NodeView | None], pick: Callable[[NodeView], str]
) -> str:
    values = [(v.environment, pick(n) if n else "-") for v, n in zip(views, nodes, strict=True)]
    return per_env(values)


def _box(name: str, views: Sequence[EnvView], nodes: Sequence[NodeView | None], fanout: int) -> Box:
    first = next(n for n in nodes if n is not None)
    facts = [
        f"{first.node_kind} · " + _fact(views, nodes, lambda n: n.workload),
        "replicas " + _fact(views, nodes, lambda n: str(n.replicas)),
    ]
    for prefix, pick in _OPTIONAL:
        values = [pick(n) if n is not None else None for n in nodes]
        if any(v is not None for v in values):
            pairs = [(v.environment, x or "-") for v, x in zip(views, values, strict=True)]
            facts.append(prefix + per_env(pairs))
    if fanout > 1:
        facts.append(f"fan-out to {fanout}")
    return Box(node=name, kind=first.node_kind, native=first.native is not None, facts=tuple(facts))


# Facts a box shows only where some environment has them: (prefix, the fact).
_OPTIONAL: tuple[tuple[str, Callable[[NodeView], str | None]], ...] = (
    ("partition_by ", lambda n: n.partition_by),
    ("", lambda n: n.join),
    ("gpu ", lambda n: n.gpu),
    ("native component ", lambda n: n.native),
)


@dataclass(frozen=True, kw_only=True)
class _Channels:
    """Each environment's channel profiles and admission verdicts, looked up by node."""

    environments: tuple[str, ...]
    profiles: tuple[dict[str, str], ...]
    verdicts: tuple[dict[str, str], ...]


def _arrow(source: str, target: str, channels: _Channels) -> Arrow:
    envs = channels.environments
    profiles = [(env, p.get(source, "?")) for env, p in zip(envs, channels.profiles, strict=True)]
    flagged = [
        (env, v[source]) for env, v in zip(envs, channels.verdicts, strict=True) if source in v
    ]
    verdict = None
    note = ""
    if flagged:
        verdict = "rejected" if any(s == "rejected" for _, s in flagged) else "warning"
        if len(flagged) == len(envs) and len({s for _, s in flagged}) == 1:
            note = f"admission {verdict}"
        else:
            note = "admission " + ", ".join(f"{s} in {env}" for env, s in flagged)
    return Arrow(source=source, target=target, label=per_env(profiles), verdict=verdict, note=note)


def diagram_of(views: Sequence[EnvView]) -> Diagram:
    """One diagram for every environment of a flow (nodes in the first plan's order)."""
    indexed = [{n.name: n for n in view.nodes} for view in views]
    order: dict[str, None] = {}
    for index in indexed:
        order.update(dict.fromkeys(index))
    edges: dict[tuple[str, str], None] = {}
    fanout = dict.fromkeys(order, 0)
    for name in order:
        for index in indexed:
            node = index.get(name)
            for parent in node.parents if node is not None else ():
                if parent in order and (parent, name) not in edges:
                    edges[(parent, name)] = None
                    fanout[parent] += 1
    channels = _Channels(
        environments=tuple(v.environment for v in views),
        profiles=tuple(dict(v.profiles) for v in views),
        verdicts=tuple(dict(v.verdicts) for v in views),
    )
    return Diagram(
        flow_id=views[0].flow_id if views else "",
        flow_type=views[0].flow_type if views else "",
        boxes=tuple(
            _box(name, views, [i.get(name) for i in indexed], fanout[name]) for name in order
        ),
        arrows=tuple(_arrow(s, t, channels) for s, t in edges),
    )
