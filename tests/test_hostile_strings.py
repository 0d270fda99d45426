"""Hostile strings: whatever a user writes either round-trips unchanged or is refused by name.

Strings go where users put them (constructor arguments and their keys, node names,
images, partition keys, flow ids, namespaces) and the emitted tree is read back with a
YAML parser: the value must come back exactly, inside the object and key it was given
to, without adding a key, an object or a document; a chart template must never carry a
user's ``{{`` as a Go action; every Kubernetes name and label the tree holds must obey
the DNS-1123 grammars, and every NATS subject and stream the NATS token grammar.
"""

from __future__ import annotations

import json
import pickle
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from tests.test_fuzz_graph import assert_named_failure
from vf import names
from vf.errors import VfError
from vf.pipeline import CompileRequest, CompileResult, compile_project
from vf.write import write_tree

GRAPH = '''"""One node of each kind, configured by the pickled spec next to this file."""

import pickle
from pathlib import Path

from vf import Consumer, Flow, Processor, Producer


class Source(Producer):
    def next(self):
        raise StopIteration


class Work(Processor):
    def __init__(self, *, name=None, image=None, nb_tasks=1, partition_by=None, **params):
        super().__init__(name=name, image=image, nb_tasks=nb_tasks, partition_by=partition_by)


class Sink(Consumer):
    def consume(self, item):
        pass


def build_flow():
    spec = pickle.loads((Path(__file__).parent / "spec.pkl").read_bytes())
    src = Source(name="source")
    work = Work(**spec["work"])(src)
    return Flow([Sink(name="sink")(work)], flow_type="batch", flow_id=spec["flow_id"])
'''
CONFIG = """environments:
  dev:
    namespace: {namespace}
    images: {{default: registry.example.com/hostile/worker:1}}
"""
PAYLOADS = [
    "{{ .Release.Name }}",
    '{{- fail "injected" -}}',
    "{{/* x */}}",
    "${HOME}",
    "$(id)",
    "`id`",
    "; rm -rf / #",
    "a\n---\nkind: Secret",
    "key: value",
    "- item",
    "&anchor",
    "*alias",
    "!!python/object/apply:os.system ['id']",
    "# comment",
    "'\"",
    "\\",
    "\u2028\u2029\x85",
    "\ufeff",
    "%TAG ! tag:x,2000:",
    "|\n  block",
    ">",
    "null",
    "~",
    "true",
    "0o17",
    "1_000",
    ".inf",
    "<<",
    "=",
    "\t",
    "\x00\x07\x1b[31m",
    "x" * 5000,
]
hostile = st.one_of(st.sampled_from(PAYLOADS), st.text(max_size=40))
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
NATS_TOKEN = re.compile(r"^[A-Za-z0-9_-]+$")


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("hostile")
    (root / "graph.py").write_text(GRAPH, encoding="utf-8")
    yield root


def compile_work(
    root: Path, *, work: dict[str, Any], flow_id: str | None = "hostile", namespace: str = "ns"
) -> CompileResult | VfError:
    (root / "spec.pkl").write_bytes(pickle.dumps({"work": work, "flow_id": flow_id}))
    (root / "vf.yaml").write_text(
        CONFIG.format(namespace=json.dumps(namespace)), encoding="utf-8", errors="surrogatepass"
    )
    try:
        return compile_project(CompileRequest(graph=str(root / "graph.py")))
    except VfError as error:
        return error


def documents(result: CompileResult) -> dict[str, list[Any]]:
    """The Kustomize tree's YAML files, read back by a YAML 1.2 parser."""
    yaml = YAML(typ="safe", pure=True)
    return {
        path: list(yaml.load_all(text))
        for path, text in result.tree.items()
        if path.endswith(".yaml") and path.startswith(("base/", "overlays/"))
    }


def objects(result: CompileResult) -> list[dict[str, Any]]:
    found = []
    for docs in documents(result).values():
        assert len(docs) == 1
        if isinstance(docs[0], dict) and "kind" in docs[0] and "metadata" in docs[0]:
            found.append(docs[0])
    return found


def work_env(objs: list[dict[str, Any]]) -> dict[str, str]:
    """The data of the Work node's env ConfigMap, as the tree holds it."""
    maps = [
        o["data"]
        for o in objs
        if o["kind"] == "ConfigMap" and (o.get("data") or {}).get("VF_NODE_KIND") == "processor"
    ]
    assert len(maps) == 1
    data: dict[str, str] = maps[0]
    assert all(key.startswith("VF_") for key in data)
    return data


def assert_grammars(result: CompileResult, objs: list[dict[str, Any]]) -> None:
    for obj in objs:
        meta = obj["metadata"]
        assert len(meta["name"]) <= names.K8S_NAME_MAX and DNS_SUBDOMAIN.match(meta["name"])
        for key, value in (meta.get("labels") or {}).items():
            assert isinstance(value, str) and LABEL_VALUE.match(value) and len(value) <= 63, key
    for plan in result.plans:
        for channel in plan.channels:
            assert NATS_TOKEN.match(channel.stream)
            assert all(NATS_TOKEN.match(token) for token in channel.subject.split("."))


