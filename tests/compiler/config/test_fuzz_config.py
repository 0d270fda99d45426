"""Property-based fuzzing of ``vf.yaml``: every document compiles or fails by name.

Documents are schema-adjacent: a valid two-environment target with random mutations
(deleted keys, unknown keys, values of the wrong type, extreme numbers, unicode, huge
strings, odd environment names), plus raw text that is not YAML at all. The property:
the facade returns a tree, or raises a ``VfError`` with a code, a fix and exit code 2.
"""

from __future__ import annotations

import copy
import json
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.compiler.frontend.test_fuzz_graph import assert_named_failure, assert_valid_tree
from tests.support import REPO
from vf.errors import VfError
from vf.pipeline import CompileRequest, CompileResult, compile_project

GRAPH = '''"""A small fixed graph for the vf.yaml fuzz tests."""

from vf import BATCH, Consumer, Flow, Processor, Producer


class Numbers(Producer):
    def next(self):
        raise StopIteration


class Double(Processor):
    def process(self, *items):  # also the two-parent merge
        return items[0]


class Store(Consumer):
    def consume(self, item):
        pass


def build_flow():
    src = Numbers(name="numbers")
    left = Double(name="double", nb_tasks=2)(src)
    right = Double(name="triple")(src)
    merge = Double(name="merge", nb_tasks=2, partition_by="trace_id")(left, right)
    return Flow([Store(name="store")(merge)], flow_type=BATCH)
'''

DIGEST = "sha256:" + "c" * 64
BASE: dict[str, Any] = {
    "flow_id": "fuzzcfg",
    "environments": {
        "dev": {
            "namespace": "fuzz-dev",
            "kubernetes_version": "1.33",
            "images": {"default": "registry.example.com/fuzz/worker:1"},
            "replicas": {"double": 1},
            "resources": {"*": {"cpu": "100m", "memory": "128Mi"}},
            "broker": {"profile": "dev"},
            "payload_store": {"profile": "dev"},
        },
        "prod": {
            "namespace": "fuzz",
            "kubernetes_version": "1.34",
            "images": {
                "default": f"registry.example.com/fuzz/worker@{DIGEST}",
                "overrides": {"merge": "registry.example.com/fuzz/merge:2"},
            },
            "image_pull_policy": "Always",
            "replicas": {"double": 3, "merge": 2},
            "resources": {"merge": {"cpu": "1", "memory": "1Gi", "memory_limit": "2Gi"}},
            "priority_class": "pipelines-high",
            "broker": {"profile": "durable", "replicas": 3, "storage_size": "10Gi"},
            "payload_store": {"profile": "durable", "storage_class": "fast-ssd"},
            "requirements": {"tolerated_failures": 1, "profiles": {"merge": "reliable_work"}},
        },
    },
}

odd_text = st.one_of(
    st.text(max_size=30),
    st.sampled_from(
        [
            "",
            " ",
            "名前",
            "{{ .Values.x }}",
            "$(reboot)",
            "a\nb: c",
            "on",
            "0755",
            "1e3",
            "~",
            "- x",
            "x" * 70_000,
            "\u202e",
            "\x00",
        ]
    ),
)
wild_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.sampled_from([0, -1, 1, 2, 3, 9, 10, 64, 1000, 1001, 2**31, 2**63, 10**30, -(10**30)]),
        st.floats(),
        odd_text,
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(odd_text, inner, max_size=3)
    ),
    max_leaves=6,
)
ENV_KEYS = [
    "namespace", "kubernetes_version", "run_id", "images", "image_pull_policy", "replicas",
    "resources", "priority_class", "broker", "payload_store", "requirements", "gpu",
    "autoscaling", "mounts", "bogus",
]  # fmt: skip
BROKER_KEYS = [
    "profile", "replicas", "stream_replicas", "storage_class", "storage_size", "url",
    "url_secret", "capabilities", "image",
]  # fmt: skip


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            found.extend(_paths(value, (*prefix, key)))
    return found


