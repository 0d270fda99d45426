"""A worker's ``/metrics`` (HEALTH-3): the Prometheus text it renders, checked by the real
``promtool``, and what a real worker on a real broker reports while it drains a backlog."""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import nats
import pytest
from nats.aio.msg import Msg

from tests.runtime.support import FLOWS
from tests.support import require
from vf.commands.run_local.command import provision_topology
from vf.pipeline import CompileRequest, compile_project
from vf_runtime.broker.naming import RunNames
from vf_runtime.broker.provision import provision
from vf_runtime.local.infra import LocalServer, free_port
from vf_runtime.local.supervisor import COUNTER
from vf_runtime.worker.health import LATENCY_BUCKETS, PROCESS_BUCKETS, Histogram, Metrics
from vf_runtime.worker.inputs import delivery_counts
from vf_runtime.worker.replica import run_worker

LABELS = 'flow="f",node="n",replica="2"'


def _promtool() -> str:
    path = shutil.which("promtool")
    require(path is not None, "promtool is not on PATH: run scripts/setup (Debian's prometheus)")
    assert path is not None
    return path


def _value(text: str, series: str) -> float:
    found = re.search(rf"^{re.escape(series)} (\S+)$", text, re.MULTILINE)
    assert found is not None, f"no {series} in:\n{text}"
    return float(found.group(1))


def _busy() -> Metrics:
    metrics = Metrics(node="n", flow="f", replica=2)
    metrics.bump("processed", 3)
    for seconds in (0.0004, 0.01, 0.01001, 700.0):
        metrics.observe(seconds)
    metrics.arrived(1.5)
    metrics.arrived(-0.2)  # a producer whose clock runs ahead: counted as no time at all
    metrics.dead_lettered("VF_NODE_VALUEERROR")
    metrics.dead_lettered("VF_NODE_VALUEERROR")
    metrics.dead_lettered("VF_BLOB_MISSING")
    metrics.backlog[("src", "vf-f-n-src")] = 42
    metrics.in_flight = lambda: 7
    return metrics


def test_a_histogram_counts_a_value_in_the_first_bucket_whose_bound_it_reaches() -> None:
    histogram = Histogram((0.01, 1.0))
    for value in (0.005, 0.01, 0.02, 1.0, 5.0):
        histogram.observe(value)
    lines = histogram.lines("h", '{a="1"}')
    assert lines == [
        'h_bucket{a="1",le="0.01"} 2',  # le is inclusive: 0.01 itself is in
        'h_bucket{a="1",le="1"} 4',
        'h_bucket{a="1",le="+Inf"} 5',
        'h_sum{a="1"} 6.035000',
        'h_count{a="1"} 5',
    ]


def test_the_buckets_span_milliseconds_to_minutes() -> None:
    assert PROCESS_BUCKETS[0] == 0.001 and PROCESS_BUCKETS[-1] >= 300
    assert LATENCY_BUCKETS[-1] >= 3600
    assert list(PROCESS_BUCKETS) == sorted(set(PROCESS_BUCKETS))
    assert list(LATENCY_BUCKETS) == sorted(set(LATENCY_BUCKETS))


def test_every_series_names_the_flow_node_and_replica() -> None:
    text = _busy().render()
    assert _value(text, f"vf_messages_processed_total{{{LABELS}}}") == 3
    assert _value(text, f'vf_process_seconds_bucket{{{LABELS},le="0.001"}}') == 1
    assert _value(text, f'vf_process_seconds_bucket{{{LABELS},le="0.01"}}') == 2
    assert _value(text, f'vf_process_seconds_bucket{{{LABELS},le="600"}}') == 3
    assert _value(text, f'vf_process_seconds_bucket{{{LABELS},le="+Inf"}}') == 4
    assert _value(text, f"vf_end_to_end_seconds_count{{{LABELS}}}") == 2
    assert _value(text, f"vf_end_to_end_seconds_sum{{{LABELS}}}") == 1.5
    assert _value(text, f'vf_dead_letters_total{{{LABELS},code="VF_NODE_VALUEERROR"}}') == 2
    assert _value(text, f'vf_dead_letters_total{{{LABELS},code="VF_BLOB_MISSING"}}') == 1
    assert _value(text, f"vf_messages_dead_lettered_total{{{LABELS}}}") == 3
    assert _value(text, f"vf_messages_in_flight{{{LABELS}}}") == 7
    series = f'vf_backlog_messages{{{LABELS},parent="src",durable="vf-f-n-src"}}'
    assert _value(text, series) == 42
    assert abs(_value(text, f"vf_start_time_seconds{{{LABELS}}}") - time.time()) < 600
    for line in text.splitlines():
        if not line.startswith("#"):
            assert line.startswith(("vf_",)) and LABELS in line, line
    names = re.findall(r"^# TYPE (\S+) ", text, re.MULTILINE)
    assert len(names) == len(set(names)) and all(f"# HELP {n} " in text for n in names)


