"""Render a Plan into Kubernetes objects (plain dicts), in a stable order."""

from __future__ import annotations

import json
from typing import Any

from vf.ir.plan import ContainerResources, Pairs, Plan, Workload
from vf.ir.records import PodOptions
from vf.plan.warmup import STARTUP_PERIOD_SECONDS, startup_failures
from vf.render.autoscale import apply_autoscaling
from vf.render.component import apply_component
from vf.render.credentials import (
    client_credentials,
    credential_mounts,
    credential_volumes,
    creds_file_env,
)
from vf.render.gpu import claim_templates, decorate_pod, mig_parted_configmap
from vf.render.infra import flow_component, render_infra
from vf.render.observe import observability_objects
from vf.render.pods import apply_pod_options, metrics_objects, priority_class
from vf.render.security import namespace_object, network_policies
from vf.render.shared import with_shared_labels, with_shared_parts
from vf.textio.objects import Obj
from vf_runtime.constants import HEALTH_PORT
from vf_runtime.labels import (
    BROKER_CONFIG,
    COMPONENT,
    CONFIG_HASH_KEY,
    FLOW_LABEL,
    GENERATION_KEY,
    NODE_LABEL,
    NODE_NAME_KEY,
    REPLICA_COUNTS,
)

TMP_VOLUME = "tmp"
GENERATION_ANNOTATION = GENERATION_KEY
TOPOLOGY_DIR = "/etc/vf/topology"
RUN_AS = 65532
NB_TASKS = "VF_NB_TASKS"


def render_components(plan: Plan) -> dict[str, list[Obj]]:
    """The auto-provisioned infrastructure objects, keyed by the component they come from."""
    return render_infra(
        plan.infra,
        namespace=plan.namespace,
        pull_policy=plan.image_pull_policy,
        priority_class=plan.priority_class,
        flow=dict(plan.flow_labels)[FLOW_LABEL],
        flow_id=plan.flow_id,
    )


def as_rendered(groups: dict[str, list[Obj]], objects: list[Obj]) -> dict[str, list[Obj]]:
    """``groups`` (a component's objects, as ``render_components`` or
    ``render_generated_components`` make them) with each object replaced by the one
    ``render_plan`` finished in ``objects``: with the environment's pod labels,
    annotations and autoscaling on it, as every delivery of the environment carries it."""
    finished = {(o["kind"], o["metadata"]["name"]): o for o in objects}
    return {
        name: [finished[(o["kind"], o["metadata"]["name"])] for o in members]
        for name, members in groups.items()
    }


def render_shapes(plan: Plan) -> dict[str, list[Obj]]:
    """The shipped components named for the flow, as ``components/`` holds them."""
    flow = dict(plan.flow_labels)[FLOW_LABEL]
    return {
        c: flow_component(c, plan.infra, flow=flow, flow_id=plan.flow_id)
        for c in plan.infra.components
    }


def render_generated_components(plan: Plan) -> dict[str, list[Obj]]:
    """Components vf writes per environment (the MIG geometry, the labelled Namespace),
    keyed by component name."""
    out: dict[str, list[Obj]] = {}
    namespace = namespace_object(plan)
    if namespace is not None and plan.security.namespace_component is not None:
        out[plan.security.namespace_component] = [namespace]
    mig = mig_parted_configmap(plan, plan.gpu) if plan.gpu is not None else None
    if mig is not None:
        out[f"mig-parted-{plan.environment}"] = [mig]
    return out


def render_plan(plan: Plan) -> list[Obj]:
    """Every object of one environment: infrastructure, flow-wide objects, then each node's."""
    components = {**render_components(plan), **render_generated_components(plan)}
    objects: list[Obj] = [o for objs in components.values() for o in objs]
    objects += [_broker_configmap(plan), *network_policies(plan)]
    if plan.gpu is not None:
        objects.extend(claim_templates(plan, plan.gpu))
    objects.extend(_topology_configmaps(plan))
    objects.append(_provision_job(plan))
    objects.extend(_replicas_configmap(plan))
    parts: dict[Any, Any] = {}  # one render's: its keys are garbage once the pods are made
    for workload in plan.workloads:
        if workload.headless_service is not None:
            objects.append(_headless_service(plan, workload))
        objects.append(with_shared_parts(_workload(plan, workload), table=parts))
        if workload.pdb is not None:
            objects.append(_pdb(plan, workload))
    options = plan.pods or PodOptions()
    objects += priority_class(plan.priority_class, options=options)
    objects += metrics_objects(
        objects,
        options=options,
        flow_policy=plan.network_policy,
        flow=dict(plan.flow_labels)[FLOW_LABEL],
        namespace=plan.namespace,
    )
    objects += observability_objects(plan)
    apply_pod_options(objects, options=options)
    if plan.autoscaling:
        objects = apply_autoscaling(plan, objects=objects)
    return [with_shared_labels(obj) for obj in objects]  # never changed again


