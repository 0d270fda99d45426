"""Credentials reach pods only through Secret references: a project whose external broker and
payload store use ``url_secret`` is compiled, planned, explained, validated, diffed and run
(worker and provision Job against a closed port) with the secret values in a Secret manifest
beside it and in the environment; none of the values appears in the tree or any output."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support import EXAMPLES
from vf.pipeline import CompileRequest, compile_project
from vf_runtime.redact import redact

NATS_PASSWORD = "nats-Pw-7f3a91c0e2"
REDIS_PASSWORD = "redis-Pw-5b8d24e6f1"
TOKEN = "tok-9c1e7a3f5d"
NEEDLES = (NATS_PASSWORD, REDIS_PASSWORD, TOKEN)
SECRET_MANIFEST = f"""apiVersion: v1
kind: Secret
metadata:
  name: cameras-credentials
  namespace: cameras
type: Opaque
stringData:
  nats-url: nats://cameras:{NATS_PASSWORD}@nats.messaging.svc:4222
  redis-url: rediss://default:{REDIS_PASSWORD}@redis.cache.svc:6380/0
  token: {TOKEN}
"""
CONFIG = """flow_id: cameras
environments:
  prod:
    namespace: cameras
    kubernetes_version: "1.35"
    images:
      default: registry.example.com/vf/cameras@sha256:{digest}
    replicas:
      detector: {replicas}
    broker:
      profile: external
      url_secret: {{name: cameras-credentials, key: nats-url}}
      egress: {{to: [{{namespace: messaging}}]}}
    payload_store:
      profile: external
      url_secret: {{name: cameras-credentials, key: redis-url}}
    autoscaling:
      monitoring_endpoint: nats.messaging.svc:8222
"""


def _config(replicas: int) -> str:
    return CONFIG.format(digest="ab" * 32, replicas=replicas)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The cameras example with credentials kept beside it (a test-only Secret manifest)."""
    root = tmp_path / "cameras"
    shutil.copytree(EXAMPLES / "realtime_cameras", root)
    (root / "vf.yaml").write_text(_config(2), encoding="utf-8")
    (root / "credentials.secret.yaml").write_text(SECRET_MANIFEST, encoding="utf-8")
    return root


def _secret_env(project: Path) -> dict[str, str]:
    """The caller's environment plus every way a secret could sit in it."""
    env = dict(os.environ)
    env.update(
        VF_NATS_URL=f"nats://cameras:{NATS_PASSWORD}@nats.messaging.svc:4222",
        VF_BLOB_REDIS_URL=f"rediss://default:{REDIS_PASSWORD}@redis.cache.svc:6380/0",
        NATS_TOKEN=TOKEN,
        REDIS_PASSWORD=REDIS_PASSWORD,
        PYTHONPATH=str(project),
    )
    return env


