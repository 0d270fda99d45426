"""Only the flow talks to its broker and store: credentials on real servers (ADR 0213).

nats-server admits the users of its accounts only, and an account with JetStream sees no
other account's streams or subjects; valkey with its default user off admits the flow's
user only, confined by ``store_acl_rule`` to the flow's keys and vf's commands. A worker
with the flow's credentials runs end to end; a refused one stops by name, exit 2.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import redis
from nats.aio.msg import Msg
from nats.js.errors import NotFoundError

from tests.runtime.support import FLOWS, RUN_TIMEOUT, wait_until
from vf.pipeline import CompileRequest, compile_project
from vf_runtime.broker.client import BrokerError, connect
from vf_runtime.broker.provision import provision_run
from vf_runtime.clientauth import CredentialsError, NatsAuth, StoreAuth, nats_auth, store_auth
from vf_runtime.credentials import store_acl_rule, store_key_prefix
from vf_runtime.local.infra import (
    LocalServer,
    free_port,
    nats_server_binary,
    start_nats,
    start_redis,
)
from vf_runtime.store.blobstore import (
    AppliedLog,
    BlobStore,
    PayloadUnreadable,
    StoreRefused,
    idempotency_key,
)

pytestmark = pytest.mark.slow  # real servers: make test-fast skips it

WORKER = (sys.executable, "-m", "vf_runtime.worker.replica")
FLOW = NatsAuth(user="vf-blobs", password="flow-secret-0123456789")
ADMIN = StoreAuth(user="admin", password="admin-secret-0123456789")


def test_exactly_one_form_of_broker_credentials_and_a_store_user_with_its_password(
    tmp_path: Path,
) -> None:
    both = {"VF_NATS_USER": "u", "VF_NATS_PASSWORD": "pw-hidden", "VF_NATS_TOKEN": "t"}
    cases = [both, {"VF_NATS_USER": "u"}, {"VF_NATS_CREDS": str(tmp_path / "absent.creds")}]
    for env in cases:
        with pytest.raises(CredentialsError) as caught:
            nats_auth(env)
        assert caught.value.code == "VF_BROKER_CREDENTIALS"
        assert "= fix: " in caught.value.render() and "pw-hidden" not in str(caught.value)
    user = nats_auth({**both, "VF_NATS_TOKEN": ""})  # an empty variable is an unset one
    assert user.options() == {"user": "u", "password": "pw-hidden"}
    assert "pw-hidden" not in repr(user) and "pw-hidden" not in user.described()
    assert nats_auth({"VF_NATS_TOKEN": "t"}).options() == {"token": "t"}
    assert nats_auth({}).options() == {}
    with pytest.raises(CredentialsError) as caught:
        store_auth({"VF_BLOB_REDIS_USER": "u"})
    assert caught.value.code == "VF_STORE_CREDENTIALS"
    assert store_auth({"VF_BLOB_REDIS_PASSWORD": "p"}).options() == {"password": "p"}


def test_a_broker_with_credentials_refuses_a_client_without_them_by_name(tmp_path: Path) -> None:
    server = start_nats(tmp_path / "nats", auth=FLOW)
    try:
        conf = tmp_path / "nats" / "nats-server.conf"
        assert oct(conf.stat().st_mode & 0o777) == "0o600"
        assert FLOW.password not in conf.read_text()  # named by variable, never written

        async def attempt(auth: NatsAuth) -> str:
            try:
                client = await connect(server.url, timeout=30, name="t", auth=auth)
            except BrokerError as exc:
                assert FLOW.password not in str(exc) and "wrong" not in str(exc)
                return exc.code
            await client.close()
            return "connected"

        wrong = NatsAuth(user=FLOW.user, password="wrong-password")
        # refused at once: a wait of 30 s would end as VF_BROKER_UNAVAILABLE instead
        assert asyncio.run(attempt(NatsAuth())) == "VF_BROKER_AUTH"
        assert asyncio.run(attempt(wrong)) == "VF_BROKER_AUTH"
        assert asyncio.run(attempt(NatsAuth(token="a-token"))) == "VF_BROKER_AUTH"
        assert asyncio.run(attempt(FLOW)) == "connected"
    finally:
        server.stop()


TWO_ACCOUNTS = """\
accounts {
  A { jetstream: enabled, users: [ {user: a, password: a-secret} ] }
  B { jetstream: enabled, users: [ {user: b, password: b-secret} ] }
}
"""


def _two_accounts(directory: Path) -> LocalServer:
    """One nats-server, two flows' accounts (how flows share a broker they bring)."""
    directory.mkdir(parents=True)
    (directory / "nats.conf").write_text(TWO_ACCOUNTS)
    port = free_port()
    command = [nats_server_binary(), "-js", "-a", "127.0.0.1", "-p", str(port)]
    command += ["-sd", str(directory / "js"), "-c", str(directory / "nats.conf")]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return LocalServer("nats-server", f"nats://127.0.0.1:{port}", port, process).ready()


