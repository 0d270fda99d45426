"""A broker that stops answering for a while ends no worker with a traceback.

The start-up calls a replica makes before its work (the BATCH producer's wait for its
readers, the check that its generation has not already finished, the ordinal bucket) are
asked again while JetStream does not answer, as stream and durable set-up already were
(``patiently``); a broker call no retry covers ends the run by name with exit 3
(``VF_BROKER_TIMEOUT``, ``VF_BROKER_UNAVAILABLE``), for its controller to start it again.

The pause is real: the nats-server process is stopped (SIGSTOP) for longer than a
JetStream request's 10 s, then continued.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import nats.errors
import pytest

from tests.runtime.broker.test_broker_faults_named import _start, _wait_for, _worker_env
from tests.runtime.broker.test_stream_share import _compiled
from tests.runtime.store.test_store_full import _start_small_nats
from vf_runtime.worker.config import load_worker_config
from vf_runtime.worker.exits import EXIT_BROKER
from vf_runtime.worker.opening import ended_by

PAUSE = 14.0  # seconds the broker answers nothing: past a JetStream request's 10 s


@pytest.mark.slow
def test_a_producer_waiting_for_its_readers_outlives_a_broker_pause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """numbers (BATCH) waits for the durable of its reader, scale, which never starts; the
    broker pauses meanwhile. Before: the next ``consumers_info`` timed out and the producer
    exited 1 with a traceback. Now it asks again, is alive when the broker answers, and
    stops cleanly on SIGTERM."""
    plan, broker_env, max_file_store = _compiled(tmp_path, monkeypatch, "brokerpause", 5)
    server = _start_small_nats(tmp_path / "nats", max_file_store=max_file_store)
    log = tmp_path / "numbers.log"
    try:
        env = _worker_env(plan, "numbers", broker_env, VF_NATS_URL=server.url)
        producer = _start(env, log)
        try:
            waiting = _wait_for(log, "waiting for 1 reader(s)", seconds=60)
            os.kill(server.process.pid, signal.SIGSTOP)
            try:
                time.sleep(PAUSE)
            finally:
                os.kill(server.process.pid, signal.SIGCONT)
            asked_again = _wait_for(log, "JetStream not answering yet", seconds=15)
            time.sleep(1.0)  # the answer of the request asked again arrives
            alive = producer.poll() is None
            producer.send_signal(signal.SIGTERM)
            code = producer.wait(timeout=60)
        finally:
            if producer.poll() is None:
                producer.kill()
    finally:
        server.stop()
    out = log.read_text(errors="replace")
    assert waiting, out
    assert "Traceback" not in out, out
    assert asked_again, out
    assert alive, out
    assert code in (0, 4), out  # stopped while waiting: STOP-1's exit, or nothing left to do


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (nats.errors.TimeoutError(), "VF_BROKER_TIMEOUT"),
        (nats.errors.ConnectionClosedError(), "VF_BROKER_UNAVAILABLE"),
        (nats.errors.NoRespondersError(), "VF_BROKER_UNAVAILABLE"),
    ],
)
def test_a_broker_call_no_retry_covers_ends_the_run_by_name(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    error: Exception,
    code: str,
) -> None:
    plan, broker_env, _ = _compiled(tmp_path, monkeypatch, "brokerlost", 5)
    config = load_worker_config(_worker_env(plan, "numbers", broker_env, VF_NATS_URL="nats://x"))
    assert ended_by(error, config) == EXIT_BROKER
    err = capsys.readouterr().err
    assert err.startswith(f"error[{code}] "), err
    assert "= fix: " in err and "Traceback" not in err, err