def _meta(plan: Plan, name: str, labels: Pairs) -> Obj:
    return {"name": name, "namespace": plan.namespace, "labels": dict(labels)}


def _broker_configmap(plan: Plan) -> Obj:
    labels = (*plan.run_labels, (COMPONENT, BROKER_CONFIG))
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(plan, plan.broker_configmap, labels),
        "data": broker_env(plan),
    }


def broker_env(plan: Plan) -> dict[str, str]:
    """What every worker and the provision Job learn about the broker and the payload store."""
    infra = plan.infra
    data: dict[str, str] = {}
    if infra.nats_url is not None:
        data["VF_NATS_URL"] = infra.nats_url
    if infra.store_url is not None:
        data["VF_BLOB_REDIS_URL"] = infra.store_url
    if infra.stream_replicas > 1:
        data["VF_STREAM_REPLICAS"] = str(infra.stream_replicas)
    if infra.stream_bytes is not None:  # each BATCH stream's share of the store (ADR 0232)
        data["VF_STREAM_MAX_BYTES"] = str(infra.stream_bytes.max_bytes)
    if plan.generation is not None:
        data["VF_GENERATION"] = plan.generation
    explicit = [
        {"channel": r.channel, "profile": r.profile} for r in plan.admission.requests if r.explicit
    ]
    if explicit:
        data["VF_PROFILE_REQUESTS_JSON"] = json.dumps(
            explicit, sort_keys=True, separators=(",", ":")
        )
    return data


def secret_env(plan: Plan) -> list[Obj]:
    """Service URLs that carry credentials, and the flow's broker and store credentials
    (ADR 0212), come from Secrets, never from the ConfigMap."""
    infra = plan.infra
    pairs = [
        ("VF_NATS_URL", infra.nats_url_secret),
        ("VF_BLOB_REDIS_URL", infra.store_url_secret),
        *client_credentials(infra),
    ]
    env = [
        {"name": var, "valueFrom": {"secretKeyRef": {"name": ref.name, "key": ref.key}}}
        for var, ref in pairs
        if ref is not None
    ]
    return env + creds_file_env(infra)


def _topology_configmaps(plan: Plan) -> list[Obj]:
    prov = plan.provision
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": _meta(plan, name, prov.labels),
            "data": {f"nodes-{index:03d}.jsonl": shard},
        }
        for index, (name, shard) in enumerate(
            zip(prov.topology_configmaps, prov.topology_shards, strict=True)
        )
    ]


def _pod_security() -> Obj:
    return {
        "runAsNonRoot": True,
        "runAsUser": RUN_AS,
        "runAsGroup": RUN_AS,
        "fsGroup": RUN_AS,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _container_security() -> Obj:
    return {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "privileged": False,
        "readOnlyRootFilesystem": True,
    }


def _pod_spec(plan: Plan, containers: list[Obj], volumes: list[Obj], restart: str) -> Obj:
    spec: Obj = {
        "automountServiceAccountToken": False,
        "containers": containers,
        "restartPolicy": restart,
        "securityContext": _pod_security(),
        "volumes": [
            {"name": TMP_VOLUME, "emptyDir": {}},
            *volumes,
            *credential_volumes(plan.infra),
        ],
    }
    if plan.priority_class is not None:
        spec["priorityClassName"] = plan.priority_class
    return spec


def _provision_job(plan: Plan) -> Obj:
    prov = plan.provision
    mounts: list[Obj] = [{"name": TMP_VOLUME, "mountPath": "/tmp"}]
    sources = [{"configMap": {"name": name}} for name in prov.topology_configmaps]
    mounts.append({"name": "topology", "mountPath": TOPOLOGY_DIR, "readOnly": True})
    mounts += credential_mounts(plan.infra)
    container = {
        "name": "provision",
        "image": prov.image,
        "imagePullPolicy": plan.image_pull_policy,
        "command": ["vf-provision"],
        "envFrom": [{"configMapRef": {"name": plan.broker_configmap}}],
        "env": provision_env(plan),
        "resources": container_resources(prov.resources),
        "securityContext": _container_security(),
        "volumeMounts": mounts,
    }
    volumes = [{"name": "topology", "projected": {"sources": sources}}]
    spec: Obj = {
        "backoffLimit": prov.backoff_limit,
        "template": {
            "metadata": _job_pod_metadata(plan, {}, prov.labels),
            "spec": _pod_spec(plan, [container], volumes, "Never"),
        },
    }
    if prov.ignore_disruptions:
        spec["podFailurePolicy"] = _ignore_disruptions()
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _meta(plan, prov.job, prov.labels),
        "spec": spec,
    }


