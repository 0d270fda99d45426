"""Native components: descriptor and params validation, planning, rendering, run-local refusal."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.support import REPO
from vf.cli import cli
from vf.commands.run_local.command import RunLocalRequest, run_local
from vf.errors import EXIT_ENVIRONMENT, EXIT_USER, VfError
from vf.pipeline import CompileRequest, CompileResult, compile_project

CONFIG = "environments:\n  dev:\n    images:\n      default: registry.example.com/t/app:1\n"

DESCRIPTOR: dict[str, Any] = {
    "apiVersion": "vf.dev/component/v1",
    "name": "upper",
    "kind": "processor",
    "image": "registry.example.com/t/upper:2",
    "command": ["upper", "--serve"],
    "ports": [{"name": "metrics", "port": 9100}],
    "params": {
        "type": "object",
        "properties": {"suffix": {"type": "string"}, "width": {"type": "integer"}},
        "required": ["suffix"],
        "additionalProperties": False,
    },
    "resources": {"cpu": "250m", "memory": "1Gi"},
    "runtime": {"localCommand": ["{python}", "upper.py"]},
}

GRAPH = """\
from typing import Any

from vf import BATCH, Consumer, Flow, Producer, component


class Src(Producer):
    def next(self) -> Any:
        raise StopIteration


class Sink(Consumer):
    def consume(self, item: Any) -> None:
        pass


def build_flow() -> Flow:
    source = Src()
    middle = component({ref!r}, {args})(source)
    return Flow([Sink()(middle)], flow_type=BATCH)
