"""Platform defaults for every pod of an environment (``pods:`` in vf.yaml): default
requests, image pull Secrets, the ServiceAccount, topology spread, extra labels and
annotations. The JSON Schema has checked the shapes; this module makes the record."""

from __future__ import annotations

from typing import Any

from vf.config.network import parse_peers
from vf.errors import Problem
from vf.ir.records import DEFAULT_CPU, DEFAULT_MEMORY, PodOptions

Pairs = tuple[tuple[str, str], ...]


def parse_pod_options(raw: dict[str, Any] | None) -> PodOptions:
    raw = raw or {}
    requests = raw.get("default_requests", {"cpu": DEFAULT_CPU, "memory": DEFAULT_MEMORY})
    requests = requests or {}  # null or {}: no defaults (BestEffort pods are the user's call)
    return PodOptions(
        default_cpu=None if requests.get("cpu") is None else str(requests["cpu"]),
        default_memory=None if requests.get("memory") is None else str(requests["memory"]),
        image_pull_secrets=tuple(raw.get("image_pull_secrets") or ()),
        service_account=raw.get("service_account"),
        topology_spread=bool(raw.get("topology_spread", True)),
        labels=tuple(sorted((raw.get("labels") or {}).items())),
        annotations=tuple(sorted((raw.get("annotations") or {}).items())),
        priority_class_value=raw.get("priority_class_value"),
        metrics_from=parse_peers((raw.get("metrics") or {}).get("from")),
        service_monitor=bool((raw.get("metrics") or {}).get("service_monitor", False)),
    )


def pod_problems(
    env: str, *, options: PodOptions, priority_class: str | None, where: str = ""
) -> list[Problem]:
    if options.priority_class_value is None or priority_class is not None:
        return []
    return [
        Problem(
            code="VF_CONFIG_WORKLOAD",
            what=f"environments.{env}.pods.priority_class_value: there is no priority_class "
            "to create",
            remedy=f"set environments.{env}.priority_class to the PriorityClass's name",
            where=where or f"vf.yaml (environment '{env}')",
        )
    ]
