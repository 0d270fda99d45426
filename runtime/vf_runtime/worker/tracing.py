"""Traces of the items a worker handles (TRACE-1…5 in PROTOCOL.md, ADR 0221).

W3C trace context travels in each data message's ``traceparent`` header, never in
the envelope. A worker records one span per item: a producer's per item emitted,
a processor's or consumer's per input group, a child of its first input's context
that links every input of a join. Spans go out over OTLP through the OpenTelemetry
SDK, configured by the standard ``OTEL_*`` variables.

This module imports nothing of OpenTelemetry: with no OTLP endpoint set
:func:`tracer_from` returns None, the loops skip every tracing step, and the
packages are never loaded (a worker image may lack them: the ``otel`` extra).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from vf_runtime.worker.config import WorkerConfig

log = logging.getLogger("vf.worker")

TRACEPARENT, TRACESTATE = "traceparent", "tracestate"
ENDPOINTS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
# How an item's span ends (its ``vf.outcome`` attribute)
OK = "ok"  # processed, its output stored, its inputs acked
RETRIED = "retried"  # failed, handed back for a later delivery (DELIV-3)
DEAD_LETTERED = "dead_lettered"  # copied to the dead-letter stream with its code
HANDED_BACK = "handed_back"  # left un-acked: a stop, a stuck call, the breaker, a full store
DROPPED = "dropped"  # a REALTIME output the broker did not take in time
CLOSE_SECONDS = 5.0  # the most a worker waits at exit for its last spans to go out


class ItemSpan(Protocol):
    """One item's span while a worker handles it."""

    @property
    def headers(self) -> Mapping[str, str]:
        """The trace context an output of this item carries (``traceparent``…)."""
        ...

    @property
    def live(self) -> bool:
        """Whether ``end`` has anything to do: a span not ended yet (an item its trace does
        not record has none: it is never ended)."""
        ...

    def end(self, outcome: str, *, code: str = "") -> None:
        """End the span (the first call only) with its outcome and dead-letter code."""
        ...


class Tracer(Protocol):
    """Starts the spans of one replica's items and exports them."""

    def emitted(self, *, item: str, seconds: float) -> ItemSpan:
        """A producer's item, made by a ``next()`` that took ``seconds``: a new trace."""
        ...

    def processing(self, carriers: Sequence[Mapping[str, str] | None], *, item: str) -> ItemSpan:
        """An input group, one header mapping per input (None: a message without headers)."""
        ...

    def close(self, timeout: float) -> None:
        """Export what is left, waiting at most ``timeout`` seconds."""
        ...


class _Message(Protocol):
    @property
    def headers(self) -> dict[str, str] | None: ...


class _Envelope(Protocol):
    @property
    def trace_id(self) -> str: ...


class Traced(Protocol):
    """What spans are kept on: a delivery (``vf_runtime.worker.inputs.Delivery``)."""

    @property
    def msg(self) -> _Message: ...

    @property
    def envelope(self) -> _Envelope | None: ...

    span: ItemSpan | None


def tracing_wanted(env: Mapping[str, str]) -> bool:
    """Whether the ``OTEL_*`` environment asks for traces: an OTLP endpoint, not switched off."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if env.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() == "none":
        return False
    return any(env.get(name, "").strip() for name in ENDPOINTS)


def tracer_from(config: WorkerConfig, env: Mapping[str, str] | None = None) -> Tracer | None:
    """The replica's tracer, or None when no endpoint is set (nothing is imported then).

    The SDK reads the process environment itself, so ``env`` defaults to it.
    """
    env = os.environ if env is None else env
    if not tracing_wanted(env):
        return None
    try:
        from vf_runtime.worker.otel import OtlpTracer
    except ImportError as exc:
        log.warning(
            "traces are asked for (OTEL_EXPORTER_OTLP_ENDPOINT) but OpenTelemetry cannot be "
            "imported (%s): install vf-gitops-worker[otel]; this replica records no spans",
            exc,
        )
        return None
    return OtlpTracer(config, env)


def start_spans(tracer: Tracer, groups: Sequence[Sequence[Traced]]) -> None:
    """Give every delivery of each group the group's span."""
    for group in groups:
        first = group[0]
        envelope = first.envelope
        item = envelope.trace_id if envelope is not None else ""
        # one input (all but a join's): no comprehension of one
        carriers = [first.msg.headers] if len(group) == 1 else [d.msg.headers for d in group]
        span = tracer.processing(carriers, item=item)
        for delivery in group:
            delivery.span = span


def end_spans(group: Sequence[Traced], outcome: str, *, code: str = "") -> None:
    """End the spans of a group's deliveries that still run (one per group: ended once)."""
    for delivery in group:
        span = delivery.span
        if span is not None and span.live:
            span.end(outcome, code=code)
