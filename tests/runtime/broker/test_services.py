"""Provisioning, dead letters, health and supervision against real servers and processes."""

from __future__ import annotations

import asyncio
import io
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, TypeVar

import pytest
from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig
from nats.js.errors import NotFoundError

from tests.runtime.opshelp import with_js
from tests.runtime.support import FLOWS
from vf.commands.run_local.command import provision_topology
from vf.pipeline import CompileRequest, compile_project
from vf_runtime.broker.client import BrokerError
from vf_runtime.broker.naming import RunNames
from vf_runtime.broker.provision import RunTopology, provision, prune_superseded
from vf_runtime.broker.topology import NodeTopology
from vf_runtime.local.infra import LocalServer, free_port
from vf_runtime.local.supervisor import (
    ReplicaSpec,
    SuperviseOptions,
    SupervisionPolicy,
    Supervisor,
    scrape,
)
from vf_runtime.wire import EOS, Envelope, encode_envelope
from vf_runtime.worker.health import HealthServer, Metrics
from vf_runtime.worker.replica import run_worker

T = TypeVar("T")
NODES = (
    NodeTopology(
        name="src", parents=(), replicas=1, partitioned=False, has_children=True, max_deliver=4
    ),
    NodeTopology(
        name="mid", parents=("src",), replicas=2, partitioned=True, has_children=True, max_deliver=4
    ),
    NodeTopology(
        name="out",
        parents=("mid",),
        replicas=1,
        partitioned=False,
        has_children=False,
        max_deliver=4,
    ),
)


def _run(flow: str, run: str = "r1") -> RunTopology:
    return RunTopology(flow_id=flow, run_id=run, flow_type="batch", nodes=NODES)


def test_provisioning_is_idempotent_and_creates_every_durable(nats_server: LocalServer) -> None:
    async def body(js: JetStreamContext) -> list[str]:
        first = await provision(js, _run("prov-idem"))
        assert await provision(js, _run("prov-idem")) == first
        names = RunNames("prov-idem", "r1")
        mid = [c.name for c in await js.consumers_info(names.stream("src"))]
        out = [c.name for c in await js.consumers_info(names.stream("mid"))]
        await js.stream_info(names.dlq_stream())
        return sorted(mid + out)

    found = with_js(nats_server.url, body)
    assert set(found) == {
        "mid--from--src--p0",
        "mid--from--src--p1",
        "src--eos--anchor",
        "mid--eos--anchor",
        "out--from--mid",
    }


def test_an_existing_durable_that_differs_fails_with_the_difference(
    nats_server: LocalServer,
) -> None:
    async def body(js: JetStreamContext) -> str:
        names = RunNames("prov-diff", "r1")
        await provision(js, _run("prov-diff"))
        await js.delete_consumer(names.stream("mid"), "out--from--mid")
        await js.add_consumer(
            names.stream("mid"),
            ConsumerConfig(
                durable_name="out--from--mid", filter_subject=names.subject("mid"), max_deliver=9
            ),
        )
        with pytest.raises(BrokerError) as caught:
            await provision(js, _run("prov-diff"))
        return str(caught.value)

    message = with_js(nats_server.url, body)
    assert "out--from--mid" in message and "max_deliver: has 9, this run needs 4" in message


def test_every_differing_object_is_named_though_they_are_ensured_together(
    nats_server: LocalServer,
) -> None:
    async def body(js: JetStreamContext) -> str:
        names = RunNames("prov-both", "r1")
        await provision(js, _run("prov-both"))
        for stream, durable, subject in (
            ("mid", "out--from--mid", "mid"),
            ("src", "mid--from--src--p1", "src"),
        ):
            await js.delete_consumer(names.stream(stream), durable)
            config = ConsumerConfig(
                durable_name=durable, filter_subject=names.subject(subject), max_deliver=9
            )
            await js.add_consumer(names.stream(stream), config)
        with pytest.raises(BrokerError) as caught:
            await provision(js, _run("prov-both"))
        assert caught.value.code == "VF_TOPOLOGY_MISMATCH"
        return str(caught.value)

    lines = with_js(nats_server.url, body).splitlines()
    assert len(lines) == 2, lines
    assert "mid--from--src--p1" in lines[0] and "out--from--mid" in lines[1]


