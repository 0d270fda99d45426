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
from collections.abc import Mapping, Sequence

from vf.emit.helm.roles import BUDGETS, worker_entry
from vf.emit.helm.shapes import in_release
from vf.ir.plan import Plan, Workload
from vf.ir.records import PodOptions
from vf.plan.config_hash import NB_TASKS, PARENT_REPLICAS
from vf.plan.jobs import TAG_LEN
from vf.plan.warmup import STARTUP_FAILURES, startup_failures
from vf.render.credentials import credential_mounts, credential_volumes
from vf.render.gpu import decorate_pod
from vf.render.objects import container_resources, secret_env
from vf.textio.objects import Obj

WORKERS = "workers"  # each worker's planned facts
POD = "workerPod"  # what every worker's pod shares
NODES = "nodes"  # each worker's knobs: replicas, image, resources (and the overrides)
_KNOBS = ("replicas", "image", "resources")
# the workload kinds the worker templates render
ROLE_KINDS = frozenset({"Deployment", "Job", "StatefulSet"})
# each node's own variables under a readable key (the rest of its own: ``variables``)
_READABLE = {"VF_NODE_CLASS": "class", "VF_NODE_PARAMS_JSON": "params"}
_DEFAULTED = ("kind", "component", "class", "params")
# what the templates write from the node's key and other values
_DERIVED = frozenset(
    {NB_TASKS, PARENT_REPLICAS, "VF_NODE_KIND", "VF_NODE_NAME", "VF_PARENT_NAMES", *_READABLE}
)


def with_worker_values(values: Obj, plan: Plan) -> Obj:
    """``values`` (the role sections of one environment) with the workers' sections."""
    return {**values, **worker_values(plan, flow=values["flow"])}


def worker_values(plan: Plan, *, flow: Obj) -> Obj:
    """The ``workers`` section and each worker's ``nodes.<node>`` entry of one environment."""
    shared = _shared_env(plan.workloads)
    facts = {
        w.node: _node(plan, w, flow=flow, shared=shared)
        for w in plan.workloads
        if w.kind in ROLE_KINDS
    }
    nodes = {node: {k: entry.pop(k) for k in _KNOBS} for node, entry in facts.items()}
    defaults = _defaults(facts)
    out: Obj = {
        # every vf pod's (the provision Job's as well): a --set reaches them all
        "imagePullPolicy": plan.image_pull_policy,
        "priorityClassName": plan.priority_class,
        POD: {**_workers(plan, shared=shared), "defaults": defaults},
        WORKERS: dict(sorted(facts.items())),
        NODES: dict(sorted(nodes.items())),
    }
    if plan.generation is not None:  # a BATCH Job's name ends in it
        out["generation"] = plan.generation
    return out


def _defaults(facts: Mapping[str, Obj]) -> Obj:
    """The most common ``kind``, ``component``, ``class`` and ``params`` of the workers
    (``workerPod.defaults``), each left out of the entries that have it: the release holds
    every environment's values several times, and a 5,000-node flow's must fit 1 MiB."""
    out: Obj = {}
    for key in _DEFAULTED:  # (a key of every entry: kind and component; "" for no class)
        seen = Counter(str(entry.get(key, "")) for entry in facts.values())
        if not seen:
            continue
        common = min(seen, key=lambda v: (-seen[v], v))
        out[key] = common
        for entry in facts.values():
            if str(entry.get(key, "")) == common:
                entry.pop(key, None)
            else:
                entry.setdefault(key, "")  # none of its own: not the default either
    out["variables"] = _default_variables(facts)
    return out


def _default_variables(facts: Mapping[str, Obj]) -> dict[str, str]:
    """The most common value of each variable most workers have of their own; each
    entry keeps its other ``variables`` and names the defaults it lacks in ``unset``."""
    counts = Counter(
        (k, v) for entry in facts.values() for k, v in (entry.get("variables") or {}).items()
    )
    best: dict[str, tuple[int, str]] = {}
    for (name, value), count in sorted(counts.items()):
        if count * 2 > len(facts) and count > best.get(name, (0, ""))[0]:
            best[name] = (count, value)
    defaults = {name: value for name, (_, value) in sorted(best.items())}
    for entry in facts.values():
        own = entry.pop("variables", None) or {}
        rest = {k: v for k, v in own.items() if defaults.get(k) != v}
        if rest:
            entry["variables"] = rest
        lacking = [k for k in defaults if k not in own]
        if lacking:
            entry["unset"] = lacking
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
    pods = plan.pods or PodOptions()
    infra = plan.infra
    env = [{"name": k, "value": in_release(plan.namespace, v)} for k, v in shared.items()]
    env += secret_env(plan)
    out: Obj = {
        "broker": plan.broker_configmap,
        "env": sorted(env, key=lambda e: str(e["name"])),
        "startupFailures": STARTUP_FAILURES,
        "topologySpread": pods.topology_spread,
    }
    jobs = [w for w in plan.workloads if w.kind == "Job"]
    if jobs:  # the environment's, alike for every Job (vf.yaml's supervision, its version)
        out["backoffLimit"] = jobs[0].backoff_limit
        out["ignoreDisruptions"] = jobs[0].ignore_disruptions
    configmaps = {w.replicas_configmap for w in plan.workloads} - {None}
    if configmaps:
        out["replicasConfigMap"] = min(c for c in configmaps if c is not None)
    if credential_volumes(infra):
        out["volumes"] = credential_volumes(infra)
        out["volumeMounts"] = credential_mounts(infra)
    if pods.image_pull_secrets:
        out["imagePullSecrets"] = [{"name": n} for n in pods.image_pull_secrets]
    if pods.service_account is not None:
        out["serviceAccountName"] = pods.service_account
    return out


