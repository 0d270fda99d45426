"""vf.yaml: schema validation with suggestions and locations, environment selection."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.graph_sources import NODES
from vf.cli import cli
from vf.config.targets import load_targets

GRAPH = (
    NODES
    + """

def build_flow():
    return Flow([Sink()(Work()(Src()))])
"""
)


IMAGE = "environments:\n  dev:\n    images:\n      default: r.io/a:1\n"


def _validate(write_graph: Callable[..., Path], config: str) -> tuple[int, str]:
    graph = write_graph(GRAPH, config)
    result = CliRunner().invoke(cli, ["validate", str(graph)])
    return result.exit_code, result.output


def test_unknown_key_suggests_the_nearest(write_graph: Callable[..., Path]) -> None:
    config = "environments:\n  dev:\n    namespce: x\n    images:\n      default: reg.io/a:1\n"
    code, output = _validate(write_graph, config)
    assert code == 2
    assert "error[VF_CONFIG_UNKNOWN_KEY]" in output
    assert "did you mean 'namespace'" in output
    assert "vf.yaml:3" in output


@pytest.mark.parametrize(
    ("config", "code"),
    [
        ("environments:\n  dev:\n    replicas:\n      work: 0\n", "VF_CONFIG_SCHEMA"),
        ("environments:\n  dev:\n    replicas:\n      work: two\n", "VF_CONFIG_SCHEMA"),
        ("environments:\n  dev:\n    image_pull_policy: Sometimes\n", "VF_CONFIG_SCHEMA"),
        ("environments:\n  dev:\n    namespace: Bad_NS\n", "VF_CONFIG_SCHEMA"),
        ("environments:\n  Dev:\n    namespace: x\n", "VF_CONFIG_SCHEMA"),
        ("environments:\n  dev:\n    images:\n      default: 'UPPER:case'\n", "VF_CONFIG_SCHEMA"),
        (
            "environments:\n  dev:\n    resources:\n      work:\n        cpu: lots\n",
            "VF_CONFIG_SCHEMA",
        ),
        ("environments: {}\n", "VF_CONFIG_SCHEMA"),
        ("flow_id: x\nflow_id: y\n", "VF_CONFIG_SYNTAX"),
        ("environments: [\n", "VF_CONFIG_SYNTAX"),
        ("- a\n- b\n", "VF_CONFIG_SCHEMA"),
        (
            IMAGE + "    replicas:\n      ghost: 2\n",
            "VF_CONFIG_UNKNOWN_NODE",
        ),
        (
            IMAGE + "    replicas:\n      src: 2\n",
            "VF_CONFIG_REPLICAS",
        ),
    ],
)
def test_bad_configs_get_named_errors(
    config: str, code: str, write_graph: Callable[..., Path]
) -> None:
    exit_code, output = _validate(write_graph, config)
    assert exit_code == 2, output
    assert f"error[{code}]" in output
    assert "Traceback" not in output


NAMED = GRAPH.replace(
    "return Flow([Sink()(Work()(Src()))])", 'return Flow([Sink()(Work()(Src()))], flow_id="alpha")'
)


@pytest.mark.parametrize(
    ("in_config", "written"),
    [("alpha", "vf-alpha-"), (None, "vf-alpha-"), ("beta", None)],
)
def test_the_graph_and_vf_yaml_agree_on_the_flow_id(
    write_graph: Callable[..., Path], in_config: str | None, written: str | None
) -> None:
    config = IMAGE if in_config is None else f"flow_id: {in_config}\n{IMAGE}"
    graph = write_graph(NAMED, config)
    out = graph.parent / "deploy"
    result = CliRunner().invoke(cli, ["compile", str(graph), "--out", str(out)])
    if written is None:
        assert result.exit_code == 2
        assert "error[VF_CONFIG_FLOW_ID_CONFLICT]" in result.output
        assert "'beta'" in result.output and "'alpha'" in result.output
        assert "--> vf.yaml:1" in result.output
        assert not out.exists()
    else:
        assert result.exit_code == 0, result.output
        resources = out / "overlays" / "dev" / "resources"
        assert all(f.name.split("-", 1)[1].startswith(written) for f in resources.glob("job-*"))
        assert list(resources.glob("job-*"))


def test_without_a_config_there_is_one_default_environment() -> None:
    targets = load_targets(None)
    assert [env.name for env in targets.environments] == ["default"]
    assert targets.environments[0].namespace == "default"


def test_explicit_config_path(write_graph: Callable[..., Path], tmp_path: Path) -> None:
    graph = write_graph(GRAPH)
    config = tmp_path / "targets.yaml"
    config.write_text("environments:\n  edge:\n    images:\n      default: r.io/a:1\n")
    result = CliRunner().invoke(cli, ["validate", str(graph), "--config", str(config)])
    assert result.exit_code == 0, result.output
    missing = CliRunner().invoke(cli, ["validate", str(graph), "--config", str(tmp_path / "no")])
    assert missing.exit_code == 2
    assert "error[VF_CONFIG_NOT_FOUND]" in missing.output


def test_resources_fall_back_to_the_wildcard(write_graph: Callable[..., Path]) -> None:
    config = (
        "environments:\n  dev:\n    images:\n      default: r.io/a:1\n    resources:\n"
        "      '*':\n        cpu: 100m\n        memory: 64Mi\n      work:\n        cpu: 2\n"
    )
    graph = write_graph(GRAPH, config)
    result = CliRunner().invoke(cli, ["plan", str(graph)])
    assert result.exit_code == 0, result.output
    assert '"cpu": "2"' in result.output
    assert '"memory": "64Mi"' in result.output


RESOURCES = IMAGE + "    resources:\n"


@pytest.mark.parametrize(
    ("entries", "said", "line"),
    [
        (  # the node's own entry: 256Mi < 512Mi (units differ: 0.25Gi < 512Mi too)
            "      work:\n        memory: 512Mi\n        memory_limit: 256Mi\n",
            "node 'work': memory_limit 256Mi is below its memory request 512Mi "
            "(resources.work.memory)",
            6,
        ),
        (
            "      work:\n        memory: 1Gi\n        memory_limit: 0.5Gi\n",
            "node 'work': memory_limit 0.5Gi is below its memory request 1Gi",
            6,
        ),
        (  # a limit from '*', the request from the node's entry
            "      '*':\n        memory_limit: 100M\n      work:\n        memory: 128Mi\n",
            "node 'work': memory_limit 100M is below its memory request 128Mi "
            "(resources.work.memory)",
            6,
        ),
        (
            "      work:\n        cpu: '2'\n        cpu_limit: 1500m\n",
            "node 'work': cpu_limit 1500m is below its cpu request 2 (resources.work.cpu)",
            6,
        ),
        (
            "      work:\n        cpu: 0.5\n        cpu_limit: 499m\n",
            "node 'work': cpu_limit 499m is below its cpu request 0.5",
            6,
        ),
    ],
)
def test_a_limit_below_its_request_is_refused_by_name(
    write_graph: Callable[..., Path], entries: str, said: str, line: int
) -> None:
    """The API server refuses a pod whose limit is below its request; vf says so first."""
    code, output = _validate(write_graph, RESOURCES + entries)
    assert code == 2, output
    assert "error[VF_CONFIG_LIMIT_BELOW_REQUEST]" in output
    assert said in output
    assert f"vf.yaml:{line} (environment 'dev')" in output


def test_a_limit_below_the_default_request_names_where_the_request_is_set(
    write_graph: Callable[..., Path],
) -> None:
    config = (
        RESOURCES + "      work:\n        memory_limit: 32Mi\n"
        "    pods:\n      default_requests:\n        memory: 64Mi\n"
    )
    code, output = _validate(write_graph, config)
    assert code == 2, output
    assert (
        "memory_limit 32Mi is below its memory request 64Mi "
        "(the default request, pods.default_requests.memory)"
    ) in output


@pytest.mark.parametrize(
    "entry",
    [
        "memory: 512Mi\n        memory_limit: 512Mi",  # equal is what Guaranteed pods do
        "memory: 1Gi\n        memory_limit: 1024Mi",
        "memory: 1G\n        memory_limit: 1Gi",
        "cpu: 500m\n        cpu_limit: 0.5",
        "cpu_limit: 100m",  # no request of its own: vf's default request is 100m
    ],
)
def test_a_limit_at_or_above_its_request_compiles(
    write_graph: Callable[..., Path], entry: str
) -> None:
    code, output = _validate(write_graph, RESOURCES + f"      work:\n        {entry}\n")
    assert code == 0, output


def test_a_limit_is_held_to_vfs_default_request_unless_there_is_none(
    write_graph: Callable[..., Path],
) -> None:
    """With no request of its own a node gets vf's default (100m CPU); with the defaults
    turned off (``default_requests: null``) Kubernetes requests the limit itself."""
    entry = RESOURCES + "      work:\n        cpu_limit: 50m\n"
    code, output = _validate(write_graph, entry)
    assert code == 2, output
    assert "cpu_limit 50m is below its cpu request 100m (the default request" in output
    code, output = _validate(write_graph, entry + "    pods:\n      default_requests: null\n")
    assert code == 0, output