def _vf(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vf", *args],
        cwd=project,
        env=_secret_env(project),
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def _leaks(text: str) -> list[str]:
    return [needle for needle in NEEDLES if needle in text]


def test_no_secret_in_the_tree_or_the_cli_output(project: Path) -> None:
    runs = [
        (0, _vf(project, "compile", "graph.py", "--out", "deploy")),
        (0, _vf(project, "compile", "graph.py", "--out", "deploy", "--check")),
        (0, _vf(project, "plan", "graph.py")),
        (0, _vf(project, "plan", "graph.py", "--format", "yaml")),
        (0, _vf(project, "explain", "graph.py")),
        (0, _vf(project, "validate", "graph.py")),
    ]
    (project / "vf.yaml").write_text(_config(3), encoding="utf-8")
    runs.append((1, _vf(project, "compile", "graph.py", "--out", "deploy", "--check")))
    runs.append((1, _vf(project, "diff", "graph.py", "--out", "deploy", "--raw")))
    for expected, done in runs:
        assert done.returncode == expected, done.args
        assert _leaks(done.stdout + done.stderr) == [], done.args
    files = [p for p in (project / "deploy").rglob("*") if p.is_file()]
    assert len(files) > 40  # a whole tree (the chart shares templates between objects)
    for path in files:
        assert _leaks(path.read_text(encoding="utf-8")) == [], path
    tree = project / "deploy"
    broker = [
        *tree.glob("base/configmap-*-broker*.yaml"),
        *tree.glob("overlays/*/resources/configmap-*-broker*.yaml"),
    ]
    assert broker and "VF_NATS_URL" not in "".join(p.read_text() for p in broker)
    found = [*tree.glob("base/deployment-*"), *tree.glob("overlays/*/resources/deployment-*")]
    workers = "".join(p.read_text() for p in found)
    assert workers.count("name: cameras-credentials") >= 2 * 5  # both URLs, every Deployment


def test_the_plan_records_references_not_values(project: Path) -> None:
    result = compile_project(CompileRequest(graph=str(project / "graph.py")))
    infra = result.plans[0].infra
    assert infra.nats_url is None and infra.store_url is None
    assert infra.nats_url_secret is not None and infra.store_url_secret is not None
    assert (infra.nats_url_secret.name, infra.nats_url_secret.key) == (
        "cameras-credentials",
        "nats-url",
    )


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _run_env(project: Path, env: dict[str, str]) -> dict[str, str]:
    out = _secret_env(project)
    port = _closed_port()
    out.update(env)
    out["VF_NATS_URL"] = f"nats://cameras:{NATS_PASSWORD}@127.0.0.1:{port}"
    out["VF_BLOB_REDIS_URL"] = f"redis://default:{REDIS_PASSWORD}@127.0.0.1:{port}/0"
    out["VF_CONNECT_TIMEOUT_SECONDS"] = "1"
    return out


def test_runtime_logs_redact_credentials(project: Path, tmp_path: Path) -> None:
    """The provision Job and a worker that cannot reach the broker name it without secrets."""
    plan = compile_project(CompileRequest(graph=str(project / "graph.py"))).plans[0]
    topology = tmp_path / "topology"
    topology.mkdir()
    for index, shard in enumerate(plan.provision.topology_shards):
        (topology / f"nodes-{index:03d}.jsonl").write_text(shard, encoding="utf-8")
    provision_env = {
        "VF_FLOW_ID": plan.flow_id,
        "VF_FLOW_TYPE": plan.flow_type,
        "VF_RUN_ID": plan.run_id,
        "VF_TOPOLOGY_DIR": str(topology),
    }
    worker = next(w for w in plan.workloads if w.node == "alerts")
    worker_env = {**dict(worker.env), "VF_HEALTH_PORT": str(_closed_port())}
    for module, env in (
        ("vf_runtime.broker.provision", provision_env),
        ("vf_runtime.worker.replica", worker_env),
    ):
        done = subprocess.run(
            [sys.executable, "-m", module, *(["--timeout", "1"] if "provision" in module else [])],
            env=_run_env(project, env),
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        output = done.stdout + done.stderr
        assert done.returncode != 0, output
        assert "127.0.0.1" in output, output  # it does say where it could not connect
        assert _leaks(output) == [], output


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("nats://u:pw@h:4222", "nats://***@h:4222"),
        ("tls://tok@a:1,tls://tok@b:2", "tls://***@a:1,tls://***@b:2"),
        ("redis://h:6379/0?password=pw&db=1", "redis://h:6379/0?password=***&db=1"),
        ("plain nats://h:4222 stays", "plain nats://h:4222 stays"),
        ("nats://user:p@ssw0rd@host:4222", "nats://***@host:4222"),
        ("nats://user:p@ss@w0rd@host:4222/x", "nats://***@host:4222/x"),
        ("redis://:p:w:d@h:6379/0", "redis://***@h:6379/0"),
        ("redis://u:pa/ss@h:6379/0", "redis://***@h:6379/0"),
        ("nats://u:pa%40ss@h:4222", "nats://***@h:4222"),
        ("nats://u:pa,ss@h:4222", "nats://***@h:4222"),
        ("nats://u:p@w@a:1,nats://v:q@x@b:2", "nats://***@a:1,nats://***@b:2"),
        ("nats://a:1,nats://u:p@w@b:2", "nats://a:1,nats://***@b:2"),
        ("at 'nats://u:p@w@h:4222': refused", "at 'nats://***@h:4222': refused"),
        ("nats://***@h:4222", "nats://***@h:4222"),
    ],
)
def test_redact(text: str, expected: str) -> None:
    assert redact(text) == expected


_URL_CHARS = st.characters(
    codec="ascii", min_codepoint=33, max_codepoint=126
)  # printable, no whitespace: what a URL in a log line can hold


@given(user=st.text(_URL_CHARS, max_size=8), password=st.text(_URL_CHARS, min_size=4, max_size=24))
def test_redact_never_shows_the_password(user: str, password: str) -> None:
    """Whatever a password holds (``@``, ``:``, ``/``, ``%``, ``,``), none of it is shown."""
    for url in (f"nats://{user}:{password}@nats.svc:4222", f"rediss://{user}:{password}@r:6380/0"):
        shown = redact(f"cannot connect to {url}: refused")
        assert password not in shown, shown
        if not re.search(r",[A-Za-z][A-Za-z0-9+.-]*://", user + password):  # a list's next URL
            host = url.rpartition("@")[2]
            assert shown == f"cannot connect to {url.split('://')[0]}://***@{host}: refused"
