"""A one-machine stand-in for the API server, the controllers and the kubelet.

``apply`` takes rendered objects the way a sync does (kubectl, Argo CD or Flux rules
for what a changed immutable Job becomes), ``delete`` removes them with their pods, and
``tick`` advances every controller and pod. Services become loopback proxies to their
ready endpoints; pods get their environment, volumes and probes as the kubelet gives them.
A kind in ``absent_kinds`` has no CRD here: the API server refuses its objects (ADR 0202).
"""

from __future__ import annotations

import functools
import secrets as random_names
import string
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vf.runtree.controllers import CONTROLLERS, Controller, template_hash
from vf.runtree.gitops_state import GitopsState
from vf.runtree.images import ImageResolver, pod_template
from vf.runtree.launch import build_pod
from vf.runtree.manifests import key
from vf.runtree.network import AddressBook, ServiceProxies, dns_names, env_links
from vf.runtree.podhost import ClusterOptions, Key
from vf.runtree.pods import Pod
from vf.runtree.podspec import ContainerLaunch, Sources, decoded_secret
from vf.runtree.runtime import ContainerRuntime, ProcessRuntime
from vf.runtree.scrape import ScrapeFile, target_groups
from vf.textio.objects import Obj
from vf_runtime.local.infra import free_port

SYNC_MODES = ("kubectl", "argocd", "flux", "helm")
_ALPHABET = string.ascii_lowercase + string.digits


def _suffix() -> str:
    return "".join(random_names.choice(_ALPHABET) for _ in range(5))


@dataclass
class _Service:
    obj: Obj
    proxies: list[int] = field(default_factory=list)


