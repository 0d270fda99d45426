"""The broker's, the store's and the monitoring role templates (ADR 237): ``nats.yaml``,
``redis.yaml``, ``monitoring.yaml`` and ``priorityclass.yaml``, the same bytes in every
flow's chart, render from ``infra.nats``, ``infra.redis``, ``monitoring`` and
``priorityClass``; what a Helm user sets there changes what renders, and the schema refuses
what the templates do not read. Rendered with the real ``helm``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.graph_sources import LIVE_CHAIN
from tests.support import helm_template, parse_docs, rendered_by_name
from vf.pipeline import CompileRequest, CompileResult, compile_project
from vf.tree.write import write_tree

pytestmark = pytest.mark.slow  # real renders: make test-fast skips it

INFRA_FILES = (
    "chart/templates/nats.yaml",
    "chart/templates/redis.yaml",
    "chart/templates/monitoring.yaml",
    "chart/templates/priorityclass.yaml",
)
WATCHED = """environments:
  dev:
    namespace: mon-dev
    images: {default: r.io/a:1}
    priority_class: vf-high
    pods: {priority_class_value: 1000, metrics: {service_monitor: true}}
    observability: {alerts: true, dashboard: true}
"""


@pytest.fixture(scope="module")
def batch(
    compiled_examples: dict[str, CompileResult], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    root = tmp_path_factory.mktemp("batch") / "deploy"
    write_tree(root, compiled_examples["batch_pipeline"].tree)
    return root / "chart"


def test_every_flows_chart_ships_the_same_broker_and_store_templates(
    compiled_examples: dict[str, CompileResult],
) -> None:
    texts = {path: {str(r.tree[path]) for r in compiled_examples.values()} for path in INFRA_FILES}
    assert all(len(seen) == 1 for seen in texts.values()), texts
    for result in compiled_examples.values():  # the objects are the roles', not the diff's
        diffed = [
            p
            for p in result.tree
            if p.startswith("chart/templates/") and ("-nats" in p or "-redis" in p)
        ]
        assert diffed == [p for p in diffed if "/networkpolicy-" in p]


def _objects(helm: str, chart: Path, *args: str) -> dict[tuple[str, str], Any]:
    return rendered_by_name(helm, chart, "values-prod.yaml", *args, namespace="pipes")


def test_the_brokers_values_are_what_a_helm_user_sets(batch: Path, helm: str) -> None:
    name = ("StatefulSet", "vf-batch-demo-nats")
    plain = _objects(helm, batch)[name]["spec"]
    assert plain["replicas"] == 3
    args = plain["template"]["spec"]["containers"][0]["args"]
    assert len(args[args.index("--routes") + 1].split(",")) == 3
    claim = plain["volumeClaimTemplates"][0]["spec"]
    assert (claim["storageClassName"], claim["resources"]["requests"]["storage"]) == (
        "fast-ssd",
        "50Gi",
    )
    tuned = _objects(
        helm,
        batch,
        "--set",
        "infra.nats.replicas=5",
        "--set",
        "infra.nats.storage.size=80Gi",
    )[name]["spec"]
    assert tuned["replicas"] == 5
    args = tuned["template"]["spec"]["containers"][0]["args"]
    routes = args[args.index("--routes") + 1].split(",")
    assert routes[-1].endswith("@vf-batch-demo-nats-4.vf-batch-demo-nats-headless:6222")
    assert tuned["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] == "80Gi"


def test_a_store_without_auth_asks_no_credentials(batch: Path, helm: str) -> None:
    """``infra.redis.auth`` set to null: no user of the flow's, no Secret read."""
    name = ("Deployment", "vf-batch-demo-redis")
    plain = _objects(helm, batch)[name]["spec"]["template"]["spec"]["containers"][0]
    assert "--user" in plain["args"] and "env" in plain
    bare = _objects(helm, batch, "--set", "infra.redis.auth=null")[name]
    container = bare["spec"]["template"]["spec"]["containers"][0]
    assert "--user" not in container["args"] and "env" not in container
    assert container["args"] == plain["args"][: plain["args"].index("--user")]


@pytest.mark.parametrize(
    "setting",
    [
        "infra.nats.profile=clustered",  # no profile of vf's
        "infra.nats.replica=5",  # a typo
        "infra.nats.replicas=0",  # no server
        "infra.redis.storage.sizes=1Gi",  # a typo below
        "infra.mongo.image=mongo",  # no service of vf's
        "monitoring.alerts.rules=none",  # the rules are a list
        "priorityClass.value=high",  # a PriorityClass's value is a number
    ],
)
def test_the_schema_refuses_what_the_templates_do_not_read(
    batch: Path, helm: str, setting: str
) -> None:
    done = helm_template(
        helm, batch, "-n", "pipes", "-f", str(batch / "values-prod.yaml"), "--set", setting
    )
    assert done.returncode != 0
    assert "values don't meet the specifications of the schema" in done.stderr, done.stderr


@pytest.fixture
def watched(write_graph: Callable[..., Path]) -> Path:
    graph = write_graph(LIVE_CHAIN.format(flow_id="mon"), WATCHED)
    out = graph.parent / "deploy"
    tree = compile_project(CompileRequest(graph=str(graph), out=out)).tree
    assert (
        not [  # the objects are the roles', not the diff's
            p
            for p in tree
            if p.startswith("chart/templates/")
            and ("-metrics" in p or "-alerts" in p or "-dashboard" in p or "priorityclass-" in p)
        ]
    )
    write_tree(out, tree)
    return out / "chart"


def _watched(helm: str, chart: Path, *args: str, apis: tuple[str, ...] | None = None) -> Any:
    values = ("-n", "mon", "-f", str(chart / "values-dev.yaml"), "--skip-tests", *args)
    done = (
        helm_template(helm, chart, *values)
        if apis is None
        else (helm_template(helm, chart, *values, apis=apis))
    )
    assert done.returncode == 0, done.stderr
    return {(d["kind"], d["metadata"]["name"]): d for d in parse_docs(done.stdout)}


def test_what_watches_the_flow_renders_from_monitoring(watched: Path, helm: str) -> None:
    full = _watched(helm, watched)
    assert {("Service", "vf-mon-metrics"), ("ServiceMonitor", "vf-mon-metrics")} <= set(full)
    assert {("PrometheusRule", "vf-mon-alerts"), ("ConfigMap", "vf-mon-dashboard")} <= set(full)
    bare = _watched(helm, watched, apis=())  # no Prometheus Operator: its objects stay out
    assert {k for k in bare if k[0] in ("ServiceMonitor", "PrometheusRule")} == set()
    assert ("ConfigMap", "vf-mon-dashboard") in bare and ("Service", "vf-mon-metrics") in bare
    quiet = _watched(helm, watched, "--set", "monitoring.alerts=null")
    assert ("PrometheusRule", "vf-mon-alerts") not in quiet


def test_the_priority_class_is_the_one_the_pods_name(watched: Path, helm: str) -> None:
    """``priorityClassName`` names the PriorityClass vf creates and every pod's class."""
    objects = _watched(helm, watched, "--set", "priorityClassName=vf-urgent")
    created = objects[("PriorityClass", "vf-urgent")]
    assert created["value"] == 1000
    assert created["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    broker = objects[("Deployment", "vf-mon-nats")]["spec"]["template"]["spec"]
    assert broker["priorityClassName"] == "vf-urgent"