def _node(plan: Plan, workload: Workload, *, flow: Obj, shared: Mapping[str, str]) -> Obj:
    """One worker's entry: how its object's name and labels differ from what the
    templates derive, then what it runs with."""
    env = dict(workload.env)
    name, tag = workload.name, None
    if workload.kind == "Job":  # <name>-<tag>: the generation, or the Job's own digest
        name, tag = name[: -TAG_LEN - 1], name[-TAG_LEN:]
    entry = worker_entry(workload.node, dict(workload.labels), flow=flow, name=name, suffix="")
    if tag is not None and tag != plan.generation:
        entry["tag"] = tag
    service = workload.headless_service
    if service is not None and service != f"{workload.name}-hl":
        entry["serviceName"] = service
    entry.update(
        {
            "kind": workload.kind,
            "component": workload.node_kind,
            "replicas": workload.replicas,
            "image": workload.image,
        }
    )
    pod = _gpu_pod(plan, workload)
    entry["resources"] = pod["containers"][0]["resources"]
    entry.update({key: env[name] for name, key in _READABLE.items() if name in env})
    if env.get("VF_PARENT_NAMES"):
        entry["parents"] = env["VF_PARENT_NAMES"]  # comma-separated, as the variable
    own = {
        k: in_release(plan.namespace, v)
        for k, v in env.items()
        if k not in _DERIVED and k not in shared
    }
    if own:
        entry["variables"] = own
    entry["configHash"] = workload.config_hash[:12]
    entry.update(_pod_parts(workload, pod=pod))
    return entry


def _gpu_pod(plan: Plan, workload: Workload) -> Obj:
    """What the GPU grant adds to the worker's pod: devices, placement, runtime class."""
    pod: Obj = {"containers": [{"resources": container_resources(workload.resources)}]}
    grant = plan.gpu.grant_for(workload.node) if plan.gpu is not None else None
    if plan.gpu is not None and grant is not None:
        decorate_pod(pod, gpu=plan.gpu, grant=grant)
    return pod


def _pod_parts(workload: Workload, *, pod: Obj) -> Obj:
    """The entry's optional keys: only what this worker has."""
    out: Obj = {}
    gpu = {k: v for k, v in pod.items() if k != "containers"}
    if gpu:
        out["gpu"] = gpu
    if workload.mounts:
        out["mounts"] = [_mount(m.path, m.claim, m.source, m.read_only) for m in workload.mounts]
    if workload.rollout is not None:
        out["rollout"] = workload.rollout
    run = workload.component
    if run is not None:
        out["command"] = list(run.command)  # empty: the image's entrypoint
        if run.ports:
            out["ports"] = [
                {"name": p.name, "containerPort": p.port, "protocol": p.protocol} for p in run.ports
            ]
    if workload.probes and workload.warmup_seconds is not None:
        out["startupFailures"] = startup_failures(workload.warmup_seconds)
    return out


def _mount(path: str, claim: str | None, source: str | None, read_only: bool) -> Obj:
    out: Obj = {"path": path}
    if claim is not None:
        out["claim"] = claim
    else:
        out["hostPath"] = source
    if read_only:
        out["readOnly"] = True
    return out


def worker_kinds(roles: Mapping[str, Obj]) -> dict[str, int]:
    """How many objects of each worker kind the chart holds (in any environment)."""
    seen: dict[str, set[str]] = {}
    for values in roles.values():
        default = ((values.get(POD) or {}).get("defaults") or {}).get("kind")
        for node, entry in (values.get(WORKERS) or {}).items():
            seen.setdefault(str(entry.get("kind", default)), set()).add(node)
    if "StatefulSet" in seen:  # each with its headless Service
        seen["Service"] = seen["StatefulSet"]
    return {kind: len(nodes) for kind, nodes in sorted(seen.items())}


def shared_workers(values: Mapping[str, Obj]) -> Obj:
    """``values.yaml``'s sections of the workers: what every environment's values hold
    alike (the node's class, params, parents, its budget's component…), taken out of
    ``values`` (changed in place), so the release, which holds every environment's values
    file, holds it once. Helm merges it under the environment's values."""
    envs = sorted(values)
    out: Obj = {POD: {}, WORKERS: {}}
    if not envs:
        return out
    for name in (WORKERS, BUDGETS):
        out[name] = _shared_entries([values[e].get(name) or {} for e in envs])
    pods = [values[e].get(POD) or {} for e in envs]
    defaults = pods[0].get("defaults")
    if defaults is not None and all(p.get("defaults") == defaults for p in pods):
        out[POD]["defaults"] = defaults
        for each in pods:
            del each["defaults"]
    return out


def _shared_entries(sections: Sequence[Obj]) -> Obj:
    """The keys of each entry that every section holds alike, taken out of the sections
    (an entry left with nothing of its own goes)."""
    shared: Obj = {}
    for node, first in list(sections[0].items()):
        entries = [s.get(node) for s in sections]
        alike = {
            k: v for k, v in first.items() if all(e is not None and e.get(k) == v for e in entries)
        }
        if alike:
            shared[node] = alike
            for section, entry in zip(sections, entries, strict=True):
                for key in alike:
                    del entry[key]  # type: ignore[union-attr]
                if not entry:
                    del section[node]
    return shared