class Cluster:
    """Objects by key, a controller per workload, Services as proxies; advanced by ``tick``."""

    def __init__(self, options: ClusterOptions) -> None:
        self.options = options
        self.processes = ProcessRuntime(guardian=options.guardian)
        self.objects: dict[Key, Obj] = {}
        self.controllers: dict[Key, Controller] = {}
        self.owner: dict[Key, str] = {}
        self.resolvers: dict[str, ImageResolver] = {}
        self.extra_secrets: dict[str, dict[str, str]] = {}
        self.books: dict[str, AddressBook] = {}
        self.services: dict[Key, _Service] = {}
        self.proxies = ServiceProxies()
        self.pod_ports: dict[tuple[str, str, int], int] = {}
        self.started = time.monotonic()
        self._incarnation = 0
        self._draining: list[Controller] = []
        self.recreated: list[str] = []  # Jobs a sync deleted and created again
        self.gitops = GitopsState()  # the controllers' own objects, as last applied
        self.inventory: dict[str, set[Key]] = {}  # what each Flux Kustomization applied
        self.labelled: dict[Key, str] = {}  # the Kustomization named by an object's labels
        self.releases: dict[str, tuple[Obj, ...]] = {}  # each Helm release's last good objects
        self.refused: list[str] = []  # objects of a kind this cluster does not serve
        where = options.scrape_targets
        self.scrape = None if where is None else ScrapeFile(path=where, log=self.log)
        self._rescrape()

    def unserved(self, obj: Obj) -> str | None:
        """Why the API server refuses ``obj``: no CRD here serves its kind (else None)."""
        if obj.get("kind") not in self.options.absent_kinds:
            return None
        return (
            f'no matches for kind "{obj["kind"]}" in version "{obj.get("apiVersion")}": '
            "ensure CRDs are installed first"
        )

    # --- the API: apply, delete -------------------------------------------------------
    def apply(
        self,
        objects: Sequence[Obj],
        *,
        app: str,
        resolver: ImageResolver,
        mode: str = "kubectl",
        prune: bool = True,
    ) -> list[str]:
        """Create or update ``objects`` as ``app``; prune what else ``app`` applied before."""
        self.resolvers[app] = resolver
        errors: list[str] = []
        wanted = {key(o) for o in objects}
        for obj in objects:
            why = self.unserved(obj)
            if why is not None:  # kubectl and each tool apply the rest; each says why
                name = f"{str(obj['kind']).lower()}/{obj['metadata']['name']}"
                self.log(f"{name}: not applied: {why}")
                self.refused.append(name)
                continue
            error = self._apply_one(obj, app=app, mode=mode)
            if error:
                errors.append(error)
        if prune:
            self.delete([k for k, owner in self.owner.items() if owner == app and k not in wanted])
        self._sync_services()
        return errors

    def _apply_one(self, obj: Obj, *, app: str, mode: str) -> str | None:
        k = key(obj)
        old = self.objects.get(k)
        if old is not None and obj["kind"] == "Job" and _template(old) != _template(obj):
            if not _may_recreate(obj, mode):
                return (
                    f'{mode}: The Job "{k[2]}" is invalid: spec.template: Invalid value: '
                    "field is immutable"
                )
            self.log(f"job/{k[2]}: changed, deleted and re-created ({mode})")
            self.recreated.append(k[2])
            self.delete([k])
            old = None
        self.objects[k] = obj
        self.owner[k] = app
        factory = CONTROLLERS.get(str(obj["kind"]))
        if factory is None:
            return None
        if k in self.controllers:
            self.controllers[k].update(obj)
        else:
            self.controllers[k] = factory(obj=obj, make_pod=self._make_pod)
        return None

    def delete(self, keys: Iterable[Key]) -> None:
        """Delete objects; workloads take their pods with them (foreground cascade)."""
        now = time.monotonic()
        for k in list(keys):
            self.objects.pop(k, None)
            self.owner.pop(k, None)
            self.labelled.pop(k, None)
            controller = self.controllers.pop(k, None)
            if controller is not None:
                controller.stop(now)
                self._draining.append(controller)
            service = self.services.pop(k, None)
            if service is not None:
                for port in service.proxies:
                    self.proxies.close(port)
        self._sync_services()

    # --- the loop ---------------------------------------------------------------------
    def tick(self) -> None:
        now = time.monotonic()
        for controller in list(self.controllers.values()):
            before, status = len(controller.events), controller.status
            controller.tick(now)
            label = f"{controller.kind.lower()}/{controller.name}"
            for event in controller.events[before:]:
                self.log(f"{label}: {event}")
            if controller.status != status:
                self.log(f"{label}: {controller.status}")
        for controller in list(self._draining):
            for pod in controller.pods:
                pod.tick(now)
            controller.reap()
            if not controller.pods:
                self._draining.remove(controller)
        self._rescrape()

    def _rescrape(self) -> None:
        """Rewrite the scrape targets file when the pods the ServiceMonitors select change."""
        if self.scrape is not None:
            self.scrape.update(
                target_groups(
                    self.objects.values(),
                    self.pods(),
                    spec_of=lambda pod: pod_spec_of(pod, self),
                    port_for=self.port_for,
                )
            )

    def run_until(self, done: Callable[[], bool], *, timeout: float, step: float = 0.1) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.tick()
            if done():
                return True
            time.sleep(step)
        return False

    def pods(self) -> list[Pod]:
        found = [p for c in self.controllers.values() for p in c.pods]
        return found + [p for c in self._draining for p in c.pods]

    def drained(self) -> bool:
        """Every deleted workload's pods are gone."""
        return not self._draining

    def idle(self) -> bool:
        """No process started here is still running."""
        return all(p.gone for p in self.pods())

    def delete_app(self, app: str, *, by_waves: bool, timeout: float = 60.0) -> None:
        """Delete what ``app`` applied: at once, or highest sync wave first (Argo CD's prune
        order), each wave's processes gone before the next."""
        keys = [k for k, owner in self.owner.items() if owner == app]
        if not by_waves:
            self.delete(keys)
            self.run_until(self.drained, timeout=timeout)
            return
        waves: dict[int, list[Key]] = {}
        for k in keys:
            waves.setdefault(wave_of(self.objects[k]), []).append(k)
        for wave in sorted(waves, reverse=True):
            self.delete(waves[wave])
            self.run_until(self.drained, timeout=timeout)

    def shutdown(self, *, timeout: float = 30.0) -> None:
        """Delete everything (workers before the broker), wait, then kill what is left."""
        for app in sorted(set(self.owner.values())):
            self.delete_app(app, by_waves=True, timeout=timeout)
        self.delete(list(self.objects))
        if not self.run_until(self.idle, timeout=timeout):
            left = ", ".join(sorted(p.name for p in self.pods() if not p.gone))
            self.log(f"still running after {timeout:g}s, killed: {left}")
        for pod in self.pods():
            pod.kill()
        if self.options.oci is not None:
            self.options.oci.close()
            self.log("every process and container stopped")
        else:
            self.log("every process stopped")
        self.proxies.shutdown()

    def log(self, text: str) -> None:
        self.options.log(f"[{time.monotonic() - self.started:6.1f}s] {text}")

    # --- services -----------------------------------------------------------------------
    def address_book(self, namespace: str) -> AddressBook:
        return self.books.setdefault(namespace, AddressBook())

    def port_for(self, namespace: str, pod: str, container_port: int) -> int:
        """The loopback port of ``pod``'s container port: stable for a pod name."""
        slot = (namespace, pod, container_port)
        if slot not in self.pod_ports:
            self.pod_ports[slot] = free_port()
        return self.pod_ports[slot]

    def _sync_services(self) -> None:
        for k, obj in self.objects.items():
            if obj["kind"] == "Service" and k not in self.services:
                self.services[k] = self._open_service(obj)
        for namespace in {k[1] for k in self.objects}:
            self._headless_names(namespace)

    def _open_service(self, obj: Obj) -> _Service:
        meta, spec = obj["metadata"], obj.get("spec") or {}
        service = _Service(obj)
        selector = spec.get("selector") or {}
        for port in spec.get("ports") or []:
            target = port.get("targetPort", port["port"])
            local = self.proxies.open(
                functools.partial(self._endpoints, meta["namespace"], selector, target)
            )
            service.proxies.append(local)
            self.address_book(meta["namespace"]).add(
                dns_names(meta["name"], meta["namespace"]), int(port["port"]), local
            )
        return service

    def _endpoints(self, namespace: str, selector: Mapping[str, str], target: Any) -> list[int]:
        ports = []
        for pod in self.pods():
            if pod.namespace != namespace or not pod.ready or not selector:
                continue
            if all(pod.labels.get(k) == v for k, v in selector.items()):
                number = _container_port(pod_spec_of(pod, self), target)
                if number is not None:
                    ports.append(self.port_for(namespace, pod.name, number))
        return ports

    def _headless_names(self, namespace: str) -> None:
        book = self.address_book(namespace)
        for obj in self.objects.values():
            if obj["kind"] != "StatefulSet" or obj["metadata"]["namespace"] != namespace:
                continue
            service = (obj.get("spec") or {}).get("serviceName")
            template = pod_template(obj) or {}
            ports = [
                int(p["containerPort"])
                for c in (template.get("spec") or {}).get("containers") or []
                for p in c.get("ports") or []
            ]
            for ordinal in range(int(obj["spec"].get("replicas", 1))):
                pod = f"{obj['metadata']['name']}-{ordinal}"
                for number in ports:
                    names = dns_names(pod, namespace, under=service) if service else []
                    book.add(names, number, self.port_for(namespace, pod, number))

    def _links(self, namespace: str) -> list[tuple[str, str]]:
        table: dict[str, list[tuple[str | None, int, int]]] = {}
        for k, service in self.services.items():
            if k[1] != namespace:
                continue
            ports = (service.obj.get("spec") or {}).get("ports") or []
            table[k[2]] = [
                (p.get("name"), int(p["port"]), local)
                for p, local in zip(ports, service.proxies, strict=False)
            ]
        return list(env_links(table))

    # --- pods ---------------------------------------------------------------------------
    def pod_sources(self, namespace: str, *, links: bool) -> Sources:
        config_maps = {
            k[2]: {str(a): str(b) for a, b in (o.get("data") or {}).items()}
            for k, o in self.objects.items()
            if k[0] == "ConfigMap" and k[1] == namespace
        }
        secrets = {
            k[2]: decoded_secret(o)
            for k, o in self.objects.items()
            if k[0] == "Secret" and k[1] == namespace
        }
        for name, data in self.extra_secrets.items():
            secrets.setdefault(name, data)
        claims = self.options.run_dir / "claims" / namespace
        return Sources(
            config_maps=config_maps,
            secrets=secrets,
            claim_dir=lambda claim: _mkdir(claims / claim),
            links=self._links(namespace) if links else (),
        )

    def _make_pod(self, controller: Controller, *, index: int | None) -> Pod:
        return build_pod(self, controller, index=index)

    def pod_name(self, controller: Controller, index: int | None) -> str:
        name = controller.name
        if controller.kind == "StatefulSet":
            return f"{name}-{index}"
        if controller.kind == "Deployment":
            return f"{name}-{template_hash(controller.obj)}-{_suffix()}"
        return f"{name}-{index}-{_suffix()}" if index is not None else f"{name}-{_suffix()}"

    def runtime_for(self, launch: ContainerLaunch) -> ContainerRuntime:
        """The runtime that starts ``launch``: podman's for the worker image's containers
        under ``--runtime podman``, else a local process."""
        oci = self.options.oci
        return oci if oci is not None and oci.takes(launch) else self.processes

    def next_incarnation(self) -> int:
        self._incarnation += 1
        return self._incarnation

    def new_uid(self) -> str:
        return str(uuid.uuid4())


