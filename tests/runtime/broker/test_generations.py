"""Run generations on real servers: one run's incarnations never feed or end each other.

Each test runs ``vf run-local`` of the paced BATCH flow (a replayable producer at
4 items/s, an idempotent sink) against one long-lived nats-server and redis-server,
the way a re-created Job set meets the streams of the run's previous incarnation.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import nats
import pytest

from tests.runtime.support import (
    FLOWS,
    FlowRun,
    finish_flow,
    live_processes_with,
    run_flow,
    start_flow,
    wait_until,
)
from vf_runtime.broker.naming import RunNames
from vf_runtime.local.infra import LocalServer
from vf_runtime.wire import EOS, Envelope, encode_envelope

pytestmark = pytest.mark.slow  # real servers, renders or long runs: make test-fast skips it

COUNT = 12


def _applied(path: Path) -> Counter[int]:
    """How many times the sink applied each item."""
    if not path.exists():
        return Counter()
    return Counter(json.loads(line)["i"] for line in path.read_text().splitlines() if line)


def _identity(output: str) -> tuple[str, str]:
    """The run id and generation ``vf run-local`` announced."""
    found = re.search(r"run (\S+) generation (\S+) ", output)
    assert found is not None, output[-2000:]
    return found.group(1), found.group(2)


def _report(name: str, **counts: object) -> None:
    print(f"[{name}] " + ", ".join(f"{k}={v}" for k, v in counts.items()))


async def _streams(url: str, flow: str) -> list[str]:
    client = await nats.connect(url)
    try:
        infos = await client.jetstream().streams_info()
        return sorted(i.config.name or "" for i in infos if f"vf-{flow}-" in (i.config.name or ""))
    finally:
        await client.close()


def test_a_finished_batch_flow_run_again_applies_every_item_again(
    tmp_path: Path, nats_server: LocalServer, redis_server: LocalServer
) -> None:
    outputs = [tmp_path / "first.jsonl", tmp_path / "second.jsonl"]
    runs = []
    for out in outputs:
        env = {"VF_TEST_OUT": str(out), "VF_TEST_COUNT": str(COUNT)}
        runs.append(run_flow("paced.py", nats=nats_server, redis=redis_server, env=env))
    first, second = (_applied(out) for out in outputs)
    (run_a, gen_a), (run_b, gen_b) = (_identity(r.output) for r in runs)
    _report(
        "rerun",
        run=run_a,
        generations=f"{gen_a},{gen_b}",
        first_delivered=len(first),
        first_duplicated=sum(c - 1 for c in first.values()),
        second_delivered=len(second),
        second_duplicated=sum(c - 1 for c in second.values()),
        second_lost=COUNT - len(second),
    )
    assert run_a == run_b, "the scenario needs the same run id twice"
    assert gen_a != gen_b, "every local run must get a generation of its own"
    for run in runs:
        assert run.code == 0, run.output[-4000:]
    expected = Counter(range(1, COUNT + 1))
    assert first == expected
    assert second == expected, "the second run did not apply its own items exactly once"
    streams = asyncio.run(_streams(nats_server.url, "paced"))
    assert not [s for s in streams if gen_a in s], f"superseded generation kept: {streams}"


def test_a_killed_run_leaves_its_backlog_to_itself_and_the_next_run_does_its_own_work(
    tmp_path: Path, nats_server: LocalServer, redis_server: LocalServer
) -> None:
    killed, second = tmp_path / "killed.jsonl", tmp_path / "second.jsonl"
    log = tmp_path / "killed.log"
    env = {"VF_TEST_OUT": str(killed), "VF_TEST_COUNT": str(COUNT)}
    process = start_flow(
        "paced.py", nats_url=nats_server.url, redis_url=redis_server.url, env=env, log=log
    )
    wait_until(lambda: sum(_applied(killed).values()) >= 3, timeout=60, what="3 applied items")
    os.kill(process.pid, signal.SIGKILL)
    first = finish_flow(process, log=log, timeout=10)
    wait_until(  # its workers notice the supervisor is gone (VF_EXIT_WITH_PARENT) and stop
        lambda: not live_processes_with("VF_TEST_OUT", str(killed)),
        timeout=30,
        what="the killed run's workers to stop",
    )
    partial = _applied(killed)
    env = {"VF_TEST_OUT": str(second), "VF_TEST_COUNT": str(COUNT)}
    run = run_flow("paced.py", nats=nats_server, redis=redis_server, env=env)
    after = _applied(second)
    _, gen_killed = _identity(first.output)
    _report(
        "killed-then-rerun",
        killed_applied=sum(partial.values()),
        killed_after_rerun=sum(_applied(killed).values()),
        second_delivered=len(after),
        second_duplicated=sum(c - 1 for c in after.values()),
        second_lost=COUNT - len(after),
    )
    assert run.code == 0, run.output[-4000:]
    assert first.code == -signal.SIGKILL
    assert 3 <= sum(partial.values()) < COUNT, "the first run was not killed mid-way"
    assert after == Counter(range(1, COUNT + 1)), "the second run did not do its own work"
    assert _applied(killed) == partial, "the killed run's sink applied something afterwards"
    streams = asyncio.run(_streams(nats_server.url, "paced"))
    assert not [s for s in streams if gen_killed in s], f"the killed backlog is kept: {streams}"


def _run_local_with(generation: str, *, out: Path, nats_url: str, redis_url: str) -> FlowRun:
    """``run_local`` of the paced flow with a generation of the caller's choosing."""
    graph = str(FLOWS / "paced.py")
    script = (
        "import sys\nfrom vf.commands.run_local.command import RunLocalRequest, run_local\n"
        f"sys.exit(run_local(RunLocalRequest(graph={graph!r}, nats_url={nats_url!r}, "
        f"redis_url={redis_url!r}, stall_seconds=30, generation={generation!r})))\n"
    )
    env = {**os.environ, "VF_TEST_OUT": str(out), "VF_TEST_COUNT": "6"}
    done = subprocess.run(
        [sys.executable, "-c", script],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )
    return FlowRun(code=done.returncode, output=done.stdout + done.stderr)


