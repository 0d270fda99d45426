"""A local run never takes what is not its own for its own, and an operator command does
not wait on a broker that answered: a NATS server of another process on the port vf chose
for its own is refused by name, ``--nats URL`` says which server answered, and a refused
connection fails an operator command at once (real nats-server throughout)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.runtime.opshelp import vf
from vf_runtime.local.infra import LocalServer, free_port, launch_nats, nats_identity


def test_a_nats_server_vf_did_not_start_is_refused(
    nats_server: LocalServer, tmp_path: Path
) -> None:
    """vf's own server cannot bind the port another one holds; the stranger answers the
    port, and used to be taken for vf's (a flow then ran on another user's broker)."""
    ours = launch_nats(tmp_path / "nats", port=nats_server.port)
    try:
        with pytest.raises(RuntimeError) as caught:
            ours.ready()
    finally:
        ours.stop()
    print(caught.value)
    assert "another NATS server" in str(caught.value) or "exited at start" in str(caught.value)
    assert "server_name" in str(caught.value) or "address already in use" in str(caught.value)


def test_the_server_that_answers_says_who_it_is(nats_server: LocalServer, tmp_path: Path) -> None:
    mine = launch_nats(tmp_path / "mine").ready()
    try:
        info = nats_identity(mine.url)
    finally:
        mine.stop()
    assert info["server_name"] == mine.server_name and info["server_id"]
    assert nats_identity(nats_server.url)["server_id"] != info["server_id"]


def test_an_operator_command_fails_at_once_on_a_refused_connection() -> None:
    url = f"nats://127.0.0.1:{free_port()}"  # nothing listens: the kernel refuses at once
    started = time.monotonic()
    done = vf("runs", "--flow", "f", "--timeout", "10", nats_url=url)
    took = time.monotonic() - started
    print(f"[refused] exit {done.code} in {took:.2f}s: {done.err.splitlines()[0]}")
    assert done.code == 3 and "error[VF_BROKER_UNAVAILABLE]" in done.err
    assert "refused" in done.err and took < 3.0