def test_label_values_are_escaped() -> None:
    text = Metrics(node='a"b\\c', flow="f").render()
    assert 'node="a\\"b\\\\c"' in text
    assert "processed" in {name for name, _, _ in COUNTER.findall(text)}


def test_promtool_reads_the_metrics_and_finds_nothing_to_lint() -> None:
    promtool = _promtool()
    for metrics in (Metrics(node="n", flow="f"), _busy()):
        done = subprocess.run(
            [promtool, "check", "metrics"],
            input=metrics.render(),
            capture_output=True,
            text=True,
            check=False,
        )
        print(f"promtool check metrics: rc={done.returncode} {done.stdout}{done.stderr}")
        assert done.returncode == 0 and not (done.stdout + done.stderr).strip()


def _msg(reply: str) -> Msg:
    return Msg(None, subject="x", reply=reply, data=b"")  # type: ignore[arg-type]


def test_the_backlog_is_read_from_the_ack_subject() -> None:
    assert delivery_counts(_msg("$JS.ACK.S.C.1.10.9.1700000000000000000.5")) == (False, 5)
    assert delivery_counts(_msg("$JS.ACK.S.C.3.10.9.1700000000000000000.0")) == (True, 0)
    # the long form (a domain and an account hash) goes through nats-py's parser
    long = "$JS.ACK.dom.acc.S.C.2.10.9.1700000000000000000.12.tok"
    assert delivery_counts(_msg(long)) == (True, 12)


def _get(port: int) -> str | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1) as response:
            return str(response.read().decode())
    except OSError:
        return None


@pytest.mark.slow
def test_a_worker_draining_a_backlog_reports_it(
    tmp_path: Path, nats_server: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The producer fills its stream first; the sink then drains it while /metrics is read."""
    count = 4000
    env = {"VF_TEST_OUT": str(tmp_path / "sink.jsonl"), "VF_TEST_FLOW": "metered"}
    for key, value in {**env, "VF_TEST_COUNT": str(count)}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.syspath_prepend(str(FLOWS))
    plan = compile_project(CompileRequest(graph=str(FLOWS / "flood.py"))).plans[0]
    stream = RunNames(plan.flow_id, plan.run_id).stream("numbers")
    port = free_port()

    def worker_env(node: str, health: int) -> dict[str, str]:
        values = dict(next(w for w in plan.workloads if w.node == node).env)
        values.update(VF_NATS_URL=nats_server.url, VF_REPLICA_ID="0", VF_HEALTH_PORT=str(health))
        return values

    async def body() -> tuple[list[str], int]:
        client = await nats.connect(nats_server.url)
        js = client.jetstream()
        try:
            await provision(js, provision_topology(plan))
            producer = asyncio.create_task(run_worker(worker_env("numbers", 0)))
            deadline = time.monotonic() + 60
            while (await js.stream_info(stream)).state.messages < count:
                assert time.monotonic() < deadline, "the producer did not publish its items"
                await asyncio.sleep(0.05)
            sink = asyncio.create_task(run_worker(worker_env("sink", port)))
            scrapes: list[str] = []
            while not sink.done():
                text = await asyncio.to_thread(_get, port)
                if text is not None:
                    scrapes.append(text)
                await asyncio.sleep(0.01)
            codes = await asyncio.wait_for(asyncio.gather(producer, sink), timeout=60)
            assert list(codes) == [0, 0]
            return scrapes, count
        finally:
            await client.close()

    scrapes, sent = asyncio.run(body())
    labels = 'flow="metered",node="sink",replica="0"'
    series = rf'vf_backlog_messages\{{{labels},parent="numbers",durable="[^"]+"\}}'
    backlog = re.compile(rf"^{series} (\d+)$", re.MULTILINE)
    seen = [int(m) for text in scrapes for m in backlog.findall(text)]
    last = scrapes[-1]
    processed = _value(last, f"vf_messages_processed_total{{{labels}}}")
    print(
        f"scrapes: {len(scrapes)}, backlog seen: max {max(seen, default=-1)} "
        f"last {seen[-1] if seen else None}, processed by the last scrape: {processed:.0f}/{sent}"
    )
    assert seen and max(seen) > 0, "the sink never reported the items still waiting for it"
    assert seen[-1] < max(seen), "the backlog the sink reported never shrank"
    assert _value(last, f"vf_end_to_end_seconds_count{{{labels}}}") == processed
    assert _value(last, f"vf_process_seconds_count{{{labels}}}") == processed
    assert _value(last, f"vf_end_to_end_seconds_sum{{{labels}}}") > 0
    done = subprocess.run(
        [_promtool(), "check", "metrics"], input=last, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0 and not (done.stdout + done.stderr).strip(), done.stdout