def test_another_flows_account_cannot_read_or_write_this_flows_streams(tmp_path: Path) -> None:
    server = _two_accounts(tmp_path / "nats")
    a, b = NatsAuth(user="a", password="a-secret"), NatsAuth(user="b", password="b-secret")

    async def check() -> None:
        mine = await connect(server.url, timeout=10, name="a", auth=a)
        other = await connect(server.url, timeout=10, name="b", auth=b)
        try:
            js, js_other = mine.jetstream(), other.jetstream()
            await js.add_stream(name="vf-a-run-numbers", subjects=["vf.a.run.numbers"])
            await js.publish("vf.a.run.numbers", b"1")
            with pytest.raises(NotFoundError):
                await js_other.stream_info("vf-a-run-numbers")
            assert await js_other.streams_info() == []
            heard: list[bytes] = []

            async def hear(msg: Msg) -> None:
                heard.append(msg.data)

            await other.subscribe("vf.a.>", cb=hear)
            await other.publish("vf.a.run.numbers", b"forged")  # B's own subject space
            await other.flush()
            await mine.publish("vf.a.run.numbers", b"2")
            await mine.flush()
            await asyncio.sleep(0.3)
            assert heard == [b"forged"]  # its own, never the other account's "2"
            assert (await js.stream_info("vf-a-run-numbers")).state.messages == 2
        finally:
            await mine.close()
            await other.close()

    try:
        asyncio.run(check())
    finally:
        server.stop()


def test_the_acl_rule_confines_a_flows_store_user_to_its_keys(tmp_path: Path) -> None:
    mine, other = (StoreAuth(user=f"vf-{f}", password=f"{f}-secret-0123") for f in ("a", "b"))
    users = [(mine, store_acl_rule("a")), (other, store_acl_rule("b"))]
    server = start_redis(tmp_path / "redis", users=[*users, (ADMIN, "~* &* +@all")])
    conf = (tmp_path / "redis" / "redis-server.conf").read_text()
    assert mine.password not in conf and "user default off" in conf

    async def check() -> None:
        store = BlobStore.from_url(server.url, ttl_seconds=60, prefix="vf:a:", auth=mine)
        wrong = StoreAuth(user=mine.user, password="wrong")
        intruders = [
            BlobStore.from_url(server.url, ttl_seconds=60, prefix="vf:b:", auth=other),
            BlobStore.from_url(server.url, ttl_seconds=60, prefix="vf:a:", auth=other),
            BlobStore.from_url(server.url, ttl_seconds=60, prefix="vf:a:", auth=StoreAuth()),
            BlobStore.from_url(server.url, ttl_seconds=60, prefix="vf:a:", auth=wrong),
        ]
        try:
            ref = await store.put("g1-m1", b"payload", readers=["r1", "r2"])
            assert ref.startswith(store_key_prefix("a"))
            log = AppliedLog(store.client, flow_id="a", node="sink")
            await log.mark("m1")
            assert await log.seen("m1")
            with pytest.raises(PayloadUnreadable):  # another flow's key: that message's problem
                await intruders[0].get(ref)
            for intruder in intruders:
                with pytest.raises(StoreRefused):
                    await intruder.release(ref, reader="r1")
            for intruder in intruders[1:]:
                with pytest.raises(StoreRefused):
                    await intruder.put("g1-m2", b"forged", readers=["r1"])
            with pytest.raises(redis.exceptions.NoPermissionError):
                await store.client.flushall()
            with pytest.raises(redis.exceptions.NoPermissionError):
                await store.client.keys("*")
            assert await store.get(ref) == b"payload"
            assert not await store.release(ref, reader="r1")
            assert await store.release(ref, reader="r2")
        finally:
            for each in (store, *intruders):
                await each.close()

    try:
        asyncio.run(check())
        admin = redis.Redis.from_url(server.url, **ADMIN.options())
        keys = sorted(k.decode() for k in admin.scan_iter("*"))
        assert keys == [idempotency_key(flow_id="a", node="sink", message_id="m1")]
    finally:
        server.stop()


