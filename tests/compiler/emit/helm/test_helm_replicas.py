"""``--set nodes.<node>.replicas`` keeps the values that depend on a replica count consistent:
the worker's ``VF_NB_TASKS``, its children's ``VF_PARENT_REPLICAS`` and the config hashes
follow it, with the real ``helm``, on join flows of both types."""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from ruamel.yaml import YAML

from tests.graph_sources import NODES
from tests.random_flows import NODES as RANDOM_NODES
from tests.random_flows import SEEDS, RandomFlow, layered_flow, seeded
from tests.support import as_overlay
from vf.pipeline import CompileRequest, CompileResult, compile_project
from vf.plan.config_hash import config_hash
from vf.tree.write import write_tree

pytestmark = pytest.mark.slow  # real servers, renders or long runs: make test-fast skips it

Obj = dict[str, Any]
JOIN = (
    NODES
    + """

class Pair(Processor):
    def process(self, left, right):
        return (left, right)


def build_flow():
    src = Src(name="src")
    a, b = Work(name="a")(src), Work(name="b")(src)
    return Flow([Sink(name="sink")(Pair(name="join")(a, b))], flow_type=REALTIME, flow_id="joins")
"""
)
CONFIG = """environments:
  dev:
    namespace: joins-dev
    images: {{default: r.io/joins:1}}
    replicas: {{a: {a}}}
"""


