"""What an environment ships for watching its flow (``observability:``, ADR 0216): the
PrometheusRule's alerts, checked and exercised with the real ``promtool`` on synthetic
series, and the Grafana dashboard ConfigMap."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from tests.compiler.verify.test_crd_schemas import _errors, own_schema
from tests.graph_sources import LIVE_CHAIN
from tests.support import require
from vf.errors import VfError
from vf.pipeline import CompileRequest, compile_project
from vf.tree.write import write_tree

Obj = dict[str, Any]
GRAPH = LIVE_CHAIN.format(flow_id="obs")
CONFIG = """environments:
  dev:
    namespace: obs-dev
    images: {{default: r.io/a:1}}
{extra}"""
ALL = "    observability: {alerts: true, dashboard: true, latency_target_seconds: 5}\n"
SEL = 'namespace="obs-dev",flow="obs"'


def _objects(write_graph: Callable[..., Path], extra: str) -> list[Obj]:
    graph = write_graph(GRAPH, CONFIG.format(extra=extra))
    return compile_project(CompileRequest(graph=str(graph))).objects["dev"]


def _one(objects: list[Obj], kind: str, **labels: str) -> Obj:
    (found,) = [
        o
        for o in objects
        if o["kind"] == kind and labels.items() <= (o["metadata"].get("labels") or {}).items()
    ]
    return found


def _promtool() -> str:
    path = shutil.which("promtool")
    require(path is not None, "promtool is not on PATH: run scripts/setup (Debian's prometheus)")
    assert path is not None
    return path


def _dump(path: Path, document: Any) -> Path:
    yaml = YAML(typ="safe")
    yaml.default_flow_style = False
    with path.open("w", encoding="utf-8") as out:
        yaml.dump(document, out)
    return path


def test_nothing_is_shipped_unless_asked_for(write_graph: Callable[..., Path]) -> None:
    kinds = {o["kind"] for o in _objects(write_graph, "")}
    assert "PrometheusRule" not in kinds
    plain = _objects(write_graph, "    observability: {alerts: false, dashboard: false}\n")
    assert not [o for o in plain if o["kind"] == "PrometheusRule" or "grafana_dashboard" in str(o)]


@pytest.mark.parametrize(
    ("section", "code", "words"),
    [
        ("{alert: true}", "VF_CONFIG_UNKNOWN_KEY", "did you mean 'alerts'"),
        ("{alerts: yes please}", "VF_CONFIG_SCHEMA", "observability.alerts"),
        ("{alerts: true, latency_target_seconds: 0}", "VF_CONFIG_SCHEMA", "latency_target"),
        ("{alerts: true, latency_target_seconds: 5s}", "VF_CONFIG_SCHEMA", "latency_target"),
        ("{latency_target_seconds: 5}", "VF_CONFIG_OBSERVABILITY", "alerts is not true"),
        ("{alerts: false, latency_target_seconds: 5}", "VF_CONFIG_OBSERVABILITY", "alerts"),
    ],
)
def test_unknown_keys_and_bad_values_are_named_errors(
    write_graph: Callable[..., Path], section: str, code: str, words: str
) -> None:
    with pytest.raises(VfError) as error:
        _objects(write_graph, f"    observability: {section}\n")
    problem = error.value.problems[0]
    print(f"{section}: {problem.code}: {problem.what} / {problem.remedy} @ {problem.where}")
    assert problem.code == code
    assert words in f"{problem.what} {problem.remedy}"
    assert "vf.yaml:5" in problem.where  # the observability line


def test_the_rule_is_an_optional_object_and_matches_its_schema(
    write_graph: Callable[..., Path],
) -> None:
    objects = _objects(write_graph, ALL)
    rule = _one(objects, "PrometheusRule")
    monitor_like = {"vf.dev/optional": "true", "vf.dev/flow": "obs"}
    assert monitor_like.items() <= rule["metadata"]["labels"].items()
    assert rule["metadata"] == {**rule["metadata"], "name": "vf-obs-alerts", "namespace": "obs-dev"}
    assert _errors(own_schema(rule), rule) == []
    alerts = [r["alert"] for r in rule["spec"]["groups"][0]["rules"]]
    assert alerts == [
        "VfNodeStalled",
        "VfDeadLettersGrowing",
        "VfReplicaRestarting",
        "VfEndToEndLatencyHigh",
    ]
    for item in rule["spec"]["groups"][0]["rules"]:
        assert SEL in item["expr"], item["expr"]
        assert {"summary", "description", "runbook"} <= item["annotations"].keys()
        assert (
            "vf " in item["annotations"]["runbook"] or "kubectl" in item["annotations"]["runbook"]
        )
    no_target = _one(_objects(write_graph, "    observability: {alerts: true}\n"), "PrometheusRule")
    assert "VfEndToEndLatencyHigh" not in str(no_target)


def test_promtool_accepts_every_rule(write_graph: Callable[..., Path], tmp_path: Path) -> None:
    promtool = _promtool()
    rule = _one(_objects(write_graph, ALL), "PrometheusRule")
    path = _dump(tmp_path / "rules.yaml", rule["spec"])
    done = subprocess.run(
        [promtool, "check", "rules", str(path)], capture_output=True, text=True, check=False
    )
    print(done.stdout, done.stderr)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 rules found" in done.stdout


def _series(name: str, values: str, **labels: str) -> Obj:
    pairs = ",".join([SEL, *(f'{k}="{v}"' for k, v in sorted(labels.items()))])
    return {"series": f"{name}{{{pairs}}}", "values": values}


FLAT, GROWING = "0x40", "0+10x40"  # one sample a minute for 40 minutes


def _settled(node: str, replica: str = "0", **values: str) -> list[Obj]:
    """The three counters of settled items every worker exports (flat unless given)."""
    return [
        _series(f"vf_messages_{name}_total", values.get(name, FLAT), node=node, replica=replica)
        for name in ("processed", "failed", "skipped")
    ]


def _expected(alert: str, severity: str, **labels: str) -> Obj:
    return {"exp_labels": {"namespace": "obs-dev", "flow": "obs", "severity": severity, **labels}}


CASES: list[Obj] = [
    {  # a node whose durable holds work and that settles nothing stalls; the others do not
        "interval": "1m",
        "input_series": [
            *_settled("stuck"),
            _series("vf_backlog_messages", "5x40", node="stuck", replica="0", durable="d1"),
            _series("vf_messages_in_flight", FLAT, node="stuck", replica="0"),
            # a hung call: nothing settled, one message held, no backlog reading yet
            *_settled("hung"),
            _series("vf_messages_in_flight", "1x40", node="hung", replica="0"),
            # busy: work waits, and items are settled
            *_settled("busy", processed=GROWING),
            _series("vf_backlog_messages", "5x40", node="busy", replica="0", durable="d2"),
            # failing everything is not a stall (the dead-letter alert says it)
            *_settled("failing", failed=GROWING),
            _series("vf_backlog_messages", "5x40", node="failing", replica="0", durable="d3"),
            # idle: nothing to do
            *_settled("idle"),
            _series("vf_backlog_messages", FLAT, node="idle", replica="0", durable="d4"),
            _series("vf_messages_in_flight", FLAT, node="idle", replica="0"),
            # two replicas of one durable: one still shows the backlog of its last message,
            # the other saw it drained; an idle node, not a stalled one
            *_settled("shared", "0"),
            *_settled("shared", "1"),
            _series("vf_backlog_messages", "3x40", node="shared", replica="0", durable="d5"),
            _series("vf_backlog_messages", FLAT, node="shared", replica="1", durable="d5"),
        ],
        "alert_rule_test": [
            {"eval_time": "8m", "alertname": "VfNodeStalled", "exp_alerts": []},
            {
                "eval_time": "20m",
                "alertname": "VfNodeStalled",
                "exp_alerts": [
                    _expected("VfNodeStalled", "critical", node="hung"),
                    _expected("VfNodeStalled", "critical", node="stuck"),
                ],
            },
        ],
    },
    {  # dead letters: a code still arriving pages; one that stopped arriving does not
        "interval": "1m",
        "input_series": [
            _series("vf_dead_letters_total", "0x15 1+1x25", node="work", code="VF_NODE_KEYERROR"),
            _series("vf_dead_letters_total", "4x40", node="sink", code="VF_BLOB_MISSING"),
        ],
        "alert_rule_test": [
            {"eval_time": "10m", "alertname": "VfDeadLettersGrowing", "exp_alerts": []},
            {
                "eval_time": "25m",
                "alertname": "VfDeadLettersGrowing",
                "exp_alerts": [
                    _expected("", "warning", node="work", code="VF_NODE_KEYERROR"),
                ],
            },
        ],
    },
    {  # restarts: a replica that started three times in half an hour; one that started once
        "interval": "1m",
        "input_series": [
            _series("vf_start_time_seconds", "100x5 400x5 700x5 1000x25", node="work", replica="0"),
            _series("vf_start_time_seconds", "100x20 1300x20", node="sink", replica="0"),
        ],
        "alert_rule_test": [
            {"eval_time": "12m", "alertname": "VfReplicaRestarting", "exp_alerts": []},
            {
                "eval_time": "20m",
                "alertname": "VfReplicaRestarting",
                "exp_alerts": [_expected("", "warning", node="work", replica="0")],
            },
        ],
    },
    {  # latency: most items reach "slow" between 5 s and 10 s (over the 5 s target)
        "interval": "1m",
        "input_series": [
            *[
                _series("vf_end_to_end_seconds_bucket", v, node="slow", le=le)
                for le, v in (("1", FLAT), ("5", FLAT), ("10", "0+60x40"), ("+Inf", "0+60x40"))
            ],
            *[
                _series("vf_end_to_end_seconds_bucket", "0+60x40", node="fast", le=le)
                for le in ("1", "5", "10", "+Inf")
            ],
        ],
        "alert_rule_test": [
            {"eval_time": "8m", "alertname": "VfEndToEndLatencyHigh", "exp_alerts": []},
            {
                "eval_time": "20m",
                "alertname": "VfEndToEndLatencyHigh",
                "exp_alerts": [_expected("", "warning", node="slow")],
            },
        ],
    },
]


def _bare(rule: Obj) -> Obj:
    return {k: v for k, v in rule.items() if k != "annotations"}


def test_each_alert_fires_when_it_should_and_not_otherwise(
    write_graph: Callable[..., Path], tmp_path: Path
) -> None:
    """``promtool test rules`` on synthetic series. The annotations are left out of the
    rules under test (promtool would compare their expanded text); ``promtool check rules``
    above checks their templates."""
    promtool = _promtool()
    rule = _one(_objects(write_graph, ALL), "PrometheusRule")
    groups = [
        {**group, "rules": [_bare(r) for r in group["rules"]]} for group in rule["spec"]["groups"]
    ]
    _dump(tmp_path / "rules.yaml", {"groups": groups})
    tests = {"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": CASES}
    path = _dump(tmp_path / "tests.yaml", tests)
    done = subprocess.run(
        [promtool, "test", "rules", str(path)],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    print(done.stdout, done.stderr)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_dashboard_has_a_row_per_node_in_diagram_order(
    write_graph: Callable[..., Path],
) -> None:
    objects = _objects(write_graph, ALL)
    configmap = _one(objects, "ConfigMap", grafana_dashboard="1")
    assert configmap["metadata"]["name"] == "vf-obs-dashboard"
    ((key, text),) = configmap["data"].items()
    assert key == "vf-obs-dashboard-obs-dev.json"
    board = json.loads(text)
    rows = [p["title"] for p in board["panels"] if p["type"] == "row"]
    assert rows == ["src", "work", "sink"]
    titles = [p["title"] for p in board["panels"] if p["type"] != "row"]
    assert titles == [
        *("src: rate", "src: latency", "src: retries"),
        *("work: rate", "work: latency", "work: dead letters", "work: in flight"),
        *("sink: rate", "sink: latency", "sink: dead letters", "sink: in flight"),
    ]
    assert len({p["id"] for p in board["panels"]}) == len(board["panels"])
    for panel in board["panels"]:
        for target in panel.get("targets", []):
            assert (
                SEL in target["expr"] and f'node="{panel["title"].split(":")[0]}"' in target["expr"]
            )
    again = _one(_objects(write_graph, ALL), "ConfigMap", grafana_dashboard="1")
    assert again["data"][key] == text  # the same bytes on every compile


def test_a_row_selects_only_what_its_nodes_kind_exposes(
    write_graph: Callable[..., Path],
) -> None:
    """A producer receives nothing (no input rate, end-to-end latency, dead letter or
    backlog) and its row shows its publish retries; a consumer publishes nothing."""
    configmap = _one(_objects(write_graph, ALL), "ConfigMap", grafana_dashboard="1")
    board = json.loads(next(iter(configmap["data"].values())))
    exprs: dict[str, str] = {}
    for panel in board["panels"]:
        if panel["type"] != "row":
            node = panel["title"].split(":")[0]
            exprs[node] = exprs.get(node, "") + " ".join(t["expr"] for t in panel["targets"])
    inputs = ("received", "end_to_end", "dead_letters", "backlog", "in_flight")
    assert not [name for name in inputs if f"vf_{name}" in exprs["src"].replace("messages_", "")]
    assert "vf_publish_retries_total" in exprs["src"] and "vf_store_retries_total" in exprs["src"]
    assert "vf_messages_published_total" not in exprs["sink"]
    for node in ("work", "sink"):
        assert all(f"vf_{name}" in exprs[node].replace("messages_", "") for name in inputs)
    widths = {p["title"]: p["gridPos"]["w"] for p in board["panels"]}
    assert widths["src: rate"] == 8 and widths["work: rate"] == 6  # each row spans the width


def test_the_readme_lists_the_operator_and_grafana(write_graph: Callable[..., Path]) -> None:
    graph = write_graph(GRAPH, CONFIG.format(extra=ALL))
    out = graph.parent / "deploy"
    write_tree(out, compile_project(CompileRequest(graph=str(graph), out=out)).tree)
    readme = (out / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("### `dev`") :]
    assert "PrometheusRule" in section and "observability.alerts: false" in section
    assert 'grafana_dashboard: "1"' in section and "observability.dashboard: false" in section


TRACING = (
    "    observability:\n      tracing: {endpoint: 'http://otel.obs:4318', sample_ratio: 0.05}\n"
)


def _worker_env(objects: list[Obj]) -> dict[str, dict[str, str]]:
    """Each worker container's plain ``env`` values, by workload name."""
    found: dict[str, dict[str, str]] = {}
    for obj in objects:
        if obj["kind"] not in ("Deployment", "StatefulSet", "Job"):
            continue
        containers = obj["spec"]["template"]["spec"]["containers"]
        workers = [c for c in containers if c["name"] == "worker"]
        if not workers:
            continue  # the provision Job
        (container,) = workers
        found[obj["metadata"]["name"]] = {
            e["name"]: e["value"] for e in container["env"] if "value" in e
        }
    return found


