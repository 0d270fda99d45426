"""A real Prometheus over a real run: start Debian's ``prometheus`` on a loopback port with
a run's file_sd targets file, ask its HTTP API, and hold the compiled PrometheusRule and
dashboard to what the run's workers expose (ADR 0227, 0231, 0240). Shared by the
``vf run-local`` and the ``vf run-tree`` tests."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.runtime.support import wait_until
from tests.support import require
from vf_runtime.local.infra import free_port

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


def prometheus_path() -> str:
    """Debian's ``prometheus`` (a skip with the reason where it is absent, a failure in CI)."""
    path = shutil.which("prometheus")
    require(path is not None, "prometheus is not on PATH: run scripts/setup (Debian's prometheus)")
    assert path is not None
    return path


@contextmanager
def started_prometheus(binary: str, folder: Path, targets: Path) -> Iterator[Prometheus]:
    """``prometheus`` scraping every second what ``targets`` lists, its data in ``folder``."""
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
        wait_until(lambda: ready(server.url), timeout=30, what="prometheus to be ready")
        yield server
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


def ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=1) as answer:
            return int(answer.status) == 200
    except OSError:
        return False


def rule_and_dashboard(objects: Iterable[Any]) -> tuple[Any, list[tuple[str, str]]]:
    """The PrometheusRule among a flow's compiled ``objects``, and its dashboard's
    expressions, each with the node whose row holds it."""
    found = list(objects)
    (rule,) = [o for o in found if o["kind"] == "PrometheusRule"]
    (board,) = [o for o in found if o["kind"] == "ConfigMap" and "grafana_dashboard" in str(o)]
    panels = json.loads(next(iter(board["data"].values())))["panels"]
    rows: list[tuple[str, str]] = []
    node = ""
    for panel in panels:  # a row, then its node's panels
        node = panel["title"] if panel["type"] == "row" else node
        rows += [(node, target["expr"]) for target in panel.get("targets", [])]
    return rule, rows


def alert_exprs(rule: Any) -> list[str]:
    return [r["expr"] for group in rule["spec"]["groups"] for r in group["rules"]]


def names_what_the_workers_expose(server: Prometheus, expr: str) -> None:
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


def selects_the_nodes_series(server: Prometheus, node: str, expr: str) -> None:
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


def evaluates(server: Prometheus, exprs: Iterable[str]) -> None:
    """Each expression parses and evaluates (an empty answer is still an answer)."""
    for expr in exprs:
        answer = server.query(expr)
        print(
            f"[prometheus] {answer['status']} {len(answer.get('data', {}).get('result', []))} "
            f"series: {expr[:100]}"
        )
        assert answer["status"] == "success", (expr, answer)
