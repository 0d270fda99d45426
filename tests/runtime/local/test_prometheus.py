"""A real Prometheus scrapes a real ``vf run-local`` run through the targets file the run
keeps (``prometheus-targets.json``), and answers for the workers' series and for every
alert expression of the PrometheusRule vf compiles for the same flow (ADR 0216, 0227)."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.runtime.support import FLOWS, finish_flow, start_flow, wait_until
from tests.support import require
from vf.pipeline import CompileRequest, compile_project
from vf_runtime.local.infra import LocalServer, free_port

pytestmark = pytest.mark.slow  # real servers, a whole run and a Prometheus

CONFIG = """environments:
  local:
    images:
      default: registry.example.com/vf/runtime-tests:0
    observability: {alerts: true, dashboard: true, latency_target_seconds: 5}
"""
SCRAPE = """global: {{scrape_interval: 1s, evaluation_interval: 1s}}
scrape_configs:
  - job_name: vf
    file_sd_configs: [{{files: ["{targets}"], refresh_interval: 1s}}]
"""
SELECTOR = re.compile(r"\b(vf_\w+)\{([^}]*)\}")
NODE = re.compile(r',node="[^"]*"')
GROUPING = re.compile(r"\b(?:by|on) \(([^)]*)\)")


class Prometheus:
    """One ``prometheus`` on a loopback port, asked through its HTTP API."""

    def __init__(self, url: str) -> None:
        self.url = url

    def query(self, expr: str) -> dict[str, Any]:
        """``/api/v1/query``'s whole answer (status, and data or error)."""
        query = urllib.parse.urlencode({"query": expr})
        try:
            with urllib.request.urlopen(f"{self.url}/api/v1/query?{query}", timeout=5) as answer:
                return dict(json.load(answer))
        except urllib.error.HTTPError as error:  # a bad expression: 400 with the reason
            return dict(json.load(error))

    def vector(self, expr: str) -> list[dict[str, Any]]:
        answer = self.query(expr)
        assert answer["status"] == "success", f"{expr}: {answer}"
        return list(answer["data"]["result"])

    def described(self, metric: str) -> bool:
        """Whether a scraped target described ``metric`` (its ``# TYPE`` line)."""
        query = urllib.parse.urlencode({"metric": metric})
        with urllib.request.urlopen(f"{self.url}/api/v1/targets/metadata?{query}") as answer:
            return bool(json.load(answer)["data"])


@pytest.fixture
def prometheus_binary() -> str:
    path = shutil.which("prometheus")
    require(path is not None, "prometheus is not on PATH: run scripts/setup (Debian's prometheus)")
    assert path is not None
    return path


@contextmanager
def _start_prometheus(binary: str, folder: Path, targets: Path) -> Iterator[Prometheus]:
    folder.mkdir()
    config = folder / "prometheus.yml"
    config.write_text(SCRAPE.format(targets=targets), encoding="utf-8")
    address = f"127.0.0.1:{free_port()}"
    log = (folder / "prometheus.log").open("wb")
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={folder / 'data'}",
            f"--web.listen-address={address}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        server = Prometheus(f"http://{address}")
        wait_until(lambda: _ready(server.url), timeout=30, what="prometheus to be ready")
        yield server
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=1) as answer:
            return int(answer.status) == 200
    except OSError:
        return False


def _rule_and_dashboard(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Any, list[tuple[str, str]]]:
    """The PrometheusRule vf compiles for slowfix.py's environment, and the dashboard's
    expressions, each with the node whose row holds it."""
    monkeypatch.setenv("VF_TEST_OUT", "unused")
    monkeypatch.setenv("VF_TEST_BUG", "unused")
    request = CompileRequest(graph=str(FLOWS / "slowfix.py"), config=str(config))
    objects = compile_project(request).objects["local"]
    (rule,) = [o for o in objects if o["kind"] == "PrometheusRule"]
    (board,) = [o for o in objects if o["kind"] == "ConfigMap" and "grafana_dashboard" in str(o)]
    panels = json.loads(next(iter(board["data"].values())))["panels"]
    rows: list[tuple[str, str]] = []
    node = ""
    for panel in panels:  # a row, then its node's panels
        node = panel["title"] if panel["type"] == "row" else node
        rows += [(node, target["expr"]) for target in panel.get("targets", [])]
    return rule, rows


def _names_what_the_workers_expose(server: Prometheus, expr: str) -> None:
    """Each series ``expr`` selects is scraped, and each label it groups or matches by is
    on the series of one of its metrics. A node without dead letters has no series of
    ``vf_dead_letters_total`` (a family of one series per code): its workers describe it."""
    grouping = {
        label.strip() for labels in GROUPING.findall(expr) for label in labels.split(",")
    } - {""}
    seen: set[str] = set()
    for metric, matchers in SELECTOR.findall(expr):
        found = server.vector(f"{metric}{{{matchers}}}")
        if not found and metric == "vf_dead_letters_total" and 'node="' in matchers:
            assert server.described(metric), expr  # and another node's series has the labels
            flow_wide = NODE.sub("", matchers)
            found = server.vector(f"{metric}{{{flow_wide}}}")
        assert found, f"no series {metric}{{{matchers}}} of {expr}"
        seen |= {label for series in found for label in series["metric"]}
    assert grouping <= seen, (grouping - seen, expr)


def _selects_the_nodes_series(server: Prometheus, node: str, expr: str) -> None:
    """Each metric a panel of ``node``'s row names has series of that node, and each
    histogram it reads has observations: a panel that draws nothing for the node's kind (a
    producer's backlog, or its dead letters or end-to-end latency) fails."""
    for metric, matchers in SELECTOR.findall(expr):
        assert f'node="{node}"' in matchers, (node, expr)
        found = server.vector(f"{metric}{{{matchers}}}")
        assert found, f"the row of {node} selects no series: {metric}{{{matchers}}} of {expr}"
        if metric.endswith("_bucket"):
            count = server.vector(f"sum({metric.removesuffix('_bucket')}_count{{{matchers}}})")
            assert float(count[0]["value"][1]) > 0, f"{node}: no observation of {metric}"


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
        wait_until(targets.exists, timeout=60, what=f"{targets}:\n{log.read_text()[-3000:]}")
        assert f"file_sd_configs: {targets}" in log.read_text()
        with _start_prometheus(prometheus_binary, tmp_path / "prometheus", targets) as server:
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
    exprs = [r["expr"] for group in rule["spec"]["groups"] for r in group["rules"]]
    assert len(exprs) == 4
    for expr in exprs + [expr for _, expr in panels]:
        answer = server.query(expr)
        print(
            f"[prometheus] {answer['status']} {len(answer.get('data', {}).get('result', []))} "
            f"series: {expr[:100]}"
        )
        assert answer["status"] == "success", (expr, answer)
    for expr in exprs:
        _names_what_the_workers_expose(server, expr)
    assert {node for node, _ in panels} == {"numbers", "sink"}
    for node, expr in panels:
        _selects_the_nodes_series(server, node, expr)
