"""Faults of the broker end a worker by name, never with a traceback (ADR 0244).

On a real nats-server whose ``max_file_store`` is the one the tree's nats.conf sets, each
worker runs as a ``vf-worker`` process, as a pod runs it:

- a producer stopped (SIGTERM) while its output stream is full exits 4, a BATCH replica
  stopped before its work was done (STOP-1), saying which outputs were held back; the
  stream holds exactly the items it says it published;
- a replica with siblings of a run whose streams vf-provision capped as superseded
  (PROV-6) reads on, or, a restarted life, ends with ``error[VF_GENERATION_SUPERSEDED]``
  and exit 4 when its parent stream has no room for its tally (EOS-8);
- a stream the broker refuses to make (its subjects taken by another stream, more
  replicas than servers) is ``error[VF_BROKER_REFUSED]`` and exit 3.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.js.errors import NotFoundError

from tests.runtime.broker.test_stream_share import _compiled
from tests.runtime.store.test_store_full import _start_small_nats
from tests.runtime.support import FLOWS
from tests.runtime.worker.test_faults import _report
from vf.commands.run_local.command import provision_topology
from vf_runtime.broker.naming import RunNames
from vf_runtime.broker.provision import RunTopology, provision_and_reclaim
from vf_runtime.local.infra import LocalServer
from vf_runtime.wire import decode_envelope

pytestmark = pytest.mark.slow

LIMIT = 2 * 1024 * 1024  # the producer's stream fills after about 20 items of 100 kB


def _worker_env(plan: Any, node: str, broker: dict[str, str], **values: str) -> dict[str, str]:
    """A worker's environment as its pod has it (the broker ConfigMap's keys included)."""
    env = {**os.environ, **dict(next(w for w in plan.workloads if w.node == node).env), **broker}
    env.update(VF_HEALTH_PORT="0", VF_STREAM_REPLICAS="1", VF_GENERATION="g1", **values)
    env["PYTHONPATH"] = os.pathsep.join([str(FLOWS), os.environ.get("PYTHONPATH", "")])
    return env


def _start(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    worker = str(Path(sys.executable).with_name("vf-worker"))
    with log.open("wb") as out:
        return subprocess.Popen([worker], env=env, stdout=out, stderr=subprocess.STDOUT)


def _wait_for(log: Path, text: str, *, seconds: float = 60) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if text in log.read_text(errors="replace"):
            return True
        time.sleep(0.1)
    return False


async def _stored(url: str, names: RunNames, node: str) -> dict[str, Any]:
    """The items the node's stream holds, in order, and its end-of-stream marker's count."""
    client = await nats.connect(url)
    js = client.jetstream()
    try:
        stream = names.stream(node)
        state = (await js.stream_info(stream)).state
        items: list[int] = []
        for seq in range(state.first_seq, state.last_seq + 1):
            msg = await js.get_msg(stream, seq)
            if msg.subject == names.subject(node):
                items.append(decode_envelope(msg.data or b"").seq)
        try:
            marker = await js.get_last_msg(stream, names.eos_subject(node, replica=0))
            claimed: int | None = decode_envelope(marker.data or b"").seq
        except NotFoundError:
            claimed = None
        return {"items": items, "marker": claimed}
    finally:
        await client.close()


def _provision(server: LocalServer, run: RunTopology) -> None:
    asyncio.run(provision_and_reclaim(server.url, run, prune=False, timeout=10))


def test_a_producer_stopped_while_its_stream_is_full_exits_4_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan, broker_env, max_file_store = _compiled(
        tmp_path, monkeypatch, "fullstop", 400, VF_TEST_SIZE="100000"
    )
    server = _start_small_nats(tmp_path / "nats", max_file_store=max_file_store)
    names = RunNames(plan.flow_id, plan.run_id, "g1")
    log = tmp_path / "numbers.log"
    try:
        _provision(
            server, dataclasses.replace(provision_topology(plan, "g1"), stream_max_bytes=LIMIT)
        )
        env = _worker_env(
            plan, "numbers", broker_env, VF_NATS_URL=server.url, VF_STREAM_MAX_BYTES=str(LIMIT)
        )
        producer = _start(env, log)
        try:
            held_back = _wait_for(log, "warning[VF_BROKER_FULL]")
            time.sleep(0.5)  # still retrying: its stream stays full
            producer.send_signal(signal.SIGTERM)
            code = producer.wait(timeout=60)
        finally:
            if producer.poll() is None:
                producer.kill()
        stored = asyncio.run(_stored(server.url, names, "numbers"))
    finally:
        server.stop()
    out = log.read_text(errors="replace")
    published = re.search(r"stopped with (\d+) output\(s\) published and (\d+) held back", out)
    report = _report(
        "stopped-while-full",
        {
            "exit": code,
            "traceback": "Traceback" in out,
            "stored": len(stored["items"]),
            "marker": stored["marker"],
            "said": published.groups() if published else None,
        },
    )
    assert held_back, out
    assert "Traceback" not in out, out
    assert code == 4, out  # a BATCH replica stopped before its work was done (STOP-1)
    assert published is not None, out
    count, withheld = int(published.group(1)), int(published.group(2))
    assert withheld > 0, report
    # nothing half-written: the stream holds items 1..count, the ones the replica counted
    assert stored["items"] == list(range(1, count + 1)), report
    assert stored["marker"] in (None, count), report


async def _pulling(url: str, names: RunNames, replica: subprocess.Popen[bytes]) -> bool:
    """Wait until ``replica`` of scale pulls from numbers' stream (past every start-up
    step); False when it ended first."""
    client = await nats.connect(url)
    js = client.jetstream()
    try:
        durable = names.durable("scale", parent="numbers")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and replica.poll() is None:
            if (await js.consumer_info(names.stream("numbers"), durable)).num_waiting:
                return True
            await asyncio.sleep(0.2)
        return False
    finally:
        await client.close()


async def _stop(url: str, names: RunNames) -> None:
    client = await nats.connect(url)
    try:
        await client.publish(names.control(), names.stop_payload())
        await client.flush()
    finally:
        await client.close()


def _life(env: dict[str, str], log: Path, names: RunNames, url: str) -> tuple[bool, int]:
    """Run one life of a scale replica: whether it pulled, and its exit code once stopped."""
    replica = _start(env, log)
    try:
        pulled = asyncio.run(_pulling(url, names, replica))
        if replica.poll() is None:
            asyncio.run(_stop(url, names))
        return pulled, replica.wait(timeout=60)
    finally:
        if replica.poll() is None:
            replica.kill()


def test_replicas_with_siblings_of_a_capped_run_read_on_or_end_superseded_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """scale has two competing replicas, which pool their tallies in numbers' stream."""
    plan, broker_env, max_file_store = _compiled(tmp_path, monkeypatch, "cappedsib", 10)
    share = int(broker_env["VF_STREAM_MAX_BYTES"])
    server = _start_small_nats(tmp_path / "nats", max_file_store=max_file_store)
    base = dataclasses.replace(provision_topology(plan, "g1"), stream_max_bytes=share)
    earlier = RunNames(plan.flow_id, "ra", "g1")
    logs = [tmp_path / f"scale-{n}.log" for n in range(3)]

    def env(replica: int) -> dict[str, str]:
        return _worker_env(
            plan,
            "scale",
            broker_env,
            VF_NATS_URL=server.url,
            VF_RUN_ID="ra",
            VF_REPLICA_ID=str(replica),
        )

    try:
        _provision(server, dataclasses.replace(base, run_id="ra"))
        first = _life(env(0), logs[0], earlier, server.url)  # its tally is stored in numbers
        _provision(server, dataclasses.replace(base, run_id="rb"))  # caps ra's streams
        sibling = _life(env(1), logs[1], earlier, server.url)  # a first life: reads on
        again = _life(env(0), logs[2], earlier, server.url)  # a restarted life
    finally:
        server.stop()
    outs = [log.read_text(errors="replace") for log in logs]
    report = _report(
        "capped-siblings",
        {
            "lives": [first, sibling, again],
            "tracebacks": ["Traceback" in out for out in outs],
            "superseded": ["VF_GENERATION_SUPERSEDED" in out for out in outs],
        },
    )
    for out in outs:
        assert "Traceback" not in out, out
    assert first == (True, 4), outs[0]  # a BATCH replica stopped before its work was done
    assert sibling == (True, 4), outs[1]  # it read on, as a single replica does, until stopped
    assert again == (False, 4), outs[2]  # ended before it took anything
    assert "error[VF_GENERATION_SUPERSEDED]" in outs[2], outs[2]
    assert f"stream {earlier.stream('numbers')} was capped" in outs[2], outs[2]
    assert "= fix:" in outs[2] and "vf-provision" in outs[2], report


