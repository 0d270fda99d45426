"""The nats-py internals a worker writes through: checked at import, with nats-py's public
path taken when one is missing, and a whole flow run both ways on a real nats-server."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from nats.aio.client import Client
from nats.aio.subscription import Subscription
from nats.js import JetStreamContext

from tests.runtime.opshelp import with_js
from tests.runtime.support import FLOWS
from vf_runtime.broker import nats_internals
from vf_runtime.broker.naming import RunNames
from vf_runtime.local.infra import LocalServer
from vf_runtime.worker.replica import run_worker


def test_the_installed_nats_py_has_every_member_vf_writes_through() -> None:
    assert nats_internals.MISSING == []
    assert nats_internals.AVAILABLE


class _SyncFlush(Client):
    def _flush_pending(self) -> None:  # type: ignore[override]  # no longer a coroutine
        return None


class _OtherCommand(Client):
    async def _send_command(self, cmd: bytes, priority: bool, urgent: bool) -> None:  # type: ignore[override]
        return None


class _NoFlushQueue(Client):
    def __init__(self) -> None:
        super().__init__()
        del self._flush_queue


class _NoId(Subscription):
    def __init__(self, conn: Any, id: int = 0) -> None:
        super().__init__(conn, id)
        del self._id


@pytest.mark.parametrize(
    ("client", "subscription", "named"),
    [
        (_SyncFlush, Subscription, ["Client._flush_pending"]),
        (_OtherCommand, Subscription, ["Client._send_command"]),
        (_NoFlushQueue, Subscription, ["Client._flush_queue"]),
        (Client, _NoId, ["Subscription._id"]),
    ],
)
def test_a_changed_or_missing_member_is_named(
    client: type[Client], subscription: type[Subscription], named: list[str]
) -> None:
    assert nats_internals.missing(client, subscription) == named


def _flow(nats_server: LocalServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    """The linear flow's four workers in this process; the number of items the sink wrote."""
    from vf.pipeline import CompileRequest, compile_project

    out = tmp_path / "sink.jsonl"
    monkeypatch.setenv("VF_TEST_OUT", str(out))
    monkeypatch.setenv("VF_TEST_FLOW", f"internals-{nats_internals.AVAILABLE}".lower())
    monkeypatch.setenv("VF_TEST_COUNT", "50")
    monkeypatch.syspath_prepend(str(FLOWS))
    plan = compile_project(CompileRequest(graph=str(FLOWS / "linear.py"))).plans[0]
    names = RunNames(plan.flow_id, plan.run_id)

    def env(node: str, replica: int) -> dict[str, str]:
        values = dict(next(w for w in plan.workloads if w.node == node).env)
        values.update(VF_NATS_URL=nats_server.url, VF_REPLICA_ID=str(replica), VF_HEALTH_PORT="0")
        return values

    async def body(js: JetStreamContext) -> int:
        workers = [("numbers", 0), ("scale", 0), ("scale", 1), ("sink", 0)]
        codes = await asyncio.wait_for(
            asyncio.gather(*(run_worker(env(node, r)) for node, r in workers)), timeout=60
        )
        assert codes == [0, 0, 0, 0]
        pending = await js.consumer_info(names.stream("scale"), "sink--from--scale")
        assert pending.num_ack_pending == 0, "an ack did not reach the broker"
        return len(out.read_text().splitlines())

    return with_js(nats_server.url, body)


@pytest.mark.slow
@pytest.mark.parametrize("available", [True, False], ids=["internals", "public-path"])
def test_a_flow_runs_the_same_through_the_internals_and_the_public_path(
    nats_server: LocalServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    available: bool,
) -> None:
    """With ``AVAILABLE`` False (as on a nats-py that lacks a member), every publish, ack
    and inbox drain goes through nats-py's public calls, and the flow delivers the same;
    with ``FAST_HEADERS`` False the connections read headers with nats-py's own parse."""
    monkeypatch.setattr(nats_internals, "AVAILABLE", available)
    monkeypatch.setattr(nats_internals, "FAST_HEADERS", available)
    assert _flow(nats_server, tmp_path, monkeypatch) == 50


def test_vfs_header_parse_agrees_with_the_installed_nats_py() -> None:
    assert nats_internals.FAST_HEADERS
    assert nats_internals.agrees(Client._parse_header_lines)
    assert type(nats_internals.client())._parse_header_lines is not Client._parse_header_lines
    # past the fixed cases: every short name of ASCII bytes, whitespace and controls included
    names = [bytes([a, b]) for a in range(0, 128, 3) for b in range(0, 128, 5)]
    block = b"".join(n + b": v\r\n" for n in names if b"\r" not in n and b"\n" not in n)
    assert nats_internals.parse_headers(block) == Client._parse_header_lines(block)


def _skips_nothing(raw: bytes) -> dict[str, str]:
    """A parse that differs from nats-py's: it keeps a name with whitespace."""
    out: dict[str, str] = {}
    for line in raw.split(b"\r\n"):
        name, colon, value = line.partition(b":")
        if colon:
            out[name.strip().decode("latin-1")] = value.strip().decode("latin-1")
    return out


def test_a_nats_py_whose_header_parse_differs_keeps_its_own() -> None:
    assert not nats_internals.agrees(_skips_nothing)
    assert not nats_internals.agrees(lambda raw: 1 / 0)


async def _received(url: str, headers: dict[str, str]) -> dict[str, str] | None:
    client = nats_internals.client()
    await client.connect(url)
    try:
        inbox = await client.subscribe("vf.test.headers")
        await client.publish("vf.test.headers", b"x", headers=headers)
        return (await inbox.next_msg(timeout=5)).headers
    finally:
        await client.close()


def test_a_vf_connection_reads_what_was_sent(nats_server: LocalServer) -> None:
    sent = {
        "Nats-Msg-Id": "f:r:g1:n:0:1",
        "traceparent": "00-" + "ab" * 16 + "-" + "cd" * 8 + "-01",
    }
    assert asyncio.run(_received(nats_server.url, sent)) == sent


def test_whether_the_server_asked_for_tls_is_read_and_fails_closed() -> None:
    client: Any = Client()
    assert not nats_internals.requires_tls(client)  # no INFO yet
    client._server_info = {"tls_required": True}
    assert nats_internals.requires_tls(client)
    del client._server_info  # a nats-py that keeps it elsewhere: the CA's client refuses
    assert not nats_internals.requires_tls(client)
