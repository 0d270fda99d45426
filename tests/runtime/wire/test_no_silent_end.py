"""No message ends a run in silence, on real servers: an abort (forged or relayed) is a
named failure, a dead letter's reason in any language reaches the report, and a payload
the store cannot read is one message's dead letter, not a crashed reader."""

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

from tests.runtime.support import FLOWS, finish_flow, run_flow, wait_until
from vf_runtime.broker.naming import RunNames
from vf_runtime.local.infra import LocalServer
from vf_runtime.wire import (
    ABORT,
    DATA,
    BlobRef,
    Envelope,
    ErrorInfo,
    decode_envelope,
    encode_envelope,
    encode_payload,
)
from vf_runtime.wire.payloads import VALUE

pytestmark = pytest.mark.slow  # real servers, renders or long runs: make test-fast skips it


def _applied(path: Path) -> Counter[int]:
    if not path.exists():
        return Counter()
    return Counter(json.loads(line)["i"] for line in path.read_text().splitlines() if line)


def _start(
    tmp_path: Path, graph: str, *, count: int, generation: str, nats_url: str, redis_url: str
) -> tuple[subprocess.Popen[bytes], Path, Path]:
    """``vf run-local`` of ``flows/<graph>`` in the background, keeping its dead letters in
    ``tmp_path``; returns once it has announced its run."""
    out, log = tmp_path / "sink.jsonl", tmp_path / "run.log"
    (tmp_path / "run").mkdir()
    script = (
        "import sys\nfrom pathlib import Path\n"
        "from vf.commands.run_local.command import RunLocalRequest, run_local\n"
        f"sys.exit(run_local(RunLocalRequest(graph={str(FLOWS / graph)!r}, "
        f"nats_url={nats_url!r}, redis_url={redis_url!r}, stall_seconds=30, "
        f"generation={generation!r}, run_dir=Path({str(tmp_path / 'run')!r}))))\n"
    )
    env = {
        **os.environ,
        "VF_TEST_OUT": str(out),
        "VF_TEST_COUNT": str(count),
        "VF_ACK_WAIT_SECONDS": "2",
    }
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-c", script], env=env, stdout=sink, stderr=subprocess.STDOUT
        )
    wait_until(lambda: "[vf] running flow " in log.read_text(), timeout=60, what="the run")
    return process, out, log


def _run_id(log: Path) -> str:
    found = re.search(r"^\[vf\] running flow \S+ run (\S+) ", log.read_text(), re.MULTILINE)
    assert found is not None, log.read_text()[-2000:]
    return found.group(1)