async def _foreign_stream(url: str) -> None:
    """Another stream on the broker that takes every vf subject (an operator's audit copy)."""
    client = await nats.connect(url)
    try:
        await client.jetstream().add_stream(name="audit", subjects=["vf.>"])
    finally:
        await client.close()


def test_a_stream_whose_subjects_another_stream_takes_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """nats-server refuses a stream whose subjects overlap another's (10065), and, on one
    server, one of the tree's 3 replicas (10074): the worker and vf-provision name the
    refusal and exit 3, instead of a traceback."""
    plan, broker_env, max_file_store = _compiled(tmp_path, monkeypatch, "overlap", 10)
    server = _start_small_nats(tmp_path / "nats", max_file_store=max_file_store)
    names = RunNames(plan.flow_id, plan.run_id, "g1")
    log = tmp_path / "numbers.log"
    topology = tmp_path / "topology"
    topology.mkdir()
    for n, shard in enumerate(plan.provision.topology_shards):
        (topology / f"nodes-{n:03d}.jsonl").write_text(shard)
    try:
        asyncio.run(_foreign_stream(server.url))
        worker = _start(_worker_env(plan, "numbers", broker_env, VF_NATS_URL=server.url), log)
        try:
            code = worker.wait(timeout=90)
        finally:
            if worker.poll() is None:
                worker.kill()
        provision = subprocess.run(
            [str(Path(sys.executable).with_name("vf-provision")), "--nats", server.url],
            env={
                **os.environ,
                **broker_env,
                "VF_FLOW_ID": plan.flow_id,
                "VF_FLOW_TYPE": "batch",
                "VF_RUN_ID": plan.run_id,
                "VF_GENERATION": "g1",
                "VF_TOPOLOGY_DIR": str(topology),
            },
            check=False,
            capture_output=True,
            text=True,
            timeout=90,
        )
    finally:
        server.stop()
    out = log.read_text(errors="replace")
    provisioned = provision.stdout + provision.stderr
    _report("overlap", {"worker": code, "provision": provision.returncode})
    assert "Traceback" not in out, out
    assert code == 3, out
    assert "error[VF_BROKER_REFUSED]" in out and names.dlq_stream() in out, out
    assert "10065" in out and "= fix:" in out, out
    assert "Traceback" not in provisioned, provisioned
    assert provision.returncode == 3, provisioned
    assert "error[VF_BROKER_REFUSED]" in provisioned, provisioned
    assert names.stream("numbers") in provisioned and "10074" in provisioned, provisioned
