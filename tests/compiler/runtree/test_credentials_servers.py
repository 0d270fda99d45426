"""The broker and store vf runs ask credentials (ADR 0212), proven on the real servers the
tests run: each starts from the configuration, arguments and environment vf renders, its
``$(VAR)`` arguments expanded from the environment as the kubelet does, with made-up Secret
values. Only the container paths and ports become this machine's.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import re
import subprocess
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import nats
import pytest
import redis
from nats.errors import Error as NatsError

from tests.support import require
from vf.pipeline import CompileResult
from vf_runtime.credentials import store_key_prefix
from vf_runtime.local.infra import (
    MissingTool,
    free_port,
    nats_server_binary,
    redis_server_binary,
)

pytestmark = pytest.mark.slow  # real servers

Obj = dict[str, Any]
SECRETS = {
    "vf-batch-demo-nats-auth": {"user": "flow-user", "password": "f1a2b3c4d5e6"},
    "vf-batch-demo-nats-routes": {"user": "route-user", "password": "0a1b2c3d4e5f"},
    "vf-batch-demo-redis-auth": {"user": "store-user", "password": "9f8e7d6c5b4a"},
}
STOP_WAIT = 10.0


def _infra(result: CompileResult, env: str, kind: str, infra: str) -> Obj:
    return next(
        o
        for o in result.objects[env]
        if o["kind"] == kind and o["metadata"]["labels"].get("vf.dev/infra") == infra
    )


def _container_env(container: Obj, secrets: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """The container's environment as the kubelet makes it: Secret keys read, a pod name."""
    env: dict[str, str] = {}
    for var in container.get("env") or []:
        source = var.get("valueFrom") or {}
        if "secretKeyRef" in source:
            ref = source["secretKeyRef"]
            env[var["name"]] = secrets[ref["name"]][ref["key"]]
        elif "fieldRef" in source:
            env[var["name"]] = "vf-batch-demo-nats-0"
        else:
            env[var["name"]] = var["value"]
    return env


def _kubelet_args(container: Obj, env: Mapping[str, str]) -> list[str]:
    """``$(VAR)`` in the container's args replaced from its environment."""
    return [
        re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m[1], m[0]), str(a))
        for a in container.get("args") or []
    ]


def _binary(find: Any) -> str:
    try:
        return str(find())
    except MissingTool as exc:
        require(False, str(exc))
        raise


class _Servers:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, argv: list[str], env: Mapping[str, str], name: str) -> Path:
        log = self.root / f"{name}.log"
        with log.open("wb") as out:
            self.procs.append(
                subprocess.Popen(argv, env=dict(env), stdout=out, stderr=subprocess.STDOUT)
            )
        return log

    def stop(self) -> None:
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=STOP_WAIT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[_Servers]:
    running = _Servers(tmp_path)
    try:
        yield running
    finally:
        running.stop()


def _local_conf(text: str, *, root: Path, client: int, monitor: int, cluster: int = 0) -> str:
    text = text.replace("port: 4222", f"port: {client}").replace("http: 8222", f"http: {monitor}")
    text = text.replace("  port: 6222", f"  port: {cluster}")
    text = text.replace("/var/run/nats/", f"{root}/").replace("/data/", f"{root}/data/")
    return text


def _wait_port(port: int, *, log: Path) -> None:
    import socket

    for _ in range(200):
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"no server on {port}: {log.read_text(errors='replace')[-2000:]}")


def _start_nats(
    servers: _Servers, result: CompileResult, env_name: str, kind: str, *, index: int = 0
) -> tuple[int, int, Obj, dict[str, str]]:
    conf = _infra(result, env_name, "ConfigMap", "nats")["data"]["nats.conf"]
    workload = _infra(result, env_name, kind, "nats")
    container = workload["spec"]["template"]["spec"]["containers"][0]
    env = _container_env(container, SECRETS)
    client, monitor = free_port(), free_port()
    root = servers.root / f"nats-{index}"
    root.mkdir()
    path = root / "nats.conf"
    path.write_text(_local_conf(conf, root=root, client=client, monitor=monitor))
    args = _kubelet_args(container, env)
    args[args.index("--config") + 1] = str(path)
    log = servers.start([_binary(nats_server_binary), *args], env, f"nats-{index}")
    _wait_port(client, log=log)
    return client, monitor, container, env


async def _use_jetstream(port: int, **login: str) -> str:
    nc = await nats.connect(
        f"nats://127.0.0.1:{port}", allow_reconnect=False, max_reconnect_attempts=0, **login
    )
    try:
        js = nc.jetstream()
        await js.add_stream(name="CREDS", subjects=["creds.>"])
        ack = await js.publish("creds.one", b"x")
        return ack.stream
    finally:
        await nc.close()


def test_the_dev_broker_takes_only_the_flows_user(
    servers: _Servers, compiled_examples: dict[str, CompileResult]
) -> None:
    client, _monitor, container, _env = _start_nats(
        servers, compiled_examples["batch_pipeline"], "dev", "Deployment"
    )
    names = {v["name"] for v in container["env"]}
    assert {"VF_NATS_USER", "VF_NATS_PASSWORD"} <= names
    with pytest.raises((NatsError, OSError)) as refused:
        asyncio.run(_use_jetstream(client))
    assert "Authorization Violation" in str(refused.value)
    with pytest.raises((NatsError, OSError)) as refused:
        asyncio.run(_use_jetstream(client, user="flow-user", password="not-the-password"))
    assert "Authorization Violation" in str(refused.value)
    login = SECRETS["vf-batch-demo-nats-auth"]
    assert asyncio.run(_use_jetstream(client, user=login["user"], password=login["password"])) == (
        "CREDS"
    )