def _copies(tmp_path: Path) -> list[dict[str, object]]:
    """The dead letters ``vf run-local`` copied to disk (none when it wrote no copy)."""
    lines: list[dict[str, object]] = []
    for path in sorted((tmp_path / "run").glob("vf-dead-letters-*.jsonl")):
        lines += [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return lines


async def _publish(url: str, subject: str, data: bytes, headers: dict[str, str]) -> None:
    client = await nats.connect(url)
    try:
        await client.jetstream().publish(subject, data, headers=headers)
    finally:
        await client.close()


async def _last(url: str, stream: str, subject: str) -> Envelope:
    client = await nats.connect(url)
    try:
        raw = await client.jetstream().get_last_msg(stream, subject)
        return decode_envelope(raw.data or b"")
    finally:
        await client.close()


def test_a_forged_abort_mid_stream_is_a_named_failure_that_propagates(
    tmp_path: Path, nats_server: LocalServer, redis_server: LocalServer
) -> None:
    """An abort of 'numbers' replica 0 with this run's flow, run and generation, claiming
    nothing, is published on its end-of-stream subject after 3 of 30 items. It must not
    end 'scale' early (its count is checked, EOS-6), and it must not end in a success: the
    readers relay a genuine abort carrying its reason, and each ends by name (EOS-5)."""
    count, generation = 30, "abort1"
    process, out, log = _start(
        tmp_path,
        "paced.py",
        count=count,
        generation=generation,
        nats_url=nats_server.url,
        redis_url=redis_server.url,
    )
    wait_until(lambda: sum(_applied(out).values()) >= 3, timeout=60, what="3 applied items")
    names = RunNames("paced", _run_id(log), generation)
    forged = Envelope(
        type=ABORT,
        producer="numbers",
        flow_id="paced",
        run_id=names.run_id,
        trace_id="abort-r0",
        seq=0,
        error=ErrorInfo(code="VF_CAMERA_GONE", message="la caméra a disparu"),
    )
    subject = names.eos_subject("numbers", replica=0)
    asyncio.run(
        _publish(nats_server.url, subject, encode_envelope(forged), {"VF-Generation": generation})
    )
    run = finish_flow(process, log=log, timeout=120)
    applied = _applied(out)
    relayed = asyncio.run(
        _last(nats_server.url, names.stream("scale"), names.eos_subject("scale", replica=0))
    )
    letters = [c for c in _copies(tmp_path) if "VF_UPSTREAM_ABORTED" in json.dumps(c)]
    print(
        f"[forged-abort] applied={len(applied)} of {count}, lost={count - len(applied)}, "
        f"exit={run.code}, abort dead letters={len(letters)}, scale's marker={relayed.type}"
    )
    assert run.code == 8, run.output[-4000:]
    assert "[vf] flow finished (" not in run.output
    assert "[vf] flow aborted: scale/r0, sink/r0 ended on an abort" in run.output
    assert "(restarts: 0, exit 8)" in run.output, "an aborted replica was restarted"
    assert applied == Counter(range(1, count + 1)), "the abort ended a reader before its count"
    for node in ("scale", "sink"):
        assert re.search(rf"^\[vf\] {node}: 1 item\(s\) dead-lettered", run.output, re.MULTILINE), (
            run.output[-4000:]
        )
    assert re.search(r"^\[vf\]\s+VF_UPSTREAM_ABORTED: .*VF_CAMERA_GONE", run.output, re.M)
    assert "la caméra a disparu" in run.output
    # scale relays a genuine abort (its own count, life and generation) with the reason,
    # and the sink, taking it after everything scale published, ends by name too
    assert relayed.type == ABORT and relayed.error is not None, relayed
    assert relayed.error.code == "VF_CAMERA_GONE" and relayed.seq == count
    assert {str(c["node"]) for c in letters} == {"scale", "sink"}, letters


def test_a_non_ascii_reason_reaches_the_report_and_the_copy(
    tmp_path: Path, nats_server: LocalServer, redis_server: LocalServer
) -> None:
    """A node raises with a message in non-ASCII text; its dead letter is reported with
    the text as it was, the copy on disk is written, and the run exits 6."""
    process, out, log = _start(
        tmp_path,
        "accented.py",
        count=6,
        generation="accent1",
        nats_url=nats_server.url,
        redis_url=redis_server.url,
    )
    run = finish_flow(process, log=log, timeout=120)
    copies = _copies(tmp_path)
    print(f"[non-ascii-reason] exit={run.code}, copied dead letters={len(copies)}")
    assert run.code == 6, run.output[-4000:]
    assert "VF_INTERNAL" not in run.output
    assert re.search(r"^\[vf\]\s+VF_NODE_VALUEERROR: ValueError: café ✓ 3$", run.output, re.M)
    assert len(copies) == 1, copies
    headers = copies[0]["headers"]
    assert isinstance(headers, dict) and headers["VF-Error"] == "ValueError: café ✓ 3"
    assert sorted(_applied(out)) == [1, 2, 4, 5, 6]


def test_a_blobref_naming_a_set_key_is_dead_lettered_and_the_run_goes_on(
    tmp_path: Path, nats_server: LocalServer, redis_server: LocalServer
) -> None:
    """An envelope of this run on 'numbers' subject whose BlobRef names a Redis set (an
    obligation set, as vf itself writes them): the payload cannot be read, so that one
    message is dead-lettered by name and every real item is applied."""
    count, generation = 12, "wrong1"
    key = "vf-blobobl-{vf-blob-forged}"

    async def keep_set(present: bool) -> None:
        from redis.asyncio import Redis

        client = Redis.from_url(redis_server.url)
        try:
            if present:
                await client.sadd(key, "scale--from--numbers")
            else:  # the store is shared: other tests count the blob keys left in it
                await client.delete(key)
        finally:
            await client.aclose()

    asyncio.run(keep_set(True))
    try:
        process, out, log = _start(
            tmp_path,
            "paced.py",
            count=count,
            generation=generation,
            nats_url=nats_server.url,
            redis_url=redis_server.url,
        )
        names = RunNames("paced", _run_id(log), generation)
        reference = BlobRef(ref=key, inner_payload_type=VALUE, size=3)
        payload_type, payload = encode_payload(reference)
        envelope = Envelope(
            type=DATA,
            producer="numbers",
            flow_id="paced",
            run_id=names.run_id,
            trace_id="numbers:forged:1",
            seq=1,
            payload_type=payload_type,
            payload=payload,
        )
        raw, headers = encode_envelope(envelope), {"VF-Generation": generation}
        asyncio.run(_publish(nats_server.url, names.subject("numbers"), raw, headers))
        run = finish_flow(process, log=log, timeout=180)
    finally:
        asyncio.run(keep_set(False))
    applied = _applied(out)
    restarts = len(re.findall(r"^\[vf\] scale/r0 exited with", run.output, re.MULTILINE))
    print(
        f"[blobref-to-a-set] applied={len(applied)} of {count}, scale restarts={restarts}, "
        f"exit={run.code}"
    )
    assert run.code == 6, run.output[-4000:]
    assert restarts == 0, run.output[-4000:]
    assert applied == Counter(range(1, count + 1))
    assert re.search(r"^\[vf\] scale: 1 item\(s\) dead-lettered", run.output, re.MULTILINE)
    assert re.search(r"^\[vf\]\s+VF_BLOB_UNREADABLE: .*WRONGTYPE", run.output, re.MULTILINE)


HUNG_COUNT, HUNG_ON = 400, 150


def test_a_node_call_that_never_returns_hands_its_items_to_the_sibling(
    tmp_path: Path, nats_server: LocalServer, redis_server: LocalServer
) -> None:
    """One of two competing replicas of ``scale`` never returns from the call of one item
    (DELIV-12). With a 3 s bound, that replica says ``VF_NODE_HUNG``, exits 6 and hands
    back every input its node had not started at once; its sibling (and its own next life)
    take them and every item reaches the sink well before their leases (60 s) would have
    run out. Before, the hung replica renewed the leases of the items it had fetched ahead
    for ever: they never reached the sink, and the run ended only on the stall bound."""
    out, marker = tmp_path / "sink.jsonl", tmp_path / "hang-once"
    marker.touch()
    env = {
        "VF_TEST_OUT": str(out),
        "VF_TEST_COUNT": str(HUNG_COUNT),
        "VF_TEST_HANG_ON": str(HUNG_ON),
        "VF_TEST_HANG_MARKER": str(marker),
        "VF_TEST_CALL_TIMEOUT": "3",
        "VF_RETRY_DELAY_CAP_SECONDS": "0.5",
        # the hung replica's next life publishes nothing; its marker is taken after this
        # quiet wait (EOS-6), as any restarted publisher's
        "VF_EOS_WAIT_SECONDS": "2",
    }
    run = run_flow("hung.py", nats=nats_server, redis=redis_server, env=env)
    applied = _applied(out)
    missing = sorted(set(range(1, HUNG_COUNT + 1)) - set(applied))
    hung = re.findall(r"error\[VF_NODE_HUNG\] 'scale' replica (\d)", run.output)
    print(
        f"[hung] exit {run.code}; {len(applied)} of {HUNG_COUNT} applied, {len(missing)} "
        f"never reached the sink; hung replicas {hung}"
    )
    assert not marker.exists(), "no call hung: the premise failed"
    assert missing == [], run.output[-4000:]
    assert len(hung) == 1, run.output[-4000:]
    assert re.search(rf"scale/r{hung[0]}\S* exited with 6", run.output), run.output[-4000:]
    assert run.code == 0, run.output[-4000:]
