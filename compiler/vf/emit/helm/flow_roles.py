"""The values of the flow-wide role templates (ADR 236) from one environment's plan:
``resourceClaimTemplates.<node>`` (a DRA GPU worker's claim), ``networkPolicies``,
``brokerConfig`` with ``broker.natsUrl`` and ``payloadStore.url``, and ``migParted``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from vf.emit.helm.shapes import entry, in_release
from vf.ir.plan import Plan
from vf.ir.records import PodOptions
from vf.ir.security import InfraPolicy
from vf.render.gpu import mig_parted_configmap
from vf.render.pods import metrics_objects
from vf.render.security import network_policies, peer_selector
from vf.textio.objects import Obj
from vf_runtime.labels import FLOW_LABEL

CLAIMS, POLICIES = "resourceClaimTemplates", "networkPolicies"
BROKER_CONFIG, MIG = "brokerConfig", "migParted"


def flow_values(plan: Plan) -> Obj:
    mig = mig_parted_configmap(plan, plan.gpu) if plan.gpu is not None else None
    return {
        CLAIMS: _claims(plan),
        POLICIES: _policies(plan),
        MIG: {"name": mig["metadata"]["name"], "config": mig["data"]["config.yaml"]} if mig else {},
        **_broker(plan),
    }


def flow_objects(values: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """Keyed by their role's key (a node, a service, a section), not by name: a name that
    carries a digest (a generation's, a claim's) differs between environments."""
    for node in values.get(CLAIMS) or {}:
        yield "ResourceClaimTemplate", node
    policies = values.get(POLICIES) or {}
    for service in policies.get("infra") or {}:
        yield "NetworkPolicy", f"infra.{service}"
    if "flow" in policies:
        yield "NetworkPolicy", "flow"
    for section in (BROKER_CONFIG, MIG):
        if values.get(section):
            yield "ConfigMap", section


def _claims(plan: Plan) -> Obj:
    """Each DRA GPU worker's claim template, by node: the devices each of its pods claims."""
    gpu = plan.gpu
    claims = {claim.template: claim for claim in gpu.claims} if gpu is not None else {}
    held = {g.node: claims[g.claim_template] for g in gpu.grants if g.claim_template} if gpu else {}
    return {
        node: entry(
            name=claim.template,
            deviceClassName=claim.device_class,
            count=claim.count,
            selectors=list(claim.selectors) or None,
            memory=claim.capacity_memory,
            mps=claim.mps or None,
        )
        for node, claim in sorted(held.items())
    }


def _broker(plan: Plan) -> Obj:
    """The broker ConfigMap's values: the services' URLs under their knobs (``broker``,
    ``payloadStore``), the rest under ``brokerConfig``."""
    infra = plan.infra
    requests = [
        {"channel": r.channel, "profile": r.profile} for r in plan.admission.requests if r.explicit
    ]
    config = entry(
        name=plan.broker_configmap,
        generation=plan.generation,
        streamReplicas=infra.stream_replicas if infra.stream_replicas > 1 else None,
        streamMaxBytes=infra.stream_bytes.max_bytes if infra.stream_bytes is not None else None,
        profileRequests=requests or None,
    )
    urls = (("broker", "natsUrl", infra.nats_url), ("payloadStore", "url", infra.store_url))
    return {BROKER_CONFIG: config} | {
        knob: {key: in_release(plan.namespace, url)} for knob, key, url in urls if url is not None
    }


def _policies(plan: Plan) -> Obj:
    """The flow's policy (its egress rules, and the readers of its pods' ``/metrics``) and
    each service's: its ports and who may read its monitoring port."""
    policy = network_policies(plan)[0]  # the rules, as the overlay has them
    metrics_objects(  # the readers of /metrics, on the policy as vf.render.objects puts them
        [policy],
        options=plan.pods or PodOptions(),
        flow_policy=plan.network_policy,
        flow=dict(plan.flow_labels)[FLOW_LABEL],
        namespace=plan.namespace,
    )
    spec = policy["spec"]
    flow = entry(name=plan.network_policy, egress=spec["egress"], ingress=spec.get("ingress"))
    infra = {p.infra: _infra_policy(p) for p in plan.security.infra_policies}
    return {"flow": flow, "infra": dict(sorted(infra.items()))}


def _infra_policy(policy: InfraPolicy) -> Obj:
    port, peers = policy.monitoring_port, [peer_selector(p) for p in policy.monitoring_from]
    return entry(
        name=policy.name,
        component=policy.component,
        clientPort=policy.client_port,
        clusterPort=policy.cluster_port,
        monitoring={"port": port, "from": peers} if port is not None else None,
    )
