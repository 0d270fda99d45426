"""``vf init``: the scaffold compiles out of the box, ``--check`` passes, bad targets fail."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner
from ruamel.yaml import YAML

from vf import __version__
from vf.cli import cli
from vf.commands.scaffold import init_project
from vf.errors import EXIT_USER
from vf.pipeline import CompileRequest, compile_project
from vf.render.objects import RUN_AS
from vf.runtree.worker_env import IMAGE_ENV


def test_scaffold_writes_the_project_and_a_current_tree(tmp_path: Path) -> None:
    target = tmp_path / "video-jobs"
    result = CliRunner().invoke(cli, ["init", str(target)])
    assert result.exit_code == 0, result.output
    for name in ("graph.py", "video_jobs_nodes.py", "vf.yaml", "Dockerfile", "README.md"):
        assert (target / name).is_file(), name
    assert (target / ".github" / "workflows" / "vf.yaml").is_file()
    assert (target / "deploy" / "plan" / "dev.json").is_file()
    check = CliRunner().invoke(
        cli, ["compile", str(target / "graph.py"), "--out", str(target / "deploy"), "--check"]
    )
    assert check.exit_code == 0, check.output
    assert not list(tmp_path.glob(".video-jobs.vf-init-*")), "staging folder left behind"


def test_scaffold_compiles_both_environments(tmp_path: Path) -> None:
    init_project(tmp_path / "p", name="sq")
    result = compile_project(CompileRequest(graph=str(tmp_path / "p" / "graph.py")))
    assert [p.environment for p in result.plans] == ["dev", "prod"]
    assert result.plans[0].flow_id == "sq"
    prod = {w.node: w for w in result.plans[1].workloads}
    assert prod["square"].replicas == 3
    assert dict(prod["square"].env)["VF_NODE_CLASS"] == "sq_nodes.Square"


def test_ci_snippet_runs_compile_check(tmp_path: Path) -> None:
    init_project(tmp_path / "p")
    ci = (tmp_path / "p" / ".github" / "workflows" / "vf.yaml").read_text()
    assert "vf compile graph.py --out deploy --check" in ci


def test_ci_workflow_gives_the_pull_requests_code_nothing_to_take(tmp_path: Path) -> None:
    """``--check`` imports graph.py and the node modules, so a pull request's code runs in the
    job: the workflow keeps the token read-only, holds no secrets, leaves no git credentials
    in the checkout and never runs a fork's code with the base repository's rights."""
    init_project(tmp_path / "p")
    text = (tmp_path / "p" / ".github" / "workflows" / "vf.yaml").read_text()
    workflow = YAML(typ="safe").load(text)
    assert set(workflow["on"]) == {"push", "pull_request"}
    assert "pull_request_target" not in text.split("\nname:", 1)[1]  # only the comment names it
    assert workflow["permissions"] == {"contents": "read"}
    (job,) = workflow["jobs"].values()
    assert job.get("permissions", {"contents": "read"}) == {"contents": "read"}
    assert "secrets." not in text.split("\nname:", 1)[1]
    checkouts = [s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/checkout@")]
    assert len(checkouts) == 1
    assert checkouts[0]["with"]["persist-credentials"] is False
    assert "vf compile graph.py --out deploy --check" in [s.get("run") for s in job["steps"]]


def test_scaffold_dockerfile_installs_the_worker_distribution_and_runs_as_the_pod_user(
    tmp_path: Path,
) -> None:
    init_project(tmp_path / "p")
    text = (tmp_path / "p" / "Dockerfile").read_text()
    assert f'ARG VF_WORKER_REQUIREMENT="vf-gitops-worker=={__version__}"' in text
    assert 'pip install --constraint /tmp/worker-constraints.txt "${VF_WORKER_REQUIREMENT}"' in text
    assert "vf-gitops==" not in text and "vf-gitops[" not in text  # no compiler in the image
    assert "COPY p_nodes.py /app/\n" in text  # root's: the pod user reads, never writes it
    active = [line for line in text.splitlines() if line.startswith("USER")]
    assert active == ["USER root", f"USER {RUN_AS}:{RUN_AS}"]  # installs as root, runs as 65532
    assert 'ENTRYPOINT ["vf-worker"]' in text


def test_scaffold_dockerfile_env_is_the_base_images(tmp_path: Path) -> None:
    init_project(tmp_path / "p")
    text = (tmp_path / "p" / "Dockerfile").read_text().replace("\\\n", " ")
    env: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("ENV "):
            env |= dict(item.split("=", 1) for item in shlex.split(line[4:]))
    assert env == dict(IMAGE_ENV)


def test_ci_installs_the_compile_only_distribution_at_this_version(tmp_path: Path) -> None:
    init_project(tmp_path / "p")
    ci = (tmp_path / "p" / ".github" / "workflows" / "vf.yaml").read_text()
    assert f"vars.VF_REQUIREMENT || 'vf-gitops=={__version__}'" in ci
    assert 'pip install "$VF_REQUIREMENT"' in ci
    assert "vf==" not in ci  # the PyPI name vf is another project's


def test_init_refuses_a_folder_with_files(tmp_path: Path) -> None:
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    result = CliRunner().invoke(cli, ["init", str(tmp_path / "busy")])
    assert result.exit_code == EXIT_USER
    assert "error[VF_INIT_NOT_EMPTY]" in result.output
    assert sorted(p.name for p in (tmp_path / "busy").iterdir()) == ["notes.txt"]


def test_init_accepts_an_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    init_project(tmp_path / "empty")
    assert (tmp_path / "empty" / "graph.py").is_file()


@pytest.mark.parametrize("name", ["9lives", "Upper", "a" * 64, "with_underscore"])
def test_init_refuses_names_that_cannot_be_a_flow_id_and_a_module(
    tmp_path: Path, name: str
) -> None:
    result = CliRunner().invoke(cli, ["init", str(tmp_path / "p"), "--name", name])
    assert result.exit_code == EXIT_USER
    assert "error[VF_INIT_NAME]" in result.output
    assert not (tmp_path / "p").exists()