"""
CALL_LINE = 18  # the line of the component(...) call in GRAPH


def _project(
    tmp_path: Path,
    descriptor: dict[str, Any] | str | None = None,
    *,
    args: str = "params={'suffix': '!'}",
    ref: str = "comp/component.yaml",
    config: str = CONFIG,
) -> Path:
    folder = tmp_path / "comp"
    folder.mkdir(parents=True, exist_ok=True)
    body = DESCRIPTOR if descriptor is None else descriptor
    text = body if isinstance(body, str) else json.dumps(body)  # JSON is YAML
    (folder / "component.yaml").write_text(text, encoding="utf-8")
    graph = tmp_path / "graph.py"
    graph.write_text(GRAPH.format(ref=ref, args=args), encoding="utf-8")
    (tmp_path / "vf.yaml").write_text(config, encoding="utf-8")
    return graph


def _compile(graph: Path) -> CompileResult:
    return compile_project(CompileRequest(graph=str(graph)))


def _error(graph: Path) -> VfError:
    with pytest.raises(VfError) as caught:
        _compile(graph)
    return caught.value


def _with(**changes: Any) -> dict[str, Any]:
    document = json.loads(json.dumps(DESCRIPTOR))
    for key, value in changes.items():
        if value is None:
            document.pop(key, None)
        else:
            document[key] = value
    return document


def _workload(result: CompileResult, node: str) -> Any:
    return next(w for w in result.plans[0].workloads if w.node == node)


def _object(result: CompileResult, kind: str, node: str) -> dict[str, Any]:
    return next(
        o
        for o in result.objects["dev"]
        if o["kind"] == kind and o["metadata"]["labels"].get("vf.dev/node") == node
    )


# --- what a valid component becomes ---------------------------------------------------------


def test_component_renders_its_image_command_ports_and_ref(tmp_path: Path) -> None:
    result = _compile(_project(tmp_path))
    workload = _workload(result, "upper")
    env = dict(workload.env)
    assert "VF_NODE_CLASS" not in env
    assert env["VF_COMPONENT_REF"].startswith("upper@sha256:")
    assert json.loads(env["VF_NODE_PARAMS_JSON"]) == {"suffix": "!"}
    assert env["VF_NODE_KIND"] == "processor"
    container = _object(result, "Job", "upper")["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "registry.example.com/t/upper:2"
    assert container["command"] == ["upper", "--serve"]
    assert {"name": "metrics", "containerPort": 9100, "protocol": "TCP"} in container["ports"]
    assert container["resources"]["requests"] == {"cpu": "250m", "memory": "1Gi"}
    plan = json.loads(result.tree["plan/dev.json"])
    entry = next(w for w in plan["workloads"] if w["node"] == "upper")
    assert entry["component"]["ref"] == env["VF_COMPONENT_REF"]
    python_node = next(w for w in plan["workloads"] if w["node"] == "sink")
    assert "component" not in python_node  # plans of Python nodes are unchanged


def test_the_ref_is_a_digest_of_the_descriptor_not_of_its_path(tmp_path: Path) -> None:
    first = _compile(_project(tmp_path / "a"))
    second = _compile(_project(tmp_path / "b"))
    assert first.tree == second.tree
    changed = _compile(_project(tmp_path / "c", _with(command=["upper", "--fast"])))
    ref = dict(_workload(first, "upper").env)["VF_COMPONENT_REF"]
    assert dict(_workload(changed, "upper").env)["VF_COMPONENT_REF"] != ref


def test_without_command_the_image_entrypoint_runs(tmp_path: Path) -> None:
    result = _compile(_project(tmp_path, _with(command=None, ports=None)))
    container = _object(result, "Job", "upper")["spec"]["template"]["spec"]["containers"][0]
    assert "command" not in container
    # only the health port every worker has (its liveness probe's), none of its own
    assert container["ports"] == [{"name": "health", "containerPort": 8080}]


def test_a_worker_job_has_a_liveness_probe(tmp_path: Path) -> None:
    """A Job's worker is probed on /healthz as a Deployment's is, so a replica whose node
    call ran past its bound (DELIV-12) fails its pod instead of holding its work; it has
    no readiness or startup probe (before: no probe at all)."""
    result = _compile(_project(tmp_path, _with(command=None, ports=None)))
    container = _object(result, "Job", "upper")["spec"]["template"]["spec"]["containers"][0]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert "readinessProbe" not in container and "startupProbe" not in container


def test_vf_yaml_overrides_image_and_node_resources(tmp_path: Path) -> None:
    config = (
        "environments:\n  dev:\n    images:\n      default: registry.example.com/t/app:1\n"
        "      overrides: {upper: registry.example.com/t/upper:3}\n"
        "    resources:\n      '*': {cpu: 50m, memory: 64Mi}\n      upper: {memory: 2Gi}\n"
    )
    result = _compile(_project(tmp_path, config=config))
    workload = _workload(result, "upper")
    assert workload.image == "registry.example.com/t/upper:3"
    # the node's own entry wins, then the descriptor, then '*'
    assert (workload.resources.cpu, workload.resources.memory) == ("250m", "2Gi")
    assert _workload(result, "sink").resources.cpu == "50m"


def test_graph_keywords_reach_the_node(tmp_path: Path) -> None:
    graph = _project(tmp_path, args="params={'suffix': '!'}, name='shout', nb_tasks=3")
    workload = _workload(_compile(graph), "shout")
    assert workload.replicas == 3


def test_gpu_resources_make_a_gpu_node(tmp_path: Path) -> None:
    document = _with(resources={"gpu": {"count": 2}})
    workload = _workload(_compile(_project(tmp_path, document)), "upper")
    assert (workload.device_type, workload.gpu_count) == ("gpu", 2)
    assert dict(workload.env)["VF_GPU_COUNT"] == "2"


def test_a_cached_component_is_found_by_name_and_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    (cache / "upper" / "1.2").mkdir(parents=True)
    (cache / "upper" / "1.2" / "component.yaml").write_text(json.dumps(DESCRIPTOR))
    monkeypatch.setenv("VF_COMPONENT_CACHE", str(cache))
    result = _compile(_project(tmp_path / "p", ref="upper:1.2"))
    assert _workload(result, "upper").image == "registry.example.com/t/upper:2"
    with pytest.raises(VfError) as caught:
        _compile(_project(tmp_path / "q", ref="upper:9.9"))
    assert caught.value.code == "VF_COMPONENT_NOT_FOUND"


def test_a_folder_ref_means_its_component_yaml(tmp_path: Path) -> None:
    result = _compile(_project(tmp_path, ref="comp/"))  # a bare name is a cached component
    assert _workload(result, "upper").node_kind == "processor"


# --- every bad descriptor, params or option is a named error at the graph line ---------------

BAD_DESCRIPTORS = [
    ("missing-kind", _with(kind=None), "VF_COMPONENT_DESCRIPTOR", "'kind' is a required"),
    ("bad-kind", _with(kind="sink"), "VF_COMPONENT_DESCRIPTOR", "$.kind"),
    ("bad-version", _with(apiVersion="v2"), "VF_COMPONENT_DESCRIPTOR", "$.apiVersion"),
    ("unknown-field", _with(replicas=3), "VF_COMPONENT_DESCRIPTOR", "replicas"),
    ("bad-image", _with(image="Not An Image"), "VF_COMPONENT_DESCRIPTOR", "$.image"),
    ("empty-command", _with(command=[]), "VF_COMPONENT_DESCRIPTOR", "$.command"),
    ("bad-quantity", _with(resources={"cpu": "lots"}), "VF_COMPONENT_DESCRIPTOR", "cpu"),
    ("finite-processor", _with(finite=False), "VF_COMPONENT_DESCRIPTOR", "finite"),
    ("not-a-mapping", "- just\n- a list\n", "VF_COMPONENT_DESCRIPTOR", "not a mapping"),
    ("yaml", "name: [unclosed\n", "VF_COMPONENT_YAML", "not valid YAML"),
    ("duplicate-key", "name: a\nname: b\n", "VF_COMPONENT_YAML", "not valid YAML"),
    (
        "gpu-consumer",
        _with(kind="consumer", resources={"gpu": {"count": 1}}),
        "VF_COMPONENT_GPU",
        "cannot claim GPUs",
    ),
    (
        "gpu-count-and-memory",
        _with(resources={"gpu": {"count": 2, "memoryGiB": 10}}),
        "VF_COMPONENT_GPU",
        "one device",
    ),
    ("health-port", _with(ports=[{"name": "web", "port": 8080}]), "VF_COMPONENT_PORT", "8080"),
    (
        "health-name",
        _with(ports=[{"name": "health", "port": 9000}]),
        "VF_COMPONENT_PORT",
        "health",
    ),
    (
        "duplicate-port",
        _with(ports=[{"name": "a", "port": 9000}, {"name": "b", "port": 9000}]),
        "VF_COMPONENT_PORT",
        "twice",
    ),
    (
        "params-schema",
        _with(params={"type": "objekt"}),
        "VF_COMPONENT_PARAMS_SCHEMA",
        "not a valid JSON Schema",
    ),
]


@pytest.mark.parametrize(
    ("document", "code", "fragment"),
    [case[1:] for case in BAD_DESCRIPTORS],
    ids=[case[0] for case in BAD_DESCRIPTORS],
)
def test_bad_descriptor_is_a_named_error_at_the_graph_line(
    tmp_path: Path, document: dict[str, Any] | str, code: str, fragment: str
) -> None:
    error = _error(_project(tmp_path, document))
    assert error.exit_code == EXIT_USER
    assert code in {p.code for p in error.problems}
    assert fragment in error.render()
    assert all(p.where.endswith(f"graph.py:{CALL_LINE}") for p in error.problems)


def test_every_schema_problem_of_a_descriptor_is_reported_at_once(tmp_path: Path) -> None:
    error = _error(_project(tmp_path, _with(kind="sink", image="BAD", ports=[{"name": "x"}])))
    assert len(error.problems) == 3


BAD_CALLS = [
    ("missing-param", "params={}", "VF_COMPONENT_PARAMS", "'suffix' is a required"),
    ("wrong-type", "params={'suffix': 3}", "VF_COMPONENT_PARAMS", "params.suffix"),
    ("extra-param", "params={'suffix': '', 'x': 1}", "VF_COMPONENT_PARAMS", "'x' was unexpected"),
    ("not-mapping", "params=[1, 2]", "VF_COMPONENT_PARAMS", "is not a mapping"),
    ("not-json", "params={'suffix': {1, 2}}", "VF_COMPONENT_PARAMS", "JSON-serializable"),
    ("gpu-option", "params={'suffix': ''}, gpu_count=2", "VF_COMPONENT_OPTION", "gpu_count"),
    ("bad-option", "params={'suffix': ''}, idempotent=True", "VF_COMPONENT_OPTION", "idempotent"),
]


@pytest.mark.parametrize(
    ("args", "code", "fragment"),
    [case[1:] for case in BAD_CALLS],
    ids=[case[0] for case in BAD_CALLS],
)
def test_bad_params_or_options_are_named_errors_at_the_graph_line(
    tmp_path: Path, args: str, code: str, fragment: str
) -> None:
    error = _error(_project(tmp_path, args=args))
    assert error.exit_code == EXIT_USER
    assert error.code == code
    assert fragment in error.render()
    assert error.problems[0].where.endswith(f"graph.py:{CALL_LINE}")


def test_params_without_a_params_schema_are_refused(tmp_path: Path) -> None:
    error = _error(_project(tmp_path, _with(params=None)))
    assert error.code == "VF_COMPONENT_PARAMS"
    assert "declares no params" in error.render()


@pytest.mark.parametrize(
    ("ref", "code"),
    [
        ("missing/component.yaml", "VF_COMPONENT_NOT_FOUND"),
        ("nothing-cached", "VF_COMPONENT_NOT_FOUND"),
        ("oci://registry.example.com/c/upper:1", "VF_COMPONENT_REF"),
        ("", "VF_COMPONENT_REF"),
    ],
)
def test_unresolvable_refs_are_named_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ref: str, code: str
) -> None:
    monkeypatch.setenv("VF_COMPONENT_CACHE", str(tmp_path / "empty-cache"))
    error = _error(_project(tmp_path, ref=ref))
    assert error.code == code
    assert error.problems[0].where.endswith(f"graph.py:{CALL_LINE}")


def test_the_cli_exits_2_with_the_graph_line(tmp_path: Path) -> None:
    graph = _project(tmp_path, args="params={'suffix': 3}")
    result = CliRunner().invoke(cli, ["validate", str(graph)])
    assert result.exit_code == EXIT_USER
    assert "error[VF_COMPONENT_PARAMS]" in result.output
    assert f"graph.py:{CALL_LINE}" in result.output


# --- vf run-local ---------------------------------------------------------------------------


def test_run_local_refuses_a_component_without_a_local_command(tmp_path: Path) -> None:
    graph = _project(tmp_path, _with(runtime=None))
    with pytest.raises(VfError) as caught:
        run_local(RunLocalRequest(graph=str(graph), nats_url="nats://127.0.0.1:1"))
    assert caught.value.code == "VF_LOCAL_COMPONENT_IMAGE"
    assert caught.value.exit_code == EXIT_ENVIRONMENT
    assert "cannot start on this machine" in caught.value.render()


def test_run_local_refuses_a_local_command_that_is_not_there(tmp_path: Path) -> None:
    graph = _project(tmp_path, _with(runtime={"localCommand": ["bin/not-built-yet"]}))
    result = CliRunner().invoke(cli, ["run-local", str(graph), "--nats", "nats://127.0.0.1:1"])
    assert result.exit_code == EXIT_ENVIRONMENT
    assert "error[VF_LOCAL_COMPONENT_COMMAND]" in result.output


def test_local_command_placeholders_resolve_against_the_descriptor(tmp_path: Path) -> None:
    import sys

    from vf.frontend.component_descriptor import local_command

    graph = _project(tmp_path, _with(runtime={"localCommand": ["{python}", "{dir}/x.py", "a"]}))
    spec = _compile(graph).graph.node("upper").component
    assert spec is not None
    folder = str((tmp_path / "comp").resolve())
    assert local_command(spec) == (sys.executable, f"{folder}/x.py", "a")
    relative = _compile(
        _project(tmp_path / "r", _with(runtime={"localCommand": ["bin/tool", "--x"]}))
    ).graph.node("upper")
    assert relative.component is not None
    assert local_command(relative.component) == (
        str((tmp_path / "r" / "comp").resolve() / "bin" / "tool"),
        "--x",
    )


def test_docs_example_descriptor_is_valid() -> None:
    """The descriptor shown in docs/components.md passes the schema."""
    from vf.frontend.component_descriptor import check_descriptor

    text = (REPO / "docs" / "components.md").read_text()
    block = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    from ruamel.yaml import YAML

    document = json.loads(json.dumps(YAML(typ="safe").load(textwrap.dedent(block))))
    assert check_descriptor(document, label="docs", where="docs") == []


def test_an_oversized_descriptor_is_refused(tmp_path: Path) -> None:
    padding = "# " + "x" * 1024 + "\n"
    error = _error(_project(tmp_path, json.dumps(DESCRIPTOR) + "\n" + padding * 1100))
    assert error.code == "VF_COMPONENT_DESCRIPTOR"
    assert "larger than 1 MiB" in error.render()


def test_an_empty_descriptor_is_refused(tmp_path: Path) -> None:
    assert _error(_project(tmp_path, "")).code == "VF_COMPONENT_DESCRIPTOR"


def test_one_component_used_twice_needs_names(tmp_path: Path) -> None:
    graph = _project(tmp_path)
    text = graph.read_text().replace(
        "    return Flow([Sink()(middle)], flow_type=BATCH)",
        "    again = component('comp/component.yaml', params={'suffix': '?'})(source)\n"
        "    return Flow([Sink(name='a')(middle), Sink(name='b')(again)], flow_type=BATCH)",
    )
    graph.write_text(text)
    assert "VF_GRAPH_DUPLICATE_NAME" in {p.code for p in _error(graph).problems}
    graph.write_text(text.replace("params={'suffix': '?'})", "params={'suffix': '?'}, name='u2')"))
    assert {w.node for w in _compile(graph).plans[0].workloads} >= {"upper", "u2"}


def test_without_an_image_the_environments_image_applies(tmp_path: Path) -> None:
    workload = _workload(_compile(_project(tmp_path, _with(image=None))), "upper")
    assert workload.image == "registry.example.com/t/app:1"


def test_a_live_producer_component_runs_as_a_deployment(tmp_path: Path) -> None:
    live = {
        "apiVersion": "vf.dev/component/v1",
        "name": "camera",
        "kind": "producer",
        "finite": False,
        "image": "registry.example.com/t/camera:1",
    }
    folder = tmp_path / "cam"
    folder.mkdir()
    (folder / "component.yaml").write_text(json.dumps(live))
    (tmp_path / "graph.py").write_text(
        "from typing import Any\n\n"
        "from vf import REALTIME, Consumer, Flow, component\n\n\n"
        "class Sink(Consumer):\n"
        "    def consume(self, item: Any) -> None:\n"
        "        pass\n\n\n"
        "def build_flow() -> Flow:\n"
        "    source = component('cam/component.yaml')\n"
        "    return Flow([Sink(idempotent=True)(source)], flow_type=REALTIME)\n"
    )
    (tmp_path / "vf.yaml").write_text(CONFIG)
    workload = _workload(_compile(tmp_path / "graph.py"), "camera")
    assert (workload.kind, workload.node_kind) == ("Deployment", "producer")
    assert dict(workload.env)["VF_PARENT_NAMES"] == ""