def _at(document: dict[str, Any], path: tuple[Any, ...]) -> Any:
    node: Any = document
    for key in path:
        node = node[key]
    return node


@st.composite
def mutated_documents(draw: st.DrawFn) -> Any:
    """The base target with one to four mutations, each at a random place."""
    document = copy.deepcopy(BASE)
    for _ in range(draw(st.integers(1, 4))):
        paths = _paths(document)
        path = draw(st.sampled_from(paths))
        op = draw(st.sampled_from(["replace", "delete", "add", "rename", "known"]))
        if not path:
            return draw(st.one_of(wild_values, st.just(document)))
        parent = _at(document, path[:-1])
        if not isinstance(parent, dict) or path[-1] not in parent:
            continue
        if op == "replace":
            parent[path[-1]] = draw(wild_values)
        elif op == "delete":
            del parent[path[-1]]
        elif op == "rename":
            parent[draw(odd_text)] = parent.pop(path[-1])
        else:
            target = _at(document, path)
            keys = ENV_KEYS + BROKER_KEYS if op == "known" else []
            key = draw(st.sampled_from(keys)) if keys else draw(odd_text)
            if isinstance(target, dict):
                target[key] = draw(wild_values)
    return document


RAW_TEXTS = [
    "environments: [",
    "environments:\n  dev:\n    namespace: a\n    namespace: b\n",
    "\tenvironments: {}",
    "a: &x [*x]",
    "environments: !!python/object:os.system {}",
    "%YAML 9.9\n---\n{}",
    "--- a\n--- b\n",
    "\ufeffflow_id: bom",
    "environments:\n  dev: {images: {default: " + "x" * 100_000 + "}}",
    "\x00\x01\x02",
]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("fuzz-config")
    (root / "graph.py").write_text(GRAPH, encoding="utf-8")
    yield root


def compile_config(root: Path, text: str | bytes) -> CompileResult | VfError:
    path = root / "vf.yaml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        return compile_project(CompileRequest(graph=str(root / "graph.py")))
    except VfError as error:
        return error


def check(outcome: CompileResult | VfError) -> None:
    if isinstance(outcome, VfError):
        assert_named_failure(outcome)
    else:
        assert_valid_tree(outcome)


def test_deeply_nested_yaml_fails_by_name(project: Path) -> None:
    outcome = compile_config(project, "environments: " + "[" * 600 + "]" * 600)
    assert isinstance(outcome, VfError)
    assert_named_failure(outcome)


def test_escaped_surrogates_in_free_text_fail_by_name(project: Path) -> None:
    document = copy.deepcopy(BASE)
    document["environments"]["dev"]["mounts"] = {"*": ["/data\ud800"]}
    check(compile_config(project, json.dumps(document)))


def test_escaped_surrogates_in_service_urls_fail_by_name(project: Path) -> None:
    document = copy.deepcopy(BASE)
    document["environments"]["dev"]["broker"] = {"profile": "external", "url": "nats://a\ud800"}
    outcome = compile_config(project, json.dumps(document))
    assert isinstance(outcome, VfError)
    assert_named_failure(outcome)


def test_the_base_document_compiles(project: Path) -> None:
    outcome = compile_config(project, json.dumps(BASE))
    assert not isinstance(outcome, VfError), outcome.render()


@pytest.mark.slow
@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(document=mutated_documents())
def test_any_target_compiles_or_fails_by_name(project: Path, document: Any) -> None:
    check(compile_config(project, json.dumps(document)))


@pytest.mark.slow
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=st.one_of(
        st.sampled_from(RAW_TEXTS),
        st.text(max_size=200),
        st.binary(max_size=200),
    )
)
def test_any_text_compiles_or_fails_by_name(project: Path, text: str | bytes) -> None:
    check(compile_config(project, text))


