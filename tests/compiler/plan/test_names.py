"""Kubernetes names shortened where they say least (ADR 0209): the parts a flow's objects
share give way before the node's name, whose words keep their beginnings, and a hash of
the logical name keeps every name unique."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from tests.compiler.emit.test_deliveries_agree import _assert_deliveries_agree
from tests.support import kustomize_build
from vf import names
from vf.pipeline import CompileRequest, compile_project
from vf.runtree.manifests import parse_objects
from vf_runtime.labels import NODE_LABEL, NODE_NAME_KEY

DNS_LABEL = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?")
FLOW = "warehouse-loading-dock-camera-analytics-production"
LIMITS = (names.K8S_NAME_MAX, 52, 54)


def _unhashed(name: str) -> str:
    return name.rsplit("-", 1)[0]


def test_nodes_that_differ_in_a_middle_word_keep_it_in_their_names() -> None:
    north, south = (f"camera-{side}-entrance-detector" for side in ("north", "south"))
    for node in (north, south):
        name = names.k8s_name("vf", FLOW, "r1234567", node)
        assert name.startswith("vf-warehous") and f"-r1234567-{node}-" in name, name
    for limit in LIMITS:
        a, b = (
            names.k8s_name("vf", FLOW, "r1234567", n, "hl", limit=limit) for n in (north, south)
        )
        assert "-nort" in a and "-sout" in b and _unhashed(a) != _unhashed(b), (a, b)
    long_north, long_south = (f"{n}-for-the-east-yard-loading-dock-area-v2" for n in (north, south))
    a, b = names.label_value(long_north), names.label_value(long_south)
    assert "-nort-" in a and "-sout-" in b and a.endswith(names.short_hash(long_north)), a
    assert "-v2-" in a  # the last word stays too


def test_names_that_fit_are_left_as_they_were() -> None:
    assert names.k8s_name("vf", "cameras", "r8cd423d", "detector") == "vf-cameras-r8cd423d-detector"
    hashed = names.k8s_name("vf", "cameras", "r8cd423d", "Scale")
    assert hashed == f"vf-cameras-r8cd423d-scale-{names.short_hash('vf-cameras-r8cd423d-Scale')}"


WORD = st.text("abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=14)
NODE = st.lists(WORD, min_size=1, max_size=12).map("-".join).filter(lambda n: len(n) <= 128)
FLOW_ID = st.lists(WORD, min_size=1, max_size=8).map("-".join).map(lambda f: f[:63].strip("-"))


@settings(max_examples=300, deadline=None)
@given(
    flow=FLOW_ID,
    run=st.text("abcdef0123456789", min_size=1, max_size=16).map(lambda r: "r" + r[:15]),
    stem=st.lists(WORD, min_size=2, max_size=6),
    middles=st.lists(WORD, min_size=2, max_size=6, unique=True),
    suffix=st.sampled_from([(), ("hl",), ("pdb",), ("0",)]),
    limit=st.sampled_from(LIMITS),
)
def test_adversarial_node_sets_get_valid_distinct_deterministic_names(
    flow: str,
    run: str,
    stem: list[str],
    middles: list[str],
    suffix: tuple[str, ...],
    limit: int,
) -> None:
    """Nodes whose names differ only in one middle word, under a flow id of any length."""
    nodes = ["-".join([*stem[:1], middle, *stem[1:]]) for middle in middles]
    made = [names.k8s_name("vf", flow, run, node, *suffix, limit=limit) for node in nodes]
    for node, name in zip(nodes, made, strict=True):
        assert len(name) <= limit and DNS_LABEL.fullmatch(name), name
        assert name == names.k8s_name("vf", flow, run, node, *suffix, limit=limit)
        label = names.label_value(node)
        assert len(label) <= 63 and DNS_LABEL.fullmatch(label), label
    assert len(set(made)) == len(made), made
    # Where the node's words keep two letters each (the flow id and run id cut to their
    # floor leave it that room), middle words that differ in those letters tell the names
    # apart before the hash.
    room = limit - names.HASH_LEN - 1
    node_room = room - len("vf-") - 2 * (names.PART_FLOOR + 1) - sum(len(s) + 1 for s in suffix)
    words = len(stem) + 1
    if 3 * words - 1 <= node_room and len({m[:2] for m in middles}) == len(middles):
        assert len({_unhashed(name) for name in made}) == len(made), made


@settings(max_examples=300, deadline=None)
@given(
    parts=st.lists(st.text(min_size=0, max_size=90), min_size=1, max_size=5).filter(
        any  # the empty name is returned as it is
    )
)
def test_any_parts_give_a_dns_label_within_the_limit(parts: list[str]) -> None:
    for limit in LIMITS:
        name = names.k8s_name(*parts, limit=limit)
        assert len(name) <= limit and DNS_LABEL.fullmatch(name), (parts, name)


GRAPH = """from vf import REALTIME, Consumer, Flow, Processor, Producer


