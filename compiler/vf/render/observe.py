"""What an environment ships for watching its flow (``observability:``, ADR 0216): a
Prometheus Operator PrometheusRule of the alerts a flow's owner pages on, and a Grafana
dashboard in a ConfigMap that Grafana's dashboard sidecar loads (label
``grafana_dashboard: "1"``).

Both read the workers' ``/metrics`` (docs/PROTOCOL.md HEALTH-3), selected by the
``namespace`` label the scrape adds and the ``flow`` label every worker writes, so two
environments of one flow in one Prometheus never answer for each other. The
PrometheusRule is of an optional API (``vf.dev/optional``, ADR 0202): every delivery
treats it as it treats the ServiceMonitor. The output depends only on the plan: the
dashboard's JSON is written with sorted keys and its panels in the flow's diagram order.
"""

from __future__ import annotations

import hashlib
import json

from vf import names
from vf.ir.plan import Plan, Workload
from vf.ir.records import Observability
from vf.textio.objects import Obj
from vf_runtime.constants import RETRIES, NodeKind
from vf_runtime.labels import FLOW_LABEL, MANAGED_BY, MANAGER, OPTIONAL_LABEL

DASHBOARD_LABEL = "grafana_dashboard"  # what the sidecar of Grafana's Helm chart looks for
STALL_WINDOW = "10m"  # no item settled for this long, with work waiting: stalled
RESTARTS = 2  # more restarts of one replica than this in RESTART_WINDOW page
RESTART_WINDOW = "30m"
QUANTILE = 0.95  # the end-to-end latency the target holds: this quantile of it
_BY = "namespace, flow, node"


def _string(value: str) -> str:
    """A PromQL string literal (JSON's escapes are a subset of PromQL's)."""
    return json.dumps(value)


def _selector(plan: Plan, *extra: str) -> str:
    pairs = [f"namespace={_string(plan.namespace)}", f"flow={_string(plan.flow_id)}", *extra]
    return "{" + ",".join(pairs) + "}"


def observability_objects(plan: Plan) -> list[Obj]:
    """The PrometheusRule and the dashboard ConfigMap ``plan.observability`` asks for."""
    options = plan.observability or Observability()
    objects = []
    if options.alerts:
        objects.append(prometheus_rule(plan, options))
    if options.dashboard:
        objects.append(dashboard_configmap(plan))
    return objects


def _labels(plan: Plan) -> dict[str, str]:
    return {MANAGED_BY: MANAGER, FLOW_LABEL: dict(plan.flow_labels)[FLOW_LABEL]}


def alert_rules(plan: Plan, options: Observability) -> list[Obj]:
    """The rules of the flow's one group, each with what to do in its annotations."""
    sel = _selector(plan)
    rules = [_stalled_rule(plan, sel), _dead_letter_rule(plan, sel), _restart_rule(plan, sel)]
    target = options.latency_target_seconds
    if target is not None:
        rules.append(_latency_rule(plan, sel, target))
    return rules


def _stalled_rule(plan: Plan, sel: str) -> Obj:
    flow, ns = plan.flow_id, plan.namespace
    # items settled: each counter summed on its own (a range over several names would
    # give series that differ by name only, which increase() cannot return together)
    settled = " + ".join(
        f"sum by ({_BY}) (increase(vf_messages_{name}_total{sel}[{STALL_WINDOW}]))"
        for name in ("processed", "failed", "skipped")
    )
    waiting = (
        f"(max by ({_BY}) (min by ({_BY}, durable) (vf_backlog_messages{sel})) > 0)"
        f" or (sum by ({_BY}) (vf_messages_in_flight{sel}) > 0)"
    )
    return {
        "alert": "VfNodeStalled",
        "expr": f"({settled} == 0) and on ({_BY}) ({waiting})",
        "for": STALL_WINDOW,  # the window alone would judge a node on its first samples
        "labels": {"severity": "critical"},
        "annotations": {
            "summary": f"vf flow {flow}: node {{{{ $labels.node }}}} has stopped",
            "description": f"No item of node {{{{ $labels.node }}}} was settled in "
            f"{STALL_WINDOW} while its durable still holds undelivered messages or its "
            "replicas hold some in flight: a hung call, a full store or broker, or a "
            "crash-looping worker.",
            "runbook": f"vf runs --flow {flow} (pending per durable); kubectl -n {ns} "
            f"logs -l {FLOW_LABEL}={dict(plan.flow_labels)[FLOW_LABEL]} --tail=100 "
            "(look for error[VF_...] lines); docs/observability.md#vfnodestalled",
        },
    }


