"""The CLI driven in-process: plan, explain, validate, version, env selection, exit codes."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from tests.support import example_graph
from vf import __version__
from vf.cli import cli


def _invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def test_version() -> None:
    assert _invoke("--version") == (0, f"vf {__version__}\n")


def test_help_lists_the_commands() -> None:
    code, output = _invoke("--help")
    assert code == 0
    for command in ("compile", "plan", "explain", "validate"):
        assert command in output


def test_plan_json_for_one_environment() -> None:
    code, output = _invoke("plan", example_graph("batch_pipeline"), "--env", "prod")
    assert code == 0
    plan = json.loads(output)
    assert plan["environment"] == "prod"
    assert plan["version"] == "vf.plan/v1"
    merge = next(w for w in plan["workloads"] if w["node"] == "merge")
    assert merge["kind"] == "Job" and merge["indexed"] and merge["replicas"] == 2
    assert merge["env"]["VF_PARTITION_BY"] == "trace_id"


def test_plan_yaml_for_all_environments() -> None:
    code, output = _invoke("plan", example_graph("realtime_cameras"), "--format", "yaml")
    assert code == 0
    assert output.count("version: vf.plan/v1") == 2


def test_explain_summarises_nodes_and_channels() -> None:
    code, output = _invoke("explain", example_graph("realtime_cameras"))
    assert code == 0
    assert "tracker: processor → StatefulSet x3" in output
    assert "channel detector: live_latest" in output


def test_validate_writes_nothing() -> None:
    code, output = _invoke("validate", example_graph("batch_pipeline"))
    assert code == 0
    assert output.startswith("ok: 5 nodes, 2 environment(s)")


def test_unknown_environment_is_a_named_error() -> None:
    code, output = _invoke("validate", example_graph("batch_pipeline"), "--env", "staging")
    assert code == 2
    assert "error[VF_CONFIG_UNKNOWN_ENV]" in output
    assert "dev, prod" in output


def test_console_script_runs_as_a_module() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "vf", "--version"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0
    assert done.stdout.strip() == f"vf {__version__}"


def test_a_compile_run_in_process_gives_the_caller_its_collector_back(tmp_path: Path) -> None:
    """Only the vf executable, which ends after the compile, leaves the collector paused."""
    assert gc.isenabled()
    out = tmp_path / "deploy"
    code, output = _invoke("compile", example_graph("batch_pipeline"), "--out", str(out))
    assert code == 0, output
    assert (out / "base" / "kustomization.yaml").is_file()
    assert gc.isenabled()


def test_compile_prints_each_plan_warning_once_with_its_environments(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["compile", example_graph("batch_pipeline"), "--out", str(tmp_path / "tree")]
    )
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith("warning (")]
    assert any(
        "not pinned by digest" in line and line.startswith("warning (dev)") for line in lines
    )
    store = [line for line in lines if "VF_ADMISSION_STORE_SIZE" in line]
    assert len(store) == 1 and store[0].startswith("warning (dev, prod): ")
