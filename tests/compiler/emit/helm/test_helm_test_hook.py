"""The chart's ``helm test`` Pod, run: its script, as Helm renders it, against a real
nats-server and a real Valkey, with BusyBox's ``sh`` and ``nc`` (the tools of the Alpine
images the Pod runs in).

Nothing here runs a cluster: the Pod's DNS names become loopback addresses, and its
command runs as a process. What is checked is what the Pod's own text decides: that it
reads the URLs it is given (credentials, several servers, no port), speaks each server's
protocol, and fails when a server does not answer. Debian's BusyBox builds the smaller
``nc`` (``-w`` bounds the connection only), Alpine's the larger one (``-w`` also bounds a
silent connection); the script ends each exchange by closing its side, so both read to
the server's close and stop there.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from tests.support import require
from vf.pipeline import CompileResult
from vf.tree.write import write_tree
from vf_runtime.local.infra import LocalServer, redis_server_binary, start_nats, start_redis

GUARDED = ("--requirepass", "pw", "--save", "", "--appendonly", "no", "--dir")
pytestmark = pytest.mark.slow  # real servers and a real helm: make test-fast skips it

SHOW = ("--show-only", "templates/tests/test-connection.yaml")


@pytest.fixture(scope="module")
def hook(
    compiled_examples: dict[str, CompileResult],
    tmp_path_factory: pytest.TempPathFactory,
    helm: str,
) -> dict[str, Any]:
    """The batch example's test Pod, as ``helm template`` renders it for dev."""
    root = tmp_path_factory.mktemp("hook") / "deploy"
    write_tree(root, compiled_examples["batch_pipeline"].tree)
    chart = root / "chart"
    done = subprocess.run(
        [helm, "template", "vf-release", str(chart), "-f", str(chart / "values-dev.yaml"), *SHOW],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    (pod,) = [d for d in YAML(typ="safe").load_all(done.stdout) if d]
    container: dict[str, Any] = pod["spec"]["containers"][0]
    assert container["command"][:2] == ["sh", "-c"]
    return container


@pytest.fixture(scope="module")
def busybox(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder whose ``sh``, ``nc``, ``grep`` and ``printf`` are BusyBox's applets."""
    found = shutil.which("busybox")
    require(found is not None, "busybox is missing: scripts/setup installs it")
    assert found is not None
    folder = tmp_path_factory.mktemp("busybox")
    for applet in ("sh", "nc", "grep", "printf"):
        (folder / applet).symlink_to(found)
    return folder


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalServer, LocalServer]]:
    nats = start_nats(tmp_path_factory.mktemp("nats"))
    try:
        redis = start_redis(tmp_path_factory.mktemp("redis"))
    except BaseException:
        nats.stop()
        raise
    yield nats, redis
    redis.stop()
    nats.stop()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _run(hook: dict[str, Any], busybox: Path, *, nats: str, redis: str) -> tuple[int, str]:
    """The Pod's command with its two variables set to ``nats`` and ``redis``."""
    names = {e["name"] for e in hook["env"]}
    assert names == {"VF_NATS_URL", "VF_BLOB_REDIS_URL"}
    env = {"PATH": str(busybox), "VF_NATS_URL": nats, "VF_BLOB_REDIS_URL": redis}
    done = subprocess.run(
        [str(busybox / "sh"), *hook["command"][1:]],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done.returncode, done.stdout + done.stderr


def test_the_test_pod_passes_when_the_broker_and_the_store_answer(
    hook: dict[str, Any], busybox: Path, servers: tuple[LocalServer, LocalServer]
) -> None:
    nats, redis = servers
    code, out = _run(hook, busybox, nats=nats.url, redis=redis.url)
    assert code == 0, out
    assert f"broker 127.0.0.1 {nats.port} answers" in out
    assert f"store 127.0.0.1 {redis.port} answers" in out


def test_the_test_pod_reads_credentials_and_the_first_of_several_servers(
    hook: dict[str, Any], busybox: Path, servers: tuple[LocalServer, LocalServer]
) -> None:
    nats, redis = servers
    several = f"nats://user:secret@127.0.0.1:{nats.port},nats://127.0.0.1:{_free_port()}"
    code, out = _run(hook, busybox, nats=several, redis=f"redis://:pw@127.0.0.1:{redis.port}/0")
    assert code == 0, out
    assert f"broker 127.0.0.1 {nats.port} answers" in out


def test_the_test_pod_fails_when_the_broker_does_not_answer(
    hook: dict[str, Any], busybox: Path, servers: tuple[LocalServer, LocalServer]
) -> None:
    _, redis = servers
    closed = _free_port()
    code, out = _run(hook, busybox, nats=f"nats://127.0.0.1:{closed}", redis=redis.url)
    assert code == 1, out
    assert f"broker 127.0.0.1 {closed} does not answer" in out
    assert "store" not in out  # it stops at the first failure


def test_the_test_pod_fails_when_something_else_answers_on_the_brokers_port(
    hook: dict[str, Any], busybox: Path, servers: tuple[LocalServer, LocalServer]
) -> None:
    """The store's port speaks another protocol: a connection alone is not an answer."""
    _, redis = servers
    code, out = _run(hook, busybox, nats=f"nats://127.0.0.1:{redis.port}", redis=redis.url)
    assert code == 1, out
    assert "does not answer" in out


def test_the_test_pod_fails_when_the_store_does_not_answer(
    hook: dict[str, Any], busybox: Path, servers: tuple[LocalServer, LocalServer]
) -> None:
    nats, _ = servers
    closed = _free_port()
    code, out = _run(hook, busybox, nats=nats.url, redis=f"redis://127.0.0.1:{closed}/0")
    assert code == 1, out
    assert f"store 127.0.0.1 {closed} does not answer" in out


def test_a_store_that_asks_for_a_password_answers(
    hook: dict[str, Any], busybox: Path, servers: tuple[LocalServer, LocalServer], tmp_path: Path
) -> None:
    """The Pod holds no password: a store that refuses it (NOAUTH) still answers."""
    nats, _ = servers
    port = _free_port()
    argv = [redis_server_binary(), "--port", str(port), "--bind", "127.0.0.1", *GUARDED]
    guarded = subprocess.Popen(
        [*argv, str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_listening(port)
        code, out = _run(hook, busybox, nats=nats.url, redis=f"redis://127.0.0.1:{port}/0")
    finally:
        guarded.terminate()
        guarded.wait(timeout=10)
    assert code == 0, out
    assert f"store 127.0.0.1 {port} answers" in out


def test_an_external_broker_or_store_is_not_checked(
    hook: dict[str, Any], busybox: Path, servers: tuple[LocalServer, LocalServer]
) -> None:
    """An empty URL is what the template renders for a broker or store the chart does not
    run: the Pod says so and passes."""
    nats, _ = servers
    code, out = _run(hook, busybox, nats=nats.url, redis="")
    assert code == 0, out
    assert "the store is not the chart's: not checked" in out


def _wait_listening(port: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"nothing listens on {port}")
