"""What an environment ships for watching its flow (``observability:`` in vf.yaml): alerts
as a PrometheusRule, a Grafana dashboard as a ConfigMap, and the end-to-end latency the
alert holds the flow to (ADR 0216). The JSON Schema has checked the shapes and ranges;
here the settings are made a record and checked against each other."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from vf.errors import Problem
from vf.ir.records import Observability, Tracing


def parse_observability(raw: dict[str, Any] | None) -> Observability:
    raw = raw or {}
    target = raw.get("latency_target_seconds")
    tracing = raw.get("tracing")
    return Observability(
        alerts=bool(raw.get("alerts", False)),
        dashboard=bool(raw.get("dashboard", False)),
        latency_target_seconds=None if target is None else float(target),
        tracing=None if tracing is None else _tracing(tracing),
    )


def _tracing(raw: dict[str, Any]) -> Tracing:
    return Tracing(
        endpoint=str(raw["endpoint"]).strip(),
        sample_ratio=float(raw.get("sample_ratio", 0.01)),
        protocol=str(raw.get("protocol", "http/protobuf")),
    )


def tracing_env(tracing: Tracing | None) -> dict[str, str]:
    """The standard variables the worker's OpenTelemetry SDK reads (TRACE-4); none untraced."""
    if tracing is None:
        return {}
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": tracing.endpoint,
        "OTEL_EXPORTER_OTLP_PROTOCOL": tracing.protocol,
        "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
        "OTEL_TRACES_SAMPLER_ARG": f"{tracing.sample_ratio:g}",
    }


def _endpoint_problem(endpoint: str) -> str | None:
    """Why an OTLP endpoint is not one the exporters can use, or None."""
    try:
        url = urlsplit(endpoint)
        url.port  # noqa: B018 (raises for a port that is not a number)
    except ValueError as exc:
        return f"it is not a URL ({exc})"
    if url.scheme not in ("http", "https") or not url.hostname:
        return "it is not an http:// or https:// URL with a host"
    if url.username is not None or url.password is not None:
        return "it holds credentials, which would be written into every worker's pod"
    if url.query or url.fragment:
        return "it has a query or a fragment, which the exporters do not send"
    return None


def observability_problems(env: str, *, options: Observability, where: str) -> list[Problem]:
    """A latency target with no alert to hold it (the setting would do nothing); a trace
    endpoint the exporters cannot use."""
    problems: list[Problem] = []
    why = None if options.tracing is None else _endpoint_problem(options.tracing.endpoint)
    if options.tracing is not None and why is not None:
        problems.append(
            Problem(
                code="VF_CONFIG_TRACING",
                what=f"environments.{env}.observability.tracing.endpoint "
                f"{options.tracing.endpoint!r} cannot be used: {why}",
                remedy="give the collector's base URL, e.g. "
                "http://otel-collector.observability:4318 (http/protobuf) or :4317 (grpc); "
                "headers such as tokens go in OTEL_EXPORTER_OTLP_HEADERS from a Secret",
                where=where,
            )
        )
    if options.latency_target_seconds is None or options.alerts:
        return problems
    problems.append(
        Problem(
            code="VF_CONFIG_OBSERVABILITY",
            what=f"environments.{env}.observability.latency_target_seconds is set, but "
            "alerts is not true: only the end-to-end latency alert reads it",
            remedy=f"set environments.{env}.observability.alerts: true, or drop "
            "latency_target_seconds",
            where=where,
        )
    )
    return problems
