"""Render the plan's security decisions: NetworkPolicies and the labelled Namespace."""

from __future__ import annotations

from vf.ir.plan import Plan
from vf.ir.records import Peer
from vf.ir.security import EgressRule, InfraPolicy
from vf.plan.security import DNS_PORT, RESTRICTED
from vf.textio.objects import Obj
from vf_runtime.labels import (
    COMPONENT,
    FLOW_LABEL,
    INFRA_LABEL,
    MANAGED_BY,
    MANAGER,
    NAME,
    NAMESPACE_NAME,
    POD_SECURITY,
)

API = "networking.k8s.io/v1"
PSA_PREFIX = POD_SECURITY


def network_policies(plan: Plan) -> list[Obj]:
    """The flow's policy (no ingress, listed egress) and one per service vf runs."""
    policies = plan.security.infra_policies
    return [_flow_policy(plan), *(_infra_policy(plan, policy=p) for p in policies)]


def namespace_object(plan: Plan) -> Obj | None:
    """The Namespace with Pod Security labels, when vf.yaml asks vf to label it.

    ``enforce`` is pinned to the target's Kubernetes version so a cluster upgrade cannot
    tighten admission under running pods; ``warn`` and ``audit`` follow the newest rules.
    """
    if not plan.security.namespace_labels:
        return None
    level = plan.security.pod_security_level
    labels = {
        f"{PSA_PREFIX}/enforce": level,
        f"{PSA_PREFIX}/enforce-version": f"v{plan.kubernetes_version}",
        f"{PSA_PREFIX}/warn": RESTRICTED,
        f"{PSA_PREFIX}/warn-version": "latest",
        f"{PSA_PREFIX}/audit": RESTRICTED,
        f"{PSA_PREFIX}/audit-version": "latest",
    }
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": plan.namespace, "labels": labels},
    }


def _flow_selector(plan: Plan) -> Obj:
    return {"matchLabels": {FLOW_LABEL: dict(plan.flow_labels)[FLOW_LABEL]}}


def _flow_policy(plan: Plan) -> Obj:
    spec: Obj = {
        "podSelector": _flow_selector(plan),
        "policyTypes": ["Ingress", "Egress"],
        "egress": [_egress_rule(rule) for rule in plan.security.worker_egress],
    }
    return {
        "apiVersion": API,
        "kind": "NetworkPolicy",
        "metadata": {
            "name": plan.network_policy,
            "namespace": plan.namespace,
            "labels": dict(plan.flow_labels),
        },
        "spec": spec,
    }


def _ports(ports: tuple[int, ...], *, protocols: tuple[str, ...] = ("TCP",)) -> list[Obj]:
    return [{"port": port, "protocol": proto} for port in ports for proto in protocols]


def _egress_rule(rule: EgressRule) -> Obj:
    out: Obj = {"ports": _ports(rule.ports, protocols=rule.protocols)}
    if rule.to:
        out["to"] = [peer_selector(peer) for peer in rule.to]
    return out


def peer_selector(peer: Peer) -> Obj:
    """A NetworkPolicy peer: an address block, or pods by namespace and labels."""
    if peer.cidr is not None:
        return {"ipBlock": {"cidr": peer.cidr}}
    out: Obj = {}
    if peer.namespace is not None:
        out["namespaceSelector"] = {"matchLabels": {NAMESPACE_NAME: peer.namespace}}
    if peer.pod_labels:
        out["podSelector"] = {"matchLabels": dict(peer.pod_labels)}
    return out


def _infra_policy(plan: Plan, *, policy: InfraPolicy) -> Obj:
    flow = dict(plan.flow_labels)[FLOW_LABEL]
    own = {"podSelector": {"matchLabels": {FLOW_LABEL: flow, INFRA_LABEL: policy.infra}}}
    ingress: list[Obj] = [
        {"from": [{"podSelector": _flow_selector(plan)}], "ports": _ports((policy.client_port,))}
    ]
    egress: list[Obj] = []
    if policy.cluster_port is not None:
        cluster = _ports((policy.cluster_port,))
        ingress.append({"from": [own], "ports": cluster})
        egress.append({"to": [own], "ports": cluster})
        egress.append({"ports": _ports((DNS_PORT,), protocols=("UDP", "TCP"))})
    if policy.monitoring_port is not None:
        ingress.append(
            {
                "from": [peer_selector(peer) for peer in policy.monitoring_from],
                "ports": _ports((policy.monitoring_port,)),
            }
        )
    spec: Obj = {
        "podSelector": own["podSelector"],
        "policyTypes": ["Ingress", "Egress"],
        "ingress": ingress,
    }
    if egress:
        spec["egress"] = egress
    labels = {
        COMPONENT: policy.component,
        MANAGED_BY: MANAGER,
        NAME: policy.infra,
        FLOW_LABEL: flow,
        INFRA_LABEL: policy.infra,
    }
    return {
        "apiVersion": API,
        "kind": "NetworkPolicy",
        "metadata": {"name": policy.name, "namespace": plan.namespace, "labels": labels},
        "spec": spec,
    }
