"""The neighbour check of ``vf compile``: it reads nothing it should not (a FIFO, a link to
a device, JSON nested without end are warnings naming the file), and it refuses only real
collisions, the same flow in the same namespace of a cluster both trees name, wherever in
the repository the other tree is (ADR 0160)."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support import example_graph
from vf.cli import cli

VF = str(Path(sys.executable).with_name("vf"))
SOURCE = Path(example_graph("batch_pipeline")).parent


def _flow(
    tmp: Path, name: str, *, cluster: str | None = None, double: int = 1, flow: str = ""
) -> str:
    """A copy of examples/batch_pipeline; ``cluster`` names the cluster of every
    environment, ``double`` changes the dev plan."""
    folder = tmp / "src" / name
    shutil.copytree(SOURCE, folder)
    config = folder / "vf.yaml"
    text = config.read_text().replace("      double: 1\n", f"      double: {double}\n")
    if flow:
        text = text.replace("flow_id: batch-demo\n", f"flow_id: {flow}\n")
    if cluster is not None:
        for namespace in ("pipelines-dev", "pipelines"):
            line = f"    namespace: {namespace}\n"
            text = text.replace(line, f"{line}    cluster: {cluster}\n")
    config.write_text(text)
    return str(folder / "graph.py")


def _compile(graph: str, out: Path) -> tuple[int, str]:
    done = CliRunner().invoke(cli, ["compile", graph, "--out", str(out)])
    return done.exit_code, done.output


def _limited() -> None:  # the child may not take the machine's memory
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))


def _compile_apart(graph: str, out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``vf compile`` in its own process, under a memory cap and a time limit: a
    neighbour that hangs or eats memory fails the test instead of the machine."""
    return subprocess.run(
        [VF, "compile", graph, "--out", str(out), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        preexec_fn=_limited,
        env={**os.environ, "VF_DEBUG": ""},
    )


def _planted(parent: Path) -> Path:
    """A folder beside the output that looks like a vf tree."""
    tree = parent / "planted"
    (tree / "plan").mkdir(parents=True)
    (tree / ".vf-manifest.json").write_text('{"files": [], "generator": "vf"}\n')
    return tree


@pytest.mark.slow
def test_a_neighbour_that_cannot_be_read_is_a_warning_naming_it(tmp_path: Path) -> None:
    deploy = tmp_path / "deploy"
    tree = _planted(deploy)
    os.mkfifo(tree / "plan" / "fifo.json")
    (tree / "plan" / "lists.json").write_text("[" * 200_000)
    (tree / "plan" / "objects.json").write_text('{"a":' * 5_000)
    (tree / "plan" / "zero.json").symlink_to("/dev/zero")
    graph = example_graph("batch_pipeline")
    for args in ((), ("--check",)):
        done = _compile_apart(graph, deploy / "batch", *args)
        print(f"[unreadable neighbours {args}] exit {done.returncode}\n{done.stderr[-2000:]}")
        assert done.returncode in ((0,) if not args else (0, 1)), done.stderr
        assert "VF_INTERNAL" not in done.stderr
        for name, why in (
            ("fifo.json", "FIFO"),
            ("lists.json", "nested deeper"),
            ("objects.json", "nested deeper"),
            ("zero.json", "symbolic link"),
        ):
            warned = [line for line in done.stderr.splitlines() if name in line]
            assert warned and "warning[VF_FLOW_NEIGHBOUR]" in warned[0], name
            assert why in warned[0], (name, warned)


def test_the_quick_start_after_make_demo_compiles(tmp_path: Path) -> None:
    """make demo writes deploy/batch_pipeline; the README's Quick start then compiles the
    same flow into deploy/batch: a copy, a warning at most."""
    graph = example_graph("batch_pipeline")
    assert _compile(graph, tmp_path / "deploy" / "batch_pipeline")[0] == 0
    code, output = _compile(graph, tmp_path / "deploy" / "batch")
    print(output)
    assert code == 0, output
    assert "VF_FLOW_COLLISION" not in output and "is a copy of this plan" in output


def test_two_trees_of_one_flow_for_named_clusters_are_not_refused(tmp_path: Path) -> None:
    """deploy/us and deploy/eu: the same flow, environment names and namespaces, different
    plans, for clusters each vf.yaml names: nothing to say."""
    us = _flow(tmp_path, "us", cluster="us-east", double=1)
    eu = _flow(tmp_path, "eu", cluster="eu-west", double=2)
    assert _compile(us, tmp_path / "deploy" / "us")[0] == 0
    code, output = _compile(eu, tmp_path / "deploy" / "eu")
    print(output)
    assert code == 0 and "VF_FLOW" not in output, output


def test_two_trees_of_one_flow_for_unnamed_clusters_are_a_warning(tmp_path: Path) -> None:
    a, b = _flow(tmp_path, "a", double=1), _flow(tmp_path, "b", double=2)
    assert _compile(a, tmp_path / "out-a")[0] == 0
    code, output = _compile(b, tmp_path / "out-b")
    print(output)
    assert code == 0 and "VF_FLOW_COLLISION" not in output, output
    assert "neither tree says which cluster" in output and "environments.<env>.cluster" in output


@pytest.mark.parametrize("where", ["other/b", "x/y/out-c"])
def test_a_real_collision_anywhere_in_the_repository_is_refused(tmp_path: Path, where: str) -> None:
    """The same flow, a different plan, the same namespace of the cluster both name: refused,
    whether the other tree is a sibling or elsewhere in the git work tree."""
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    first = _flow(tmp_path, "first", cluster="prod", double=1)
    second = _flow(tmp_path, "second", cluster="prod", double=2)
    assert _compile(first, repo / "deploy" / "a")[0] == 0
    code, output = _compile(second, repo / where)
    print(output)
    assert code == 2 and "error[VF_FLOW_COLLISION]" in output, output
    assert "deploy/a/plan/dev.json" in output and not (repo / where).exists()


def test_trees_found_through_the_gitops_path_layout(tmp_path: Path) -> None:
    """Outside a git work tree, gitops.path (deploy/batch) says where the repository's root
    is: a tree in another folder of it is compared."""
    repo = tmp_path / "checkout"
    first = _flow(tmp_path, "first", cluster="prod", double=1)
    second = _flow(tmp_path, "second", cluster="prod", double=2)
    assert _compile(first, repo / "elsewhere" / "old")[0] == 0
    code, output = _compile(second, repo / "deploy" / "batch")
    assert code == 2 and "error[VF_FLOW_COLLISION]" in output, output


def test_two_flows_labelling_one_namespace_of_one_cluster_are_refused(tmp_path: Path) -> None:
    """prod of both flows labels namespace 'pipelines' for Pod Security: one Namespace
    object, two owners, in the cluster both name."""
    first = _flow(tmp_path, "first", cluster="prod")
    second = _flow(tmp_path, "second", cluster="prod", flow="batch-other")
    assert _compile(first, tmp_path / "deploy" / "a")[0] == 0
    code, output = _compile(second, tmp_path / "deploy" / "b")
    print(output)
    assert code == 2 and "error[VF_FLOW_COLLISION]" in output
    assert "labelled by two flows" in output and "environment 'prod'" in output
