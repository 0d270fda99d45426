"""The values of the flow-wide role templates (ADR 236), built from one environment's plan.

Each section feeds one hand-written template under ``templates/helm/roles/``, the same bytes
in every flow's chart: ``resourceClaimTemplates.<node>`` (a DRA GPU worker's claim),
``networkPolicies`` (the flow's policy and each of vf's services'), ``brokerConfig`` with
``broker.natsUrl`` and ``payloadStore.url`` (the broker ConfigMap every pod reads) and
``migParted`` (the MIG geometry's ConfigMap).
``vf.emit.helm.roles`` registers them beside ADR 229's roles.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vf.ir.gpu import DraClaim
from vf.ir.plan import Plan
from vf.ir.records import PodOptions
from vf.ir.security import InfraPolicy
from vf.render.gpu import mig_parted_configmap
from vf.render.pods import metrics_objects
from vf.render.security import network_policies, peer_selector
from vf.textio.objects import Obj
from vf_runtime.labels import COMPONENT, FLOW_LABEL, INFRA_LABEL, is_broker_config, labels_of

CLAIMS = "resourceClaimTemplates"
POLICIES = "networkPolicies"
BROKER_CONFIG = "brokerConfig"
MIG = "migParted"
# a name in the environment's namespace names the release's: the template replaces this
RELEASE_NAMESPACE = "{{ .Release.Namespace }}"
# the role's kind → its template
FLOW_ROLE_FILES = {
    "ResourceClaimTemplate": "resourceclaimtemplate.yaml",
    "NetworkPolicy": "networkpolicy.yaml",
    "ConfigMap": "configmap.yaml",
}


def is_flow_role_object(obj: Obj) -> bool:
    """An object one of these role templates renders."""
    kind = obj.get("kind")
    if kind == "ConfigMap":
        return is_broker_config(obj) or _is_mig_config(obj)
    return kind in FLOW_ROLE_FILES


def _is_mig_config(obj: Obj) -> bool:
    """The nvidia-mig-parted ConfigMap: one ``config.yaml``, no component or service label."""
    labels = labels_of(obj)
    return set(obj.get("data") or ()) == {"config.yaml"} and not {COMPONENT, INFRA_LABEL} & set(
        labels
    )


def flow_role_values(plan: Plan) -> Obj:
    """This module's values sections for one environment."""
    out = {CLAIMS: _claims(plan), POLICIES: _policies(plan), **_broker(plan)}
    mig = mig_parted_configmap(plan, plan.gpu) if plan.gpu is not None else None
    out[MIG] = (
        {"name": mig["metadata"]["name"], "config": mig["data"]["config.yaml"]} if mig else {}
    )
    return out


def neutral_flow_roles() -> Obj:
    """The sections in ``values.yaml``, which holds no environment's values."""
    return {CLAIMS: {}, POLICIES: {}, BROKER_CONFIG: {}, MIG: {}}


def role_generation(values: Obj) -> str | None:
    """An environment's BATCH generation, from its role values (None: it has none)."""
    generation = (values.get(BROKER_CONFIG) or {}).get("generation")
    return None if generation is None else str(generation)


def flow_role_names(roles: Mapping[str, Obj]) -> dict[str, set[str]]:
    """The objects of each role kind, in any environment, by their role's key (a node, a
    service, a section), not by name: a name that carries a digest (a generation's, a
    claim's) differs between environments for what is one object of the chart."""
    out: dict[str, set[str]] = {kind: set() for kind in FLOW_ROLE_FILES}
    for values in roles.values():
        out["ResourceClaimTemplate"] |= set(values.get(CLAIMS) or {})
        policies = values.get(POLICIES) or {}
        out["NetworkPolicy"] |= {f"infra.{s}" for s in policies.get("infra") or {}}
        out["NetworkPolicy"] |= {"flow"} if "flow" in policies else set()
        out["ConfigMap"] |= {s for s in (BROKER_CONFIG, MIG) if values.get(s)}
    return out


def _claims(plan: Plan) -> Obj:
    """Each DRA GPU worker's claim template, by node: the devices each of its pods claims."""
    if plan.gpu is None:
        return {}
    by_name = {claim.template: claim for claim in plan.gpu.claims}
    return {
        grant.node: _claim(by_name[grant.claim_template])
        for grant in sorted(plan.gpu.grants, key=lambda g: g.node)
        if grant.claim_template is not None
    }


def _claim(claim: DraClaim) -> Obj:
    out: Obj = {"name": claim.template, "deviceClassName": claim.device_class}
    out["count"] = claim.count
    if claim.selectors:
        out["selectors"] = list(claim.selectors)
    if claim.capacity_memory is not None:
        out["memory"] = claim.capacity_memory
    if claim.mps:
        out["mps"] = True
    return out


