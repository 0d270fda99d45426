"""Traces of whole flows (TRACE-1…5): ``vf run-local`` exports to an OTLP receiver here,
which decodes every ``ExportTraceServiceRequest`` with the opentelemetry-proto package."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import re
import threading
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.runtime.support import run_flow
from tests.support import require
from vf_runtime.local.infra import LocalServer

pytestmark = pytest.mark.slow  # real servers and whole runs


@dataclass(frozen=True)
class Span:
    service: str
    name: str
    trace_id: str
    span_id: str
    parent: str
    links: tuple[str, ...]
    attributes: dict[str, Any]


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


def _decode(body: bytes) -> list[Span]:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    request = ExportTraceServiceRequest.FromString(body)
    spans: list[Span] = []
    for resource_spans in request.resource_spans:
        resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
        for scope in resource_spans.scope_spans:
            for span in scope.spans:
                spans.append(
                    Span(
                        service=str(resource.get("service.name")),
                        name=span.name,
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent=span.parent_span_id.hex(),
                        links=tuple(link.span_id.hex() for link in span.links),
                        attributes={a.key: _value(a.value) for a in span.attributes},
                    )
                )
    return spans


class _Receiver(ThreadingHTTPServer):
    spans: list[Span]
    paths: set[str]


class _Handler(BaseHTTPRequestHandler):
    server: _Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.paths.add(self.path)
        self.server.spans.extend(_decode(body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[_Receiver]:
    require(
        importlib.util.find_spec("opentelemetry") is not None,
        "the OpenTelemetry packages are missing: pip install -e '.[dev]' (the otel extra)",
    )
    server = _Receiver(("127.0.0.1", 0), _Handler)
    server.spans, server.paths = [], set()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _otel_env(server: _Receiver, out: Path) -> dict[str, str]:
    return {
        "VF_TEST_OUT": str(out),
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{server.server_address[1]}",
        "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
        "OTEL_TRACES_SAMPLER_ARG": "1.0",
        "OTEL_BSP_SCHEDULE_DELAY": "200",
    }


def _traces(spans: list[Span]) -> dict[str, list[Span]]:
    traces: dict[str, list[Span]] = defaultdict(list)
    for span in spans:
        traces[span.trace_id].append(span)
    return traces


def test_every_item_of_a_join_flow_is_one_trace_through_all_its_nodes(
    tmp_path: Path, nats_server: LocalServer, redis_server: LocalServer, receiver: _Receiver
) -> None:
    out = tmp_path / "sink.jsonl"
    run = run_flow("join.py", nats=nats_server, redis=redis_server, env=_otel_env(receiver, out))
    assert run.code == 0, run.output[-4000:]
    assert receiver.paths == {"/v1/traces"}
    traces = _traces(receiver.spans)
    assert len(traces) == 30, "one trace per item the producer emitted"
    for spans in traces.values():
        by_node = {s.attributes["vf.node"]: s for s in spans}
        assert sorted(by_node) == ["left", "numbers", "pair", "right", "sink"], spans
        assert len(spans) == 5, "one span per node, nothing retried"
        numbers, left, right = by_node["numbers"], by_node["left"], by_node["right"]
        pair, sink = by_node["pair"], by_node["sink"]
        assert numbers.parent == "" and numbers.name == "numbers emit"
        assert left.parent == numbers.span_id and right.parent == numbers.span_id
        assert pair.parent in (left.span_id, right.span_id)
        assert sorted(pair.links) == sorted([left.span_id, right.span_id])
        assert sink.parent == pair.span_id and sink.name == "sink process"
        item = numbers.attributes["vf.item"]
        for span in spans:
            assert span.service == "joins"
            assert span.attributes["vf.flow"] == "joins"
            assert span.attributes["vf.outcome"] == "ok"
            assert span.attributes["vf.item"] == item, "the envelope's trace id, every hop"
            assert span.attributes["vf.run"] and "vf.generation" in span.attributes
            assert "vf.dead_letter.code" not in span.attributes
    replicas = {
        s.attributes["vf.replica"] for s in receiver.spans if s.attributes["vf.node"] == "pair"
    }
    assert replicas == {0, 1}


def test_a_dead_lettered_item_ends_its_trace_with_the_code(
    tmp_path: Path, nats_server: LocalServer, redis_server: LocalServer, receiver: _Receiver
) -> None:
    out = tmp_path / "sink.jsonl"
    env = {**_otel_env(receiver, out), "VF_RETRY_DELAY_CAP_SECONDS": "0.5"}
    run = run_flow("poison.py", nats=nats_server, redis=redis_server, env=env)
    assert run.code == 6, run.output[-4000:]  # finished, one item dead-lettered
    traces = _traces(receiver.spans)
    assert len(traces) == 6
    failed = [
        spans for spans in traces.values() if any(s.attributes["vf.outcome"] != "ok" for s in spans)
    ]
    assert len(failed) == 1, "only item 3 fails"
    scale = [s for s in failed[0] if s.attributes["vf.node"] == "scale"]
    outcomes = sorted(s.attributes["vf.outcome"] for s in scale)
    assert outcomes == ["dead_lettered", "retried"], "one retry (max_retries=1), then the DLQ"
    (dead,) = [s for s in scale if s.attributes["vf.outcome"] == "dead_lettered"]
    assert dead.attributes["vf.dead_letter.code"] == "VF_NODE_VALUEERROR"
    (emitted,) = [s for s in failed[0] if s.attributes["vf.node"] == "numbers"]
    assert all(s.parent == emitted.span_id for s in scale), "each delivery a child of the item"
    assert not [s for s in failed[0] if s.attributes["vf.node"] == "sink"]


# Loaded first by every interpreter of the run (vf run-local, the zygote, each worker):
# an import of OpenTelemetry leaves a mark, then fails.
WATCH = """
import importlib.abc, os, sys

