"""The values of the worker templates (``templates/helm/roles/worker-*.yaml``, the pod
``vf.workerPod``) from one environment's plan (ADR 235): ``workers.<node>`` what vf planned,
``nodes.<node>`` the knobs a user sets, ``workerPod`` what every worker's pod shares, with the
``defaults`` an entry leaves out. What follows from them is the templates' (ADR 241, 254).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

from vf.emit.helm.shapes import entry, in_release, worker_entry
from vf.ir.plan import Plan, Workload
from vf.ir.records import Mount, PodOptions
from vf.plan.config_hash import NB_TASKS, PARENT_REPLICAS
from vf.plan.jobs import TAG_LEN
from vf.plan.warmup import STARTUP_FAILURES, startup_failures
from vf.render.credentials import credential_mounts, credential_volumes
from vf.render.gpu import decorate_pod
from vf.render.objects import container_resources, secret_env
from vf.textio.objects import Obj

WORKERS = "workers"  # each worker's planned facts
POD = "workerPod"  # what every worker's pod shares
_KNOBS = ("replicas", "image", "resources")  # nodes.<node>: a worker's knobs
# each node's own variables under a readable key (the rest of its own: ``variables``)
_READABLE = {"VF_NODE_CLASS": "class", "VF_NODE_PARAMS_JSON": "params"}
# what the templates write from the node's key and other values
_DERIVED = frozenset(
    {NB_TASKS, PARENT_REPLICAS, "VF_NODE_KIND", "VF_NODE_NAME", "VF_PARENT_NAMES", *_READABLE}
)


def worker_values(plan: Plan, *, flow: Obj) -> Obj:
    """The ``workers`` section and each worker's ``nodes.<node>`` entry of one environment."""
    common = set.intersection(*(set(w.env) for w in plan.workloads)) if plan.workloads else set()
    shared = dict(sorted(pair for pair in common if pair[0] not in _DERIVED))  # every worker's
    facts = {w.node: _node(plan, w, flow=flow, shared=shared) for w in plan.workloads}
    nodes = {node: {k: worker.pop(k) for k in _KNOBS} for node, worker in facts.items()}
    return {
        # every vf pod's (the provision Job's as well): a --set reaches them all
        "imagePullPolicy": plan.image_pull_policy,
        "priorityClassName": plan.priority_class,
        POD: {**_workers(plan, shared=shared), "defaults": _defaults(facts)},
        WORKERS: dict(sorted(facts.items())),
        "nodes": dict(sorted(nodes.items())),
    } | entry(generation=plan.generation)  # a BATCH Job's name ends in it


def worker_kinds(values: Mapping[str, Any]) -> dict[str, str]:
    """Each worker's workload kind, by node, in one environment's values."""
    default = values.get(POD, {}).get("defaults", {}).get("kind")
    return {node: facts.get("kind", default) for node, facts in values.get(WORKERS, {}).items()}