def test_tracing_renders_the_otel_variables_into_every_worker(
    write_graph: Callable[..., Path],
) -> None:
    plain = _worker_env(_objects(write_graph, ""))
    assert plain and not [k for env in plain.values() for k in env if k.startswith("OTEL_")]
    traced = _worker_env(_objects(write_graph, TRACING))
    assert len(traced) == len(plain)  # a producer Job's name carries its template's digest
    for env in traced.values():
        assert {k: v for k, v in env.items() if k.startswith("OTEL_")} == {
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel.obs:4318",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
            "OTEL_TRACES_SAMPLER_ARG": "0.05",
        }
    grpc = TRACING.replace("sample_ratio: 0.05", "protocol: grpc")
    for env in _worker_env(_objects(write_graph, grpc)).values():
        assert env["OTEL_EXPORTER_OTLP_PROTOCOL"] == "grpc"
        assert env["OTEL_TRACES_SAMPLER_ARG"] == "0.01"  # the default ratio


@pytest.mark.parametrize(
    ("tracing", "code", "words"),
    [
        ("{sample_ratio: 0.1}", "VF_CONFIG_SCHEMA", "endpoint"),
        ("{endpoint: 'http://c:4318', sample_ratio: 1.5}", "VF_CONFIG_SCHEMA", "sample_ratio"),
        ("{endpoint: 'http://c:4318', protocol: http/json}", "VF_CONFIG_SCHEMA", "protocol"),
        ("{endpoint: 'otel-collector:4318'}", "VF_CONFIG_TRACING", "http:// or https://"),
        ("{endpoint: 'http://u:p@c:4318'}", "VF_CONFIG_TRACING", "credentials"),
        ("{endpoint: 'http://c:43x8'}", "VF_CONFIG_TRACING", "not a URL"),
        ("{endpoint: 'http://c:4318/?a=1'}", "VF_CONFIG_TRACING", "query"),
    ],
)
def test_bad_tracing_settings_are_named_errors(
    write_graph: Callable[..., Path], tracing: str, code: str, words: str
) -> None:
    with pytest.raises(VfError) as error:
        _objects(write_graph, f"    observability:\n      tracing: {tracing}\n")
    problem = error.value.problems[0]
    assert problem.code == code, problem
    assert words in f"{problem.what} {problem.remedy}"