def assert_no_template_injection(result: CompileResult, strings: list[str]) -> None:
    actions = [s for s in strings if "{{" in s]
    for path, text in result.tree.items():
        if "/templates/" in path:
            assert not any(action in text for action in actions), path


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    params=st.dictionaries(
        hostile.filter(lambda k: k not in {"name", "image", "nb_tasks", "partition_by"}),
        st.one_of(hostile, st.lists(hostile, max_size=3), st.dictionaries(hostile, hostile)),
        max_size=3,
    )
)
def test_parameters_round_trip_unchanged(project: Path, params: dict[str, Any]) -> None:
    outcome = compile_work(project, work={"name": "work", **params})
    if isinstance(outcome, VfError):  # only values JSON cannot carry are refused
        assert_named_failure(outcome)
        assert outcome.code in {"VF_GRAPH_PARAMS", "VF_K8S_LIMIT"}, outcome.render()
        return
    objs = objects(outcome)
    env = work_env(objs)
    assert json.loads(env["VF_NODE_PARAMS_JSON"]) == params
    assert env["VF_NODE_NAME"] == "work"
    assert_grammars(outcome, objs)
    strings = [*params, *(v for v in params.values() if isinstance(v, str))]
    assert_no_template_injection(outcome, strings)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.one_of(hostile, st.from_regex(names.NODE_NAME)))
def test_node_names_are_kept_or_refused(project: Path, name: str) -> None:
    outcome = compile_work(project, work={"name": name})
    if not names.NODE_NAME.match(name) or name in {"source", "sink"}:
        assert isinstance(outcome, VfError)
        assert_named_failure(outcome)
        return
    if isinstance(outcome, VfError):  # two valid names may still collide once normalised
        assert outcome.code == "VF_IDENTITY_COLLISION", outcome.render()
        return
    objs = objects(outcome)
    assert work_env(objs)["VF_NODE_NAME"] == name
    assert_grammars(outcome, objs)
    assert_no_template_injection(outcome, [name])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(image=st.one_of(hostile, st.sampled_from(["r.example.com/a/b:1", "r/x@sha256:" + "e" * 64])))
def test_images_are_kept_or_refused(project: Path, image: str) -> None:
    outcome = compile_work(project, work={"name": "work", "image": image})
    valid = bool(image) and len(image) <= names.IMAGE_REF_MAX and names.IMAGE_REF.match(image)
    if not valid:
        assert isinstance(outcome, VfError) and outcome.code == "VF_GRAPH_IMAGE"
        return
    assert not isinstance(outcome, VfError), outcome.render()
    workers = [
        c["image"]
        for o in objects(outcome)
        if o["kind"] in {"Job", "Deployment", "StatefulSet"}
        for c in o["spec"]["template"]["spec"]["containers"]
    ]
    assert image in workers


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key=hostile, flow_id=st.one_of(hostile, st.from_regex(names.FLOW_ID)))
def test_partition_keys_and_flow_ids_are_kept_or_refused(
    project: Path, key: str, flow_id: str
) -> None:
    outcome = compile_work(
        project, work={"name": "work", "nb_tasks": 2, "partition_by": key}, flow_id=flow_id
    )
    if not names.PARTITION_KEY.match(key) or not names.FLOW_ID.match(flow_id):
        assert isinstance(outcome, VfError)
        assert_named_failure(outcome)
        return
    assert not isinstance(outcome, VfError), outcome.render()
    objs = objects(outcome)
    env = work_env(objs)
    assert env["VF_PARTITION_BY"] == key and env["VF_FLOW_ID"] == flow_id
    assert_grammars(outcome, objs)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(namespace=hostile)
def test_namespaces_are_kept_or_refused(project: Path, namespace: str) -> None:
    outcome = compile_work(project, work={"name": "work"}, namespace=namespace)
    if isinstance(outcome, VfError):
        assert_named_failure(outcome)
        assert not re.fullmatch(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?", namespace)
        return
    overlay = documents(outcome)["overlays/dev/kustomization.yaml"][0]
    assert overlay["namespace"] == namespace


def test_the_writer_refuses_text_utf8_cannot_encode(tmp_path: Path) -> None:
    out = tmp_path / "deploy"
    write_tree(out, {"a.yaml": "a: 1\n"})
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    with pytest.raises(VfError) as info:
        write_tree(out, {"a.yaml": "a: 2\n", "plan/dev.json": '{"url": "nats://a\ud800"}\n'})
    assert info.value.code == "VF_OUTPUT_TEXT" and info.value.exit_code == 2
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert not list(tmp_path.glob(".deploy.vf-new-*"))