def test_the_same_generation_run_again_fails_by_name_instead_of_doing_nothing(
    tmp_path: Path, nats_server: LocalServer, redis_server: LocalServer
) -> None:
    first, again = tmp_path / "first.jsonl", tmp_path / "again.jsonl"
    urls = {"nats_url": nats_server.url, "redis_url": redis_server.url}
    done = _run_local_with("same1", out=first, **urls)
    rerun = _run_local_with("same1", out=again, **urls)
    _report(
        "same-generation",
        first_delivered=len(_applied(first)),
        rerun_applied=sum(_applied(again).values()),
        rerun_exit=rerun.code,
    )
    assert done.code == 0, done.output[-4000:]
    assert _applied(first) == Counter(range(1, 7))
    assert rerun.code != 0, "a re-created finished generation reported success"
    assert "error[VF_GENERATION_FINISHED]" in rerun.output
    assert "flow finished" not in rerun.output


def _forge_markers(
    url: str, *, plan_flow: str, run_id: str, generation: str, seen: Callable[[str], bool]
) -> None:
    """Publish what an attacker or a stale incarnation could: a well-formed end-of-stream
    marker of 'numbers' replica 0 claiming 0 items, once with another generation's header
    and once with this generation's. A reader looks up only the last marker, so the second
    goes out once ``seen('refused')`` says a reader has looked at the first, and the call
    returns once ``seen('polled')`` says the readers have polled since the second."""
    names = RunNames(plan_flow, run_id, generation)
    marker = Envelope(
        type=EOS, producer="numbers", flow_id=plan_flow, run_id=run_id, trace_id="eos-r0", seq=0
    )

    async def publish() -> None:
        client = await nats.connect(url)
        try:
            js = client.jetstream()
            subject = names.eos_subject("numbers", replica=0)
            for header, event in (("gother", "refused"), (generation, "polled")):
                await js.publish(
                    subject, encode_envelope(marker), headers={"VF-Generation": header}
                )
                async with asyncio.timeout(30):
                    while not seen(event):
                        await asyncio.sleep(0.02)
        finally:
            await client.close()

    asyncio.run(publish())


@pytest.mark.parametrize("replicas", [1, 2])
def test_a_forged_end_of_stream_marker_does_not_end_a_reader_early(
    tmp_path: Path, nats_server: LocalServer, redis_server: LocalServer, replicas: int
) -> None:
    """With one scale replica it counts alone (EOS-6); with two competing replicas on one
    durable they pool their counts (EOS-8)."""
    out, log = tmp_path / "sink.jsonl", tmp_path / "run.log"
    count = 16
    generation = f"forged{replicas}"
    env = {
        "VF_TEST_OUT": str(out),
        "VF_TEST_COUNT": str(count),
        "VF_TEST_SCALE_REPLICAS": str(replicas),
    }
    graph = str(FLOWS / "paced.py")
    script = (
        "import sys\nfrom vf.commands.run_local.command import RunLocalRequest, run_local\n"
        f"sys.exit(run_local(RunLocalRequest(graph={graph!r}, nats_url={nats_server.url!r}, "
        f"redis_url={redis_server.url!r}, stall_seconds=30, generation={generation!r})))\n"
    )
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-c", script],
            env={**os.environ, **env},
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    wait_until(lambda: sum(_applied(out).values()) >= 3, timeout=60, what="3 applied items")
    run_id, _ = _identity(log.read_text())
    marks: dict[str, int] = {}

    def seen(event: str) -> bool:
        """'refused': a reader logged the other generation's marker; 'polled': two more
        items were applied since the second marker, each reader polling every 0.25 s."""
        applied = sum(_applied(out).values())
        if event == "refused":
            return "refused: it is from generation 'gother'" in log.read_text(errors="replace")
        return applied >= min(marks.setdefault("since", applied) + 2, count)

    _forge_markers(
        nats_server.url, plan_flow="paced", run_id=run_id, generation=generation, seen=seen
    )
    run = finish_flow(process, log=log, timeout=90)
    applied = _applied(out)
    _report(
        f"forged-eos, {replicas} scale replica(s)",
        delivered=len(applied),
        duplicated=sum(c - 1 for c in applied.values()),
        lost=count - len(applied),
        exit=run.code,
    )
    assert run.code == 0, run.output[-4000:]
    assert applied == Counter(range(1, count + 1)), "a forged marker ended a reader early"
    assert "refused: it is from generation 'gother'" in run.output
