"""What building a pod reads from the cluster: the cluster's options, and :class:`PodHost`,
the part of ``Cluster`` that ``launch`` builds pods against."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from vf.runtree.controllers import Controller
from vf.runtree.images import ImageResolver
from vf.runtree.network import AddressBook
from vf.runtree.podspec import ContainerLaunch, Sources
from vf.runtree.runtime import ContainerRuntime
from vf_runtime.local.guardian import Guardian

if TYPE_CHECKING:
    from vf.runtree.podman_runtime import PodmanRuntime

Key = tuple[str, str, str]


@dataclass(frozen=True, kw_only=True)
class ClusterOptions:
    run_dir: Path
    backoff_base: float = 10.0
    grace_cap: float | None = None
    log: Callable[[str], None] = print
    guardian: Guardian | None = None  # ends every container's group if vf itself is killed
    keep_volumes: bool = False  # --run-dir: a deleted pod's emptyDirs stay for inspection
    oci: PodmanRuntime | None = None  # --runtime podman: the worker image's containers
    # --without-crd: kinds no CRD serves here, whose objects the API server refuses
    absent_kinds: frozenset[str] = frozenset()
    # a Prometheus file_sd file kept with what the tree's ServiceMonitors select (ADR 0240)
    scrape_targets: Path | None = None


class PodHost(Protocol):
    """Names, ports, volumes' sources and a runtime for a new pod."""

    options: ClusterOptions
    owner: dict[Key, str]  # object key -> the app that applied it
    resolvers: dict[str, ImageResolver]  # app -> how its images map to this machine

    def pod_name(self, controller: Controller, index: int | None) -> str: ...
    def new_uid(self) -> str: ...
    def next_incarnation(self) -> int: ...
    def port_for(self, namespace: str, pod: str, container_port: int) -> int: ...
    def address_book(self, namespace: str) -> AddressBook: ...
    def pod_sources(self, namespace: str, *, links: bool) -> Sources: ...
    def runtime_for(self, launch: ContainerLaunch) -> ContainerRuntime: ...
