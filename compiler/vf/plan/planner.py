"""Plan one environment: every name, label, image, replica count and VF_* variable."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import replace

from vf import names
from vf.config.observability import observability_problems, tracing_env
from vf.config.pod_options import pod_problems
from vf.config.targets import Environment
from vf.config.workload import pod_mounts
from vf.errors import Problem, raise_if
from vf.ir.admission import Admission
from vf.ir.gpu import GpuGrant, GpuPlan
from vf.ir.graph import Graph, NodeIR
from vf.ir.plan import (
    PLAN_VERSION,
    Channel,
    ContainerResources,
    Pairs,
    Plan,
    Provision,
    Workload,
    WorkloadKind,
    record_to_json,
)
from vf.ir.records import Observability, PodOptions
from vf.plan.admission import admit
from vf.plan.autoscale import plan_autoscaling
from vf.plan.component import component_resources, component_run
from vf.plan.config_hash import config_hash, scales_in_place
from vf.plan.context import PlanContext
from vf.plan.infra import infra_image_warnings, plan_infra, plan_provision
from vf.plan.inputs import check_config_nodes, resolve_images, resolve_replicas
from vf.plan.jobs import broker_configmap, ignores_disruptions, tag_jobs, tag_provision
from vf.plan.limits import limit_problems
from vf.plan.replay import replay_unsafe, replay_warnings
from vf.plan.security import plan_security, security_warnings
from vf.plan.streambytes import plan_stream_bytes
from vf.textio.jsontext import compact_json
from vf_runtime.broker.naming import RunNames
from vf_runtime.constants import BATCH, ENVELOPE_VERSION, GPU, HEALTH_PORT
from vf_runtime.labels import (
    COMPONENT,
    FLOW_LABEL,
    INSTANCE,
    MANAGED_BY,
    MANAGER,
    NAME,
    NODE_LABEL,
    PART_OF,
    RUN_LABEL,
)
from vf_runtime.policies import DEFAULT_CALL_TIMEOUT

STATEFULSET_NAME_MAX = 52  # leaves room for the controller-revision-hash label


def _flow_labels(flow_id: str) -> Pairs:
    return (
        (FLOW_LABEL, names.label_value(flow_id)),
        (MANAGED_BY, MANAGER),
        (PART_OF, names.label_value(flow_id)),
    )


def _checked_inputs(graph: Graph, env: Environment) -> tuple[dict[str, int], dict[str, str]]:
    """Each node's replicas and image in ``env``; raise with every problem of its inputs."""
    problems: list[Problem] = []
    replicas = resolve_replicas(graph, env, problems)
    images = resolve_images(graph, env, problems)
    check_config_nodes(graph, env, problems)
    problems += pod_problems(
        env.name,
        options=env.pods,
        priority_class=env.priority_class,
        where=env.place_of("pods"),
    )
    problems += observability_problems(
        env.name, options=env.observability, where=env.place_of("observability")
    )
    raise_if(problems)
    return replicas, images


def _context(
    graph: Graph, env: Environment, *, flow_id: str, replicas: dict[str, int]
) -> tuple[PlanContext, str]:
    """What every per-node decision shares, and where the run id came from."""
    run_id, run_source = _run_id(graph, env, flow_id=flow_id, replicas=replicas)
    run_labels = (*_flow_labels(flow_id), (RUN_LABEL, run_id))
    ctx = PlanContext(
        graph=graph,
        env=env,
        flow_id=flow_id,
        run_id=run_id,
        replicas=replicas,
        run_labels=run_labels,
    )
    return ctx, run_source


