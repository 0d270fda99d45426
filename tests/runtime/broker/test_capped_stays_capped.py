"""A superseded stream vf-provision capped (PROV-6) stays capped when a replica of its run
starts again (ADR 0239), on a real nats-server whose ``max_file_store`` is the tree's.

A pod of the earlier run, rescheduled while the newer run works, ensures its streams
again; before, that raised their byte limit back to the full share, a reservation the
share split never counted. Only a provisioning of the run itself lifts the cap.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from pathlib import Path

import nats
import pytest
from nats.js import JetStreamContext

from tests.runtime.broker.test_stream_share import _compiled
from tests.runtime.store.test_store_full import _start_small_nats
from tests.runtime.worker.test_faults import _report
from vf.commands.run_local.command import provision_topology
from vf_runtime.broker.naming import RunNames
from vf_runtime.broker.provision import provision_and_reclaim
from vf_runtime.broker.streams import ensure_stream
from vf_runtime.broker.topology import stream_config
from vf_runtime.constants import BATCH
from vf_runtime.labels import CAPPED_KEY
from vf_runtime.worker.replica import run_worker

pytestmark = pytest.mark.slow


async def _limits(js: JetStreamContext, names: RunNames) -> dict[str, object]:
    found: dict[str, object] = {}
    for node in ("numbers", "scale"):
        config = (await js.stream_info(names.stream(node))).config
        found[node] = (config.max_bytes, CAPPED_KEY in (config.metadata or {}))
    return found


async def _started(js: JetStreamContext, names: RunNames) -> bool:
    """Wait until the earlier run's sink pulls from its parent: past every ensure."""
    durable = names.durable("sink", parent="scale")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if (await js.consumer_info(names.stream("scale"), durable)).num_waiting:
            return True
        await asyncio.sleep(0.2)
    return False


def test_a_restarted_replica_of_a_superseded_run_leaves_its_streams_capped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan, broker_env, max_file_store = _compiled(tmp_path, monkeypatch, "capped", 10)
    share = int(broker_env["VF_STREAM_MAX_BYTES"])
    server = _start_small_nats(tmp_path / "nats", max_file_store=max_file_store)
    base = dataclasses.replace(provision_topology(plan, "g1"), stream_max_bytes=share)
    earlier = RunNames(plan.flow_id, "ra", "g1")

    def env(node: str) -> dict[str, str]:
        values = dict(next(w for w in plan.workloads if w.node == node).env)
        values.update(broker_env, VF_NATS_URL=server.url, VF_RUN_ID="ra", VF_GENERATION="g1")
        values.update(VF_REPLICA_ID="0", VF_HEALTH_PORT="0", VF_STREAM_REPLICAS="1")  # one server
        return values

    async def body() -> dict[str, object]:
        seen: dict[str, object] = {}
        client = await nats.connect(server.url)
        js = client.jetstream()
        try:
            await provision_and_reclaim(
                server.url, dataclasses.replace(base, run_id="ra"), prune=False, timeout=10
            )
            await provision_and_reclaim(
                server.url, dataclasses.replace(base, run_id="rb"), prune=False, timeout=10
            )
            seen["capped"] = await _limits(js, earlier)
            # its sink starts again and ensures its input, scale's stream; the producer's
            # ensure of its output stream is the same call, made here as a worker makes it
            sink = asyncio.create_task(run_worker(env("sink")))
            output = stream_config(earlier, "numbers", flow_type=BATCH, max_bytes=share)
            await ensure_stream(js, output)
            seen["started"] = await _started(js, earlier)
            seen["after_restart"] = await _limits(js, earlier)
            await client.publish(earlier.control(), earlier.stop_payload())
            seen["exit"] = await asyncio.wait_for(sink, timeout=60)
            # the earlier run provisioned again (a rollback): its own streams get the share
            await provision_and_reclaim(
                server.url, dataclasses.replace(base, run_id="ra"), prune=False, timeout=10
            )
            seen["provisioned_again"] = await _limits(js, earlier)
            return seen
        finally:
            await client.close()

    try:
        seen = asyncio.run(body())
    finally:
        server.stop()
    report = _report("capped-stays-capped", {"share": share, **seen})
    capped = {"numbers": (1, True), "scale": (1, True)}
    assert seen["capped"] == capped, report  # empty streams, capped at one byte (PROV-6)
    assert seen["started"], report
    assert seen["after_restart"] == capped, report
    assert seen["exit"] == 4, report  # a BATCH replica stopped before its work was done
    assert seen["provisioned_again"] == {"numbers": (share, False), "scale": (share, False)}, report
