"""What an environment ships for watching its flow (``observability:`` in vf.yaml): alerts
as a PrometheusRule, a Grafana dashboard as a ConfigMap, and the end-to-end latency the
alert holds the flow to (ADR 0216). The JSON Schema has checked the shapes and ranges;
here the settings are made a record and checked against each other."""

from __future__ import annotations

from typing import Any

from vf.errors import Problem
from vf.ir.records import Observability


def parse_observability(raw: dict[str, Any] | None) -> Observability:
    raw = raw or {}
    target = raw.get("latency_target_seconds")
    return Observability(
        alerts=bool(raw.get("alerts", False)),
        dashboard=bool(raw.get("dashboard", False)),
        latency_target_seconds=None if target is None else float(target),
    )


def observability_problems(env: str, *, options: Observability, where: str) -> list[Problem]:
    """A latency target with no alert to hold it: the setting would do nothing."""
    if options.latency_target_seconds is None or options.alerts:
        return []
    return [
        Problem(
            code="VF_CONFIG_OBSERVABILITY",
            what=f"environments.{env}.observability.latency_target_seconds is set, but "
            "alerts is not true: only the end-to-end latency alert reads it",
            remedy=f"set environments.{env}.observability.alerts: true, or drop "
            "latency_target_seconds",
            where=where,
        )
    ]