def plan_environment(
    graph: Graph,
    env: Environment,
    *,
    flow_id: str,
    flags: tuple[tuple[str, str], ...] = (),
) -> Plan:
    """Decide everything the renderers need for ``env``; raise with every problem found."""
    replicas, images = _checked_inputs(graph, env)
    problems: list[Problem] = []
    admission = admit(graph, env, flags=flags)
    ctx, run_source = _context(graph, env, flow_id=flow_id, replicas=replicas)
    run_id = ctx.run_id
    gpu = _gpu(ctx, problems)
    raise_if(problems)
    workloads = tuple(_workload(ctx, node, images[node.name], gpu) for node in graph.nodes)
    raise_if(_rollout_problems(env, workloads) + limit_problems(env, workloads))
    security = plan_security(env, workloads=workloads, flow_id=flow_id)
    provision = plan_provision(ctx, images)
    generation = _generation(graph, workloads=workloads, provision=provision, gpu=gpu, env=env)
    ids = {"flow_id": flow_id, "run_id": run_id}
    workloads = tag_jobs(workloads, **ids, generation=generation, gpu=gpu, pods=env.pods)
    unreplayable = replay_unsafe(graph)
    plan = Plan(
        version=PLAN_VERSION,
        environment=env.name,
        namespace=env.namespace,
        cluster=env.cluster,
        kubernetes_version=env.kubernetes_version,
        flow_id=flow_id,
        flow_type=graph.flow_type,
        run_id=run_id,
        run_id_source=run_source,
        generation=generation,
        image_pull_policy=env.image_pull_policy,
        priority_class=env.priority_class,
        broker_configmap=broker_configmap(flow_id=flow_id, run_id=run_id, generation=generation),
        network_policy=names.k8s_name("vf", flow_id, "netpol"),
        flow_labels=_flow_labels(flow_id),
        run_labels=ctx.run_labels,
        provision=tag_provision(provision, **ids, generation=generation, pods=env.pods),
        workloads=workloads,
        channels=_channels(ctx, graph, admission, generation=generation),
        infra=plan_infra(env, flow_id=flow_id, stream_bytes=plan_stream_bytes(graph, env)),
        admission=admission,
        gpu=gpu,
        supervision=env.workloads.supervision,
        security=security,
        pods=None if env.pods == PodOptions() else env.pods,
        observability=env.observability if env.observability != Observability() else None,
        warnings=_warnings(graph, images, admission)
        + tuple(replay_warnings(unreplayable))
        + security_warnings(security)
        + infra_image_warnings(env),
        unreplayable_producers=tuple(p for p, _ in unreplayable) or None,
    )
    return _scaled(ctx, plan, env=env)


def _channels(
    ctx: PlanContext, graph: Graph, admission: Admission, *, generation: str | None
) -> tuple[Channel, ...]:
    broker = ctx.broker_names(generation)
    return tuple(
        _channel(ctx, node, admission.profile_of(node.name), broker=broker)
        for node in graph.nodes
        if node.children
    )


def _scaled(ctx: PlanContext, plan: Plan, *, env: Environment) -> Plan:
    """The plan with its autoscaling, and its GPUs proven at the autoscaling maximum and
    during a rollout too."""
    scalers = plan_autoscaling(
        ctx.graph, plan=plan, settings=env.autoscaling, where=env.place_of("autoscaling")
    )
    if scalers:
        plan = replace(plan, autoscaling=scalers)
    if plan.gpu is not None:
        from vf.plan.gpu.moments import plan_moments

        plan = plan_moments(ctx, plan)
    return plan


def _gpu(ctx: PlanContext, problems: list[Problem]) -> GpuPlan | None:
    """The GPU planner's decisions; a flow without GPU nodes never loads the planner."""
    if not any(node.device_type == GPU for node in ctx.graph.nodes):
        return None
    from vf.plan.gpu.planner import plan_gpu

    return plan_gpu(ctx, problems)


def _run_id(
    graph: Graph, env: Environment, *, flow_id: str, replicas: Mapping[str, int]
) -> tuple[str, str]:
    """The target's run id, else a digest of what shapes the broker topology."""
    if env.run_id is not None:
        return env.run_id, "target"
    shape = [
        [
            node.name,
            node.kind,
            list(node.parents),
            node.partition_by,
            replicas[node.name] if node.partition_by is not None else 1,
            node.delivery.max_deliver,
        ]
        for node in graph.nodes
    ]
    text = json.dumps([flow_id, graph.flow_type, shape], separators=(",", ":"))
    return "r" + hashlib.sha256(text.encode()).hexdigest()[:7], "topology-digest"


def _generation(
    graph: Graph,
    *,
    workloads: tuple[Workload, ...],
    provision: Provision,
    gpu: GpuPlan | None,
    env: Environment,
) -> str | None:
    """A BATCH environment's generation: a digest of everything that defines its work.

    Any change to a node's spec, image, parameters, replicas, resources or environment
    gives a new generation, which re-creates every Job of the flow together on fresh
    streams. A REALTIME flow has one generation per run (None): its Deployments roll
    through the same streams.
    """
    if graph.flow_type != BATCH:
        return None
    work = [record_to_json(w) for w in workloads]
    text = compact_json(
        # the GPU plan too: a Job's pod names its claim template, whose name digests the claim
        [
            work,
            provision.image,
            list(provision.topology_shards),
            record_to_json(gpu),
            record_to_json(env.pods),  # labels, pull Secrets, ServiceAccount: in every pod
        ]
    )
    return "g" + hashlib.sha256(text.encode()).hexdigest()[:7]


