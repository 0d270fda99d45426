"""The durable broker's probes and preStop against the real nats-server (the pinned binary
the tests run, the release the tree's image holds): a three-server cluster started from the
configuration vf renders answers 200 on each probe's path once it is healthy, and the
preStop command stops a server in lame-duck mode through the configured pid file (ADR 200).
"""

from __future__ import annotations

import http.client
import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

from tests.support import require
from vf.render.infra import NATS_PID_FILE, component_objects, nats_conf, nats_route_urls
from vf_runtime.local.infra import MissingTool, free_port, nats_server_binary

pytestmark = pytest.mark.slow  # real servers

REPLICAS = 3
# the pod's terminationGracePeriodSeconds, asserted in tests/compiler/render/test_infra.py
GRACE = 60.0


def _container() -> dict[str, Any]:
    sts = next(o for o in component_objects("nats-durable") if o["kind"] == "StatefulSet")
    container: dict[str, Any] = sts["spec"]["template"]["spec"]["containers"][0]
    return container


def _local_conf(index: int, ports: list[dict[str, int]], root: Path) -> str:
    """vf's durable configuration for server ``index``, its cluster names and container
    paths turned into this machine's ports and folders."""
    text = nats_conf(durable=True, replicas=REPLICAS, name="vf-nats")
    own = ports[index]
    text = text.replace("port: 4222", f"port: {own['client']}")
    text = text.replace("http: 8222", f"http: {own['monitor']}")
    text = text.replace("  port: 6222", f"  port: {own['cluster']}")
    pid_dir = str(PurePosixPath(NATS_PID_FILE).parent)
    text = text.replace(pid_dir, str(root / f"run-{index}"))
    return text.replace("/data/", f"{root}/data-{index}/")


# the Secrets' values the kubelet would put in the pods' environment (ADR 0212)
CREDENTIALS = {
    "VF_NATS_USER": "flow",
    "VF_NATS_PASSWORD": "a1b2c3",
    "VF_NATS_ROUTE_USER": "route",
    "VF_NATS_ROUTE_PASSWORD": "d4e5f6",
}


def _local_routes(ports: list[dict[str, int]]) -> str:
    """The StatefulSet's ``--routes``, expanded as the kubelet does, to this machine's ports."""
    text = nats_route_urls(name="vf-nats", replicas=REPLICAS, auth=True)
    for var, value in CREDENTIALS.items():
        text = text.replace(f"$({var})", value)
    return re.sub(
        r"vf-nats-(\d+)\.vf-nats-headless:6222",
        lambda m: f"127.0.0.1:{ports[int(m.group(1))]['cluster']}",
        text,
    )


def _status(port: int, path: str) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path)
        return conn.getresponse().status
    except OSError:
        return 0
    finally:
        conn.close()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[list[subprocess.Popen[bytes]], list[dict[str, int]]]]:
    try:
        binary = nats_server_binary()
    except MissingTool as exc:
        require(False, str(exc))
    ports = [
        {"client": free_port(), "cluster": free_port(), "monitor": free_port()}
        for _ in range(REPLICAS)
    ]
    procs, logs = [], []
    for i in range(REPLICAS):
        (tmp_path / f"run-{i}").mkdir()
        conf = tmp_path / f"nats-{i}.conf"
        conf.write_text(_local_conf(i, ports, tmp_path), encoding="utf-8")
        log = (tmp_path / f"nats-{i}.log").open("wb")
        logs.append(log)
        env = {**os.environ, **CREDENTIALS, "POD_NAME": f"vf-nats-{i}"}
        argv = [binary, "--config", str(conf), "--routes", _local_routes(ports)]
        procs.append(subprocess.Popen(argv, stdout=log, stderr=log, env=env))
    try:
        yield procs, ports
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        for log in logs:
            log.close()


def test_each_probe_path_answers_200_and_the_prestop_drains_through_the_pid_file(
    cluster: tuple[list[subprocess.Popen[bytes]], list[dict[str, int]]], tmp_path: Path
) -> None:
    procs, ports = cluster
    container = _container()
    paths = {k: container[k]["httpGet"]["path"] for k in ("startupProbe", "readinessProbe")}
    paths["livenessProbe"] = container["livenessProbe"]["httpGet"]["path"]
    # The startup probe's window: the cluster forms and every server's full check passes.
    deadline = time.monotonic() + 120
    for port in (p["monitor"] for p in ports):
        while _status(port, paths["startupProbe"]) != 200:
            assert time.monotonic() < deadline, (tmp_path / "nats-0.log").read_text()
            time.sleep(0.5)
    for i, port in enumerate(p["monitor"] for p in ports):
        assert {k: _status(port, path) for k, path in paths.items()} == dict.fromkeys(paths, 200), (
            f"server {i}"
        )
        pid_file = tmp_path / f"run-{i}" / PurePosixPath(NATS_PID_FILE).name
        assert pid_file.read_text().strip() == str(procs[i].pid)

    # The preStop command, its pid file where this server keeps it.
    argv = [str(a) for a in container["lifecycle"]["preStop"]["exec"]["command"]]
    assert argv[0] == "nats-server"
    argv[0] = nats_server_binary()
    argv = [a.replace(NATS_PID_FILE, str(tmp_path / "run-0" / "nats.pid")) for a in argv]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    assert procs[0].wait(timeout=GRACE) == 0  # it left before the kubelet's SIGKILL
    assert "Entering lame duck mode" in (tmp_path / "nats-0.log").read_text()
    # The other two keep quorum and stay Ready.
    for port in (p["monitor"] for p in ports[1:]):
        assert _status(port, paths["readinessProbe"]) == 200
