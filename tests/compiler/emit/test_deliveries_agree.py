"""The chart and the overlays deliver the same objects for flows and targets no example has.

``tests/compiler/emit/helm/test_helm.py`` holds ``helm template`` equal to
``kubectl kustomize`` on the
examples. Here the flows are made up: random layered graphs (one or two producers, joins
with partitioning, replicas), BATCH or REALTIME, and one to three environments that each set
a random mix of vf.yaml's knobs. Every environment's chart render must equal its overlay's
build, object for object. Both sides are read as Kubernetes' own tools read them
(``vf.runtree.manifests.parse_objects``).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given

from tests.random_flows import NODES, SEEDS, layered_flow, seeded
from tests.support import as_overlay, by_identity, helm_template, kustomize_build
from vf.emit.ordering import without_tool_annotations
from vf.pipeline import CompileRequest, compile_project
from vf.runtree.manifests import parse_objects
from vf.tree.write import write_tree

pytestmark = pytest.mark.slow  # real renders: make test-fast skips it

Obj = dict[str, Any]


def _environment(
    rng: random.Random, name: str, *, works: list[str], partitioned: list[str], kind: str
) -> Obj:
    """One environment: a namespace and image, then each knob with some chance."""
    nodes = [*works, "s0"]
    env: Obj = {
        "namespace": f"agree-{name}",
        "images": {"default": f"r.io/a/w:{rng.randint(1, 3)}"},
    }
    if rng.random() < 0.5:
        env["replicas"] = {n: rng.randint(1, 4) for n in rng.sample(works, k=len(works) // 2 + 1)}
    if rng.random() < 0.5:
        env["resources"] = {"*": {"cpu": rng.choice(["100m", 1]), "memory": "128Mi"}}
        env["resources"][rng.choice(nodes)] = {"cpu": "2", "memory": "1Gi", "memory_limit": "2Gi"}
    if rng.random() < 0.4:
        env["images"]["overrides"] = {rng.choice(nodes): "r.io/a/special@sha256:" + "a" * 64}
    optional: dict[str, Any] = {
        "image_pull_policy": lambda: rng.choice(["Always", "IfNotPresent"]),
        "priority_class": lambda: f"pc-{name}",
        "pods": lambda: _pods(rng, name),
        "broker": lambda: {
            "profile": rng.choice(["dev", "durable"]),
            **_auth(rng),
            **_tls(name, "broker"),
        },
        "payload_store": lambda: {
            "profile": rng.choice(["dev", "durable"]),
            **_auth(rng),
            **_tls(name, "store"),
        },
        "pod_security": lambda: {"namespace_labels": True},
        "supervision": lambda: {"max_restarts": rng.randint(0, 5)},
        "mounts": lambda: {rng.choice(nodes): ["data-claim:/data"]},
    }
    for key, make in optional.items():
        if rng.random() < 0.4:
            env[key] = make()
    if kind == "REALTIME":
        env.update(_realtime(rng, works=works, partitioned=partitioned))
    env.update(_observability(name, works))
    return env


def _auth(rng: random.Random) -> Obj:
    """vf's default credentials, none, or other Secrets (ADR 0212)."""
    return rng.choice([{}, {"auth": "none"}, {"auth": {"secret": "own-creds"}}])


def _tls(name: str, service: str) -> Obj:
    """TLS or not (ADR 0222), from a generator of its own: the seeds' other draws stay."""
    rng = random.Random(f"tls:{name}:{service}")
    return {"tls": {"secret": f"{service}-tls"}} if rng.random() < 0.5 else {}


def _observability(name: str, works: list[str]) -> Obj:
    """Alerts and a dashboard, from a generator of their own: the seeds' other draws stay."""
    rng = random.Random(f"observability:{name}:{','.join(works)}")
    if rng.random() < 0.5:
        return {}
    alerts = rng.random() < 0.8
    target = {"latency_target_seconds": rng.choice([0.5, 5, 30])} if alerts else {}
    return {
        "observability": {"alerts": alerts, "dashboard": not alerts or rng.random() < 0.7, **target}
    }


def _pods(rng: random.Random, name: str) -> Obj:
    """``pods:``: labels and annotations, and some of its other settings."""
    pods: Obj = {"labels": {"team": name}, "annotations": {"a.example.com/x": "y"}}
    pods["image_pull_secrets"] = ["regcred"] if rng.random() < 0.5 else []
    if rng.random() < 0.5:
        pods["service_account"] = f"sa-{name}"
    pods["topology_spread"] = rng.random() < 0.3
    if rng.random() < 0.3:
        pods["metrics"] = {"service_monitor": True, "from": [{"namespace": "monitoring"}]}
    return pods


