"""A real Prometheus scrapes a real ``vf run-local`` run through the targets file the run
keeps (``prometheus-targets.json``), and answers for the workers' series and for every
alert expression of the PrometheusRule vf compiles for the same flow (ADR 0216, 0227)."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.prometheus_run import (
    Prometheus,
    alert_exprs,
    evaluates,
    names_what_the_workers_expose,
    rule_and_dashboard,
    selects_the_nodes_series,
    started_prometheus,
)
from tests.runtime.support import FLOWS, finish_flow, start_flow, wait_until
from vf.pipeline import CompileRequest, compile_project
from vf_runtime.local.infra import LocalServer

pytestmark = pytest.mark.slow  # real servers, a whole run and a Prometheus

CONFIG = """environments:
  local:
    images:
      default: registry.example.com/vf/runtime-tests:0
    observability: {alerts: true, dashboard: true, latency_target_seconds: 5}
"""


def _rule_and_dashboard(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Any, list[tuple[str, str]]]:
    """The PrometheusRule vf compiles for slowfix.py's environment, and the dashboard's
    expressions, each with the node whose row holds it."""
    monkeypatch.setenv("VF_TEST_OUT", "unused")
    monkeypatch.setenv("VF_TEST_BUG", "unused")
    request = CompileRequest(graph=str(FLOWS / "slowfix.py"), config=str(config))
    return rule_and_dashboard(compile_project(request).objects["local"])


def test_a_real_prometheus_scrapes_a_local_run_and_evaluates_every_alert(
    tmp_path: Path,
    nats_server: LocalServer,
    redis_server: LocalServer,
    prometheus_binary: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """slowfix.py runs paced for about a minute and dead-letters one item; Prometheus
    follows the run's targets file. While the run goes on: the processed counter and an
    end-to-end quantile answer, and every alert (and dashboard) expression of the rule
    compiled for the same vf.yaml parses and evaluates; each alert selects series that
    exist and groups by labels they carry, and each dashboard panel selects series its
    node's kind exposes."""
    config, run_dir, bug = tmp_path / "vf.yaml", tmp_path / "run", tmp_path / "bug"
    config.write_text(CONFIG, encoding="utf-8")
    bug.write_text("1")
    rule, panels = _rule_and_dashboard(config, monkeypatch)
    namespace = rule["metadata"]["namespace"]
    sel = f'namespace="{namespace}",flow="slowfix"'
    env = {"VF_TEST_OUT": str(tmp_path / "sink.jsonl"), "VF_TEST_BUG": str(bug)}
    log = tmp_path / "run.log"
    process = start_flow(
        "slowfix.py",
        nats_url=nats_server.url,
        redis_url=redis_server.url,
        env={**env, "VF_TEST_COUNT": "400"},
        log=log,
        args=("--config", str(config), "--run-dir", str(run_dir)),
    )
    try:
        targets = run_dir / "prometheus-targets.json"
        wait_until(targets.exists, timeout=60, what=str(targets), log=log)
        assert f"file_sd_configs: {targets}" in log.read_text()
        with started_prometheus(prometheus_binary, tmp_path / "prometheus", targets) as server:
            _while_it_runs(server, sel, rule, panels)
    finally:
        process.send_signal(signal.SIGINT)
        run = finish_flow(process, log=log, timeout=60)
    print(f"[prometheus] run ended with {run.code}")


def _while_it_runs(server: Prometheus, sel: str, rule: Any, panels: list[tuple[str, str]]) -> None:
    processed = f'sum(vf_messages_processed_total{{{sel},node="sink"}})'
    dead = f"sum(vf_dead_letters_total{{{sel}}})"
    quantile = (
        "histogram_quantile(0.95, sum by (le) "
        f'(rate(vf_end_to_end_seconds_bucket{{{sel},node="sink"}}[20s])))'
    )

    def answered() -> bool:
        values = [server.vector(q) for q in (processed, dead, quantile)]
        return all(v and float(v[0]["value"][1]) > 0 for v in values)

    wait_until(answered, timeout=60, what="the run's series in Prometheus")
    time.sleep(2)  # one more scrape: every replica's gauges and histograms are in
    up = server.vector('up{job="vf"}')
    print(f"[prometheus] targets up: {[(u['metric']['instance'], u['value'][1]) for u in up]}")
    assert len(up) == 2 and {u["metric"]["namespace"] for u in up} == {sel.split('"')[1]}
    seconds = float(server.vector(quantile)[0]["value"][1])
    print(f"[prometheus] processed {server.vector(processed)[0]['value'][1]}, p95 {seconds:g}s")
    assert 0 < seconds < 60
    exprs = alert_exprs(rule)
    assert len(exprs) == 4
    evaluates(server, exprs + [expr for _, expr in panels])
    for expr in exprs:
        names_what_the_workers_expose(server, expr)
    assert {node for node, _ in panels} == {"numbers", "sink"}
    for node, expr in panels:
        selects_the_nodes_series(server, node, expr)