class _Watch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "opentelemetry":
            with open(os.environ["VF_TEST_OTEL_MARK"], "a") as mark:
                mark.write(name + "\\n")
            raise ImportError("blocked: " + name)
        return None

sys.meta_path.insert(0, _Watch())
"""


@pytest.mark.parametrize("endpoint", [False, True])
def test_without_an_endpoint_no_worker_imports_opentelemetry(
    tmp_path: Path, nats_server: LocalServer, redis_server: LocalServer, endpoint: bool
) -> None:
    """With tracing off nothing of OpenTelemetry loads in any process of a run; the same
    watch sees the import once an endpoint is set (the check is not vacuous)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(WATCH)
    mark = tmp_path / "imported"
    env = {
        "VF_TEST_OUT": str(tmp_path / "sink.jsonl"),
        "VF_TEST_OTEL_MARK": str(mark),
        "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
    }
    if endpoint:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://127.0.0.1:9"
    run = run_flow("join.py", nats=nats_server, redis=redis_server, env=env)
    assert run.code == 0, run.output[-4000:]
    if endpoint:
        assert "opentelemetry" in mark.read_text()
        assert "install vf-gitops-worker[otel]" in run.output  # said, and the run goes on
    else:
        assert not mark.exists(), mark.read_text()


def test_an_unsampled_parent_passes_its_context_on_and_a_sampled_one_gets_a_child(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    require(importlib.util.find_spec("opentelemetry") is not None, "no OpenTelemetry packages")
    from vf_runtime.worker.otel import OtlpTracer, Unsampled

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    config: Any = type("Config", (), {})()
    config.flow_id, config.node_name, config.replica_id = "f", "n", 0
    config.run_id, config.generation = "r", ""
    tracer = OtlpTracer(config, {"OTEL_TRACES_SAMPLER": "parentbased_always_on"})
    unsampled = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
    span = tracer.processing([{"traceparent": unsampled, "tracestate": "a=1"}], item="i")
    assert isinstance(span, Unsampled)
    assert dict(span.headers) == {"traceparent": unsampled, "tracestate": "a=1"}
    sampled = unsampled[:-2] + "01"
    child = tracer.processing([{"traceparent": sampled}], item="i")
    version, trace_id, span_id, flags = child.headers["traceparent"].split("-")
    assert (version, trace_id, flags) == ("00", sampled[3:35], "01")
    assert span_id != sampled[36:52]
    child.end("ok")
    root = tracer.processing([None], item="i")  # a message without headers: a new trace
    assert root.headers["traceparent"].split("-")[1] != trace_id
    root.end("ok")
    # a stranger's traceparent whose flags are not hex: a new trace, not an exception
    forged = tracer.processing([{"traceparent": unsampled[:-2] + "zz"}], item="i")
    assert forged.headers["traceparent"].split("-")[1] != unsampled[3:35]
    forged.end("ok")
    tracer.close(0.5)


def _tracer(monkeypatch: pytest.MonkeyPatch, sampler: str, ratio: str = "") -> Any:
    """An ``OtlpTracer`` of ``sampler`` whose finished spans an in-memory exporter keeps
    (``tracer.kept``), with a count of the spans asked of the SDK (``tracer.asked``)."""
    require(importlib.util.find_spec("opentelemetry") is not None, "no OpenTelemetry packages")
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from vf_runtime.worker.otel import OtlpTracer

    monkeypatch.setenv("OTEL_TRACES_SAMPLER", sampler)  # the SDK reads its sampler here
    monkeypatch.setenv("OTEL_TRACES_SAMPLER_ARG", ratio)
    config: Any = type("Config", (), {})()
    config.flow_id, config.node_name, config.replica_id = "f", "n", 0
    config.run_id, config.generation = "r", ""
    tracer: Any = OtlpTracer(config, {"OTEL_TRACES_SAMPLER": sampler})
    tracer.kept = InMemorySpanExporter()
    tracer.provider.add_span_processor(SimpleSpanProcessor(tracer.kept))
    tracer.asked = 0
    start_span = tracer.tracer.start_span

    def counted(*args: Any, **kwargs: Any) -> Any:
        tracer.asked += 1
        return start_span(*args, **kwargs)

    tracer.tracer = type("Counted", (), {"start_span": staticmethod(counted)})()
    return tracer


def test_an_item_the_sampler_drops_asks_the_sdk_for_no_span(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A producer's item its sampler drops gets a context of its own (a new trace id and
    span id, the flags the SDK gives a dropped span) without a span of the SDK."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    tracer = _tracer(monkeypatch, "parentbased_always_off")
    parents = []
    for n in range(200):
        span = tracer.emitted(item=f"n:{n}", seconds=0.001)
        parents.append(span.headers["traceparent"])
        assert set(span.headers) == {"traceparent"}
        span.end("ok")
    assert tracer.asked == 0
    assert all(re.fullmatch(r"00-[0-9a-f]{32}-[0-9a-f]{16}-02", p) for p in parents), parents[:3]
    assert len({p.split("-")[1] for p in parents}) == 200  # a trace each
    assert not tracer.kept.get_finished_spans()
    tracer.close(0.5)


def test_the_sampler_decides_each_producer_item_as_the_sdk_would(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At a ratio of 0.3 the items whose trace the SDK's own sampler records are exactly
    those that get a span, each recorded by the SDK with the trace id its outputs carry
    and vf's attributes; the others are dropped by the same rule."""
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace.sampling import TraceIdRatioBased
    from opentelemetry.trace import SpanKind

    from vf_runtime.worker.otel import root_bound

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    tracer = _tracer(monkeypatch, "parentbased_traceidratio", "0.3")
    sampler = tracer.provider.sampler
    assert tracer.bound == TraceIdRatioBased.get_bound_for_rate(0.3)
    sampled: dict[str, str] = {}
    for n in range(1000):
        span = tracer.emitted(item=f"n:{n}", seconds=0.001)
        _, trace_id, span_id, flags = span.headers["traceparent"].split("-")
        decision = sampler.should_sample(Context(), int(trace_id, 16), "n emit", SpanKind.PRODUCER)
        assert decision.decision.is_sampled() == bool(int(flags, 16) & 1), trace_id
        if int(flags, 16) & 1:
            sampled[trace_id] = span_id
        span.end("ok")
    assert 200 < len(sampled) < 400  # 300 expected; outside this: about 1e-12
    assert tracer.asked == len(sampled)
    kept = tracer.kept.get_finished_spans()
    assert {f"{s.context.trace_id:032x}": f"{s.context.span_id:016x}" for s in kept} == sampled
    for span in kept:
        assert span.name == "n emit" and span.attributes["vf.outcome"] == "ok"
        assert {"vf.flow", "vf.node", "vf.replica", "vf.run", "vf.item"} <= set(span.attributes)
    always = _tracer(monkeypatch, "parentbased_always_on").provider.sampler
    assert root_bound(always, "n emit") == 1 << 64  # every item: the SDK's span each
    tracer.close(0.5)


def test_a_replica_draws_only_the_low_half_of_each_new_trace_id(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every trace a replica starts shares the replica's high 64 bits; the low 64, drawn per
    item, decide: a dropped item's are at or above the sampler's bound and its header carries
    the replica's one parent id, a recorded item's are below it and its SDK span has the
    trace id its header carries. Every header is a well-formed W3C ``traceparent``; another
    replica has another high half and parent id."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    tracer = _tracer(monkeypatch, "parentbased_traceidratio", "0.3")
    contexts = []
    for n in range(1000):
        span = tracer.emitted(item=f"n:{n}", seconds=0.001)
        contexts.append(span.headers["traceparent"])
        span.end("ok")
    assert all(re.fullmatch(r"00-[0-9a-f]{32}-[0-9a-f]{16}-0[23]", c) for c in contexts)
    fields = [c.split("-") for c in contexts]
    (high,) = {trace_id[:16] for _, trace_id, _, _ in fields}  # one high half for all
    assert high == f"{tracer.high:016x}" != "0" * 16
    dropped = [(int(t[16:], 16), parent) for _, t, parent, flags in fields if flags == "02"]
    recorded = {t: parent for _, t, parent, flags in fields if flags == "03"}
    assert len(dropped) + len(recorded) == 1000 and 200 < len(recorded) < 400
    assert all(low >= tracer.bound for low, _ in dropped)
    assert len({parent for _, parent in dropped}) == 1 and dropped[0][1] != "0" * 16
    assert all(int(t[16:], 16) < tracer.bound for t in recorded)
    kept = tracer.kept.get_finished_spans()
    assert {f"{s.context.trace_id:032x}": f"{s.context.span_id:016x}" for s in kept} == recorded
    other = _tracer(monkeypatch, "parentbased_traceidratio", "0.3")
    assert other.high != tracer.high and other.dropped != tracer.dropped
    tracer.close(0.5)
    other.close(0.5)


async def _dead_letter_headers(url: str, flow: str) -> dict[str, str]:
    import nats

    client = await nats.connect(url)
    try:
        message = await client.jetstream().get_last_msg(f"vf-{flow}-dlq", f"vf.{flow}._dlq.>")
        return {str(k): str(v) for k, v in (message.headers or {}).items()}
    finally:
        await client.close()


def test_a_dead_letter_keeps_the_traceparent_of_the_message_it_copies(
    tmp_path: Path, nats_server: LocalServer, redis_server: LocalServer, receiver: _Receiver
) -> None:
    """The DLQ record of item 3 carries the context its input message carried, that of the
    producer's span, so ``vf dlq show`` and the run's kept copy lead to the item's trace."""
    out = tmp_path / "sink.jsonl"
    env = {**_otel_env(receiver, out), "VF_RETRY_DELAY_CAP_SECONDS": "0.5"}
    run = run_flow("poison.py", nats=nats_server, redis=redis_server, env=env)
    assert run.code == 6, run.output[-4000:]
    headers = asyncio.run(_dead_letter_headers(nats_server.url, "poison"))
    print(f"[dead letter] traceparent={headers.get('traceparent')!r}")
    (dead,) = [s for s in receiver.spans if s.attributes["vf.outcome"] == "dead_lettered"]
    (emitted,) = [
        s
        for s in receiver.spans
        if s.trace_id == dead.trace_id and s.attributes["vf.node"] == "numbers"
    ]
    version, trace_id, parent, flags = headers["traceparent"].split("-")
    assert (version, trace_id, parent) == ("00", emitted.trace_id, emitted.span_id)
    assert int(flags, 16) & 1, "sampled (the SDK may set other flag bits, e.g. random)"
    assert headers["VF-Code"] == "VF_NODE_VALUEERROR"
    copy = re.search(r"a copy is kept in (\S+)", run.output)
    assert copy is not None, run.output[-4000:]
    (record,) = [json.loads(line) for line in Path(copy.group(1)).read_text().splitlines()]
    assert record["headers"]["traceparent"] == headers["traceparent"]