# Scalars the YAML resolver takes for numbers, booleans or dates that its constructors
# then cannot build: each ended a load with a bare IndexError, ValueError or KeyError.
UNBUILDABLE_SCALARS = [
    "+_",
    "-_",
    "0x_",
    "0b_",
    "._",
    "!!int a",
    "!!float a",
    "!!bool a",
    "2001-13-45",
]


@pytest.mark.parametrize("scalar", UNBUILDABLE_SCALARS)
def test_an_unbuildable_scalar_is_a_syntax_error_at_its_line(project: Path, scalar: str) -> None:
    outcome = compile_config(project, f"environments:\n  dev:\n    namespace: {scalar}\n")
    assert isinstance(outcome, VfError)
    assert outcome.code == "VF_CONFIG_SYNTAX"
    problem = outcome.problems[0]
    assert problem.where.endswith("vf.yaml:3"), problem.where
    assert "quote it" in problem.what


@pytest.mark.parametrize("scalar", UNBUILDABLE_SCALARS)
def test_every_user_yaml_reader_reports_an_unbuildable_scalar_as_yaml(scalar: str) -> None:
    from ruamel.yaml.error import YAMLError

    from vf.textio.yaml_read import reader

    for typ in ("rt", "safe"):
        with pytest.raises(YAMLError, match="quote it"):
            list(reader(typ).load_all(f"a:\n  b: [1, {scalar}]\n"))


def _verdicts(document: Any) -> tuple[bool, bool]:
    """(jsonschema-rs finds no problem, jsonschema finds none) for one document."""
    from vf.config.targets import config_fast_validator, config_schema
    from vf.textio.patterns import validator as schema_validator
    from vf.textio.schema_check import accepts, json_values

    reference = schema_validator(config_schema())
    try:
        expected = not any(reference.iter_errors(document))
    except (TypeError, ValueError):
        expected = False  # vf reports these as VF_CONFIG_SCHEMA too
    return accepts(config_fast_validator(), json_values(document)), expected