def _servers(tmp_path: Path, flow: str) -> tuple[LocalServer, LocalServer, StoreAuth]:
    store = StoreAuth(user=f"vf-{flow}", password="store-secret-0123456789")
    users = [(store, store_acl_rule(flow)), (ADMIN, "~* &* +@all")]
    return start_nats(tmp_path / "nats", auth=FLOW), start_redis(tmp_path / "r", users=users), store


@pytest.mark.parametrize("graph", ["blob.py", "linear.py"])
def test_a_batch_flow_with_the_flows_credentials_is_never_refused(
    tmp_path: Path, graph: str
) -> None:
    """A flow's whole store traffic (offloads, obligation sets, releases, idempotency
    records) under the user ``store_acl_rule`` confines: nothing is refused, the ACL log
    stays empty; the servers are given by URL, the credentials by the environment."""
    flow = "blobs" if graph == "blob.py" else "credentials"
    nats, store, auth = _servers(tmp_path, flow)
    out = tmp_path / "sink.jsonl"
    env = {**os.environ, **FLOW.env(), **auth.env(), "VF_TEST_OUT": str(out)}
    env.update(VF_TEST_FLOW=flow, VF_TEST_COUNT="12")
    command = [str(Path(sys.executable).with_name("vf")), "run-local", str(FLOWS / graph)]
    command += ["--nats", nats.url, "--redis", store.url, "--stall-timeout", "30"]
    admin = redis.Redis.from_url(store.url, **ADMIN.options())
    try:
        done = subprocess.run(
            command, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False
        )
        output = done.stdout + done.stderr
        assert done.returncode == 0, output[-4000:]
        assert "VF_STORE_AUTH" not in output and "NOPERM" not in output
        assert admin.acl_log() == []  # no command and no key was refused
        assert len(out.read_text().splitlines()) == (3 if graph == "blob.py" else 12)
        if graph == "blob.py":  # offloaded, then released: no blob left behind
            assert admin.info("commandstats").get("cmdstat_set", {}).get("calls", 0) >= 3
            assert list(admin.scan_iter(f"{store_key_prefix(flow)}blob*")) == []
        else:  # the idempotent sink's records, under the flow's prefix
            keys = [k.decode() for k in admin.scan_iter("*")]
            assert keys and all(k.startswith(store_key_prefix(flow)) for k in keys), keys
    finally:
        admin.close()
        nats.stop()
        store.stop()


def _worker_env(tmp_path: Path, node: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv("VF_TEST_OUT", str(tmp_path / "sink.jsonl"))  # the graph reads it
    plan = compile_project(CompileRequest(graph=str(FLOWS / "blob.py"))).plans[0]
    (workload,) = (w for w in plan.workloads if w.node == node)
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("VF_NATS_", "VF_BLOB_"))}
    path = os.pathsep.join(filter(None, [str(FLOWS), os.environ.get("PYTHONPATH", "")]))
    return {**clean, **dict(workload.env), "PYTHONPATH": path, "VF_HEALTH_PORT": "0"}