def provision_env(plan: Plan) -> list[Obj]:
    """The provision Job's variables: the credentials, then what names the run."""
    own = [("VF_FLOW_ID", plan.flow_id), ("VF_FLOW_TYPE", plan.flow_type)]
    own += [("VF_RUN_ID", plan.run_id), ("VF_TOPOLOGY_DIR", TOPOLOGY_DIR)]
    own += [("VF_PRUNE_SUPERSEDED", "1")] if plan.provision.reclaim_superseded else []
    return [*secret_env(plan), *({"name": k, "value": v} for k, v in own)]


def _ignore_disruptions() -> Obj:
    """A pod failed by a disruption (a drain, a preemption, an API-initiated eviction: the
    DisruptionTarget condition) is replaced without counting toward backoffLimit. It needs
    the pod's ``restartPolicy: Never``, which every Job of vf has. ``status`` is the API
    server's default, written out: the schemas before 1.35 require it."""
    pattern = {"status": "True", "type": "DisruptionTarget"}
    return {"rules": [{"action": "Ignore", "onPodConditions": [pattern]}]}


def _job_pod_metadata(plan: Plan, annotations: dict[str, str], labels: Pairs) -> Obj:
    """A Job's pod metadata: under BATCH it names the generation, so any change to the
    flow changes every Job's template and a GitOps controller re-creates them together."""
    if plan.generation is not None:
        annotations = {**annotations, GENERATION_ANNOTATION: plan.generation}
    metadata: Obj = {"labels": dict(labels)}
    if annotations:
        metadata["annotations"] = annotations
    return dict(sorted(metadata.items()))


def _replicas_configmap(plan: Plan) -> list[Obj]:
    """The replica counts of the workers that scale in place, one key per node: read by
    reference, so a change of one leaves every pod template as it was (ADR 183)."""
    counts = {w.node: w.replicas for w in plan.workloads if w.replicas_configmap is not None}
    names = {w.replicas_configmap for w in plan.workloads} - {None}
    if not names:
        return []
    (name,) = names
    assert name is not None
    labels = (*plan.run_labels, (COMPONENT, REPLICA_COUNTS))
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": _meta(plan, name, labels),
            "data": {node: str(count) for node, count in sorted(counts.items())},
        }
    ]


def _worker_env(workload: Workload) -> list[Obj]:
    """The worker's own variables as the pod template's values: a change of one rolls the
    pods by itself. A worker that scales in place reads its count by reference instead."""
    out: list[Obj] = []
    for name, value in workload.env:
        if name == NB_TASKS and workload.replicas_configmap is not None:
            ref = {"name": workload.replicas_configmap, "key": workload.node}
            out.append({"name": name, "valueFrom": {"configMapKeyRef": ref}})
        else:
            out.append({"name": name, "value": value})
    return out


def _headless_service(plan: Plan, workload: Workload) -> Obj:
    assert workload.headless_service is not None
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(plan, workload.headless_service, workload.labels),
        "spec": {
            "clusterIP": "None",
            "ports": [{"name": "health", "port": HEALTH_PORT, "targetPort": "health"}],
            "publishNotReadyAddresses": True,
            "selector": dict(workload.selector),
        },
    }


def _probe(path: str, **timing: int) -> Obj:
    return {"httpGet": {"path": path, "port": "health"}, **timing}


def container_resources(res: ContainerResources) -> Obj:
    requests = {k: v for k, v in (("cpu", res.cpu), ("memory", res.memory)) if v is not None}
    limits = {
        k: v for k, v in (("cpu", res.cpu_limit), ("memory", res.memory_limit)) if v is not None
    }
    out: Obj = {}
    if requests:
        out["requests"] = requests
    if limits:
        out["limits"] = limits
    return out


def _worker_container(plan: Plan, workload: Workload) -> Obj:
    container: Obj = {
        "name": "worker",
        "image": workload.image,
        "imagePullPolicy": plan.image_pull_policy,
        "command": ["vf-worker"],
        "env": sorted(
            _worker_env(workload) + secret_env(plan) + _replica_env(workload),
            key=lambda entry: str(entry["name"]),
        ),
        "envFrom": [{"configMapRef": {"name": plan.broker_configmap}}],
        "resources": container_resources(workload.resources),
        "securityContext": _container_security(),
        "volumeMounts": [
            {"name": TMP_VOLUME, "mountPath": "/tmp"},
            *_volume_mounts(workload),
            *credential_mounts(plan.infra),
        ],
    }
    container["ports"] = [{"name": "health", "containerPort": HEALTH_PORT}]
    # every worker: a replica whose loop stalled or whose node call ran past its bound
    # (DELIV-12) answers 503, and a Job's pod fails instead of holding its work for ever
    container["livenessProbe"] = _probe("/healthz", initialDelaySeconds=10, periodSeconds=15)
    if workload.probes:  # long-running workloads: readiness gates rollouts and Services
        container["readinessProbe"] = _probe("/readyz", initialDelaySeconds=2, periodSeconds=5)
        container["startupProbe"] = _probe(
            "/readyz",
            periodSeconds=STARTUP_PERIOD_SECONDS,
            failureThreshold=startup_failures(workload.warmup_seconds),
        )
    apply_component(container, workload)
    return container


