"""Plan the security of an environment: where the flow's pods may connect, who may reach the
broker and the payload store vf runs, and which Pod Security level every pod meets.

Defaults are closed: no ingress to workers, egress only to DNS, the broker and the payload
store; vf's own services accept only the flow's pods (and the monitoring readers vf.yaml
names, or KEDA's operator when autoscaling reads the broker's monitoring endpoint).
"""

from __future__ import annotations

from collections.abc import Sequence

from vf import names
from vf.config.network import NATS_CLIENT_PORT, REDIS_PORT, Egress
from vf.config.targets import Environment
from vf.errors import Problem, raise_if
from vf.ir.plan import Workload
from vf.ir.records import Peer
from vf.ir.security import EgressRule, InfraPolicy, Security
from vf.plan.infra import infra_names
from vf_runtime.labels import FLOW_LABEL, INFRA_LABEL, NAME

DNS_PORT = 53
NATS_CLUSTER_PORT = 6222
NATS_MONITOR_PORT = 8222
RESTRICTED, PRIVILEGED = "restricted", "privileged"
# Where KEDA's own install puts its operator, the pod that polls scaler endpoints.
KEDA_OPERATOR = Peer(namespace="keda", pod_labels=((NAME, "keda-operator"),))
_PROVISIONED_STORES = ("dev", "durable", "cache")


def plan_security(env: Environment, *, workloads: Sequence[Workload], flow_id: str) -> Security:
    """Every security decision of ``env``; raise when the namespace would refuse its pods."""
    host_path_nodes = tuple(w.node for w in workloads if any(m.source for m in w.mounts))
    flow = names.label_value(flow_id)
    security = Security(
        worker_egress=_worker_egress(env, flow=flow),
        infra_policies=_infra_policies(env, flow_id=flow_id),
        pod_security_level=PRIVILEGED if host_path_nodes else RESTRICTED,
        namespace_labels=env.pod_security.namespace_labels,
        namespace_component=(
            f"pod-security-{env.name}" if env.pod_security.namespace_labels else None
        ),
        host_path_nodes=host_path_nodes,
    )
    if security.namespace_labels and host_path_nodes:
        raise_if(
            [
                Problem(
                    code="VF_CONFIG_POD_SECURITY",
                    what=f"environments.{env.name}.pod_security.namespace_labels enforces the "
                    f"restricted profile, which refuses the host-path mounts of "
                    f"{', '.join(host_path_nodes)}",
                    remedy="mount a PersistentVolumeClaim (claim:/path) instead of a host path, "
                    "or drop pod_security.namespace_labels",
                    where=env.place_of("pod_security"),
                )
            ]
        )
    return security


def security_warnings(security: Security) -> tuple[str, ...]:
    """What a reviewer should know: pods that cannot meet the restricted profile."""
    if not security.host_path_nodes:
        return ()
    return (
        f"host-path mounts of {', '.join(security.host_path_nodes)} do not meet the "
        "restricted Pod Security profile: the namespace must admit privileged pods",
    )


def _tcp(purpose: str, *, ports: tuple[int, ...], to: tuple[Peer, ...]) -> EgressRule:
    return EgressRule(purpose=purpose, ports=ports, protocols=("TCP",), to=to)


def _infra_peer(infra: str, *, flow: str) -> tuple[Peer, ...]:
    """The flow's own broker or store pods (never another flow's in the same namespace)."""
    return (Peer(pod_labels=((FLOW_LABEL, flow), (INFRA_LABEL, infra))),)


def _external(purpose: str, *, egress: Egress | None) -> list[EgressRule]:
    if egress is None or not egress.ports:
        return []
    return [_tcp(purpose, ports=egress.ports, to=egress.to)]


def _worker_egress(env: Environment, *, flow: str) -> tuple[EgressRule, ...]:
    rules = [EgressRule(purpose="dns", ports=(DNS_PORT,), protocols=("UDP", "TCP"), to=())]
    broker, store = env.broker, env.payload_store
    if broker.profile == "external":
        rules += _external("broker", egress=broker.egress)
    else:
        rules.append(_tcp("broker", ports=(NATS_CLIENT_PORT,), to=_infra_peer("nats", flow=flow)))
    if store.profile == "external":
        rules += _external("payload-store", egress=store.egress)
    elif store.profile in _PROVISIONED_STORES:
        rules.append(_tcp("payload-store", ports=(REDIS_PORT,), to=_infra_peer("redis", flow=flow)))
    return tuple(rules)


def _monitoring(env: Environment) -> tuple[tuple[Peer, ...], str]:
    declared = env.broker.monitoring_from
    if declared is not None:
        return declared, "vf.yaml"
    if env.autoscaling is not None and env.autoscaling.enabled:
        return (KEDA_OPERATOR,), "autoscaling"
    return (), "none"


def _infra_policies(env: Environment, *, flow_id: str) -> tuple[InfraPolicy, ...]:
    policies = []
    broker_name, store_name = infra_names(flow_id)
    if env.broker.profile != "external":
        peers, source = _monitoring(env)
        policies.append(
            InfraPolicy(
                name=broker_name,
                infra="nats",
                component="broker",
                client_port=NATS_CLIENT_PORT,
                cluster_port=NATS_CLUSTER_PORT if env.broker.profile == "durable" else None,
                monitoring_port=NATS_MONITOR_PORT if peers else None,
                monitoring_from=peers,
                monitoring_source=source,
            )
        )
    if env.payload_store.profile in _PROVISIONED_STORES:
        policies.append(
            InfraPolicy(
                name=store_name,
                infra="redis",
                component="payload-store",
                client_port=REDIS_PORT,
                cluster_port=None,
                monitoring_port=None,
                monitoring_from=(),
                monitoring_source="none",
            )
        )
    return tuple(policies)