class Feed(Producer):
    def next(self):
        return {}


class Detect(Processor):
    def process(self, item):
        return item


class Store(Consumer):
    def consume(self, item):
        pass


def build_flow():
    feed = Feed(name="feed")
    sinks = []
    for side in ("north", "south"):
        detector = Detect(name=f"camera-{side}-entrance-detectorSUFFIX")(feed)
        sinks.append(Store(name=f"{side}-store")(detector))
    return Flow(sinks, flow_type=REALTIME, flow_id=FLOW_ID)
"""
NS = ("north", "south")
CONFIG = "environments:\n  dev:\n    images: {default: r.example.com/a/b:1}\n"


def _project(tmp_path: Path, flow_id: str, suffix: str = "") -> Path:
    graph = GRAPH.replace("FLOW_ID", repr(flow_id)).replace("SUFFIX", suffix)
    (tmp_path / "graph.py").write_text(graph)
    (tmp_path / "vf.yaml").write_text(CONFIG)
    return tmp_path / "graph.py"


def _workloads(tmp_path: Path, flow_id: str) -> dict[str, dict[str, Any]]:
    """The Kustomize tree's workloads by name (the chart renders the same objects: the
    test below holds it)."""
    _project(tmp_path, flow_id)
    tree = compile_project(CompileRequest(graph=str(tmp_path / "graph.py"))).tree
    yaml = YAML(typ="safe", pure=True)
    found: dict[str, dict[str, Any]] = {}
    for path, text in tree.items():
        if path.startswith("overlays/dev/resources/") and path.endswith(".yaml"):
            obj = yaml.load(text)
            if obj["kind"] in {"Deployment", "Job"} and NODE_LABEL in obj["metadata"]["labels"]:
                found[obj["metadata"]["name"]] = obj
    return found


def test_a_long_flow_id_keeps_the_node_names_in_the_deployments(tmp_path: Path) -> None:
    workloads = _workloads(tmp_path, FLOW)
    assert len(workloads) == 5
    for name, obj in workloads.items():
        node = obj["metadata"]["annotations"][NODE_NAME_KEY]
        assert obj["spec"]["template"]["metadata"]["annotations"][NODE_NAME_KEY] == node
        assert obj["metadata"]["labels"][NODE_LABEL] == node  # these fit a label whole
        assert name.startswith("vf-warehous") and f"-{node}-" in name, name
    detectors = sorted(n for n in workloads if "entrance-detector" in n)
    assert "-camera-north-entrance-detector-" in detectors[0], detectors
    assert "-camera-south-entrance-detector-" in detectors[1], detectors


def test_names_that_fit_carry_no_node_name_annotation(tmp_path: Path) -> None:
    workloads = _workloads(tmp_path, "docks")
    assert len(workloads) == 5
    for name, obj in workloads.items():
        assert name.startswith("vf-docks-r"), name
        assert NODE_NAME_KEY not in obj["metadata"].get("annotations", {}), name
        assert NODE_NAME_KEY not in obj["spec"]["template"]["metadata"]["annotations"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("flow_id", "suffix", "marked_nodes"),
    [
        ("docks", "", set()),
        (
            "docks",
            "-for-the-east-yard-loading-dock",
            {f"camera-{s}-entrance-detector-for-the-east-yard-loading-dock" for s in NS},
        ),
        (FLOW, "", None),  # every workload's name is shortened
    ],
)
def test_the_chart_and_the_overlay_agree_where_only_some_names_are_shortened(
    tmp_path: Path, helm: str, kubectl: str, flow_id: str, suffix: str, marked_nodes: Any
) -> None:
    """The detectors' names are too long for their workloads (not for a label), the stores'
    are not: the chart's workloads with and without the annotation render as the overlay."""
    graph = _project(tmp_path, flow_id, suffix=suffix)
    envs = {"dev": {"namespace": "default"}}
    _assert_deliveries_agree(graph, envs, helm=helm, kubectl=kubectl)
    built = parse_objects(kustomize_build(kubectl, tmp_path / "deploy/overlays/dev"), source="k")
    marked = {
        o["metadata"]["annotations"][NODE_NAME_KEY]
        for o in built
        if NODE_NAME_KEY in (o["metadata"].get("annotations") or {})
    }
    workers = {o["metadata"]["labels"][NODE_LABEL] for o in built if _is_worker(o)}
    assert marked == (workers if marked_nodes is None else marked_nodes)


def _is_worker(obj: dict[str, Any]) -> bool:
    return obj["kind"] in {"Deployment", "Job"} and NODE_LABEL in obj["metadata"]["labels"]