def budget_name(flow_id: str, run_id: str, node: str) -> str:
    """The PodDisruptionBudget's name of a long-running worker (planned above one replica;
    the chart holds it for every count, ADR 193)."""
    return names.k8s_name("vf", flow_id, run_id, node, "pdb")


def _workload_kind(graph: Graph, node: NodeIR, partitioned: bool) -> WorkloadKind:
    if graph.flow_type == BATCH or (node.kind == "producer" and node.is_finite):
        return "Job"
    return "StatefulSet" if partitioned else "Deployment"


def _workload(ctx: PlanContext, node: NodeIR, image: str, gpu: GpuPlan | None) -> Workload:
    partitioned = ctx.partitioned(node)
    kind = _workload_kind(ctx.graph, node, partitioned)
    replicas = ctx.replicas[node.name]
    base = ("vf", ctx.flow_id, ctx.run_id, node.name)
    limit = STATEFULSET_NAME_MAX if kind == "StatefulSet" else names.K8S_NAME_MAX
    node_label = names.label_value(node.name)
    selector: Pairs = (
        (FLOW_LABEL, names.label_value(ctx.flow_id)),
        (NODE_LABEL, node_label),
        (RUN_LABEL, ctx.run_id),
    )
    labels = tuple(
        sorted(
            {
                *ctx.run_labels,
                *selector,
                (NAME, node_label),
                (COMPONENT, node.kind),
                (INSTANCE, names.k8s_name(ctx.flow_id, ctx.run_id, node.name)),
            }
        )
    )
    grant = gpu.grant_for(node.name) if gpu is not None else None
    env = _worker_env(ctx, node, grant)
    long_running = kind != "Job"
    return Workload(
        node=node.name,
        node_kind=node.kind,
        kind=kind,
        name=names.k8s_name(*base, limit=limit),
        replicas_configmap=(
            names.k8s_name("vf", ctx.flow_id, ctx.run_id, "replicas")
            if scales_in_place(dict(env), kind=kind)
            else None
        ),
        headless_service=names.k8s_name(*base, "hl") if kind == "StatefulSet" else None,
        pdb=budget_name(ctx.flow_id, ctx.run_id, node.name)
        if long_running and replicas > 1
        else None,
        replicas=replicas,
        indexed=kind == "Job" and replicas > 1,
        image=image,
        resources=component_resources(ctx.env, node=node, merged=_resources(ctx.env, node.name)),
        env=env,
        labels=labels,
        selector=selector,
        config_hash=config_hash(dict(env), kind=kind),
        probes=long_running,
        backoff_limit=ctx.env.workloads.supervision.max_restarts if kind == "Job" else None,
        ignore_disruptions=kind == "Job" and ignores_disruptions(ctx.env.kubernetes_version),
        device_type=node.device_type,
        gpu_count=node.gpu_count if node.device_type == GPU else 0,
        mounts=pod_mounts(ctx.env.workloads.mounts_for(node.name)),
        rollout=ctx.env.workloads.rollout_for(node.name) if kind == "Deployment" else None,
        component=component_run(node),
        warmup_seconds=node.warmup_seconds if long_running else None,
    )


def _resources(env: Environment, node: str) -> ContainerResources:
    table = dict(env.resources)
    chosen = table.get(node) or table.get("*")
    pods = env.pods
    if chosen is None:  # requests by default: a BestEffort pod is evicted first
        return ContainerResources(cpu=pods.default_cpu, memory=pods.default_memory)
    fallback = table.get("*")

    def pick(field: str) -> str | None:
        value = getattr(chosen, field)
        if value is None and fallback is not None and chosen is not fallback:
            value = getattr(fallback, field)
        return value if isinstance(value, str) else None

    return ContainerResources(
        cpu=pick("cpu") or pods.default_cpu,
        memory=pick("memory") or pods.default_memory,
        cpu_limit=pick("cpu_limit"),
        memory_limit=pick("memory_limit"),
    )