def _string_places(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every string value of ``node``, and every key of a mapping below the top level."""
    found: list[tuple[Any, ...]] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if prefix:
                found.append(("key", *prefix, key))
            found.extend(_string_places(value, (*prefix, key)))
    elif isinstance(node, str):
        found.append(("value", *prefix))
    return found


TRAILERS = ["\n", "\r\n", "\n\n", " \n", "\r", "\t"]


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    place=st.sampled_from(_string_places(BASE)),
    trailer=st.sampled_from(TRAILERS),
)
def test_a_trailing_newline_is_refused_everywhere(
    project: Path, place: tuple[Any, ...], trailer: str
) -> None:
    """No name, version, image, quantity or key of vf.yaml may end in a line break."""
    document = copy.deepcopy(BASE)
    kind, *path = place
    parent = _at(document, tuple(path[:-1]))
    if kind == "key":
        parent[path[-1] + trailer] = parent.pop(path[-1])
    else:
        parent[path[-1]] += trailer
    outcome = compile_config(project, json.dumps(document))
    assert isinstance(outcome, VfError), f"{place} + {trailer!r} compiled"
    assert_named_failure(outcome)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(document=mutated_documents())
def test_the_config_check_agrees_with_jsonschema(document: Any) -> None:
    """vf.yaml is accepted without jsonschema only when jsonschema would accept it (ADR 218)."""
    fast, reference = _verdicts(json.loads(json.dumps(document)))
    assert fast == reference


def test_the_config_check_accepts_every_example() -> None:
    from vf.config.targets import read_yaml

    examples = sorted((REPO / "examples").glob("*/vf.yaml"))
    assert len(examples) >= 4
    for path in examples:
        assert _verdicts(read_yaml(path)) == (True, True), path


CREDENTIAL_KEYS = [
    "password", "pass", "passwd", "pwd", "token", "auth_token", "username", "user",
    "auth", "secret", "credentials", "jwt", "nkey", "seed", "api_key",
]  # fmt: skip


@st.composite
def disguised(draw: st.DrawFn, key: str) -> str:
    """``key`` with a random mix of upper case and percent escapes, maybe escaped twice."""
    chars = []
    for letter in key:
        char = letter.upper() if draw(st.booleans()) else letter
        if draw(st.integers(0, 3)) == 0:
            char = f"%{ord(char):02X}"
            if draw(st.booleans()):
                char = "%25" + char[1:]
        chars.append(char)
    return "".join(chars)


@pytest.mark.slow
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    key=st.sampled_from(CREDENTIAL_KEYS).flatmap(disguised),
    section=st.sampled_from(["broker", "payload_store"]),
    before=st.sampled_from(["", "db=1&", "a=b;"]),
)
def test_credentials_in_a_url_are_refused_however_spelled(
    project: Path, key: str, section: str, before: str
) -> None:
    scheme = "nats://n:4222" if section == "broker" else "redis://n:6379/0"
    document = copy.deepcopy(BASE)
    url = f"{scheme}?{before}{key}=hunter2"
    document["environments"]["dev"][section] = {"profile": "external", "url": url}
    outcome = compile_config(project, json.dumps(document))
    assert isinstance(outcome, VfError), f"{url} compiled"
    assert "carries credentials" in outcome.render() and "hunter2" not in outcome.render()


@pytest.mark.parametrize(
    "url",
    [
        "redis://us%65r%3Apw%40n:6379/0",
        "nats://tok%2540n:4222",
        "nats://a:4222,nats://u:p@b:4222",
    ],
)
def test_an_escaped_user_in_a_url_is_refused(project: Path, url: str) -> None:
    document = copy.deepcopy(BASE)
    section = "broker" if url.startswith("nats") else "payload_store"
    document["environments"]["dev"][section] = {"profile": "external", "url": url}
    outcome = compile_config(project, json.dumps(document))
    assert isinstance(outcome, VfError) and "carries credentials" in outcome.render()


@pytest.mark.parametrize(
    "url", ["redis://n:6379/0?db=1", "nats://a:4222,nats://b:4222", "rediss://n:6380/2"]
)
def test_a_plain_url_is_accepted(project: Path, url: str) -> None:
    document = copy.deepcopy(BASE)
    section = "broker" if url.startswith("nats") else "payload_store"
    document["environments"]["dev"][section] = {"profile": "external", "url": url}
    assert not isinstance(compile_config(project, json.dumps(document)), VfError)


@contextmanager
def within(seconds: float) -> Iterator[None]:
    """Fail the test, instead of hanging it, when the block runs longer than ``seconds``."""

    def expire(signum: int, frame: object) -> None:
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def alias_bomb(*, depth: int, fan: int, merge: bool, indent: str = "") -> str:
    """``depth`` levels of anchors, each repeating the one below ``fan`` times."""
    lines = [f'{indent}b0: &b0 {{"k": "{"x" * 8}"}}' if merge else f'{indent}b0: &b0 ["x"]']
    for level in range(1, depth):
        if merge:
            body = ", ".join(f"k{i}: *b{level - 1}" for i in range(fan))
            lines.append(f"{indent}b{level}: &b{level} {{{body}}}")
        else:
            lines.append(f"{indent}b{level}: &b{level} [{', '.join([f'*b{level - 1}'] * fan)}]")
    return "\n".join(lines) + "\n"


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    depth=st.integers(6, 10),
    fan=st.integers(6, 12),
    merge=st.booleans(),
    place=st.sampled_from(["top", "environment"]),
)
def test_an_alias_bomb_is_refused_quickly(
    project: Path, depth: int, fan: int, merge: bool, place: str
) -> None:
    if place == "top":
        text = "flow_id: bomb\n" + alias_bomb(depth=depth, fan=fan, merge=merge)
    else:
        bomb = alias_bomb(depth=depth, fan=fan, merge=merge, indent="      ")
        text = f"environments:\n  dev:\n    images: {{default: r.io/a:1}}\n    x:\n{bomb}"
    with within(10):
        outcome = compile_config(project, text)
    assert isinstance(outcome, VfError)
    assert outcome.code == "VF_CONFIG_ALIASES", outcome.render()


def test_a_recursive_alias_and_a_huge_file_are_refused(project: Path) -> None:
    with within(10):
        recursive = compile_config(project, "flow_id: a\nx: &x {y: *x}\n")
        huge = compile_config(project, "flow_id: big\n# " + "x" * (2 << 20) + "\n")
    assert isinstance(recursive, VfError) and isinstance(huge, VfError)
    assert_named_failure(recursive)
    assert huge.code == "VF_CONFIG_TOO_LARGE", huge.render()


def test_a_small_alias_still_compiles(project: Path) -> None:
    document = json.loads(json.dumps(BASE))
    text = json.dumps(document).replace(
        '"resources": {"*": {"cpu": "100m", "memory": "128Mi"}}',
        '"resources": {"*": &r {"cpu": "100m", "memory": "128Mi"}, "double": *r}',
    )
    assert "&r" in text
    check(compile_config(project, text))
    assert not isinstance(compile_config(project, text), VfError)


def test_a_component_descriptor_alias_bomb_is_refused_quickly(tmp_path: Path) -> None:
    from vf.frontend.components import component

    path = tmp_path / "component.yaml"
    path.write_text(
        "apiVersion: vf.dev/component/v1\nname: bomb\nkind: processor\n"
        "image: r.io/a:1\ncommand: [run]\n" + alias_bomb(depth=9, fan=10, merge=False),
        encoding="utf-8",
    )
    with within(10), pytest.raises(VfError) as caught:
        component(str(path))
    assert caught.value.code == "VF_COMPONENT_ALIASES", caught.value.render()


RESERVED = ["/", "//", "/tmp", "/tmp/", "//tmp", "/tmp/.", "/x/../tmp", "/etc/vf/topology/"]
BAD_CLAIMS = ["..", ".", "-a", "a-", "Data", "a..b", "a_b", "a" * 254]


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    mount=st.one_of(
        st.sampled_from(RESERVED).map(lambda p: f"/host/data:{p}"),
        st.sampled_from(RESERVED).map(lambda p: f"models:{p}"),
        st.sampled_from(RESERVED).filter(lambda p: p not in {"/", "//"}),
        st.sampled_from(BAD_CLAIMS).map(lambda c: f"{c}:/models"),
    ),
    read_only=st.booleans(),
    key=st.sampled_from(["*", "double"]),
)
def test_a_mount_no_pod_could_hold_is_refused(
    project: Path, mount: str, read_only: bool, key: str
) -> None:
    document = copy.deepcopy(BASE)
    entry = mount + (":ro" if read_only else "")
    document["environments"]["dev"]["mounts"] = {key: [entry]}
    outcome = compile_config(project, json.dumps(document))
    assert isinstance(outcome, VfError), f"mount {entry!r} compiled"
    assert_named_failure(outcome)


def test_a_mount_beside_vfs_own_still_compiles(project: Path) -> None:
    document = copy.deepcopy(BASE)
    document["environments"]["dev"]["mounts"] = {"*": ["/data:/tmp/cache:ro", "models:/models"]}
    assert not isinstance(compile_config(project, json.dumps(document)), VfError)


@pytest.mark.parametrize("trailer", TRAILERS)
def test_a_mount_with_a_trailing_newline_is_refused(project: Path, trailer: str) -> None:
    document = copy.deepcopy(BASE)
    document["environments"]["dev"]["mounts"] = {"*": ["/data:/models" + trailer]}
    outcome = compile_config(project, json.dumps(document))
    assert isinstance(outcome, VfError), f"mount with {trailer!r} compiled"
    assert_named_failure(outcome)
