"""Autoscaling: which workers KEDA scales on their input lag, recorded in the Plan.

A worker is scaled only when its replica count is not part of the topology: a
long-running Deployment that reads one parent, is not partitioned and is not a
producer (GPU workers only when the environment opts in). The Deployment then leaves
``spec.replicas`` to the autoscaler so no GitOps controller fights it.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from vf.config.delivery import DEFAULT_NATS_ACCOUNT, Autoscaling
from vf.errors import Problem, raise_if
from vf.ir.graph import Graph, NodeIR
from vf.ir.plan import Plan, Scaler, ScaleTrigger, Workload
from vf.plan.warmup import cooldown, scale_behavior
from vf_runtime.broker.naming import RunNames
from vf_runtime.constants import GPU
from vf_runtime.credentials import NATS_ACCOUNT

NATS_MONITOR_PORT = 8222


def ineligible_reason(node: NodeIR, *, workload: Workload, settings: Autoscaling) -> str:
    """Why a node cannot be autoscaled; empty when it can."""
    if workload.kind != "Deployment":
        return f"it runs as a {workload.kind}, not a long-running Deployment"
    if node.kind == "producer":
        return "a producer has no input lag to scale on"
    if node.partition_by is not None:
        return (
            f"it is partitioned by {node.partition_by!r}: its replica count is part of the topology"
        )
    if len(node.parents) != 1:
        return f"it joins {len(node.parents)} parents without partitioning, so it runs one replica"
    if node.device_type == GPU and not settings.gpu_nodes:
        return "it uses GPUs; set autoscaling.gpu_nodes: true to scale GPU workers"
    return ""


def plan_autoscaling(
    graph: Graph, *, plan: Plan, settings: Autoscaling | None, where: str = ""
) -> tuple[Scaler, ...]:
    """The scalers of one environment; raise when a requested node cannot be scaled.
    ``where``: the autoscaling block's place in the config file."""
    if settings is None or not settings.enabled:
        return ()
    where = where or f"vf.yaml (environment '{plan.environment}')"
    problems: list[Problem] = []
    known = {node.name for node in graph.nodes}
    for name in settings.nodes:
        if name not in known:
            problems.append(_problem(plan, what=f"names unknown node {name!r}", where=where))
    endpoint = _endpoint(plan, settings=settings, problems=problems, where=where)
    scalers = []
    for workload in plan.workloads:
        node = graph.node(workload.node)
        reason = ineligible_reason(node, workload=workload, settings=settings)
        if settings.nodes and node.name not in settings.nodes:
            continue
        if reason:
            if settings.nodes:
                problems.append(
                    _problem(plan, what=f"node {node.name!r} cannot scale: {reason}", where=where)
                )
            continue
        scaler = _scaler(plan, workload=workload, node=node, settings=settings, endpoint=endpoint)
        if scaler.min_replicas > scaler.max_replicas:
            problems.append(
                _problem(
                    plan,
                    what=f"node {node.name!r}: min_replicas {scaler.min_replicas} is above "
                    f"max_replicas {scaler.max_replicas}",
                    where=where,
                )
            )
        scalers.append(scaler)
    raise_if(problems)
    return tuple(scalers)


def _problem(plan: Plan, *, what: str, where: str) -> Problem:
    return Problem(
        code="VF_CONFIG_AUTOSCALING",
        what=f"environments.{plan.environment}.autoscaling: {what}",
        remedy="list only long-running, unpartitioned single-input workers under "
        "autoscaling.nodes, with min_replicas <= max_replicas",
        where=where,
    )


def _endpoint(plan: Plan, *, settings: Autoscaling, problems: list[Problem], where: str) -> str:
    """The broker's monitoring endpoint: declared, or the one vf's own broker serves."""
    if settings.monitoring_endpoint is not None:
        return settings.monitoring_endpoint
    infra = plan.infra
    if infra.broker_profile != "external" and infra.nats_url is not None:
        host = urlsplit(infra.nats_url.split(",")[0]).hostname or ""
        # KEDA's operator polls from its own namespace: the broker's full Service name
        return f"{host}.{plan.namespace}.svc:{NATS_MONITOR_PORT}"
    problems.append(
        Problem(
            code="VF_CONFIG_AUTOSCALING",
            what=f"environments.{plan.environment}.autoscaling: the broker is external, so vf "
            "does not know its monitoring endpoint",
            remedy="set autoscaling.monitoring_endpoint to the NATS monitoring host:port "
            "(for example nats.messaging.svc:8222)",
            where=where,
        )
    )
    return ""


def scaler_account(plan: Plan, settings: Autoscaling) -> str:
    """The NATS account whose streams KEDA reads: vf.yaml's, else the flow's one account
    on the broker vf runs with credentials (ADR 0212), else the broker's global one."""
    if settings.account is not None:
        return settings.account
    infra = plan.infra
    if infra.broker_profile != "external" and infra.broker_auth.secret is not None:
        return NATS_ACCOUNT
    return DEFAULT_NATS_ACCOUNT


def _scaler(
    plan: Plan, *, workload: Workload, node: NodeIR, settings: Autoscaling, endpoint: str
) -> Scaler:
    broker = RunNames(plan.flow_id, plan.run_id, plan.generation or "")
    triggers = []
    for channel in plan.channels:
        if channel.node in node.parents:
            consumer = broker.durable(node.name, parent=channel.node)
            triggers.append(ScaleTrigger(stream=channel.stream, consumer=consumer))
    minimum = settings.min_replicas if settings.min_replicas is not None else workload.replicas
    return Scaler(
        node=node.name,
        deployment=workload.name,
        min_replicas=minimum,
        max_replicas=settings.max_replicas,
        lag_threshold=settings.lag_threshold,
        polling_interval=settings.polling_interval_seconds,
        cooldown=cooldown(settings.cooldown_seconds, node.warmup_seconds),
        endpoint=endpoint,
        account=scaler_account(plan, settings),
        triggers=tuple(triggers),
        labels=workload.labels,
        behavior=scale_behavior(node.warmup_seconds),
    )