def _realtime(rng: random.Random, *, works: list[str], partitioned: list[str]) -> Obj:
    """What only a REALTIME flow's environment may set: rollouts and autoscaling."""
    out: Obj = {}
    rolled = [w for w in works if w not in partitioned]  # a partitioned one is a StatefulSet
    if rolled and rng.random() < 0.4:
        out["rollout"] = {rng.choice(rolled): rng.choice(["drain", "surge"])}
    if rng.random() < 0.4:
        out["autoscaling"] = {"enabled": True, "min_replicas": 1, "max_replicas": 6}
    return out


def _project(root: Path, seed: int) -> tuple[Path, dict[str, Obj]]:
    rng = random.Random(seed)
    flow = layered_flow(rng, flow_id="agree")
    works, partitioned = list(flow.works), list(flow.partitioned)
    names = rng.sample(["dev", "qa", "prod"], k=rng.randint(1, 3))
    envs = {
        n: _environment(rng, n, works=works, partitioned=partitioned, kind=flow.kind) for n in names
    }
    (root / "nodes.py").write_text(NODES, encoding="utf-8")
    (root / "graph.py").write_text(flow.source, encoding="utf-8")
    (root / "vf.yaml").write_text(json.dumps({"environments": envs}), encoding="utf-8")
    return root / "graph.py", envs


def _assert_deliveries_agree(graph: Path, envs: dict[str, Obj], *, helm: str, kubectl: str) -> None:
    out = graph.parent / "deploy"
    write_tree(out, compile_project(CompileRequest(graph=str(graph), out=out)).tree)
    for name, env in envs.items():
        rendered = helm_template(
            helm, out / "chart", "-f", str(out / "chart" / f"values-{name}.yaml"),
            "--namespace", env["namespace"], "--skip-tests",
        )  # fmt: skip
        assert rendered.returncode == 0, rendered.stderr
        charted = by_identity(parse_objects(rendered.stdout, source="helm template"))
        built = by_identity(
            parse_objects(kustomize_build(kubectl, out / "overlays" / name), source="kustomize")
        )
        built.pop(("Namespace", "", env["namespace"]), None)  # the release's own namespace
        assert sorted(charted) == sorted(built), name
        for key, obj in built.items():
            assert as_overlay(charted[key]) == without_tool_annotations(obj), (name, key)


@seeded(20)
@given(seed=SEEDS)
def test_any_flow_renders_the_same_from_the_chart_and_the_overlay(
    seed: int, tmp_path_factory: pytest.TempPathFactory, helm: str, kubectl: str
) -> None:
    graph, envs = _project(tmp_path_factory.mktemp(f"agree-{seed}"), seed)
    _assert_deliveries_agree(graph, envs, helm=helm, kubectl=kubectl)


def test_the_shipped_broker_carries_the_environments_pod_labels(
    tmp_path: Path, helm: str, kubectl: str
) -> None:
    """``pods.labels`` and ``pods.annotations`` go on every object: on the shipped broker's
    too, which the overlay takes from ``components/`` and patches (it lacked them)."""
    graph, envs = _project(tmp_path, 2)
    assert "pods" in envs["qa"] and "broker" not in envs["qa"]  # the shipped dev broker
    _assert_deliveries_agree(graph, envs, helm=helm, kubectl=kubectl)
    overlay = tmp_path / "deploy" / "overlays" / "qa"
    built = parse_objects(kustomize_build(kubectl, overlay), source="kustomize")
    broker = [o for o in built if o["metadata"]["labels"].get("vf.dev/infra") == "nats"]
    assert {o["kind"] for o in broker} >= {"ConfigMap", "Deployment", "Service"}
    for obj in broker:
        assert obj["metadata"]["labels"]["team"] == "qa"
        assert obj["metadata"]["annotations"]["a.example.com/x"] == "y"


def test_a_topology_row_prints_each_environments_own_text(
    tmp_path: Path, helm: str, kubectl: str
) -> None:
    """Two environments' topology ConfigMaps (their run ids differ) share a row template,
    and their lines differ beside the counts (a join partitioned in one, with one replica
    in the other): that text is a column of the row, which the template printed as the
    column's name."""
    graph, envs = _project(tmp_path, 0)
    assert set(envs) == {"dev", "prod"}
    _assert_deliveries_agree(graph, envs, helm=helm, kubectl=kubectl)
