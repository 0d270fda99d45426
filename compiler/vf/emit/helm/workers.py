"""The values of the chart's worker templates (``templates/helm/roles/worker-*.yaml``, whose
pod is ``vf.workerPod`` in ``_helpers.tpl``), from one environment's plan (ADR 235).

``workers.<node>`` holds what vf planned for a worker, with the keys a reviewer expects:
its ``kind``, ``component``, node ``class``, ``params`` and ``parents``, the ``variables``
of its own, its ``mounts``, ``gpu`` placement, ``rollout`` and the 12 digits of its
``configHash`` no replica count decides. ``nodes.<node>`` holds its knobs, as before:
``replicas``, ``image``, ``resources`` (and the users' overrides). ``workerPod`` holds what
every worker's pod shares: the broker's ConfigMap, the variables every worker has, the
credential volumes, vf.yaml's pod options, and ``defaults`` that an entry leaves out. What
follows from those values (``VF_NB_TASKS``, ``VF_PARENT_REPLICAS``, the config hash's
replica part, scaling in place, names and labels) is written once, in the templates.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
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
_DEFAULTED = ("kind", "component", "class", "params")
# what the templates write from the node's key and other values
_DERIVED = frozenset(
    {NB_TASKS, PARENT_REPLICAS, "VF_NODE_KIND", "VF_NODE_NAME", "VF_PARENT_NAMES", *_READABLE}
)


def worker_values(plan: Plan, *, flow: Obj) -> Obj:
    """The ``workers`` section and each worker's ``nodes.<node>`` entry of one environment."""
    shared = _shared_env(plan.workloads)
    facts = {w.node: _node(plan, w, flow=flow, shared=shared) for w in plan.workloads}
    nodes = {node: {k: worker.pop(k) for k in _KNOBS} for node, worker in facts.items()}
    defaults = _defaults(facts)
    out: Obj = {
        # every vf pod's (the provision Job's as well): a --set reaches them all
        "imagePullPolicy": plan.image_pull_policy,
        "priorityClassName": plan.priority_class,
        POD: {**_workers(plan, shared=shared), "defaults": defaults},
        WORKERS: dict(sorted(facts.items())),
        "nodes": dict(sorted(nodes.items())),
    }
    return out | entry(generation=plan.generation)  # a BATCH Job's name ends in it


def worker_objects(values: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """Each worker's workload (a StatefulSet with its headless Service), keyed by node."""
    default = ((values.get(POD) or {}).get("defaults") or {}).get("kind")
    for node, facts in (values.get(WORKERS) or {}).items():
        kind = str(facts.get("kind", default))
        yield kind, node
        if kind == "StatefulSet":
            yield "Service", node


def _defaults(facts: Mapping[str, Obj]) -> Obj:
    """The most common ``kind``, ``component``, ``class`` and ``params`` of the workers
    (``workerPod.defaults``), each left out of the entries that have it: the release holds
    every environment's values several times, and a 5,000-node flow's must fit 1 MiB."""
    out: Obj = {}
    for key in _DEFAULTED:  # (a key of every entry: kind and component; "" for no class)
        seen = Counter(str(worker.get(key, "")) for worker in facts.values())
        if not seen:
            continue
        common = min(seen, key=lambda v: (-seen[v], v))
        out[key] = common
        for worker in facts.values():
            if str(worker.get(key, "")) == common:
                worker.pop(key, None)
            else:
                worker.setdefault(key, "")  # none of its own: not the default either
    out["variables"] = _default_variables(facts)
    return out


def _default_variables(facts: Mapping[str, Obj]) -> dict[str, str]:
    """The most common value of each variable most workers have of their own; each
    entry keeps its other ``variables`` and names the defaults it lacks in ``unset``."""
    counts = Counter(
        (k, v) for worker in facts.values() for k, v in (worker.get("variables") or {}).items()
    )
    best: dict[str, tuple[int, str]] = {}
    for (name, value), count in sorted(counts.items()):
        if count * 2 > len(facts) and count > best.get(name, (0, ""))[0]:
            best[name] = (count, value)
    defaults = {name: value for name, (_, value) in sorted(best.items())}
    for worker in facts.values():
        own = worker.pop("variables", None) or {}
        rest = {k: v for k, v in own.items() if defaults.get(k) != v}
        if rest:
            worker["variables"] = rest
        lacking = [k for k in defaults if k not in own]
        if lacking:
            worker["unset"] = lacking
    return defaults


def _shared_env(workloads: Sequence[Workload]) -> dict[str, str]:
    """The variables every worker of the plan has, with one value."""
    if not workloads:
        return {}
    common = dict(workloads[0].env)
    for workload in workloads[1:]:
        theirs = dict(workload.env)
        common = {k: v for k, v in common.items() if theirs.get(k) == v}
    return {k: v for k, v in sorted(common.items()) if k not in _DERIVED}


def _workers(plan: Plan, *, shared: Mapping[str, str]) -> Obj:
    pods, infra = plan.pods or PodOptions(), plan.infra
    env = [{"name": k, "value": in_release(plan.namespace, v)} for k, v in shared.items()]
    configmaps = sorted({w.replicas_configmap for w in plan.workloads if w.replicas_configmap})
    volumes = credential_volumes(infra)
    jobs = [w for w in plan.workloads if w.kind == "Job"]
    out = entry(
        broker=plan.broker_configmap,
        env=sorted([*env, *secret_env(plan)], key=lambda e: str(e["name"])),
        startupFailures=STARTUP_FAILURES,
        topologySpread=pods.topology_spread,
        replicasConfigMap=configmaps[0] if configmaps else None,
        volumes=volumes or None,
        volumeMounts=credential_mounts(infra) if volumes else None,
        imagePullSecrets=[{"name": n} for n in pods.image_pull_secrets] or None,
        serviceAccountName=pods.service_account,
    )
    if jobs:  # the environment's, alike for every Job (vf.yaml's supervision, its version)
        out.update(backoffLimit=jobs[0].backoff_limit, ignoreDisruptions=jobs[0].ignore_disruptions)
    return out


def _node(plan: Plan, workload: Workload, *, flow: Obj, shared: Mapping[str, str]) -> Obj:
    """One worker's entry: how its object's name and labels differ from what the
    templates derive, then what it runs with (an optional key only where it has one)."""
    env, run, pod = dict(workload.env), workload.component, _gpu_pod(plan, workload)
    name, tag = workload.name, None
    if workload.kind == "Job":  # <name>-<tag>: the generation, or the Job's own digest
        name, tag = name[: -TAG_LEN - 1], name[-TAG_LEN:]
    service = workload.headless_service
    own = {
        k: in_release(plan.namespace, v)
        for k, v in env.items()
        if k not in _DERIVED and k not in shared
    }
    ports = (
        [{"name": p.name, "containerPort": p.port, "protocol": p.protocol} for p in run.ports]
        if run
        else []
    )
    warmup = workload.warmup_seconds if workload.probes else None
    labels = dict(workload.labels)
    return (
        worker_entry(workload.node, labels, flow=flow, name=name, suffix="")
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
            variables=own or None,
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
    grant = plan.gpu.grant_for(workload.node) if plan.gpu is not None else None
    if plan.gpu is not None and grant is not None:
        decorate_pod(pod, gpu=plan.gpu, grant=grant)
    return pod


def _mount(mount: Mount) -> Obj:
    hostPath = mount.source if mount.claim is None else None
    return entry(
        path=mount.path, claim=mount.claim, hostPath=hostPath, readOnly=mount.read_only or None
    )
