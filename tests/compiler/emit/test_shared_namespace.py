"""Any number of flows share a namespace: every object is named per flow (the Namespace
aside, owned by the flow that labels it), names fit Kubernetes' limits for any flow id a
label value can hold, and two trees of one repository that would still collide are refused."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.graph_sources import NODES
from tests.support import example_graph
from vf import names
from vf.cli import cli
from vf.pipeline import CompileRequest, compile_project

Obj = dict[str, Any]
LONG_FLOW = "f" + "-x" * 30 + "y"  # 63 characters, the longest label value
GRAPH = (
    NODES
    + """

def build_flow():
    src = Src(name="src")
    work = Work(nb_tasks=3, partition_by="key", name="work")(src)
    return Flow([Sink(name="sink")(work)], flow_type={kind}, flow_id={flow!r})
"""
)
CONFIG = """environments:
  dev:
    namespace: shared
    images: {default: r.io/a:1}
    broker: {profile: durable}
    payload_store: {profile: durable}
"""
_LIMITS = {"StatefulSet": 52}


def _compile(tmp: Path, *, flow: str, kind: str = "REALTIME") -> dict[str, list[Obj]]:
    folder = tmp / flow
    folder.mkdir()
    (folder / "graph.py").write_text(GRAPH.format(kind=kind, flow=flow), encoding="utf-8")
    (folder / "vf.yaml").write_text(CONFIG, encoding="utf-8")
    return compile_project(CompileRequest(graph=str(folder / "graph.py"))).objects


def _names(obj: Obj) -> list[str]:
    meta = obj["metadata"]
    labels = dict(meta.get("labels") or {})
    template = ((obj.get("spec") or {}).get("template") or {}).get("metadata") or {}
    labels.update(template.get("labels") or {})
    return [str(v) for v in labels.values()]


@pytest.mark.parametrize("kind", ["REALTIME", "BATCH"])
def test_a_63_character_flow_id_compiles_and_every_name_fits(tmp_path: Path, kind: str) -> None:
    objects = _compile(tmp_path, flow=LONG_FLOW, kind=kind)["dev"]
    for obj in objects:
        name = obj["metadata"]["name"]
        assert len(name) <= _LIMITS.get(obj["kind"], names.K8S_NAME_MAX), (obj["kind"], name)
        assert all(len(v) <= 63 for v in _names(obj)), name
    flows = {o["metadata"]["labels"].get("vf.dev/flow") for o in objects}
    assert flows == {LONG_FLOW}


@pytest.mark.parametrize("kind", ["REALTIME", "BATCH"])
def test_two_flows_in_one_namespace_share_no_object(tmp_path: Path, kind: str) -> None:
    first = _compile(tmp_path, flow="alpha", kind=kind)["dev"]
    second = _compile(tmp_path, flow="beta", kind=kind)["dev"]

    def keys(objects: list[Obj]) -> set[tuple[str, str]]:
        return {(o["kind"], o["metadata"]["name"]) for o in objects}

    shared = keys(first) & keys(second)
    print(f"{len(keys(first))} and {len(keys(second))} objects, shared: {sorted(shared)}")
    assert not shared
    for objects, flow in ((first, "alpha"), (second, "beta")):
        for obj in objects:  # every selector picks this flow's pods only
            selector = (obj.get("spec") or {}).get("selector") or {}
            if obj["kind"] in ("Service", "Deployment", "StatefulSet") and selector:
                assert selector.get("matchLabels", selector)["vf.dev/flow"] == flow, obj
            if obj["kind"] == "NetworkPolicy":
                assert obj["spec"]["podSelector"]["matchLabels"]["vf.dev/flow"] == flow


def _invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def test_a_second_tree_of_the_same_flow_in_one_cluster_is_refused(tmp_path: Path) -> None:
    source = example_graph("batch_pipeline")
    copy = tmp_path / "copy"
    shutil.copytree(Path(source).parent, copy)
    config = copy / "vf.yaml"  # prod: the same cluster (its Argo CD server), another plan
    config.write_text(config.read_text().replace("      double: 3\n", "      double: 4\n"))
    deploy = tmp_path / "deploy"
    assert _invoke("compile", source, "--out", str(deploy / "batch"))[0] == 0
    code, output = _invoke("compile", str(copy / "graph.py"), "--out", str(deploy / "again"))
    print(output)
    assert code == 2 and "error[VF_FLOW_COLLISION]" in output
    assert "own flow_id" in output and not (deploy / "again").exists()
    # the same tree compiled again is not a neighbour of itself
    assert _invoke("compile", source, "--out", str(deploy / "batch"))[0] == 0
    code, output = _invoke("compile", str(copy / "graph.py"), "--out", str(deploy / "again"))
    print(output)
    assert code == 2 and "error[VF_FLOW_COLLISION]" in output
    assert "own flow_id" in output and not (deploy / "again").exists()
    # the same tree compiled again is not a neighbour of itself
    assert _invoke("compile", source, "--out", str(deploy / "batch"))[0] == 0
