"""A local run that cannot fit this machine is refused before anything starts, with its
numbers and the way out (ADR 0190); ``vf run-local`` without ``--env`` runs the first
environment vf.yaml lists and says so."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support import REPO, require
from vf.cli import cli
from vf.commands.run_local import command as run_local_command
from vf.errors import EnvironmentProblem
from vf.runtree.capacity import GIB, Demand, Host, check_fit, fit, pod_demand
from vf.runtree.tools import find_tool

FLOWS = REPO / "tests" / "runtree_flows"
SMALL = Host(cores=2, memory=8 * GIB)


def test_more_than_64_processes_a_core_or_than_the_memory_holds_is_refused() -> None:
    assert fit(Demand(processes=128), SMALL).refusals == ()
    crowded = fit(Demand(processes=1500), Host(cores=2, memory=64 * GIB))
    assert crowded.refusals == (
        "1500 worker processes on 2 CPU core(s), more than 64 a core (128 here): starting "
        "them alone would take tens of seconds to minutes",
    )
    assert len(fit(Demand(processes=129), SMALL).refusals) == 1
    many = Host(cores=64, memory=8 * GIB)
    assert fit(Demand(processes=310), many).refusals == ()
    assert fit(Demand(processes=311), many).refusals == (
        "311 worker processes need at least 8.0 GiB (an idle worker holds 26.4 MiB); this "
        "machine has 8.0 GiB available",
    )


def test_cpu_requests_and_memory_requests_or_limits_beyond_the_machine_are_warnings() -> None:
    judged = fit(Demand(processes=10, cpu=2.5, memory=9 * GIB, memory_limits=12 * GIB), SMALL)
    assert judged.refusals == ()
    assert judged.warnings == (
        "the CPU requests add up to 2.5 core(s); this machine has 2",
        "the memory requests add up to 9.0 GiB; this machine has 8.0 GiB available",
        "the memory limits add up to 12.0 GiB; this machine has 8.0 GiB available",
    )


def test_oversubscribe_starts_it_with_the_refusal_as_a_warning() -> None:
    out = io.StringIO()
    with pytest.raises(EnvironmentProblem) as refused:
        check_fit(
            Demand(processes=200), way_out="fewer", oversubscribe=False, warn=out.write, host=SMALL
        )
    assert refused.value.code == "VF_LOCAL_CAPACITY" and "fewer" in refused.value.problems[0].remedy
    assert out.getvalue() == ""
    check_fit(
        Demand(processes=200), way_out="fewer", oversubscribe=True, warn=out.write, host=SMALL
    )
    assert out.getvalue().startswith("[vf] warning: 200 worker processes on 2 CPU core(s)")


def test_the_containers_a_tree_runs_at_once_with_their_requests_and_limits() -> None:
    container = {"resources": {"requests": {"cpu": "250m", "memory": "256Mi"}}}
    limited = {"resources": {"limits": {"memory": "1Gi"}}}
    objects = [
        {
            "kind": "Deployment",
            "spec": {"replicas": 3, "template": {"spec": {"containers": [container, limited]}}},
        },
        {
            "kind": "Job",
            "spec": {
                "parallelism": 4,
                "completions": 2,
                "template": {"spec": {"containers": [container]}},
            },
        },
        {"kind": "StatefulSet", "spec": {"template": {"spec": {"containers": [container]}}}},
        {"kind": "ConfigMap", "data": {"replicas": "9"}},
    ]
    need = pod_demand(objects)
    assert need.processes == 3 * 2 + 2 + 1 and need.unit == "containers"
    assert need.cpu == pytest.approx(0.25 * (3 + 2 + 1))
    assert need.memory == pytest.approx((256 * (3 + 2 + 1) + 1024 * 3) * 2**20)
    assert need.memory_limits == pytest.approx(3 * GIB)


def _project(tmp_path: Path, replicas: int) -> Path:
    """The test BATCH flow with vf.yaml listing staging (too large) before production."""
    folder = tmp_path / "project"
    folder.mkdir()
    for name in ("batch.py", "tree_nodes.py"):
        shutil.copy(FLOWS / name, folder / name)
    env = "    images: {default: registry.example.com/vf/tree-tests:1}\n"
    (folder / "vf.yaml").write_text(
        "environments:\n"
        f"  staging:\n{env}    replicas: {{double: {replicas}}}\n"
        f"  production:\n{env}    replicas: {{double: 1}}\n"
    )
    return folder


def test_run_local_runs_the_first_environment_of_vf_yaml_and_refuses_what_cannot_fit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VF_TEST_OUT", str(tmp_path / "out.jsonl"))
    # Imported before the runner swaps sys.stderr, as in any process that ran a command
    # before: the notices still go to the stream of the call.
    assert run_local_command.RunLocalRequest
    replicas = 64 * Host.this_machine().cores + 1
    folder = _project(tmp_path, replicas)
    done = CliRunner().invoke(cli, ["run-local", str(folder / "batch.py")])
    print(done.output)
    assert "[vf] environment staging (the first in vf.yaml; --env production runs another)" in (
        done.output
    )
    assert done.exit_code == 3 and "error[VF_LOCAL_CAPACITY]" in done.output
    assert f"{replicas + 2} worker processes on {Host.this_machine().cores} CPU core(s)," in (
        done.output
    )
    assert "vf.yaml's replicas: of environment staging" in done.output
    assert "--oversubscribe" in done.output
    assert not (tmp_path / "out.jsonl").exists()


def test_run_tree_refuses_a_tree_that_cannot_fit_before_anything_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require(find_tool("kubectl") is not None, "kubectl is not installed (make setup)")
    monkeypatch.setenv("VF_TEST_OUT", "/results/out.jsonl")
    replicas = 64 * Host.this_machine().cores + 1
    folder = _project(tmp_path, replicas)
    tree = tmp_path / "tree"
    compiled = CliRunner().invoke(cli, ["compile", str(folder / "batch.py"), "--out", str(tree)])
    assert compiled.exit_code == 0, compiled.output
    run_dir = tmp_path / "run"
    argv = ["run-tree", str(tree), "--env", "staging", "--app", str(folder)]
    done = CliRunner().invoke(cli, [*argv, "--run-dir", str(run_dir)])
    print(done.output)
    assert done.exit_code == 3 and "error[VF_LOCAL_CAPACITY]" in done.output
    assert f"containers on {Host.this_machine().cores} CPU core(s)," in done.output
    assert "lower the replicas of environment staging" in done.output
    assert not run_dir.exists()