def worker_objects(values: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """Each worker's workload (a StatefulSet with its headless Service), keyed by node."""
    for node, kind in worker_kinds(values).items():
        yield kind, node
        if kind == "StatefulSet":
            yield "Service", node


def _defaults(facts: Mapping[str, Obj]) -> Obj:
    """``workerPod.defaults``: the most common ``kind``, ``component``, ``class`` and
    ``params`` ("" for none) and each variable most workers have of their own with one
    value, left out of the entries that have it; an entry names the default variables it
    lacks in ``unset``. A 5,000-node flow's values must fit the release (ADR 194)."""
    out: Obj = {}
    for key in ("kind", "component", "class", "params") if facts else ():
        seen = Counter(worker.get(key, "") for worker in facts.values())
        out[key] = common = min(seen, key=lambda v: (-seen[v], v))
        for worker in facts.values():
            if worker.setdefault(key, "") == common:
                del worker[key]
    held = Counter(
        pair for worker in facts.values() for pair in worker.get("variables", {}).items()
    )
    out["variables"] = dict(sorted(pair for pair, n in held.items() if n * 2 > len(facts)))
    for worker in facts.values():
        own = worker.pop("variables", {})
        worker.update(
            entry(
                variables={k: v for k, v in own.items() if out["variables"].get(k) != v} or None,
                unset=[k for k in out["variables"] if k not in own] or None,
            )
        )
    return out


def _workers(plan: Plan, *, shared: Mapping[str, str]) -> Obj:
    pods, infra = plan.pods or PodOptions(), plan.infra
    env = [{"name": k, "value": in_release(plan.namespace, v)} for k, v in shared.items()]
    configmaps = [w.replicas_configmap for w in plan.workloads if w.replicas_configmap]
    volumes = credential_volumes(infra)
    # the environment's, alike for every Job (vf.yaml's supervision, its version)
    job = next((w for w in plan.workloads if w.kind == "Job"), None)
    return entry(
        broker=plan.broker_configmap,
        env=sorted([*env, *secret_env(plan)], key=lambda e: str(e["name"])),
        startupFailures=STARTUP_FAILURES,
        topologySpread=pods.topology_spread,
        replicasConfigMap=min(configmaps, default=None),
        volumes=volumes or None,
        volumeMounts=credential_mounts(infra) if volumes else None,
        imagePullSecrets=[{"name": n} for n in pods.image_pull_secrets] or None,
        serviceAccountName=pods.service_account,
        backoffLimit=job.backoff_limit if job else None,
        ignoreDisruptions=job.ignore_disruptions if job else None,
    )


def _node(plan: Plan, workload: Workload, *, flow: Obj, shared: Mapping[str, str]) -> Obj:
    """One worker's entry: how its object's name and labels differ from what the
    templates derive, then what it runs with (an optional key only where it has one)."""
    env, run, pod = dict(workload.env), workload.component, _gpu_pod(plan, workload)
    name, tag = workload.name, None
    if workload.kind == "Job":  # <name>-<tag>: the generation, or the Job's own digest
        name, tag = name[: -TAG_LEN - 1], name[-TAG_LEN:]
    own = [(k, v) for k, v in env.items() if k not in _DERIVED and k not in shared]
    service = workload.headless_service
    warmup = workload.warmup_seconds if workload.probes else None
    ports = [
        {"name": p.name, "containerPort": p.port, "protocol": p.protocol}
        for p in (run.ports if run else ())
    ]
    return (
        worker_entry(workload.node, dict(workload.labels), flow=flow, name=name, suffix="")
        | entry(
            tag=tag if tag != plan.generation else None,
            serviceName=service if service != f"{workload.name}-hl" else None,
            kind=workload.kind,
            component=workload.node_kind,
            replicas=workload.replicas,
            image=workload.image,
            resources=pod["containers"][0]["resources"],
            **{key: env.get(variable) for variable, key in _READABLE.items()},
            parents=env.get("VF_PARENT_NAMES") or None,  # comma-separated, as the variable
            variables={k: in_release(plan.namespace, v) for k, v in own} or None,
            configHash=workload.config_hash[:12],
            gpu={k: v for k, v in pod.items() if k != "containers"} or None,
            mounts=[_mount(m) for m in workload.mounts] or None,
            rollout=workload.rollout,
            command=list(run.command) if run is not None else None,  # empty: the image's own
            ports=ports or None,
            startupFailures=startup_failures(warmup) if warmup is not None else None,
        )
    )


def _gpu_pod(plan: Plan, workload: Workload) -> Obj:
    """What the GPU grant adds to the worker's pod: devices, placement, runtime class."""
    pod: Obj = {"containers": [{"resources": container_resources(workload.resources)}]}
    if plan.gpu is not None and (grant := plan.gpu.grant_for(workload.node)) is not None:
        decorate_pod(pod, gpu=plan.gpu, grant=grant)
    return pod


def _mount(mount: Mount) -> Obj:
    hostPath = mount.source if mount.claim is None else None
    return entry(
        path=mount.path, claim=mount.claim, hostPath=hostPath, readOnly=mount.read_only or None
    )
