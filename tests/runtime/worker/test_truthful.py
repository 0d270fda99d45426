"""Truthful outcomes on real servers: a run obeys only its own stop, refuses other runs'
data, and never reports success when it stopped early or set items aside."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import nats
import pytest

from tests.runtime.support import FLOWS, FlowRun, finish_flow, wait_until
from vf_runtime.broker.client import announce_stop
from vf_runtime.broker.naming import RunNames
from vf_runtime.local.infra import LocalServer
from vf_runtime.wire import DATA, Envelope, encode_envelope, encode_payload

pytestmark = pytest.mark.slow  # real servers, renders or long runs: make test-fast skips it

COUNT = 16


def _applied(path: Path) -> Counter[int]:
    if not path.exists():
        return Counter()
    return Counter(json.loads(line)["i"] for line in path.read_text().splitlines() if line)


def _start(
    tmp_path: Path, *, generation: str, nats_url: str, redis_url: str
) -> tuple[subprocess.Popen[bytes], Path, Path]:
    out, log = tmp_path / "sink.jsonl", tmp_path / "run.log"
    graph = str(FLOWS / "paced.py")
    script = (
        "import sys\nfrom vf.commands.run_local.command import RunLocalRequest, run_local\n"
        f"sys.exit(run_local(RunLocalRequest(graph={graph!r}, nats_url={nats_url!r}, "
        f"redis_url={redis_url!r}, stall_seconds=30, generation={generation!r})))\n"
    )
    env = {**os.environ, "VF_TEST_OUT": str(out), "VF_TEST_COUNT": str(COUNT)}
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-c", script], env=env, stdout=sink, stderr=subprocess.STDOUT
        )
    wait_until(lambda: sum(_applied(out).values()) >= 3, timeout=60, what="3 applied items")
    return process, out, log


def _run_id(log: Path) -> str:
    for line in log.read_text().splitlines():
        if line.startswith("[vf] running flow paced run "):
            return line.split()[5]
    raise AssertionError(log.read_text()[-2000:])


def _publish(url: str, subject: str, data: bytes, *, stream: bool = False) -> None:
    async def send() -> None:
        client = await nats.connect(url)
        try:
            if stream:
                await client.jetstream().publish(subject, data)
            else:
                await client.publish(subject, data)
                await client.flush()
        finally:
            await client.close()

    asyncio.run(send())


def _report(name: str, run: FlowRun, applied: Counter[int]) -> None:
    print(
        f"[{name}] delivered={len(applied)}, duplicated={sum(c - 1 for c in applied.values())}, "
        f"lost={COUNT - len(applied)}, exit={run.code}"
    )


def test_only_this_runs_exact_stop_is_obeyed(
    tmp_path: Path, nats_server: LocalServer, redis_server: LocalServer
) -> None:
    process, out, log = _start(
        tmp_path, generation="ctl1", nats_url=nats_server.url, redis_url=redis_server.url
    )
    run_id = _run_id(log)
    names = RunNames("paced", run_id, "ctl1")
    for data in (b"stop", b"\x00garbage", RunNames("paced", run_id, "other").stop_payload()):
        _publish(nats_server.url, names.control(), data)
    run = finish_flow(process, log=log, timeout=90)
    applied = _applied(out)
    _report("control-refused", run, applied)
    assert run.code == 0, run.output[-4000:]
    assert applied == Counter(range(1, COUNT + 1)), "a forged control message stopped the run"
    assert "refused a control message" in run.output


def test_a_batch_run_stopped_before_done_does_not_report_success(
    tmp_path: Path, nats_server: LocalServer, redis_server: LocalServer
) -> None:
    process, out, log = _start(
        tmp_path, generation="ctl2", nats_url=nats_server.url, redis_url=redis_server.url
    )
    announce_stop(nats_server.url, RunNames("paced", _run_id(log), "ctl2"))
    run = finish_flow(process, log=log, timeout=90)
    applied = _applied(out)
    _report("stopped-early", run, applied)
    assert len(applied) < COUNT, "the stop came too late to prove anything"
    assert run.code == 7, run.output[-4000:]
    assert "flow stopped before its work was done" in run.output
    assert "flow finished" not in run.output


def test_data_of_another_flow_on_this_runs_subject_is_dead_lettered_not_applied(
    tmp_path: Path, nats_server: LocalServer, redis_server: LocalServer
) -> None:
    process, out, log = _start(
        tmp_path, generation="for1", nats_url=nats_server.url, redis_url=redis_server.url
    )
    names = RunNames("paced", _run_id(log), "for1")
    payload_type, payload = encode_payload({"i": 999})
    for flow, run_id in (("intruder", names.run_id), ("paced", "r0ther")):
        envelope = Envelope(
            type=DATA,
            producer="numbers",
            flow_id=flow,
            run_id=run_id,
            trace_id=f"numbers:{flow}:1",
            seq=1,
            payload_type=payload_type,
            payload=payload,
        )
        _publish(nats_server.url, names.subject("numbers"), encode_envelope(envelope), stream=True)
    run = finish_flow(process, log=log, timeout=90)
    applied = _applied(out)
    _report("foreign-envelopes", run, applied)
    assert applied == Counter(range(1, COUNT + 1)), "a foreign envelope was applied"
    assert run.code == 6, run.output[-4000:]
    assert "scale: 2 item(s) dead-lettered" in run.output
    assert "VF_FOREIGN_ENVELOPE" in run.output


def _delete_one_before_it_is_read(url: str, names: RunNames) -> int:
    """Wait for 'numbers' replica 0's marker, then delete its last data message from the
    stream (no reader has started yet); returns the deleted stream sequence."""

    async def act() -> int:
        client = await nats.connect(url)
        try:
            js = client.jetstream()
            stream = names.stream("numbers")
            for _ in range(400):
                try:
                    await js.get_last_msg(stream, names.eos_subject("numbers", replica=0))
                    break
                except Exception:
                    await asyncio.sleep(0.05)
            last = await js.get_last_msg(stream, names.subject("numbers"))
            await js.delete_msg(stream, last.seq)
            return int(last.seq)
        finally:
            await client.close()

    return asyncio.run(act())


@pytest.mark.parametrize("replicas", [1, 2])
def test_an_item_lost_before_any_reader_got_it_fails_the_run_by_name(
    tmp_path: Path, nats_server: LocalServer, redis_server: LocalServer, replicas: int
) -> None:
    """The producer's marker counts 8; one of its messages is deleted from the stream
    before a scale replica reads anything. Alone (EOS-6) or pooled over two competing
    replicas (EOS-8), the readers fail by name, the loss is kept in the dead-letter
    stream, and the run does not end in a success even after the restarts."""
    count, generation = 8, f"lost{replicas}"
    out, log = tmp_path / "sink.jsonl", tmp_path / "run.log"
    graph = str(FLOWS / "paced.py")
    script = (
        "import sys\nfrom vf.commands.run_local.command import RunLocalRequest, run_local\n"
        f"sys.exit(run_local(RunLocalRequest(graph={graph!r}, nats_url={nats_server.url!r}, "
        f"redis_url={redis_server.url!r}, stall_seconds=30, generation={generation!r})))\n"
    )
    env = {
        **os.environ,
        "VF_TEST_OUT": str(out),
        "VF_TEST_COUNT": str(count),
        "VF_TEST_SCALE_REPLICAS": str(replicas),
        "VF_TEST_SCALE_OPEN_DELAY": "8",
        "VF_EOS_WAIT_SECONDS": "2",
    }
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-c", script], env=env, stdout=sink, stderr=subprocess.STDOUT
        )
    wait_until(lambda: "[vf] running flow paced" in log.read_text(), timeout=60, what="start")
    _delete_one_before_it_is_read(nats_server.url, RunNames("paced", _run_id(log), generation))
    run = finish_flow(process, log=log, timeout=120)
    applied = _applied(out)
    print(
        f"[lost-before-read, {replicas} scale replica(s)] applied={len(applied)} of {count}, "
        f"exit={run.code}"
    )
    assert len(applied) == count - 1, run.output[-4000:]
    assert "error[VF_EOS_MISMATCH]" in run.output
    # alone, the restarted replica finds its input consumed and refuses to finish (GEN-7),
    # so the node is lost (4); pooled, the restarted lives end and the record makes it 6
    assert run.code == (4 if replicas == 1 else 6), run.output[-4000:]
    assert "[vf] flow finished (" not in run.output
    assert re.search(r"^\[vf\] scale: \d+ item\(s\) dead-lettered", run.output, re.MULTILINE)
    assert re.search(r"^\[vf\]\s+VF_EOS_MISMATCH: 'scale' replica", run.output, re.MULTILINE)
