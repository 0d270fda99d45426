"""The dead-letter stream's byte limit (ADR 0239) on a real nats-server.

Beside BATCH streams with a byte limit, the flow's dead-letter stream holds the share the
compiler leaves for it, discarding new: a full one refuses the next dead letter and keeps
every older one. A replica whose dead letter it refuses hands the message back, prints
``error[VF_DLQ_FULL]`` and exits 3; once an operator clears the dead letters, the next
life dead-letters every item. Nothing is dropped on the way.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import nats
import pytest
from nats.js import JetStreamContext
from nats.js.api import DiscardPolicy
from nats.js.errors import APIError

from tests.runtime.store.test_store_full import _start_small_nats
from tests.runtime.support import FLOWS
from tests.runtime.worker.test_faults import _env, _report
from vf.commands.run_local.command import provision_topology
from vf.pipeline import CompileRequest, compile_project
from vf_runtime.broker.naming import RunNames
from vf_runtime.broker.provision import provision_and_reclaim
from vf_runtime.broker.streams import ensure_stream
from vf_runtime.broker.topology import dlq_config
from vf_runtime.worker.replica import run_worker

pytestmark = pytest.mark.slow

COUNT, SHARE, LETTER = 10, 4 * 1024 * 1024, 100_000


async def _fill(js: JetStreamContext, subject: str) -> dict[str, object]:
    """Publish to ``subject`` until the stream refuses, to the last byte a dead letter
    could take; how many it took and what it said."""
    refusals, letters = set(), 0
    for size in (LETTER, 1000, 1):
        for _ in range(200):
            try:
                await js.publish(subject, b"x" * size)
            except APIError as exc:
                refusals.add(f"{exc.err_code} {exc.description}")
                break
            letters += 1
    return {"refused": refusals, "earlier_letters": letters}


def test_a_full_dead_letter_stream_keeps_its_letters_and_stops_the_replica_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for key, value in _env(tmp_path, "dlqfull", COUNT).items():
        monkeypatch.setenv(key, value)
    monkeypatch.syspath_prepend(str(FLOWS))
    plan = compile_project(CompileRequest(graph=str(FLOWS / "dlqfill.py"))).plans[0]
    server = _start_small_nats(tmp_path / "nats", max_file_store="64MB")
    names = RunNames(plan.flow_id, plan.run_id, "g1")
    run = dataclasses.replace(provision_topology(plan, "g1"), stream_max_bytes=SHARE)

    def env(node: str, **extra: str) -> dict[str, str]:
        values = dict(next(w for w in plan.workloads if w.node == node).env)
        values.update(VF_NATS_URL=server.url, VF_GENERATION="g1", VF_REPLICA_ID="0")
        values.update(VF_HEALTH_PORT="0", VF_STREAM_MAX_BYTES=str(SHARE), **extra)
        return values

    failing = {"VF_DELIVERY": "at-least-once", "VF_ON_ERROR": "poison", "VF_BREAKER_THRESHOLD": "0"}

    async def body() -> dict[str, object]:
        seen: dict[str, object] = {}
        client = await nats.connect(server.url)
        js = client.jetstream()
        dlq = names.dlq_stream()
        try:
            await provision_and_reclaim(server.url, run, prune=False, timeout=10)
            config = (await js.stream_info(dlq)).config
            seen.update(dlq_max_bytes=config.max_bytes, dlq_discard=config.discard)
            # an earlier run's dead letters fill it to its limit
            earlier = RunNames(plan.flow_id, "earlier").dlq_subject("scale")
            seen.update(await _fill(js, earlier))
            seen["producer"] = await asyncio.wait_for(run_worker(env("numbers")), timeout=60)
            seen["full_life"] = await asyncio.wait_for(
                run_worker(env("scale", **failing)), timeout=60
            )
            seen["dlq_after_full_life"] = (await js.stream_info(dlq)).state.messages
            durable = names.durable("scale", parent="numbers")
            info = await js.consumer_info(names.stream("numbers"), durable)
            seen["acked_or_termed"] = info.ack_floor.stream_seq if info.ack_floor else 0
            seen["held"] = info.num_ack_pending + info.num_pending
            await js.purge_stream(dlq)  # the operator's fix: vf dlq purge
            seen["next_life"] = await asyncio.wait_for(
                run_worker(env("scale", **failing)), timeout=90
            )
            run_letters = await js.stream_info(dlq, subjects_filter=names.dlq_run_subjects())
            seen["dead_letters"] = run_letters.state.messages
            return seen
        finally:
            await client.close()

    try:
        seen = asyncio.run(body())
    finally:
        server.stop()
    err = capsys.readouterr().err
    report = _report("dlq-full", {**seen, "named": err.count("error[VF_DLQ_FULL]")})
    assert seen["dlq_max_bytes"] == SHARE, report
    assert seen["dlq_discard"] == DiscardPolicy.NEW, report
    assert seen["refused"] == {"10077 maximum bytes exceeded"}, report
    assert seen["producer"] == 0, report
    assert seen["full_life"] == 3, report
    assert "error[VF_DLQ_FULL] 'scale' replica 0" in err, report
    assert "each was handed back to its stream, not dropped" in err and "vf dlq purge" in err, (
        report
    )
    assert seen["dlq_after_full_life"] == seen["earlier_letters"], report  # none dropped
    assert seen["acked_or_termed"] == 0 and seen["held"] == COUNT, report  # none lost
    assert seen["next_life"] == 0, report
    assert seen["dead_letters"] == COUNT, report


def test_a_dead_letter_stream_made_before_its_limit_takes_it_and_keeps_its_letters(
    tmp_path: Path,
) -> None:
    """A flow's dead-letter stream outlives its runs: one made without a byte limit and
    discarding old takes both settings when a run with a share ensures it."""
    server = _start_small_nats(tmp_path / "nats", max_file_store="64MB")
    names = RunNames("dlqold", "r1")

    async def body() -> tuple[int, int, DiscardPolicy | None]:
        client = await nats.connect(server.url)
        js = client.jetstream()
        try:
            earlier = dataclasses.replace(
                dlq_config(names), discard=DiscardPolicy.OLD, max_bytes=None
            )
            await js.add_stream(earlier)
            await js.publish(names.dlq_subject("scale"), b"an earlier dead letter")
            await ensure_stream(js, dlq_config(names, share=SHARE))
            info = await js.stream_info(names.dlq_stream())
            return info.state.messages, info.config.max_bytes or 0, info.config.discard
        finally:
            await client.close()

    try:
        kept, limit, discard = asyncio.run(body())
    finally:
        server.stop()
    assert (kept, limit, discard) == (1, SHARE, DiscardPolicy.NEW)