def test_provisioning_a_generation_reclaims_the_runs_other_generations(
    nats_server: LocalServer,
) -> None:
    def gen(run: str, generation: str) -> RunTopology:
        return RunTopology(
            flow_id="gens", run_id=run, flow_type="batch", nodes=NODES, generation=generation
        )

    async def body(js: JetStreamContext) -> tuple[list[str], list[str]]:
        await provision(js, gen("r1", "g1"))
        await provision(js, gen("r2", "g1"))
        deleted = await prune_superseded(js, gen("r1", "g2"), other_runs=False)
        left = [i.config.name or "" for i in await js.streams_info()]
        return deleted, left

    deleted, left = with_js(nats_server.url, body)
    assert deleted == ["vf-gens-r1-g1-mid", "vf-gens-r1-g1-src"]
    assert "vf-gens-r2-g1-src" in left, "another run is pruned only on request"
    assert "vf-gens-dlq" in left


def test_prune_removes_only_streams_vf_owns_for_other_runs(nats_server: LocalServer) -> None:
    async def body(js: JetStreamContext) -> tuple[list[str], list[str]]:
        await provision(js, _run("prune", "r1"))
        await provision(js, _run("prune", "r2"))
        await provision(js, _run("prune-other", "r1"))
        await js.add_stream(name="vf-prune-r1-stranger", subjects=["stranger.prune"])
        deleted = await prune_superseded(js, _run("prune", "r2"))
        left = [i.config.name or "" for i in await js.streams_info()]
        return deleted, left

    deleted, left = with_js(nats_server.url, body)
    assert deleted == ["vf-prune-r1-mid", "vf-prune-r1-src"]
    for kept in (
        "vf-prune-r2-src",
        "vf-prune-dlq",
        "vf-prune-other-r1-src",
        "vf-prune-r1-stranger",
    ):
        assert kept in left