def _mount_name(index: int, claim: str | None) -> str:
    return f"vf-pvc-{index}" if claim is not None else f"vf-mount-{index}"


def _mount_volumes(workload: Workload) -> list[Obj]:
    volumes: list[Obj] = []
    for index, mount in enumerate(workload.mounts):
        name = _mount_name(index, mount.claim)
        if mount.claim is not None:
            source: Obj = {"persistentVolumeClaim": {"claimName": mount.claim}}
            if mount.read_only:
                source["persistentVolumeClaim"]["readOnly"] = True
        else:
            source = {"hostPath": {"path": mount.source}}
        volumes.append({"name": name, **source})
    return volumes


def _volume_mounts(workload: Workload) -> list[Obj]:
    mounts: list[Obj] = []
    for index, mount in enumerate(workload.mounts):
        entry: Obj = {"name": _mount_name(index, mount.claim), "mountPath": mount.path}
        if mount.read_only:
            entry["readOnly"] = True
        mounts.append(entry)
    return mounts


def _replica_env(workload: Workload) -> list[Obj]:
    if workload.indexed:
        path = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
        return [{"name": "VF_REPLICA_ID", "valueFrom": {"fieldRef": {"fieldPath": path}}}]
    if workload.kind == "StatefulSet":
        return [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
    return []


def _workload(plan: Plan, workload: Workload) -> Obj:
    restart = "Never" if workload.kind == "Job" else "Always"
    pod = _pod_spec(plan, [_worker_container(plan, workload)], _mount_volumes(workload), restart)
    grant = plan.gpu.grant_for(workload.node) if plan.gpu is not None else None
    if plan.gpu is not None and grant is not None:
        decorate_pod(pod, gpu=plan.gpu, grant=grant)
    full_name = _full_node_name(plan, workload)
    annotations = {CONFIG_HASH_KEY: workload.config_hash, **full_name}
    if workload.kind == "Job":
        metadata = _job_pod_metadata(plan, annotations, workload.labels)
    else:
        metadata = {"annotations": annotations, "labels": dict(workload.labels)}
    template = {"metadata": metadata, "spec": pod}
    spec: Obj
    if workload.kind == "Job":
        spec = {
            "backoffLimit": workload.backoff_limit,
            "completions": workload.replicas,
            "parallelism": workload.replicas,
            "template": template,
        }
        if workload.indexed:
            spec["completionMode"] = "Indexed"
        if workload.ignore_disruptions:
            spec["podFailurePolicy"] = _ignore_disruptions()
    else:
        spec = {
            "replicas": workload.replicas,
            "selector": {"matchLabels": dict(workload.selector)},
            "template": template,
        }
        if workload.rollout == "drain":
            spec["strategy"] = {"type": "Recreate"}
        elif workload.rollout == "surge":
            spec["strategy"] = {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
            }
        elif workload.rollout == "no-surge":  # no GPU free for a surge pod (plan/gpu/moments)
            spec["strategy"] = {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1},
            }
        if workload.kind == "StatefulSet":
            spec["serviceName"] = workload.headless_service
            spec["podManagementPolicy"] = "Parallel"
    api = "batch/v1" if workload.kind == "Job" else "apps/v1"
    meta = _meta(plan, workload.name, workload.labels)
    if full_name:
        meta["annotations"] = full_name
    return {"apiVersion": api, "kind": workload.kind, "metadata": meta, "spec": spec}


def _full_node_name(plan: Plan, workload: Workload) -> dict[str, str]:
    """``vf.dev/node-name``: the node's whole name, where the workload's name or its
    ``vf.dev/node`` label shows less of it (shortened or normalised, ADR 0209). Nowhere
    else, so a flow whose names fit renders exactly as before."""
    whole = "-".join(("vf", plan.flow_id, plan.run_id, workload.node))
    label = dict(workload.labels).get(NODE_LABEL)
    if label == workload.node and workload.name.startswith(whole):
        return {}
    return {NODE_NAME_KEY: workload.node}


def _pdb(plan: Plan, workload: Workload) -> Obj:
    assert workload.pdb is not None
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _meta(plan, workload.pdb, workload.labels),
        "spec": {"minAvailable": 1, "selector": {"matchLabels": dict(workload.selector)}},
    }
