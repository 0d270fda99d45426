"""What a Prometheus would scrape in this cluster: the tree's ServiceMonitors, resolved.

In a cluster the Prometheus Operator turns a ServiceMonitor into a scrape of the endpoints
of the Services it selects, and relabels each target with the ``namespace``, ``service``,
``pod``, ``container``, ``endpoint`` and ``job`` (the Service's name) it came from; the
endpoints list every pod the Service selects that has not ended and is not being deleted,
ready or not. ``vf run-tree`` writes the same targets, each pod's health port on loopback,
into a Prometheus ``file_sd_configs`` file (the form ``vf run-local`` writes,
``vf_runtime.local.scrape``), rewritten as pods start and go, so the flow's alerts and
dashboard select a local run as they select the cluster's pods (ADR 0240).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vf.runtree.pods import Pod
from vf.textio.objects import Obj
from vf_runtime.local.scrape import TargetGroup, loopback, write_groups

MONITOR = "ServiceMonitor"
_ENDED = ("Succeeded", "Failed")  # the Operator drops pods in these phases


def monitored(objects: Iterable[Obj], *, absent_kinds: frozenset[str]) -> bool:
    """Whether the tree holds a ServiceMonitor this cluster serves."""
    return MONITOR not in absent_kinds and any(o.get("kind") == MONITOR for o in objects)


def selects(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A Kubernetes label selector (``matchLabels``, ``matchExpressions``) on ``labels``."""
    selector = selector or {}
    wanted = selector.get("matchLabels") or {}
    if any(labels.get(str(k)) != str(v) for k, v in wanted.items()):
        return False
    for rule in selector.get("matchExpressions") or []:
        key, values = str(rule.get("key")), [str(v) for v in rule.get("values") or []]
        operator = rule.get("operator")
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and labels.get(key) in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
    return True


def _namespaces(monitor: Obj) -> set[str] | None:
    """The namespaces whose Services ``monitor`` selects (None: every namespace)."""
    chosen = (monitor.get("spec") or {}).get("namespaceSelector") or {}
    if chosen.get("any"):
        return None
    return {str(n) for n in chosen.get("matchNames") or []} or {monitor["metadata"]["namespace"]}


def _container_port(spec: Obj, target: Any) -> tuple[str, int] | None:
    """The container and port number a Service's ``targetPort`` names in a pod."""
    for container in spec.get("containers") or []:
        for port in container.get("ports") or []:
            if str(target) in (str(port.get("name")), str(port.get("containerPort"))):
                return str(container.get("name")), int(port["containerPort"])
    return ("", int(target)) if str(target).isdigit() else None


@dataclass(frozen=True)
class _Scrape:
    """One endpoint of one ServiceMonitor on one Service it selects."""

    service: Obj
    endpoint: Obj
    job: str

    def target(self) -> tuple[str, Any] | None:
        """The endpoint's name (its ``endpoint`` label) and the pods' port it reaches."""
        name = self.endpoint.get("port")
        if name is None:  # by the pods' own port, as the Operator's targetPort does
            target = self.endpoint.get("targetPort")
            return None if target is None else (str(target), target)
        for port in (self.service.get("spec") or {}).get("ports") or []:
            if port.get("name") == name:
                return str(name), port.get("targetPort", port["port"])
        return None


def _scrapes(objects: Iterable[Obj]) -> Iterator[_Scrape]:
    found = list(objects)
    services = [o for o in found if o.get("kind") == "Service"]
    for monitor in (o for o in found if o.get("kind") == MONITOR):
        spec = monitor.get("spec") or {}
        namespaces = _namespaces(monitor)
        for service in services:
            meta = service["metadata"]
            labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
            if namespaces is not None and meta["namespace"] not in namespaces:
                continue
            if not selects(spec.get("selector"), labels):
                continue
            job = labels.get(str(spec.get("jobLabel") or "")) or meta["name"]
            for endpoint in spec.get("endpoints") or []:
                yield _Scrape(service=service, endpoint=endpoint, job=job)


def target_groups(
    objects: Iterable[Obj],
    pods: Iterable[Pod],
    *,
    spec_of: Callable[[Pod], Obj],
    port_for: Callable[[str, str, int], int],
) -> list[TargetGroup]:
    """A group per pod and endpoint the cluster's ServiceMonitors select, with the labels
    the Operator's relabelling gives a pod's target."""
    groups: list[TargetGroup] = []
    live = [p for p in pods if p.terminating_since is None and p.phase not in _ENDED]
    for scrape in _scrapes(objects):
        meta, target = scrape.service["metadata"], scrape.target()
        selector = (scrape.service.get("spec") or {}).get("selector") or {}
        if target is None or not selector:  # no selector: endpoints the Service's owner keeps
            continue
        name, port = target
        for pod in live:
            if pod.namespace != meta["namespace"]:
                continue
            if any(pod.labels.get(k) != v for k, v in selector.items()):
                continue
            found = _container_port(spec_of(pod), port)
            if found is None:
                continue
            container, number = found
            labels = {
                "namespace": pod.namespace,
                "service": meta["name"],
                "pod": pod.name,
                "container": container,
                "endpoint": name,
                "job": scrape.job,
            }
            if scrape.endpoint.get("path"):
                labels["__metrics_path__"] = str(scrape.endpoint["path"])
            address = loopback(port_for(pod.namespace, pod.name, number))
            groups.append(TargetGroup(targets=(address,), labels=labels))
    return sorted(groups, key=lambda g: (sorted(g.labels.items()), g.targets))


@dataclass
class ScrapeFile:
    """The run's ``file_sd_configs`` file, rewritten only when its targets change."""

    path: Path
    log: Callable[[str], None]
    written: list[TargetGroup] | None = None
    failed: bool = False

    def update(self, groups: list[TargetGroup]) -> None:
        if groups == self.written:
            return
        try:
            write_groups(self.path, groups)
        except OSError as exc:  # a Prometheus of the user's misses the change, nothing else
            if not self.failed:
                self.log(f"could not write the scrape targets {self.path}: {exc}")
            self.failed = True
            return
        self.written = groups