def _render(helm: str, chart: Path, *args: str) -> dict[tuple[str, str], Obj]:
    done = subprocess.run(
        [helm, "template", "r", str(chart), "-n", "ns", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    docs = [d for d in YAML(typ="safe").load_all(done.stdout) if d]
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def _compiled(root: Path, *, replicas: int) -> Path:
    folder = root / f"a{replicas}"
    folder.mkdir()
    (folder / "graph.py").write_text(JOIN, encoding="utf-8")
    (folder / "vf.yaml").write_text(CONFIG.format(a=replicas), encoding="utf-8")
    result = compile_project(CompileRequest(graph=str(folder / "graph.py")))
    write_tree(folder / "deploy", result.tree)
    return folder / "deploy" / "chart"


def _planned_only(obj: Obj) -> bool:
    labels = obj["metadata"].get("labels") or {}
    return labels.get("app.kubernetes.io/component") == "provision"


def _hash(obj: Obj) -> str:
    return str(obj["spec"]["template"]["metadata"]["annotations"]["vf.dev/config-hash"])


def _env_of(objects: dict[tuple[str, str], Obj], workload: Obj) -> dict[str, str]:
    """The worker's variables, a value read by reference looked up in its ConfigMap."""
    out = {}
    for entry in workload["spec"]["template"]["spec"]["containers"][0]["env"]:
        ref = (entry.get("valueFrom") or {}).get("configMapKeyRef")
        if ref is not None:
            out[entry["name"]] = objects[("ConfigMap", ref["name"])]["data"][ref["key"]]
        elif "value" in entry:
            out[entry["name"]] = entry["value"]
    return out


def _node(objects: dict[tuple[str, str], Obj], node: str) -> Obj:
    return next(
        v
        for v in objects.values()
        if v["kind"] in ("Deployment", "Job")
        and (v["metadata"].get("labels") or {}).get("vf.dev/node") == node
    )


def _assert_hashes_follow_the_env(objects: dict[tuple[str, str], Obj]) -> int:
    checked = 0
    for (kind, _), obj in objects.items():
        labels = obj["metadata"].get("labels") or {}
        if kind in ("Deployment", "StatefulSet", "Job") and "vf.dev/node" in labels:
            assert _hash(obj) == config_hash(_env_of(objects, obj), kind=kind), obj
            checked += 1
    return checked


def test_set_replicas_renders_what_a_recompile_renders(tmp_path: Path, helm: str) -> None:
    before = _compiled(tmp_path, replicas=1)
    after = _compiled(tmp_path, replicas=3)
    values = "values-dev.yaml"
    plain = _render(helm, before, "-f", str(before / values))
    with_set = _render(helm, before, "-f", str(before / values), "--set", "nodes.a.replicas=3")
    recompiled = _render(helm, after, "-f", str(after / values))
    # the recompile names the provision Job for the new topology; the workers ensure their
    # own consumers, so the compiled provision may stay. a's PodDisruptionBudget comes with
    # the count above one, as the plan makes it (ADR 193)
    assert not [k for k in plain if k[0] == "PodDisruptionBudget"]
    with_set, recompiled = (
        {k: v for k, v in objs.items() if not _planned_only(v)} for objs in (with_set, recompiled)
    )
    assert sorted(with_set) == sorted(recompiled)
    budgets = [v for k, v in with_set.items() if k[0] == "PodDisruptionBudget"]
    assert [b["metadata"]["labels"]["vf.dev/node"] for b in budgets] == ["a"]
    for key, obj in recompiled.items():
        assert as_overlay(with_set[key]) == as_overlay(obj), key
    assert _env_of(with_set, _node(with_set, "a"))["VF_NB_TASKS"] == "3"
    assert _env_of(with_set, _node(with_set, "join"))["VF_PARENT_REPLICAS"] == "a=3,b=1"
    assert _env_of(plain, _node(plain, "join"))["VF_PARENT_REPLICAS"] == "a=1,b=1"
    # a scales in place: its count is read by reference, its pod template stays as it was
    assert _node(with_set, "a")["spec"]["template"] == _node(plain, "a")["spec"]["template"]
    assert _assert_hashes_follow_the_env(with_set) == 5


def test_set_replicas_on_a_batch_job_is_refused(
    compiled_examples: dict[str, CompileResult], tmp_path: Path, helm: str
) -> None:
    """A BATCH Job's count is part of its name's tag and its pods' indexes: a hand
    ``--set`` would change an installed Job's template under the same name, so the chart
    holds the planned count of the environment's values (ADR 154, 176); vf.yaml and a
    recompile change it."""
    write_tree(tmp_path / "deploy", compiled_examples["batch_pipeline"].tree)
    chart = tmp_path / "deploy" / "chart"
    prod = ("-f", str(chart / "values-prod.yaml"))
    assert _render(helm, chart, *prod)
    with pytest.raises(subprocess.CalledProcessError) as refused:
        _render(helm, chart, *prod, "--set", "nodes.double.replicas=5")
    assert "nodes.double.replicas is 5" in str(refused.value.stderr)
    assert "prod plans 3" in str(refused.value.stderr)


def _random_chart(root: Path, flow: RandomFlow, replicas: dict[str, int]) -> Path:
    root.mkdir()
    (root / "nodes.py").write_text(RANDOM_NODES, encoding="utf-8")
    (root / "graph.py").write_text(flow.source, encoding="utf-8")
    env: Obj = {"namespace": "ns", "images": {"default": "r.io/any:1"}, "replicas": replicas}
    (root / "vf.yaml").write_text(json.dumps({"environments": {"dev": env}}), encoding="utf-8")
    result = compile_project(CompileRequest(graph=str(root / "graph.py")))
    write_tree(root / "deploy", result.tree)
    return root / "deploy" / "chart"


@seeded(12)
@given(seed=SEEDS)
@example(seed=1)  # a two-parent join planned at one replica (a Deployment), set to four
def test_a_set_count_renders_what_a_recompile_renders_or_is_refused(
    seed: int, tmp_path_factory: pytest.TempPathFactory, helm: str
) -> None:
    """On any REALTIME flow, ``--set nodes.<node>.replicas=K`` renders what compiling with
    ``replicas: {node: K}`` renders, or the chart refuses it: a partitioned node's count is
    part of the run id and the topology even at one replica, where its workload is a
    Deployment (the chart once let that count through)."""
    rng = random.Random(seed)
    flow = layered_flow(rng, flow_id="counts", kind="REALTIME")
    node, count = rng.choice(flow.works), rng.randint(1, 4)
    root = tmp_path_factory.mktemp(f"counts-{seed}")
    before = _random_chart(root / "before", flow, {})
    values = ("-f", str(before / "values-dev.yaml"))
    try:
        with_set = _render(helm, before, *values, "--set", f"nodes.{node}.replicas={count}")
    except subprocess.CalledProcessError as refused:
        assert f"nodes.{node}.replicas is {count}" in refused.stderr, refused.stderr
        assert node in flow.partitioned, flow.source
        return
    after = _random_chart(root / "after", flow, {node: count})
    recompiled = _render(helm, after, "-f", str(after / "values-dev.yaml"))
    with_set, recompiled = (
        {k: v for k, v in objs.items() if not _planned_only(v)} for objs in (with_set, recompiled)
    )
    assert sorted(with_set) == sorted(recompiled), (node, count, flow.source)
    for key, obj in recompiled.items():
        assert as_overlay(with_set[key]) == as_overlay(obj), (key, node, count, flow.source)


LONG = "camera-north-entrance-detector-with-a-name-longer-than-a-label-may-be"
LONG_GRAPH = (
    NODES
    + f"""

def build_flow():
    work = Work(name="{LONG}", nb_tasks=3)(Src(name="src"))
    return Flow([Sink(name="sink")(work)], flow_type=BATCH, flow_id="longs")
"""
)


def test_a_long_named_jobs_planned_count_is_held(tmp_path: Path, helm: str) -> None:
    """A node name past 63 characters is shortened in its ``vf.dev/node`` label (ADR 209);
    the chart still holds its Job's planned count and refuses a ``--set`` of another."""
    assert len(LONG) > 63
    (tmp_path / "graph.py").write_text(LONG_GRAPH, encoding="utf-8")
    (tmp_path / "vf.yaml").write_text(
        "environments:\n  dev:\n    images: {default: r.io/longs:1}\n", encoding="utf-8"
    )
    result = compile_project(CompileRequest(graph=str(tmp_path / "graph.py")))
    write_tree(tmp_path / "deploy", result.tree)
    chart = tmp_path / "deploy" / "chart"
    values = YAML(typ="safe").load((chart / "values-dev.yaml").read_text(encoding="utf-8"))
    assert values["plannedReplicas"][LONG] == 3
    own = ("-f", str(chart / "values-dev.yaml"))
    assert _render(helm, chart, *own)
    with pytest.raises(subprocess.CalledProcessError) as refused:
        _render(helm, chart, *own, "--set", f"nodes.{LONG}.replicas=5")
    assert f"nodes.{LONG}.replicas is 5" in str(refused.value.stderr)