def _worker_env(ctx: PlanContext, node: NodeIR, grant: GpuGrant | None) -> Pairs:
    """The VF_* contract of one worker; optional variables only when they are set."""
    env: dict[str, str] = {
        "VF_ENVELOPE_VERSION": str(ENVELOPE_VERSION),
        "VF_FLOW_ID": ctx.flow_id,
        "VF_FLOW_TYPE": ctx.graph.flow_type,
        "VF_HAS_CHILDREN": "1" if node.children else "0",
        "VF_HEALTH_PORT": str(HEALTH_PORT),
        "VF_NB_TASKS": str(ctx.replicas[node.name]),
        "VF_NODE_KIND": node.kind,
        "VF_NODE_NAME": node.name,
        "VF_NODE_PARAMS_JSON": node.params_json,
        "VF_PARENT_NAMES": ",".join(node.parents),
        "VF_RUN_ID": ctx.run_id,
    }
    if node.component is None:
        env["VF_NODE_CLASS"] = node.node_class
    else:  # a native component: its descriptor, not a Python class (docs/PROTOCOL.md §20)
        env["VF_COMPONENT_REF"] = node.component.ref
    if node.partition_by is not None and ctx.partitioned(node):
        env["VF_PARTITION_BY"] = node.partition_by
    if node.join_policy is not None and node.parents:
        env["VF_JOIN_POLICY_JSON"] = json.dumps(node.join_policy.to_dict(), sort_keys=True)
    if node.children:
        readers = sum(
            ctx.replicas[c] if ctx.partitioned(ctx.nodes[c]) else 1 for c in node.children
        )
        env["VF_BLOB_READERS"] = str(readers)
    if node.delivery_declared:
        env["VF_DELIVERY"] = node.delivery.delivery
        env["VF_MAX_RETRIES"] = str(node.delivery.max_retries)
        env["VF_DLQ"] = node.delivery.dlq
        if node.delivery.on_error is not None:
            env["VF_ON_ERROR"] = node.delivery.on_error
        if node.delivery.call_timeout_seconds != DEFAULT_CALL_TIMEOUT:  # the worker's default
            env["VF_CALL_TIMEOUT_SECONDS"] = f"{node.delivery.call_timeout_seconds:g}"
    if node.parents:  # always, so a replica change alters a value, never the variables
        env["VF_PARENT_REPLICAS"] = ",".join(f"{p}={ctx.replicas[p]}" for p in node.parents)
    if grant is not None:
        env["VF_GPU_COUNT"] = str(grant.count)
        env["VF_GPU_GRANT"] = grant.kind
        if grant.profile is not None:
            env["VF_GPU_PROFILE"] = grant.profile
    if node.idempotent:
        env["VF_IDEMPOTENT"] = "1"
    env.update(tracing_env(ctx.env.observability.tracing))
    return tuple(sorted(env.items()))


def _channel(ctx: PlanContext, node: NodeIR, profile: str, *, broker: RunNames) -> Channel:
    readers: list[str] = []
    for child_name in node.children:
        if ctx.partitioned(ctx.nodes[child_name]):
            readers.extend(
                broker.durable(child_name, parent=node.name, partition=i)
                for i in range(ctx.replicas[child_name])
            )
        else:
            readers.append(broker.durable(child_name, parent=node.name))
    return Channel(
        node=node.name,
        subject=broker.subject(node.name),
        eos_subject=broker.eos_prefix(node.name),
        stream=broker.stream(node.name),
        profile=profile,
        readers=tuple(readers),
    )


def _warnings(graph: Graph, images: Mapping[str, str], admission: Admission) -> tuple[str, ...]:
    unpinned: dict[str, list[str]] = {}
    for node in graph.nodes:
        if "@sha256:" not in images[node.name]:
            unpinned.setdefault(images[node.name], []).append(node.name)
    found = [
        f"image {image} ({_count(nodes, 'node')}) is not pinned by digest"
        for image, nodes in sorted(unpinned.items())
    ]
    found.extend(f"{f.subject}: {f.reason}" for f in admission.warnings)
    if not admission.payload.present:
        found.extend(
            f"consumer '{n.name}' is idempotent but the environment has no payload store, "
            "where idempotency records live: delivery falls back to at-least-once"
            for n in graph.nodes
            if n.idempotent
        )
    return tuple(found)


def _count(items: list[str], noun: str) -> str:
    if len(items) <= 3:
        return ", ".join(items)
    return f"{items[0]}, {items[1]} and {len(items) - 2} more {noun}s"


def _rollout_problems(env: Environment, workloads: tuple[Workload, ...]) -> list[Problem]:
    """A rollout policy named for a node must land on a Deployment: Jobs and StatefulSets
    are not rolled that way."""
    kinds = {w.node: w.kind for w in workloads}
    return [
        Problem(
            code="VF_CONFIG_WORKLOAD",
            what=f"environments.{env.name}.rollout.{node}: node '{node}' runs as a "
            f"{kinds[node]}, which is not rolled by a rollout policy",
            remedy="remove the entry; drain and surge apply to Deployments only",
            where=env.place_of(f"rollout.{node}"),
        )
        for node, _ in env.workloads.rollout
        if node in kinds and kinds[node] != "Deployment"
    ]
