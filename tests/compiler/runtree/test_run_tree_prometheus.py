"""A real Prometheus scrapes a real ``vf run-tree`` run through the targets file the run
keeps from the tree's ServiceMonitor (``prometheus-targets.json``), with the labels the
Prometheus Operator gives a pod's target; every query of the flow's dashboard answers for
every node of its row, and every alert of its PrometheusRule evaluates (ADR 0240). Real
nats-server and store, started from the tree's manifests; Debian's prometheus."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.compiler.runtree.test_run_tree_lifecycle import FLOWS, compile_tree, config
from tests.prometheus_run import (
    Prometheus,
    alert_exprs,
    evaluates,
    names_what_the_workers_expose,
    rule_and_dashboard,
    selects_the_nodes_series,
    started_prometheus,
)
from tests.runtime.support import wait_until
from tests.support import REPO
from vf.runtree.manifests import render
from vf_runtime.local.scrape import TARGETS_FILE

pytestmark = pytest.mark.slow  # real servers, a whole run and a Prometheus

EXTRA = (
    "    pods: {metrics: {service_monitor: true}}\n"
    "    observability: {alerts: true, dashboard: true, latency_target_seconds: 5}\n"
)
FLOW = "tree-observed"
JOB = f"vf-{FLOW}-metrics"  # the Service's name: the job the Operator's relabelling sets
PODS = {"numbers": 1, "double": 2, "sink": 1}


def _path() -> str:
    return os.pathsep.join(
        [str(REPO / ".tools" / "bin"), str(Path(sys.executable).parent), os.environ["PATH"]]
    )


def _listed(targets: Path) -> list[dict[str, Any]]:
    """The groups of the targets file (none while it is missing)."""
    try:
        return list(json.loads(targets.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return []


def test_a_real_prometheus_scrapes_a_run_tree_run_and_every_dashboard_query_answers(
    tmp_path: Path, prometheus_binary: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", _path())  # kubectl renders the overlay
    settings = config(tmp_path, extra=EXTRA)
    tree = compile_tree("observed.py", tmp_path / "tree", config=settings, out="/results/o.jsonl")
    rendered = render(tree, env="dev", renderer="kustomize", sync="kubectl")
    rule, panels = rule_and_dashboard(rendered.objects)
    namespace = rule["metadata"]["namespace"]
    run_dir, log = tmp_path / "run", tmp_path / "run-tree.log"
    command = [sys.executable, "-m", "vf", "run-tree", str(tree), "--env", "dev"]
    command += ["--app", str(FLOWS), "--runtime", "process", "--run-dir", str(run_dir)]
    command += ["--for", "600", "--timeout", "240", "--backoff", "1"]
    targets = run_dir / TARGETS_FILE
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_until(
            lambda: len(_listed(targets)) == sum(PODS.values()),
            timeout=240,
            what=f"every worker pod in {targets}",
            log=log,
        )
        assert f"file_sd_configs: {targets}" in log.read_text()
        with started_prometheus(prometheus_binary, tmp_path / "prometheus", targets) as server:
            _while_it_runs(server, namespace, rule, panels, listed=_listed(targets))
    finally:
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=120)
    print(log.read_text()[-1500:])
    assert code == 130
    assert _listed(targets) == []  # every pod gone: nothing left to scrape


def _while_it_runs(
    server: Prometheus,
    namespace: str,
    rule: Any,
    panels: list[tuple[str, str]],
    *,
    listed: list[dict[str, Any]],
) -> None:
    sel = f'namespace="{namespace}",flow="{FLOW}"'
    alerts = {r["alert"]: r["expr"] for g in rule["spec"]["groups"] for r in g["rules"]}
    dead = alerts["VfDeadLettersGrowing"]

    def answered() -> bool:
        lettered = {s["metric"]["node"] for s in server.vector(dead)}
        return lettered == {"double", "sink"} and all(server.vector(e) for _, e in panels)

    wait_until(answered, timeout=90, what="every panel's query and the dead-letter alert")
    time.sleep(2)  # one more scrape: every replica's gauges and histograms are in
    up = server.vector(f'up{{job="{JOB}"}}')
    print(f"[prometheus] up: {[(u['metric']['pod'], u['value'][1]) for u in up]}")
    assert {u["value"][1] for u in up} == {"1"}
    assert {u["metric"]["pod"] for u in up} == {g["labels"]["pod"] for g in listed}
    assert {(u["metric"]["namespace"], u["metric"]["container"]) for u in up} == {
        (namespace, "worker")
    }
    pods = server.vector(f"count by (node) (count by (node, pod) (vf_start_time_seconds{{{sel}}}))")
    assert {s["metric"]["node"]: int(s["value"][1]) for s in pods} == PODS
    renamed = server.vector('count({__name__=~"vf_.+", exported_node!=""})')
    assert renamed == []  # the worker's own node label is the one the queries read
    exprs = alert_exprs(rule)
    assert len(exprs) == 4
    evaluates(server, exprs + [expr for _, expr in panels])
    for expr in exprs:
        names_what_the_workers_expose(server, expr)
    assert {node for node, _ in panels} == set(PODS)
    for node, expr in panels:
        selects_the_nodes_series(server, node, expr)
        assert server.vector(expr), f"the row of {node} draws nothing: {expr}"
