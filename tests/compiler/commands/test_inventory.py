"""``vf inventory`` against a fake ``kubectl`` replaying recorded listings (tests/fixtures)."""

from __future__ import annotations

import json
import os
import stat
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from ruamel.yaml import YAML

from tests.support import REPO
from vf.cli import cli
from vf.config.targets import load_targets
from vf.errors import EXIT_ENVIRONMENT, EXIT_USER

FIXTURES = REPO / "tests" / "fixtures" / "kubectl"

FAKE_KUBECTL = """\
#!{python}
# Replays recorded kubectl answers; FAKE_KUBECTL_FAIL names listings that fail.
import json, os, sys
fixtures = {fixtures!r}
args = sys.argv[1:]
with open(os.environ["FAKE_KUBECTL_LOG"], "a") as log:
    log.write(json.dumps(args) + "\\n")
if args[:2] != ["--context", "lab"]:
    sys.stderr.write('error: context "%s" does not exist\\n' % args[1])
    sys.exit(1)
verb = args[2:4]
name = {{
    ("get", "nodes"): "nodes",
    ("get", "pods"): "pods",
    ("version", "-o"): "version",
    ("get", "deviceclasses.resource.k8s.io"): "deviceclasses",
}}[tuple(verb)]
failing = os.environ.get("FAKE_KUBECTL_FAIL", "").split(",")
errors = json.load(open(os.path.join(fixtures, "errors.json")))
for failure in failing:
    if failure == name or failure.startswith(name + "-"):
        sys.stderr.write(errors[failure] + "\\n")
        sys.exit(1)
sys.stdout.write(open(os.path.join(fixtures, name + ".json")).read())
"""


@pytest.fixture
def kubectl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake kubectl first on PATH; returns its invocation log."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "kubectl"
    fake.write_text(FAKE_KUBECTL.format(python=sys.executable, fixtures=str(FIXTURES)))
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    log = tmp_path / "kubectl.log"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_KUBECTL_LOG", str(log))
    monkeypatch.delenv("FAKE_KUBECTL_FAIL", raising=False)
    return log


def _invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, ["inventory", "--context", "lab", *args])


def _write(path: Path, *, environment: str = "lab") -> Result:
    return _invoke("--out", str(path), "--env", environment)


def _env(path: Path, name: str = "lab") -> dict[str, Any]:
    document = YAML(typ="safe").load(path.read_text())
    env: dict[str, Any] = document["environments"][name]
    return env


def _nodes(path: Path) -> dict[str, dict[str, Any]]:
    return {n["name"]: n for n in _env(path)["gpu"]["inventory"]}


USER_CONFIG = textwrap.dedent(
    """\
    # the pipeline's targets; maintained by hand
    flow_id: cameras
    environments:
      dev:
        namespace: cams-dev   # small
      lab:
        namespace: cams-lab
        kubernetes_version: "1.31"
        images:
          default: registry.example.com/cams:1
        gpu:
          mode: mix          # MIG slices for sharers
          runtime_class: nvidia
    """
)


def test_every_node_shape_becomes_the_right_inventory_entry(tmp_path: Path, kubectl: Path) -> None:
    config = tmp_path / "vf.yaml"
    config.write_text(USER_CONFIG)
    result = _write(config)
    assert result.exit_code == 0, result.output
    nodes = _nodes(config)
    assert sorted(nodes) == ["gpu-a100-1", "gpu-dra-1", "gpu-h100-mig", "gpu-t4-shared"]
    a100 = nodes["gpu-a100-1"]
    assert (a100["product"], a100["cards"], a100["memory_gib"], a100["sharing"]) == (
        "NVIDIA-A100-SXM4-80GB",
        4,
        80,
        "physical",
    )
    assert a100["allocatable"] == {"nvidia.com/gpu": 4}
    # Running and Pending pods hold units; the Succeeded one does not
    assert a100["in_use"] == {"nvidia.com/gpu": 3}
    assert a100["labels"]["nvidia.com/mig.strategy"] == "mixed"
    assert "feature.node.kubernetes.io/pci-10de.present" not in a100["labels"]
    shared = nodes["gpu-t4-shared"]
    assert (shared["sharing"], shared["cards"], shared["in_use"]) == (
        "time-sliced",
        2,
        {"nvidia.com/gpu": 2},
    )
    mig = nodes["gpu-h100-mig"]
    assert mig["sharing"] == "mig" and mig["memory_gib"] == 79.6
    assert mig["mig_devices"] == {"1g.10gb": 4, "2g.20gb": 2, "3g.40gb": 2}
    assert mig["in_use"] == {"nvidia.com/mig-1g.10gb": 2}
    dra = nodes["gpu-dra-1"]
    assert (dra["sharing"], dra["allocatable"], dra["in_use"]) == ("dra-owned", {}, {})
    assert "gpu-unlabelled" in result.output and "not recorded" in result.output


def test_version_and_device_classes_are_recorded(tmp_path: Path, kubectl: Path) -> None:
    config = tmp_path / "vf.yaml"
    config.write_text(USER_CONFIG)
    assert _write(config).exit_code == 0
    env = _env(config)
    assert env["kubernetes_version"] == "1.34"  # from minor "34+"
    assert env["gpu"]["device_classes"] == ["gpu.nvidia.com", "mig.nvidia.com"]


