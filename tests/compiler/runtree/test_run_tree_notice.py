"""What ``vf run-tree`` says at start that it does not emulate, for the objects vf compiles:
a flow's alerts and dashboard are for a real Prometheus and Grafana (ADR 0240: the run
writes only the scrape targets)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support import REPO
from vf.pipeline import CompileRequest, compile_project
from vf.runtree.notice import not_emulated

FLOWS = REPO / "tests" / "runtree_flows"
CONFIG = """environments:
  dev:
    namespace: watched
    images: {default: registry.example.com/vf/tree-tests:1}
    pods: {metrics: {service_monitor: true}}
%s"""
OBSERVED = "    observability: {alerts: true, dashboard: true}\n"


def _objects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: str) -> list[Any]:
    config = tmp_path / "vf.yaml"
    config.write_text(CONFIG % extra, encoding="utf-8")
    monkeypatch.setenv("VF_TEST_OUT", "/results/sink.jsonl")
    request = CompileRequest(graph=str(FLOWS / "observed.py"), config=str(config))
    return list(compile_project(request).objects["dev"])


def test_the_notice_says_the_alerts_and_the_dashboard_are_not_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    objects = _objects(tmp_path, monkeypatch, OBSERVED)
    assert {"PrometheusRule", "ConfigMap"} <= {o["kind"] for o in objects}
    notes = not_emulated(objects)
    alerts = [n for n in notes if "PrometheusRule" in n]
    dashboards = [n for n in notes if "dashboard" in n]
    assert len(alerts) == 1 and "not loaded" in alerts[0] and "real Prometheus" in alerts[0]
    assert (
        len(dashboards) == 1 and "not loaded" in dashboards[0] and "real Grafana" in dashboards[0]
    )
    assert all("only the scrape targets" in n for n in alerts + dashboards)


def test_a_tree_without_alerts_or_dashboard_has_no_such_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    objects = _objects(tmp_path, monkeypatch, "")
    assert "ConfigMap" in {o["kind"] for o in objects}  # other ConfigMaps are no dashboard
    notes = not_emulated(objects)
    assert not [n for n in notes if "PrometheusRule" in n or "dashboard" in n]
