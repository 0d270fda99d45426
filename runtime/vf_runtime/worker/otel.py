"""Item spans through the OpenTelemetry SDK, exported over OTLP (the ``otel`` extra).

Imported only by :func:`vf_runtime.worker.tracing.tracer_from` once an OTLP endpoint
is set. The SDK reads the standard variables itself: the endpoint
(``OTEL_EXPORTER_OTLP_ENDPOINT``, ``…_TRACES_ENDPOINT``), headers, timeout, the
sampler (``OTEL_TRACES_SAMPLER``, ``OTEL_TRACES_SAMPLER_ARG``) and resource
attributes; vf picks the exporter from ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`` or
``OTEL_EXPORTER_OTLP_PROTOCOL`` (``http/protobuf``, the default, or ``grpc``).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.trace.sampling import (
    Decision,
    ParentBased,
    Sampler,
    StaticSampler,
    TraceIdRatioBased,
)
from opentelemetry.trace import (
    Link,
    Span,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    get_current_span,
)
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

if TYPE_CHECKING:
    from vf_runtime.worker.config import WorkerConfig

log = logging.getLogger("vf.worker")
PROTOCOLS = ("http/protobuf", "grpc")
TRACEPARENT, TRACESTATE = "traceparent", "tracestate"  # the headers of TRACE-1
_PROPAGATOR = TraceContextTextMapPropagator()


def _nonzero_bits() -> int:
    """64 random bits, never all zero."""
    return random.getrandbits(64) or 1


def exporter(env: Mapping[str, str]) -> SpanExporter:
    """The OTLP span exporter the environment names (the SDK's own variables)."""
    protocol = (
        env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    ).strip()
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()
    if protocol not in PROTOCOLS:
        log.warning("OTLP protocol %r is not one vf exports with: using http/protobuf", protocol)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HttpExporter,
    )

    return HttpExporter()


class OtlpSpan:
    """One item's SDK span and the ``traceparent`` its outputs carry."""

    __slots__ = ("headers", "live", "span")

    def __init__(self, span: Span) -> None:
        self.span = span
        self.live = True
        context = span.get_span_context()
        trace_id, span_id = context.trace_id, context.span_id
        flags = int(context.trace_flags)
        headers = {TRACEPARENT: f"00-{trace_id:032x}-{span_id:016x}-{flags:02x}"}
        if context.trace_state:
            headers[TRACESTATE] = context.trace_state.to_header()
        self.headers: Mapping[str, str] = headers

    def end(self, outcome: str, *, code: str = "") -> None:
        if not self.live:
            return
        self.live = False
        span = self.span
        if span.is_recording():
            span.set_attribute("vf.outcome", outcome)
            if code:
                span.set_attribute("vf.dead_letter.code", code)
                span.set_status(Status(StatusCode.ERROR, code))
        span.end()


class Unsampled:
    """An item its trace does not record: its outputs pass the parent's context on as it
    came (a span a parent-based sampler drops would only draw a span id nobody sees)."""

    __slots__ = ("headers",)
    live = False  # nothing to end: the loops skip ``end``

    def __init__(self, headers: Mapping[str, str]) -> None:
        self.headers = headers

    def end(self, outcome: str, *, code: str = "") -> None:
        pass


# the last hex digit of a traceparent whose sampled flag (bit 0 of the flags) is clear
_UNSAMPLED_DIGITS = frozenset("02468ace")
_HEX = frozenset("0123456789abcdef")


class PresetIds(RandomIdGenerator):
    """The SDK's random ids, except one trace id vf drew itself for the next root span."""

    def __init__(self) -> None:
        self.preset = 0  # 0 is never a trace id (W3C: all zeroes is invalid)

    def generate_trace_id(self) -> int:
        trace_id, self.preset = self.preset, 0
        return trace_id or super().generate_trace_id()


def root_bound(sampler: Sampler, name: str) -> int | None:
    """The number the 64 low bits of a new trace's id must stay below for ``sampler`` to
    record it, or None when vf cannot know (a sampler not of the SDK's own kinds).

    The SDK's samplers decide a root by those bits alone (``TraceIdRatioBased``: sampled
    when they are below its bound; always on: every id; always off: none; a parent-based
    one asks its root sampler), so the bound is found by asking ``sampler`` itself."""
    if not isinstance(sampler, ParentBased | TraceIdRatioBased | StaticSampler):
        return None

    def sampled(low: int) -> bool:
        result = sampler.should_sample(Context(), 1 << 64 | low, name, SpanKind.PRODUCER)
        return result.decision in (Decision.RECORD_ONLY, Decision.RECORD_AND_SAMPLE)

    below, above = 0, 1 << 64  # the bound lies in [below, above]: the first id not sampled
    while below < above:
        middle = (below + above) // 2
        below, above = (middle + 1, above) if sampled(middle) else (below, middle)
    return below