def _dead_letter_rule(plan: Plan, sel: str) -> Obj:
    flow = plan.flow_id
    return {
        "alert": "VfDeadLettersGrowing",
        "expr": f"sum by ({_BY}, code) (increase(vf_dead_letters_total{sel}[10m])) > 0",
        "labels": {"severity": "warning"},
        "annotations": {
            "summary": f"vf flow {flow}: node {{{{ $labels.node }}}} is dead-lettering "
            "{{ $labels.code }}",
            "description": "Items of node {{ $labels.node }} went to the dead-letter "
            "stream with code {{ $labels.code }} in the last 10 minutes "
            "(about {{ $value | humanize }}).",
            "runbook": f"vf dlq ls --flow {flow} --node {{{{ $labels.node }}}} --code "
            "{{ $labels.code }}; vf dlq show ID; after the fix: vf dlq replay --flow "
            f"{flow} --node {{{{ $labels.node }}}} --dry-run; "
            "docs/observability.md#vfdeadlettersgrowing",
        },
    }


def _restart_rule(plan: Plan, sel: str) -> Obj:
    flow, ns = plan.flow_id, plan.namespace
    return {
        "alert": "VfReplicaRestarting",
        "expr": f"max by ({_BY}, replica) (changes(vf_start_time_seconds{sel}"
        f"[{RESTART_WINDOW}])) > {RESTARTS}",
        "labels": {"severity": "warning"},
        "annotations": {
            "summary": f"vf flow {flow}: replica {{{{ $labels.replica }}}} of node "
            "{{ $labels.node }} keeps restarting",
            "description": "A replica of node {{ $labels.node }} started again "
            f"{{{{ $value }}}} times in {RESTART_WINDOW}.",
            "runbook": f"kubectl -n {ns} get pods -l {FLOW_LABEL}="
            f"{dict(plan.flow_labels)[FLOW_LABEL]}; kubectl -n {ns} logs POD --previous "
            "(the exit code and the last error[VF_...] line say why); "
            "docs/observability.md#vfreplicarestarting",
        },
    }


def _latency_rule(plan: Plan, sel: str, target: float) -> Obj:
    flow = plan.flow_id
    buckets = f"rate(vf_end_to_end_seconds_bucket{sel}[5m])"
    return {
        "alert": "VfEndToEndLatencyHigh",
        "expr": f"histogram_quantile({QUANTILE}, sum by ({_BY}, le) ({buckets})) > {target:g}",
        "for": "10m",
        "labels": {"severity": "warning"},
        "annotations": {
            "summary": f"vf flow {flow}: items reach node {{{{ $labels.node }}}} "
            f"later than {target:g}s",
            "description": f"The {QUANTILE:.0%} quantile of the time from an "
            "item's producer to node {{ $labels.node }} is "
            "{{ $value | humanizeDuration }}, over the target of "
            f"{target:g}s.",
            "runbook": f"vf runs --flow {flow} (which durable's pending grows); "
            "the dashboard's per-node latency shows the slow node; scale it "
            "(replicas, autoscaling) or speed it up; "
            "docs/observability.md#vfendtoendlatencyhigh",
        },
    }


def prometheus_rule(plan: Plan, options: Observability) -> Obj:
    name = names.k8s_name("vf", plan.flow_id, "alerts")
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        # optional: a cluster without the Prometheus Operator runs the flow without it
        "metadata": {
            "name": name,
            "namespace": plan.namespace,
            "labels": {**_labels(plan), OPTIONAL_LABEL: "true"},
        },
        "spec": {"groups": [{"name": name, "rules": alert_rules(plan, options)}]},
    }


def _target(expr: str, legend: str, ref: str) -> Obj:
    return {"expr": expr, "legendFormat": legend, "refId": ref}  # the panel's data source


def _panel(title: str, unit: str, targets: list[tuple[str, str]], *, grid: Obj, ident: int) -> Obj:
    return {
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "fieldConfig": {"defaults": {"unit": unit}},
        "gridPos": grid,
        "id": ident,
        "targets": [
            _target(expr, legend, chr(ord("A") + i)) for i, (expr, legend) in enumerate(targets)
        ],
        "title": title,
        "type": "timeseries",
    }


PanelSpec = tuple[str, str, list[tuple[str, str]]]


def _quantile(q: float, histogram: str, sel: str) -> str:
    return f"histogram_quantile({q:g}, sum by (le) (rate({histogram}_bucket{sel}[5m])))"