def test_a_worker_refused_by_the_broker_or_the_store_exits_2_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nats, store, auth = _servers(tmp_path, "blobs")
    base = _worker_env(tmp_path, "numbers", monkeypatch)
    base.update(VF_NATS_URL=nats.url, VF_BLOB_REDIS_URL=store.url)
    from vf.commands.run_local.command import provision_topology

    plan = compile_project(CompileRequest(graph=str(FLOWS / "blob.py"))).plans[0]
    asyncio.run(
        provision_run(nats.url, provision_topology(plan), prune=False, timeout=15, auth=FLOW)
    )
    cases = {
        "VF_BROKER_AUTH": {**FLOW.env(), "VF_NATS_PASSWORD": "wrong-nats-pw", **auth.env()},
        "VF_BROKER_CREDENTIALS": {**FLOW.env(), "VF_NATS_TOKEN": "a-token"},
        # the producer's first offload (4 MiB) meets the store
        "VF_STORE_AUTH": {**FLOW.env(), **auth.env(), "VF_BLOB_REDIS_PASSWORD": "wrong-store"},
    }
    try:
        for code, secrets_env in cases.items():
            done = subprocess.run(
                WORKER,
                env={**base, **secrets_env},
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            text = done.stdout + done.stderr
            assert done.returncode == 2, f"{code}: {text[-3000:]}"
            assert f"error[{code}]" in text and "= fix:" in text, text[-3000:]
            assert "Traceback" not in text, text[-3000:]
            for value in secrets_env.values():
                assert value not in text or value == FLOW.user, (value, text[-3000:])
    finally:
        nats.stop()
        store.stop()


LIVE = """\
import os

from testnodes import Numbers, Record

from vf import REALTIME, Flow


def build_flow() -> Flow:
    camera = Numbers(count=0, interval=0.02, is_finite=False, name="camera")
    sink = Record(path=os.environ["VF_TEST_OUT"], idempotent=True, name="sink")(camera)
    return Flow([sink], flow_type=REALTIME, flow_id="guarded")
"""


def test_run_locals_own_servers_refuse_a_client_without_the_runs_credentials(
    tmp_path: Path,
) -> None:
    """The embedded broker and store admit only the credentials made for the run: the
    workers have them (the sink's idempotency records go through the store), a client
    without them is refused, by name."""
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(FLOWS / "testnodes.py", project / "testnodes.py")
    (project / "graph.py").write_text(LIVE)
    env = {"images": {"default": "registry.example.com/vf/runtime-tests:0"}}
    env["payload_store"] = {"profile": "dev"}
    (project / "vf.yaml").write_text(json.dumps({"environments": {"local": env}}))
    out, log = tmp_path / "sink.jsonl", tmp_path / "run.log"
    command = [str(Path(sys.executable).with_name("vf")), "run-local", str(project / "graph.py")]
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("VF_NATS_", "VF_BLOB_"))}
    with log.open("w") as sink:
        process = subprocess.Popen(
            command, env={**clean, "VF_TEST_OUT": str(out)}, stdout=sink, stderr=sink
        )
    try:
        wait_until(
            lambda: out.exists() and len(out.read_text().splitlines()) >= 3,
            timeout=60,
            what="three items through the run's own servers",
        )
        started = re.findall(r"\[vf\] started (\S+) at (\S+)", log.read_text())
        urls = {("nats" if name == "nats-server" else "store"): url for name, url in started}
        assert set(urls) == {"nats", "store"}, log.read_text()[-3000:]
        refused = asyncio.run(_broker_refusal(urls["nats"]))
        with pytest.raises(redis.exceptions.AuthenticationError):
            redis.Redis.from_url(urls["store"]).ping()
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    output = log.read_text()
    assert refused == "VF_BROKER_AUTH"
    assert process.returncode == 130, output[-3000:]
    assert "VF_STORE_AUTH" not in output and "VF_BROKER_AUTH" not in output, output[-3000:]


async def _broker_refusal(url: str) -> str:
    try:
        client = await connect(url, timeout=10, name="stranger", auth=NatsAuth())
    except BrokerError as exc:
        return exc.code
    await client.close()
    return "connected"