class OtlpTracer:
    """A replica's tracer provider: its resource is the flow, its spans the items."""

    def __init__(self, config: WorkerConfig, env: Mapping[str, str]) -> None:
        node, replica = config.node_name, config.replica_id
        resource = Resource.create(
            {"service.name": config.flow_id, "service.instance.id": f"{node}/{replica}"}
        )
        # the worker shuts the provider down itself, bounded (close): an exit hook would
        # wait out the exporter's retries when the collector is away
        self.ids = PresetIds()
        self.provider = TracerProvider(
            resource=resource, shutdown_on_exit=False, id_generator=self.ids
        )
        self.provider.add_span_processor(BatchSpanProcessor(exporter(env)))
        self.tracer = self.provider.get_tracer("vf_runtime.worker")
        self.attributes: dict[str, str | int] = {
            "vf.flow": config.flow_id,
            "vf.node": node,
            "vf.replica": replica,
            "vf.run": config.run_id,
            "vf.generation": config.generation,
        }
        self.names = (f"{node} emit", f"{node} process")
        self.bound = root_bound(self.provider.sampler, self.names[0])
        # A new trace's id is this replica's high half and a low half drawn per item (the
        # bits the sampler decides by). What an item the sampler drops carries around that
        # low half is fixed: the high half, one parent id and the flags the SDK gives such
        # a span (ADR 0247). Neither is ever 0, so no id is all zeroes (W3C: invalid).
        self.high = _nonzero_bits()
        random_flag = TraceFlags.RANDOM_TRACE_ID if self.ids.is_trace_id_random() else 0
        self.dropped = (
            f"00-{self.high:016x}",
            f"-{_nonzero_bits():016x}-{random_flag:02x}",
        )
        # a parent-based sampler (the default) never records below an unsampled parent
        sampler = env.get("OTEL_TRACES_SAMPLER", "parentbased_always_on").strip()
        self.parent_based = sampler.startswith("parentbased_")

    def emitted(self, *, item: str, seconds: float) -> OtlpSpan | Unsampled:
        """A new trace. An item the sampler drops costs one 64-bit random number and a
        header: the SDK is asked for a span only when that number, the trace id's low
        half, is below the sampler's bound, and then for a span of that same trace id."""
        low = random.getrandbits(64)
        bound = self.bound
        if bound is None:  # a sampler vf cannot read: the SDK draws and decides alone
            return self._span(item, seconds)
        if low >= bound:
            prefix, suffix = self.dropped  # int.to_bytes().hex(): faster than a format spec
            return Unsampled({TRACEPARENT: prefix + low.to_bytes(8, "big").hex() + suffix})
        self.ids.preset = self.high << 64 | low
        return self._span(item, seconds)

    def _span(self, item: str, seconds: float) -> OtlpSpan:
        """The SDK's span of a new trace for a producer's item."""
        span = self.tracer.start_span(
            self.names[0],
            context=Context(),  # a new trace, whatever the thread's context holds
            kind=SpanKind.PRODUCER,
            attributes={**self.attributes, "vf.item": item},
            start_time=time.time_ns() - int(seconds * 1e9),
        )
        return OtlpSpan(span)

    def processing(
        self, carriers: Sequence[Mapping[str, str] | None], *, item: str
    ) -> OtlpSpan | Unsampled:
        carrier = carriers[0] if carriers else None
        if self.parent_based and carrier:  # a well-formed parent whose sampled flag is clear
            given = carrier.get(TRACEPARENT)
            if (
                given is not None
                and len(given) == 55
                and given.startswith("00-")
                and given[54] in _UNSAMPLED_DIGITS
                and given[53] in _HEX
            ):
                state = carrier.get(TRACESTATE)
                passed = {TRACEPARENT: given}
                if state is not None:
                    passed[TRACESTATE] = state
                return Unsampled(passed)
        contexts = [_PROPAGATOR.extract(each or {}) for each in carriers]
        links: list[Link] = []
        if len(contexts) > 1:  # a join: a link to each input's span
            for context in contexts:
                parent = get_current_span(context).get_span_context()
                if parent.is_valid:
                    links.append(Link(parent))
        span = self.tracer.start_span(
            self.names[1],
            context=contexts[0] if contexts else Context(),
            kind=SpanKind.CONSUMER,
            attributes={**self.attributes, "vf.item": item},
            links=links,
        )
        return OtlpSpan(span)

    def close(self, timeout: float) -> None:
        """Export the spans still queued; a collector that does not answer costs ``timeout``."""
        closing = threading.Thread(target=self.provider.shutdown, name="vf-otel-close", daemon=True)
        closing.start()
        closing.join(timeout)
        if closing.is_alive():
            log.warning("the trace collector did not take the last spans within %gs", timeout)