def test_merging_keeps_every_other_key_and_the_users_comments(
    tmp_path: Path, kubectl: Path
) -> None:
    config = tmp_path / "vf.yaml"
    config.write_text(USER_CONFIG)
    assert _write(config).exit_code == 0
    text = config.read_text()
    for kept in ("# the pipeline's targets", "namespace: cams-dev   # small", "# MIG slices"):
        assert kept in text
    env = _env(config)
    assert env["gpu"]["mode"] == "mix" and env["gpu"]["runtime_class"] == "nvidia"
    assert env["images"] == {"default": "registry.example.com/cams:1"}
    assert _env(config, "dev") == {"namespace": "cams-dev"}
    assert load_targets(config).environments[1].gpu.inventory is not None
    again = config.read_text()
    assert _write(config).exit_code == 0
    assert config.read_text() == again  # re-reading the same cluster changes nothing


def test_a_failed_pod_listing_is_unknown_never_empty(
    tmp_path: Path, kubectl: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_KUBECTL_FAIL", "pods")
    config = tmp_path / "vf.yaml"
    config.write_text(USER_CONFIG)
    result = _write(config)
    assert result.exit_code == 0, result.output
    assert "warning: GPU units held by running pods: unknown" in result.output
    assert "forbidden" in result.output
    for node in _nodes(config).values():
        assert node["in_use"] == "unknown"
    assert "in_use: unknown  # vf inventory: kubectl get pods failed" in config.read_text()
    monkeypatch.delenv("FAKE_KUBECTL_FAIL")
    assert _write(config).exit_code == 0
    assert "in_use: unknown" not in config.read_text()  # a later good read replaces it


def test_failed_version_and_device_class_listings_are_unknown(
    tmp_path: Path, kubectl: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_KUBECTL_FAIL", "version,deviceclasses")
    config = tmp_path / "vf.yaml"
    config.write_text(USER_CONFIG)
    result = _write(config)
    assert result.exit_code == 0, result.output
    env = _env(config)
    assert env["kubernetes_version"] == "1.31"  # kept, not guessed
    assert env["gpu"]["device_classes"] == "unknown"
    assert "gpu-dra-1" not in _nodes(config)  # DRA ownership cannot be told
    text = config.read_text()
    assert "# vf inventory: not updated (kubectl version -o failed" in text
    assert "Kubernetes version: unknown" in result.output
    assert "DeviceClasses: unknown" in result.output


def test_a_cluster_without_the_dra_api_serves_no_device_classes(
    tmp_path: Path, kubectl: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_KUBECTL_FAIL", "deviceclasses-absent")
    config = tmp_path / "vf.yaml"
    config.write_text(USER_CONFIG)
    result = _write(config)
    assert result.exit_code == 0, result.output
    assert _env(config)["gpu"]["device_classes"] == []
    assert "gpu-dra-1" not in _nodes(config)
    assert "node gpu-dra-1: has GPUs but advertises no GPU resource" in result.output


def test_a_failed_node_listing_writes_nothing_and_exits_3(
    tmp_path: Path, kubectl: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_KUBECTL_FAIL", "nodes")
    config = tmp_path / "vf.yaml"
    config.write_text(USER_CONFIG)
    result = _write(config)
    assert result.exit_code == EXIT_ENVIRONMENT
    assert "error[VF_INVENTORY_NODES]" in result.output
    assert config.read_text() == USER_CONFIG
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin", "kubectl.log", "vf.yaml"]


def test_only_read_only_commands_reach_the_cluster(tmp_path: Path, kubectl: Path) -> None:
    assert _invoke().exit_code == 0
    calls = [json.loads(line) for line in kubectl.read_text().splitlines()]
    assert {tuple(call[2:4]) for call in calls} == {
        ("get", "nodes"),
        ("get", "pods"),
        ("version", "-o"),
        ("get", "deviceclasses.resource.k8s.io"),
    }
    pods = next(call for call in calls if call[3] == "pods")
    assert "--all-namespaces" in pods


def test_without_out_the_fragment_is_printed(kubectl: Path) -> None:
    result = _invoke()
    assert result.exit_code == 0
    fragment = YAML(typ="safe").load(result.stdout)
    assert fragment["kubernetes_version"] == "1.34"
    assert len(fragment["gpu"]["inventory"]) == 4


def test_a_new_file_gets_the_environment(tmp_path: Path, kubectl: Path) -> None:
    config = tmp_path / "new.yaml"
    assert _write(config, environment="prod").exit_code == 0
    assert sorted(_env(config, "prod")) == ["gpu", "kubernetes_version"]


def test_out_without_env_is_refused(tmp_path: Path, kubectl: Path) -> None:
    result = _invoke("--out", str(tmp_path / "vf.yaml"))
    assert result.exit_code == EXIT_USER
    assert "error[VF_INVENTORY_ENV]" in result.output


def test_a_missing_kubectl_is_an_environment_error(tmp_path: Path) -> None:
    result = _invoke("--kubectl", str(tmp_path / "no-such-kubectl"))
    assert result.exit_code == EXIT_ENVIRONMENT
    assert "error[VF_INVENTORY_KUBECTL]" in result.output


def test_an_unknown_context_is_an_environment_error(kubectl: Path) -> None:
    result = CliRunner().invoke(cli, ["inventory", "--context", "nowhere"])
    assert result.exit_code == EXIT_ENVIRONMENT
    assert 'context \\"nowhere\\" does not exist' in result.output or "nowhere" in result.output
