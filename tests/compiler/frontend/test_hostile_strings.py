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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from tests.compiler.frontend.test_fuzz_graph import assert_named_failure
from vf import names
from vf.errors import VfError
from vf.frontend.lower import BASE_KEYWORDS
from vf.pipeline import CompileRequest, CompileResult, compile_project
from vf.tree.write import write_tree

pytestmark = pytest.mark.slow  # real servers, renders or long runs: make test-fast skips it

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
VALID = ["work", "hostile", "ns", "r.example.com/a/b:1", "trace_id", "a.b"]
# Valid values with a line break or blank after them: Python's ``$`` matches before a
# final newline, so a validator written with it would let every one of these through.
TRAILING = [v + end for v in VALID for end in ("\n", "\r\n", "\n\n", " ", "\t")]
hostile = st.one_of(st.sampled_from(PAYLOADS + TRAILING), st.text(max_size=40))

# The oracles below spell the grammars out character by character, with no regular
# expression, so that they cannot share a mistake with vf's own patterns.
LOWER_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")
ALNUM = LOWER_ALNUM | frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")


def grammar(text: str, *, ends: frozenset[str], inner: frozenset[str], most: int) -> bool:
    """``text`` is 1..most characters, begins and ends in ``ends``, holds only ``inner``."""
    return (
        0 < len(text) <= most
        and text[0] in ends
        and text[-1] in ends
        and all(c in inner for c in text)
    )


def is_label_value(text: str) -> bool:
    return text == "" or grammar(text, ends=ALNUM, inner=ALNUM | set("-_."), most=63)


def is_dns_label(text: str) -> bool:
    return grammar(text, ends=LOWER_ALNUM, inner=LOWER_ALNUM | {"-"}, most=63)


def is_dns_subdomain(text: str) -> bool:
    return len(text) <= 253 and all(is_dns_label(part) for part in text.split("."))


def is_nats_token(text: str) -> bool:
    return bool(text) and all(c in ALNUM | {"_", "-"} for c in text)


def is_node_name(text: str) -> bool:
    return grammar(text, ends=ALNUM, inner=ALNUM | set("_.-"), most=128)


def is_flow_id(text: str) -> bool:
    return grammar(text, ends=LOWER_ALNUM, inner=LOWER_ALNUM | {"-"}, most=32)


def is_partition_key(text: str) -> bool:
    inner = ALNUM | set("_.:/-")
    return 0 < len(text) <= 253 and (text[0] in ALNUM | {"_"}) and all(c in inner for c in text)


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
    """The Work node's variables, as its workload's container env holds them."""
    envs = [
        {entry["name"]: entry["value"] for entry in container.get("env") or [] if "value" in entry}
        for o in objs
        if o["kind"] in {"Job", "Deployment", "StatefulSet"}
        for container in o["spec"]["template"]["spec"]["containers"]
    ]
    found = [env for env in envs if env.get("VF_NODE_KIND") == "processor"]
    assert len(found) == 1
    data = found[0]
    assert all(key.startswith("VF_") for key in data)
    return data


def assert_grammars(result: CompileResult, objs: list[dict[str, Any]]) -> None:
    for obj in objs:
        meta = obj["metadata"]
        assert len(meta["name"]) <= names.K8S_NAME_MAX and is_dns_subdomain(meta["name"])
        for key, value in (meta.get("labels") or {}).items():
            assert isinstance(value, str) and is_label_value(value), key
    for plan in result.plans:
        for channel in plan.channels:
            assert is_nats_token(channel.stream)
            assert all(is_nats_token(token) for token in channel.subject.split("."))


def assert_no_template_injection(result: CompileResult, strings: list[str]) -> None:
    actions = [s for s in strings if "{{" in s]
    for path, text in result.tree.items():
        if "/templates/" in path:
            assert not any(action in text for action in actions), path


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    params=st.dictionaries(
        hostile.filter(lambda k: k not in BASE_KEYWORDS),
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
    if not is_node_name(name) or name in {"source", "sink"}:
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
    assert image.isascii() and not any(c.isspace() or not c.isprintable() for c in image)
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
    if not is_partition_key(key) or not is_flow_id(flow_id):
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
        assert not is_dns_label(namespace)
        return
    assert is_dns_label(namespace), f"{namespace!r} was accepted"
    namespaced = [o for o in objects(outcome) if o["kind"] not in ("Namespace", "Kustomization")]
    assert namespaced
    assert {o["metadata"].get("namespace") for o in namespaced} == {namespace}


def test_the_writer_refuses_text_utf8_cannot_encode(tmp_path: Path) -> None:
    out = tmp_path / "deploy"
    write_tree(out, {"a.yaml": "a: 1\n"})
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    with pytest.raises(VfError) as info:
        write_tree(out, {"a.yaml": "a: 2\n", "plan/dev.json": '{"url": "nats://a\ud800"}\n'})
    assert info.value.code == "VF_OUTPUT_TEXT" and info.value.exit_code == 2
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert not list(tmp_path.glob(".deploy.vf-new-*"))


@pytest.mark.parametrize("nb_tasks", [1001, 100_001, 10**9, 2**63])
def test_nb_tasks_beyond_what_a_cluster_runs_is_refused(project: Path, nb_tasks: int) -> None:
    outcome = compile_work(project, work={"name": "work", "nb_tasks": nb_tasks})
    assert isinstance(outcome, VfError), f"nb_tasks={nb_tasks} compiled"
    assert outcome.code == "VF_GRAPH_NB_TASKS", outcome.render()


def test_the_most_nb_tasks_still_compiles(project: Path) -> None:
    outcome = compile_work(project, work={"name": "work", "nb_tasks": 1000})
    assert not isinstance(outcome, VfError), outcome.render()
