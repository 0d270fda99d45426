"""The compiled share of a durable broker's store (ADR 0232) on a real nats-server whose
``max_file_store`` is the one the tree's nats.conf sets.

The flow's successive runs and generations are provisioned beside the streams the earlier
ones left (pruning off; one of them with a full backlog) without nats-server's 10047, and
a stream at its share holds back its producer (10077, ``VF_BROKER_FULL``) while the
server still takes writes to other streams; once readers run, every item arrives.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
import time
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.js import JetStreamContext
from nats.js.errors import APIError

from tests.runtime.store.test_store_full import _start_small_nats
from tests.runtime.support import FLOWS
from tests.runtime.worker.test_faults import _applied, _env, _report
from vf.commands.run_local.command import provision_topology
from vf.pipeline import CompileRequest, compile_project
from vf_runtime.broker.naming import RunNames
from vf_runtime.broker.provision import RunTopology, provision_and_reclaim
from vf_runtime.worker.replica import run_worker

pytestmark = pytest.mark.slow

COUNT, SIZE = 120, 500_000  # 60 MB of inline items: more than one stream's 36 MiB share
CONFIG = """environments:
  prod:
    images:
      default: registry.example.com/vf/runtime-tests:0
    broker: {profile: durable, storage_size: 200Mi}
"""


def _compiled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flow: str, count: int, **extra: str
) -> tuple[Any, dict[str, str], str]:
    """The bulk flow ``flow`` of ``count`` items (the fault tests' environment, ``extra``
    added) compiled: the plan, the broker ConfigMap's data and the nats.conf's
    ``max_file_store``."""
    for key, value in _env(tmp_path, flow, count, **extra).items():
        monkeypatch.setenv(key, value)
    monkeypatch.syspath_prepend(str(FLOWS))
    config = tmp_path / "vf.yaml"
    config.write_text(CONFIG)
    request = CompileRequest(graph=str(FLOWS / "bulk.py"), config=str(config))
    result = compile_project(request)
    plan = result.plans[0]
    objects = result.objects[plan.environment]
    broker = next(o for o in objects if o["metadata"]["name"] == plan.broker_configmap)
    conf = next(
        o["data"]["nats.conf"]
        for o in objects
        if o["kind"] == "ConfigMap" and "nats.conf" in o.get("data", {})
    )
    store = re.search(r"max_file_store: (\d+MB)", conf)
    assert store is not None, conf
    return plan, dict(broker["data"]), store.group(1)


async def _fill(js: JetStreamContext, subject: str) -> str:
    """Publish items of SIZE bytes until the broker refuses one; its refusal."""
    for _ in range(1000):
        try:
            await js.publish(subject, b"x" * SIZE)
        except APIError as exc:
            return f"{exc.err_code} {exc.description}"
    return "never refused"


async def _provision(url: str, run: RunTopology) -> dict[str, object]:
    pruned = await provision_and_reclaim(url, run, prune=False, timeout=10)
    return {"capped": len(pruned.capped), "deleted": len(pruned.deleted)}


def test_runs_and_generations_fit_beside_what_they_supersede(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="vf")
    plan, broker_env, max_file_store = _compiled(
        tmp_path, monkeypatch, "share", COUNT, VF_TEST_SIZE=str(SIZE)
    )
    share = int(broker_env["VF_STREAM_MAX_BYTES"])
    server = _start_small_nats(tmp_path / "nats", max_file_store=max_file_store)
    base = dataclasses.replace(provision_topology(plan), stream_max_bytes=share)
    current = RunNames(plan.flow_id, plan.run_id, "g2")

    def env(node: str, replica: int = 0) -> dict[str, str]:
        values = dict(next(w for w in plan.workloads if w.node == node).env)
        values.update(broker_env, VF_GENERATION="g2", VF_NATS_URL=server.url)
        values.update(VF_REPLICA_ID=str(replica), VF_HEALTH_PORT="0")
        return values

    async def body() -> dict[str, object]:
        seen: dict[str, object] = {}
        client = await nats.connect(server.url)
        js = client.jetstream()
        try:
            # an earlier run, left with a full backlog in one stream, and another left empty
            seen["run_a"] = await _provision(server.url, dataclasses.replace(base, run_id="ra"))
            seen["run_a_full"] = await _fill(js, RunNames(plan.flow_id, "ra").subject("numbers"))
            seen["run_b"] = await _provision(server.url, dataclasses.replace(base, run_id="rb"))
            seen["g1"] = await _provision(server.url, dataclasses.replace(base, generation="g1"))
            seen["g2"] = await _provision(server.url, dataclasses.replace(base, generation="g2"))
            stream = current.stream("numbers")
            seen["max_bytes"] = (await js.stream_info(stream)).config.max_bytes
            producer = asyncio.create_task(run_worker(env("numbers")))
            deadline = time.monotonic() + 60
            while "VF_BROKER_FULL" not in caplog.text and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            await asyncio.sleep(1.0)  # the producer keeps trying; its stream stays full
            info = await js.stream_info(stream)
            seen.update(stored_while_full=info.state.messages, bytes_while_full=info.state.bytes)
            seen["producer_done"] = producer.done()
            await js.add_stream(name="bystander", subjects=["bystander"])
            seen["other_stream_takes"] = (await js.publish("bystander", b"x" * SIZE)).seq
            await js.delete_stream("bystander")
            readers = [run_worker(env("scale", r)) for r in (0, 1)] + [run_worker(env("sink"))]
            codes = await asyncio.wait_for(asyncio.gather(producer, *readers), timeout=180)
            seen["exits"] = list(codes)
            return seen
        finally:
            await client.close()

    try:
        seen = asyncio.run(body())
    finally:
        server.stop()
    applied = _applied(tmp_path / "sink.jsonl")
    report = _report(
        "stream-share",
        {
            "share": share,
            "max_file_store": max_file_store,
            **seen,
            "maximum_bytes_refusals": caplog.text.count("maximum bytes exceeded"),
            "applied": sum(applied.values()),
        },
    )
    assert seen["run_a_full"] == "10077 maximum bytes exceeded", report  # its own limit
    assert seen["run_b"] == {"capped": 2, "deleted": 0}, report  # ra's, at what they hold
    assert seen["g1"] == {"capped": 2, "deleted": 0}, report  # rb's (ra's stay capped)
    assert seen["g2"] == {"capped": 2, "deleted": 2}, report  # g1's, then gone
    assert seen["max_bytes"] == share, report
    assert 0 < int(seen["stored_while_full"]) < COUNT, report  # type: ignore[call-overload]
    assert int(seen["bytes_while_full"]) <= share, report  # type: ignore[call-overload]
    assert not seen["producer_done"], f"the producer ended while its stream was full; {report}"
    assert int(seen["other_stream_takes"]) == 1, report  # type: ignore[call-overload]
    assert seen["exits"] == [0, 0, 0, 0], report
    assert sorted(applied) == list(range(1, COUNT + 1)), report