def test_vf_provision_command_reads_the_topology_shards(
    tmp_path: Path, nats_server: LocalServer
) -> None:
    (tmp_path / "nodes-000.jsonl").write_text(
        '{"name":"src","parents":[],"replicas":1,"partitioned":false,"has_children":true,'
        '"max_deliver":1}\n{"name":"out","parents":["src"],"replicas":3,"partitioned":false,'
        '"has_children":false,"max_deliver":1}\n'
    )
    env = {
        **os.environ,
        "VF_NATS_URL": nats_server.url,
        "VF_FLOW_ID": "cmd",
        "VF_FLOW_TYPE": "realtime",
        "VF_RUN_ID": "r9",
        "VF_TOPOLOGY_DIR": str(tmp_path),
    }
    command = [str(Path(sys.executable).with_name("vf-provision")), "--prune-superseded"]
    for _ in range(2):
        done = subprocess.run(
            command, env=env, capture_output=True, text=True, timeout=60, check=False
        )
        assert done.returncode == 0, done.stderr
    missing = subprocess.run(
        command,
        env={**env, "VF_FLOW_ID": ""},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert missing.returncode == 2 and "VF_FLOW_ID" in missing.stderr


def test_an_undecodable_message_is_dead_lettered_not_dropped(
    nats_server: LocalServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("VF_TEST_OUT", str(tmp_path / "unused.jsonl"))
    monkeypatch.setenv("VF_TEST_FLOW", "garbage")
    monkeypatch.syspath_prepend(str(FLOWS))
    plan = compile_project(CompileRequest(graph=str(FLOWS / "linear.py"))).plans[0]
    names = RunNames(plan.flow_id, plan.run_id)
    eos = Envelope(
        type=EOS,
        producer="numbers",
        flow_id="garbage",
        run_id=plan.run_id,
        trace_id="eos-r0",
        seq=0,  # the producer published nothing: the garbage is someone else's (EOS-6)
    )

    async def body(js: JetStreamContext) -> Any:
        await provision(js, provision_topology(plan))
        await js.publish(names.subject("numbers"), b"\x0a\xff\xffnot an envelope")
        await js.publish(names.eos_subject("numbers", replica=0), encode_envelope(eos))
        env = dict(next(w for w in plan.workloads if w.node == "scale").env)
        env.update(VF_NATS_URL=nats_server.url, VF_REPLICA_ID="0", VF_HEALTH_PORT="0")
        assert await asyncio.wait_for(run_worker(env), timeout=30) == 0
        return await js.get_last_msg(names.dlq_stream(), names.dlq_subject("scale"))

    message = with_js(nats_server.url, body)
    assert message.data == b"\x0a\xff\xffnot an envelope"
    assert (message.headers or {})["VF-Code"] == "VF_POISON_DECODE"


async def _has_consumers(js: JetStreamContext, stream: str) -> bool:
    try:
        return bool(await js.consumers_info(stream))
    except NotFoundError:
        return False


@pytest.mark.slow
def test_workers_need_no_provisioning_and_a_batch_producer_waits_for_readers(
    nats_server: LocalServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    out = tmp_path / "sink.jsonl"
    monkeypatch.setenv("VF_TEST_OUT", str(out))
    monkeypatch.setenv("VF_TEST_FLOW", "no-provision")
    monkeypatch.setenv("VF_TEST_COUNT", "20")
    monkeypatch.syspath_prepend(str(FLOWS))
    plan = compile_project(CompileRequest(graph=str(FLOWS / "linear.py"))).plans[0]
    names = RunNames(plan.flow_id, plan.run_id)

    def env(node: str, replica: int) -> dict[str, str]:
        values = dict(next(w for w in plan.workloads if w.node == node).env)
        values.update(VF_NATS_URL=nats_server.url, VF_REPLICA_ID=str(replica), VF_HEALTH_PORT="0")
        return values

    async def body(js: JetStreamContext) -> tuple[int, int]:
        producer = asyncio.create_task(run_worker(env("numbers", 0)))
        stream = names.stream("numbers")
        async with asyncio.timeout(30):  # it made its stream and its anchor: now it waits
            while not await _has_consumers(js, stream):
                await asyncio.sleep(0.02)
        held = 0
        for _ in range(50):  # watched for a second: it holds its items back
            held = max(held, (await js.stream_info(stream)).state.messages)
            await asyncio.sleep(0.02)
        assert not producer.done(), "the producer published with no reader to keep its output"
        rest = [
            run_worker(env("sink", 0)),
            run_worker(env("scale", 0)),
            run_worker(env("scale", 1)),
        ]
        codes = await asyncio.wait_for(asyncio.gather(producer, *rest), timeout=60)
        assert codes == [0, 0, 0, 0]
        return held, len(out.read_text().splitlines())

    held, delivered = with_js(nats_server.url, body)
    assert held == 0
    assert delivered == 20


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_health_endpoints_follow_the_worker_state() -> None:
    metrics = Metrics(node="scale")
    port = free_port()
    server = HealthServer(metrics, port=port, host="127.0.0.1")
    try:
        assert _get(port, "/readyz")[0] == 503
        metrics.ready = True
        metrics.bump("processed", 3)
        metrics.observe(0.5)
        assert _get(port, "/readyz") == (200, "ready\n")
        assert _get(port, "/healthz") == (200, "ok\n")
        status, text = _get(port, "/metrics")
        assert status == 200
        labels = 'flow="",node="scale",replica="0"'
        assert f"vf_messages_processed_total{{{labels}}} 3" in text
        assert f"vf_process_seconds_sum{{{labels}}} 0.500000" in text
        assert _get(port, "/other")[0] == 404
        assert scrape(port, "scale")["processed"] == 3
        assert scrape(port, "other") == {}, "a worker of another node was taken for this one"
        metrics.last_beat -= 3600
        assert _get(port, "/healthz") == (503, "stalled\n")
    finally:
        server.close()


def test_a_hung_node_call_fails_liveness_although_the_loop_beats() -> None:
    """A node call past its bound (DELIV-12): the worker loop still beats, but the probes
    the pods carry answer 503 (before: 200 for as long as the call hung)."""
    metrics = Metrics(node="scale")
    port = free_port()
    server = HealthServer(metrics, port=port, host="127.0.0.1")
    try:
        metrics.mark_ready()
        metrics.hang("'scale' replica 0: a call of the node has not returned after 3s")
        metrics.beat()
        assert _get(port, "/healthz") == (503, "hung\n")
        assert _get(port, "/readyz")[0] == 503
        assert _get(port, "/metrics")[0] == 200
    finally:
        server.close()


def test_a_stranger_on_a_workers_port_is_never_fatal(nats_server: LocalServer) -> None:
    """A NATS server (another process's) answering on a worker's health port gives no
    counts, not an exception: it once ended vf run-local of a 1,502-node flow with
    VF_INTERNAL (http.client.BadStatusLine)."""
    port = int(nats_server.url.rsplit(":", 1)[1])
    assert scrape(port, "scale") == {}


def _spec(node: str, code: str) -> ReplicaSpec:
    return ReplicaSpec(node=node, replica=0, env={}, command=(sys.executable, "-c", code))


def test_supervisor_restarts_crashes_then_reports_the_lost_node() -> None:
    stops: list[int] = []
    out = io.StringIO()
    options = SuperviseOptions(
        announce_stop=lambda: stops.append(1),
        policy=SupervisionPolicy(max_restarts=2, backoff=(0.0,)),
        stall_seconds=None,
        grace_seconds=0.5,
        output=out,
    )
    replicas = [
        _spec("bad", "import sys; print('boom'); sys.exit(3)"),
        _spec("slow", "import time; time.sleep(60)"),
    ]
    outcome = Supervisor(replicas, options).run()
    assert outcome.status == "lost"
    assert outcome.lost[0] == "bad/r0" and outcome.restarts == 2
    assert out.getvalue().count("[bad/r0] boom") == 3
    assert "restart 2" in out.getvalue()
    assert stops, "the supervisor never announced a stop"


def test_supervisor_reports_success_with_prefixed_logs() -> None:
    out = io.StringIO()
    options = SuperviseOptions(announce_stop=lambda: None, stall_seconds=None, output=out)
    outcome = Supervisor([_spec("ok", "print('hello')")], options).run()
    assert outcome.status == "ok" and outcome.lost == []
    assert "[ok/r0] hello" in out.getvalue()


@pytest.mark.slow
def test_supervisor_stops_a_flow_that_makes_no_progress() -> None:
    out = io.StringIO()
    options = SuperviseOptions(
        announce_stop=lambda: None, stall_seconds=1.0, grace_seconds=0.5, output=out
    )
    outcome = Supervisor([_spec("stuck", "import time; time.sleep(60)")], options).run()
    assert outcome.status == "stalled"
    assert "no progress for 1s" in out.getvalue()


@pytest.mark.slow
def test_a_stop_asked_for_ends_the_run_even_when_its_interrupt_was_swallowed() -> None:
    """A signal's KeyboardInterrupt raised inside a weakref callback is only printed by
    Python; the stop it asked for is remembered, and the supervisor still stops the run."""
    out = io.StringIO()
    stops: list[int] = []
    options = SuperviseOptions(
        announce_stop=lambda: stops.append(1),
        stall_seconds=None,
        grace_seconds=0.5,
        output=out,
        interrupted=lambda: True,
    )
    started = time.monotonic()
    outcome = Supervisor([_spec("slow", "import time; time.sleep(60)")], options).run()
    assert outcome.status == "interrupted"
    assert stops, "the supervisor never announced a stop"
    assert time.monotonic() - started < 30