def wave_of(obj: Obj) -> int:
    """The object's Argo CD sync wave (0 when it has none)."""
    annotations = obj["metadata"].get("annotations") or {}
    try:
        return int(annotations.get("argocd.argoproj.io/sync-wave", 0))
    except ValueError:
        return 0


def pod_spec_of(pod: Pod, cluster: Cluster) -> Obj:
    obj = cluster.objects.get(pod.owner)
    template = pod_template(obj) if obj else None
    spec: Obj = (template or {}).get("spec") or {}
    return spec


def _container_port(spec: Obj, target: Any) -> int | None:
    for container in spec.get("containers") or []:
        for port in container.get("ports") or []:
            if str(target) in (str(port.get("name")), str(port.get("containerPort"))):
                return int(port["containerPort"])
    return int(target) if str(target).isdigit() else None


def _template(obj: Obj) -> Any:
    return (obj.get("spec") or {}).get("template")


def _may_recreate(obj: Obj, mode: str) -> bool:
    annotations = obj["metadata"].get("annotations") or {}
    if mode == "argocd":
        options = {
            o.strip() for o in annotations.get("argocd.argoproj.io/sync-options", "").split(",")
        }
        return {"Force=true", "Replace=true"} <= options
    if mode == "flux":
        return annotations.get("kustomize.toolkit.fluxcd.io/force") == "enabled"
    return False


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path
