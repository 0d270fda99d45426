"""Build one pod from a workload's template: identity, volumes, environment, processes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from vf.runtree.controllers import Controller, template_hash
from vf.runtree.images import LocalImage, pod_template
from vf.runtree.ocispec import oci_spec
from vf.runtree.podhost import PodHost
from vf.runtree.pods import DEFAULT_GRACE, Container, Pod
from vf.runtree.podspec import (
    ContainerLaunch,
    PodMeta,
    Sources,
    Translator,
    container_env,
    expand,
    materialize_volumes,
    mount_paths,
    write_config_volumes,
)
from vf.textio.objects import Obj
from vf_runtime.labels import NODE_LABEL

COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"


def _identity(cluster: PodHost, controller: Controller, index: int | None) -> PodMeta:
    template = pod_template(controller.obj) or {}
    meta = template.get("metadata") or {}
    labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
    annotations = {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()}
    name = cluster.pod_name(controller, index)
    uid = cluster.new_uid()
    if controller.kind == "Job":
        labels |= {"batch.kubernetes.io/job-name": controller.name, "job-name": controller.name}
        labels["batch.kubernetes.io/controller-uid"] = str(
            controller.obj["metadata"].setdefault("uid", cluster.new_uid())
        )
        if index is not None:
            labels[COMPLETION_INDEX] = annotations[COMPLETION_INDEX] = str(index)
    elif controller.kind == "StatefulSet":
        labels |= {
            "statefulset.kubernetes.io/pod-name": name,
            "apps.kubernetes.io/pod-index": str(index),
        }
    else:
        labels["pod-template-hash"] = template_hash(controller.obj)
    spec = template.get("spec") or {}
    hostname = spec.get("hostname") or name
    if controller.kind == "Job" and index is not None and spec.get("subdomain"):
        hostname = f"{controller.name}-{index}"
    return PodMeta(
        name=name,
        namespace=controller.obj["metadata"]["namespace"],
        uid=uid,
        labels=labels,
        annotations=annotations,
        hostname=hostname,
        service_account=spec.get("serviceAccountName", "default"),
    )


def _claims(controller: Controller, index: int | None) -> dict[str, str]:
    if controller.kind != "StatefulSet":
        return {}
    return {
        t["metadata"]["name"]: f"{t['metadata']['name']}-{controller.name}-{index}"
        for t in controller.spec.get("volumeClaimTemplates") or []
    }


def _listen(
    image: LocalImage, argv: list[str], env: dict[str, str], ports: dict[int, int]
) -> list[str]:
    """Make the process listen on the pod's loopback ports instead of the container's."""
    if image.role in ("worker", "component") and "VF_HEALTH_PORT" in env:
        declared = int(env["VF_HEALTH_PORT"] or 0)
        if declared:
            env["VF_HEALTH_PORT"] = str(ports[declared])
    if image.role == "nats":
        flags = ["-a", "127.0.0.1", "-p", str(ports[4222])]
        if 8222 in ports:
            flags += ["-m", str(ports[8222])]
        if 6222 in ports:
            flags += ["--cluster", f"nats://127.0.0.1:{ports[6222]}"]
        return [*argv, *flags]
    if image.role == "redis":  # a TLS store listens on its --tls-port alone (--port 0)
        flag = "--tls-port" if "--tls-port" in argv else "--port"
        return [*argv, flag, str(ports.get(6379, 0)), "--bind", "127.0.0.1"]
    return argv


@dataclass(frozen=True)
class _PodContext:
    meta: PodMeta
    sources: Sources
    folders: dict[str, Path]
    pod_dir: Path
    app: str
    spec: Obj
    claims: dict[str, str]


def _container(
    cluster: PodHost, container: Obj, *, node: str | None, ctx: _PodContext
) -> tuple[ContainerLaunch, dict[str, Path]]:
    meta = ctx.meta
    resolver = cluster.resolvers[ctx.app]
    image = resolver.resolve(str(container.get("image")), node=node)
    oci = cluster.options.oci if image.role == "worker" else None
    config = oci.image(image.image) if oci is not None else None
    if config is not None:  # the image's own ENV and entry point, inside its own mounts
        image = LocalImage(
            role=image.role, image=config.ref, entrypoint=config.entrypoint, env=config.env
        )
    where = f"pod {meta.name}, container {container.get('name')}"
    env = container_env(container, image=image, meta=meta, sources=ctx.sources, where=where)
    mounts = mount_paths(container, ctx.folders)  # makes each subPath folder, as the kubelet
    paths = mounts if config is None else {}  # a container's mounts are real: none translated
    if image.role in ("worker", "component") and config is None:
        paths[resolver.ctx.image_app_dir] = resolver.ctx.app_dir
    translate = Translator(paths, cluster.address_book(meta.namespace).rewrite)
    # The image's own variables already hold local paths; translate only what the pod set.
    env = {k: v if image.env.get(k) == v else translate(v) for k, v in env.items()}
    command = [translate(expand(str(a), env)) for a in container.get("command") or []]
    args = [translate(expand(str(a), env)) for a in container.get("args") or []]
    numbers = {int(p["containerPort"]) for p in container.get("ports") or []}
    if image.role in ("worker", "component") and env.get("VF_HEALTH_PORT", "0").isdigit():
        numbers.add(int(env.get("VF_HEALTH_PORT", "0") or 0))
    if image.role == "nats":
        numbers.add(4222)
    if image.role == "redis":
        numbers.add(6379)
    numbers.discard(0)
    local = {n: cluster.port_for(meta.namespace, meta.name, n) for n in sorted(numbers)}
    argv = _listen(image, image.argv(command, args), env, local)
    named = {str(n): p for n, p in local.items()}
    for port in container.get("ports") or []:
        if port.get("name"):
            named[str(port["name"])] = local[int(port["containerPort"])]
    cwd = Path(translate(container["workingDir"])) if container.get("workingDir") else ctx.pod_dir
    if image.role in ("worker", "component") and not container.get("workingDir"):
        cwd = resolver.ctx.app_dir
    launch = ContainerLaunch(
        name=str(container.get("name")), argv=argv, env=env, cwd=cwd, image=image, ports=named
    )
    if config is not None:
        launch.oci = oci_spec(
            container,
            ctx.spec,
            image=config,
            folders=ctx.folders,
            claims=sorted(ctx.claims),
            command=command,
            args=args,
            pod_name=meta.name,
            namespace=meta.namespace,
            hostname=meta.hostname,
        )
        launch.argv = launch.oci.command_line(config)
        launch.cwd = ctx.pod_dir
    return launch, paths


def build_pod(cluster: PodHost, controller: Controller, *, index: int | None) -> Pod:
    """A new pod of ``controller`` (its processes start on the pod's first tick)."""
    meta = _identity(cluster, controller, index)
    template = pod_template(controller.obj) or {}
    spec = template.get("spec") or {}
    app = cluster.owner[(controller.kind, meta.namespace, controller.name)]
    pod_dir = (
        cluster.options.run_dir
        / "pods"
        / meta.namespace
        / (f"{meta.name}.{cluster.next_incarnation()}")
    )
    links = spec.get("enableServiceLinks", True) is not False
    sources = cluster.pod_sources(meta.namespace, links=links)
    where = f"{controller.kind.lower()}/{controller.name}"
    folders, deferred = materialize_volumes(
        spec, pod_dir=pod_dir, sources=sources, claims=_claims(controller, index)
    )
    node = meta.labels.get(NODE_LABEL)
    claims = _claims(controller, index)
    ctx = _PodContext(meta, sources, folders, pod_dir, app, spec, claims)
    built: list[tuple[Obj, ContainerLaunch, dict[str, Path]]] = []
    for item in list(spec.get("initContainers") or []) + list(spec.get("containers") or []):
        launch, paths = _container(cluster, item, node=node, ctx=ctx)
        built.append((item, launch, paths))
    all_paths = {k: v for _, _, paths in built for k, v in paths.items()}
    translate = Translator(all_paths, cluster.address_book(meta.namespace).rewrite)
    write_config_volumes(
        deferred, folders=folders, sources=sources, translate=translate, where=where
    )
    init_names = {c.get("name") for c in spec.get("initContainers") or []}
    containers: list[Container] = []
    inits: list[Container] = []
    for item, launch, _ in built:
        box = Container(
            launch=launch, log=pod_dir / f"{launch.name}.log", runtime=cluster.runtime_for(launch)
        )
        box.probe_specs = {
            k: item[k] for k in ("readinessProbe", "livenessProbe", "startupProbe") if k in item
        }
        (inits if item.get("name") in init_names else containers).append(box)
    grace = float(spec.get("terminationGracePeriodSeconds", DEFAULT_GRACE))
    if cluster.options.grace_cap is not None:
        grace = min(grace, cluster.options.grace_cap)
    return Pod(
        name=meta.name,
        namespace=meta.namespace,
        owner=(controller.kind, meta.namespace, controller.name),
        labels=dict(meta.labels),
        restart_policy=str(spec.get("restartPolicy", "Always")),
        containers=containers,
        init=inits,
        index=index,
        revision=template_hash(controller.obj),
        grace=grace,
        backoff_base=cluster.options.backoff_base,
        scratch=pod_dir / "volumes",
        keep_scratch=cluster.options.keep_volumes,
    )