def _broker(plan: Plan) -> Obj:
    """The broker ConfigMap's values: the services' URLs under their knobs (``broker``,
    ``payloadStore``), the rest under ``brokerConfig``."""
    infra = plan.infra
    config: Obj = {"name": plan.broker_configmap}
    if plan.generation is not None:
        config["generation"] = plan.generation
    if infra.stream_replicas > 1:
        config["streamReplicas"] = infra.stream_replicas
    if infra.stream_bytes is not None:
        config["streamMaxBytes"] = infra.stream_bytes.max_bytes
    explicit = [
        {"channel": r.channel, "profile": r.profile} for r in plan.admission.requests if r.explicit
    ]
    if explicit:
        config["profileRequests"] = explicit
    out: Obj = {BROKER_CONFIG: config}
    own = f".{plan.namespace}.svc"
    if infra.nats_url is not None:
        out["broker"] = {"natsUrl": infra.nats_url.replace(own, f".{RELEASE_NAMESPACE}.svc")}
    if infra.store_url is not None:
        out["payloadStore"] = {"url": infra.store_url.replace(own, f".{RELEASE_NAMESPACE}.svc")}
    return out


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
    flow: Obj = {"name": plan.network_policy, "egress": policy["spec"]["egress"]}
    if "ingress" in policy["spec"]:
        flow["ingress"] = policy["spec"]["ingress"]
    infra = {p.infra: _infra_policy(p) for p in plan.security.infra_policies}
    return {"flow": flow, "infra": dict(sorted(infra.items()))}


def _infra_policy(policy: InfraPolicy) -> Obj:
    out: Obj = {
        "name": policy.name,
        "component": policy.component,
        "clientPort": policy.client_port,
    }
    if policy.cluster_port is not None:
        out["clusterPort"] = policy.cluster_port
    if policy.monitoring_port is not None:
        out["monitoring"] = {
            "port": policy.monitoring_port,
            "from": [peer_selector(peer) for peer in policy.monitoring_from],
        }
    return out


_NAME = {"type": "string", "minLength": 1}
_CLAIM = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name", "deviceClassName", "count"],
    "properties": {
        "name": _NAME,
        "deviceClassName": _NAME,
        "count": {"type": "integer", "minimum": 1},
        "selectors": {"type": "array", "items": _NAME},
        "memory": _NAME,
        "mps": {"type": "boolean"},
    },
}


_PORT = {"type": "integer", "minimum": 1, "maximum": 65535}
_RULES = {"type": "array", "items": {"type": "object"}}
_POLICIES = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "flow": {
            "type": "object",
            "additionalProperties": False,
            "required": ["name", "egress"],
            "properties": {"name": _NAME, "egress": _RULES, "ingress": _RULES},
        },
        "infra": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "additionalProperties": False,
                "required": ["name", "component", "clientPort"],
                "properties": {
                    "name": _NAME,
                    "component": _NAME,
                    "clientPort": _PORT,
                    "clusterPort": _PORT,
                    "monitoring": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["port", "from"],
                        "properties": {"port": _PORT, "from": _RULES},
                    },
                },
            },
        },
    },
}


_BROKER_CONFIG = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "name": _NAME,
        "generation": _NAME,
        "streamReplicas": {"type": "integer", "minimum": 2},
        "streamMaxBytes": {"type": "integer", "minimum": 1},
        "profileRequests": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["channel", "profile"],
                "properties": {"channel": _NAME, "profile": _NAME},
            },
        },
    },
}
_MIG = {
    "type": "object",
    "additionalProperties": False,
    "properties": {"name": _NAME, "config": _NAME},
}


def flow_role_schemas(names: Mapping[str, Any]) -> dict[str, Any]:
    """The schemas of this module's sections; ``names`` is what limits a section keyed by
    node to the flow's nodes (``roles.role_schemas``)."""
    return {
        CLAIMS: {
            "type": "object",
            **names,
            "additionalProperties": _CLAIM,
            "description": "DRA ResourceClaimTemplates of the GPU workers by node (from the "
            "plan): each pod claims count devices of deviceClassName, matching the CEL "
            "selectors and at least memory each; mps shares them through MPS.",
        },
        POLICIES: {
            **_POLICIES,
            "description": "NetworkPolicies (from the plan): the flow's pods' egress rules "
            "and the readers of their /metrics (ingress), and each service vf runs (infra: "
            "the broker, the store): its client, cluster and monitoring ports.",
        },
        BROKER_CONFIG: {
            **_BROKER_CONFIG,
            "description": "The broker ConfigMap every pod reads (from the plan; its URLs are "
            "broker.natsUrl and payloadStore.url): copies of each stream, each BATCH stream's "
            "bytes, the channels' explicit delivery profiles, a BATCH flow's generation.",
        },
        MIG: {
            **_MIG,
            "description": "The nvidia-mig-parted config of the environment's MIG nodes "
            "(from the plan; recompile to change).",
        },
    }