def _panel_specs(sel: str, kind: NodeKind) -> list[PanelSpec]:
    """Each panel's title, unit and queries (with their legends), of what a node of
    ``kind`` exposes: a producer receives nothing, so it has no input rate, end-to-end
    latency, dead letter or backlog, and its row shows the retries that hold its
    publishing back instead; a consumer publishes nothing."""
    rate = [
        *(
            []
            if kind == "producer"
            else [(f"sum(rate(vf_messages_received_total{sel}[5m]))", "in")]
        ),
        (f"sum(rate(vf_messages_processed_total{sel}[5m]))", "processed"),
        *(
            []
            if kind == "consumer"
            else [(f"sum(rate(vf_messages_published_total{sel}[5m]))", "out")]
        ),
    ]
    latency = [
        (_quantile(0.5, "vf_process_seconds", sel), "call p50"),
        (_quantile(0.95, "vf_process_seconds", sel), "call p95"),
    ]
    if kind == "producer":
        retries = [
            (f"sum(rate(vf_{name}_retries_total{sel}[5m]))", name.replace("_", " "))
            for name in RETRIES
        ]
        return [("rate", "ops", rate), ("latency", "s", latency), ("retries", "ops", retries)]
    latency.append((_quantile(0.95, "vf_end_to_end_seconds", sel), "end to end p95"))
    backlog = f"sum by (parent) (min by (parent, durable) (vf_backlog_messages{sel}))"
    return [
        ("rate", "ops", rate),
        ("latency", "s", latency),
        (
            "dead letters",
            "short",
            [(f"sum by (code) (increase(vf_dead_letters_total{sel}[5m]))", "{{code}}")],
        ),
        (
            "in flight",
            "short",
            [
                (f"sum(vf_messages_in_flight{sel})", "in flight"),
                (backlog, "backlog from {{parent}}"),
            ],
        ),
    ]


def node_panels(plan: Plan, workload: Workload, *, y: int, first_id: int) -> list[Obj]:
    """One row for ``workload``'s node: rate, latency, dead letters and in flight (a
    producer: rate, latency and retries), side by side across the dashboard's width."""
    node = workload.node
    specs = _panel_specs(_selector(plan, f"node={_string(node)}"), workload.node_kind)
    row = {
        "collapsed": False,
        "gridPos": {"h": 1, "w": 24, "x": 0, "y": y},
        "id": first_id,
        "panels": [],
        "title": node,
        "type": "row",
    }
    width = 24 // len(specs)
    panels = [
        _panel(
            f"{node}: {title}",
            unit,
            targets,
            grid={"h": 8, "w": width, "x": width * i, "y": y + 1},
            ident=first_id + 1 + i,
        )
        for i, (title, unit, targets) in enumerate(specs)
    ]
    return [row, *panels]


def dashboard(plan: Plan) -> Obj:
    """Grafana's dashboard JSON model: a row per node, in the flow's diagram order."""
    panels: list[Obj] = []
    for index, workload in enumerate(plan.workloads):
        panels += node_panels(plan, workload, y=9 * index, first_id=1 + 5 * index)
    key = f"{plan.namespace}/{plan.flow_id}/{plan.environment}"
    return {
        "editable": True,
        "panels": panels,
        "refresh": "30s",
        "schemaVersion": 39,
        "tags": ["vf", plan.flow_id],
        "templating": {
            "list": [
                {
                    "label": "Prometheus",
                    "name": "datasource",
                    "query": "prometheus",
                    "type": "datasource",
                }
            ]
        },
        "time": {"from": "now-6h", "to": "now"},
        "title": f"vf {plan.flow_id} ({plan.environment}, {plan.namespace})",
        # stable across compiles and unique per flow and namespace (Grafana: 40 at most)
        "uid": "vf-" + hashlib.sha256(key.encode()).hexdigest()[:20],
    }


def dashboard_configmap(plan: Plan) -> Obj:
    name = names.k8s_name("vf", plan.flow_id, "dashboard")
    # one line, keys sorted: small (a client-side apply copies it into an annotation, at
    # most 256 KiB) and the same for the same plan
    text = json.dumps(dashboard(plan), sort_keys=True, separators=(",", ":")) + "\n"
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": plan.namespace,
            "labels": {**_labels(plan), DASHBOARD_LABEL: "1"},
        },
        # the sidecar writes each key as a file into one folder: unique per namespace
        "data": {f"{name}-{plan.namespace}.json": text},
    }