def _peers(monitor: int) -> set[str] | None:
    """The servers this one routes to (a pool of connections each), by name."""
    conn = http.client.HTTPConnection("127.0.0.1", monitor, timeout=5)
    try:
        conn.request("GET", "/routez")
        routes = json.loads(conn.getresponse().read()).get("routes") or []
        return {str(r.get("remote_name") or r.get("remote_id")) for r in routes}
    except (OSError, ValueError):
        return None
    finally:
        conn.close()


def _until(check: Any, *, what: str, log: Path | None = None, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    tail = log.read_text(errors="replace")[-3000:] if log is not None else ""
    raise AssertionError(f"{what}\n{tail}")


def test_durable_servers_route_only_with_the_route_credentials(
    servers: _Servers, compiled_examples: dict[str, CompileResult]
) -> None:
    """Two servers started as the StatefulSet's pods, their routes pointing at each other,
    form a cluster; a third that knows the cluster's address but not the route
    credentials is refused, and the first two never count it."""
    result = compiled_examples["batch_pipeline"]
    conf = _infra(result, "prod", "ConfigMap", "nats")["data"]["nats.conf"]
    sts = _infra(result, "prod", "StatefulSet", "nats")
    container = sts["spec"]["template"]["spec"]["containers"][0]
    assert "routes:" not in conf and "authorization {" in conf
    env = _container_env(container, SECRETS)
    ports = [{"client": free_port(), "monitor": free_port(), "cluster": free_port()} for _ in "ab"]
    name = sts["metadata"]["name"]
    logs = []
    for index, own in enumerate(ports):
        root = servers.root / f"nats-{index}"
        root.mkdir()
        (root / "nats.conf").write_text(_local_conf(conf, root=root, **own))
        args = _kubelet_args(container, env)
        args[args.index("--config") + 1] = str(root / "nats.conf")
        routes = args[args.index("--routes") + 1]
        assert f"route-user:0a1b2c3d4e5f@{name}-0.{name}-headless:6222" in routes
        for peer, theirs in enumerate(ports):
            routes = routes.replace(
                f"{name}-{peer}.{name}-headless:6222", f"127.0.0.1:{theirs['cluster']}"
            )
        # the StatefulSet's third pod is not started: its route is left out
        routes = ",".join(u for u in routes.split(",") if "-headless" not in u)
        args[args.index("--routes") + 1] = routes
        own_env = {**env, "POD_NAME": f"{name}-{index}"}
        logs.append(servers.start([_binary(nats_server_binary), *args], own_env, f"nats-{index}"))
    joined = {f"{name}-1"}
    _until(lambda: _peers(ports[0]["monitor"]) == joined, what="no route formed", log=logs[0])
    intruder = {"client": free_port(), "monitor": free_port(), "cluster": free_port()}
    root = servers.root / "intruder"
    root.mkdir()
    (root / "nats.conf").write_text(_local_conf(conf, root=root, **intruder))
    stranger = {**env, "VF_NATS_ROUTE_USER": "someone", "VF_NATS_ROUTE_PASSWORD": "guess"}
    argv = [
        _binary(nats_server_binary),
        "--config",
        str(root / "nats.conf"),
        "--routes",
        f"nats://127.0.0.1:{ports[0]['cluster']}",
    ]
    log = servers.start(argv, {**stranger, "POD_NAME": "intruder"}, "intruder")
    _until(
        lambda: "Authorization Violation" in log.read_text(errors="replace"),
        what="the server without route credentials was not refused",
        log=log,
    )
    assert _peers(ports[0]["monitor"]) == joined
    assert _peers(intruder["monitor"]) == set()


def test_the_store_takes_only_the_flows_user_and_its_keys(
    servers: _Servers, compiled_examples: dict[str, CompileResult]
) -> None:
    result = compiled_examples["batch_pipeline"]
    deployment = _infra(result, "dev", "Deployment", "redis")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    env = _container_env(container, SECRETS)
    args = _kubelet_args(container, env)
    args[args.index("--dir") + 1] = str(servers.root)
    port = free_port()
    argv = [_binary(redis_server_binary), *args, "--port", str(port), "--bind", "127.0.0.1"]
    log = servers.start(argv, env, "store")
    _wait_port(port, log=log)
    anonymous = redis.Redis(port=port, socket_timeout=5)
    with pytest.raises(redis.exceptions.AuthenticationError):
        anonymous.set("vf:batch-demo:x", b"1")
    login = SECRETS["vf-batch-demo-redis-auth"]
    with pytest.raises(redis.exceptions.AuthenticationError):
        redis.Redis(port=port, username="default", password="", socket_timeout=5).ping()
    flow = redis.Redis(
        port=port, username=login["user"], password=login["password"], socket_timeout=5
    )
    key = store_key_prefix(result.plans[0].flow_id) + "payload"
    assert flow.set(key, b"bytes")
    assert flow.get(key) == b"bytes"
    with pytest.raises(redis.exceptions.NoPermissionError):
        flow.set("vf:another-flow:payload", b"bytes")
    with pytest.raises(redis.exceptions.NoPermissionError):
        flow.get("elsewhere")
