"""The worker images in docker/, checked without a container engine (none exists here):
their user is the pod's runAsUser, their entry point is a console script of the package,
their health port is the workers', and what they copy exists."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from vf.render import RUN_AS
from vf_runtime.constants import HEALTH_PORT

REPO = Path(__file__).resolve().parent.parent
DOCKERFILES = ["Dockerfile", "Dockerfile.gpu"]
RUNTIME_DEPENDENCIES = {"nats-py", "redis", "protobuf"}


def _final_stage(name: str) -> list[str]:
    text = (REPO / "docker" / name).read_text().replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines() if line.strip() and line[0] != "#"]
    start = max(i for i, line in enumerate(lines) if line.startswith("FROM "))
    return lines[start:]


def _instruction(lines: list[str], keyword: str) -> list[str]:
    return [line.split(" ", 1)[1] for line in lines if line.startswith(keyword + " ")]


def _project() -> dict[str, object]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("name", DOCKERFILES)
def test_the_image_user_is_the_pods_run_as_user(name: str) -> None:
    stage = _final_stage(name)
    assert _instruction(stage, "USER") == [f"{RUN_AS}:{RUN_AS}"]
    run = " ".join(_instruction(stage, "RUN"))
    assert f"--uid {RUN_AS}" in run and f"--gid {RUN_AS}" in run


@pytest.mark.parametrize("name", DOCKERFILES)
def test_the_entrypoint_is_the_worker_console_script(name: str) -> None:
    stage = _final_stage(name)
    assert _instruction(stage, "ENTRYPOINT") == ['["vf-worker"]']
    scripts = _project()["scripts"]
    assert isinstance(scripts, dict)
    assert scripts["vf-worker"] == "vf_runtime.worker:main"
    assert scripts["vf-provision"] == "vf_runtime.provision:main"  # the provision Job's command


@pytest.mark.parametrize("name", DOCKERFILES)
def test_the_image_exposes_the_health_port(name: str) -> None:
    stage = _final_stage(name)
    assert _instruction(stage, "EXPOSE") == [str(HEALTH_PORT)]
    assert f"VF_HEALTH_PORT={HEALTH_PORT}" in _instruction(stage, "ENV")


@pytest.mark.parametrize("name", DOCKERFILES)
def test_every_copied_path_exists_in_the_repository(name: str) -> None:
    text = (REPO / "docker" / name).read_text()
    for line in text.splitlines():
        match = re.match(r"COPY (?!--from)(\S+) ", line)
        if match:
            assert (REPO / match.group(1)).exists(), match.group(1)


def test_runtime_requirements_are_exactly_the_runtime_dependencies_in_range() -> None:
    declared = {
        Requirement(item).name: Requirement(item)
        for item in _project()["dependencies"]  # type: ignore[attr-defined]
    }
    pinned = [
        Requirement(line)
        for line in (REPO / "docker" / "requirements-runtime.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert {r.name for r in pinned} == RUNTIME_DEPENDENCIES
    for requirement in pinned:
        (version,) = [s.version for s in requirement.specifier]
        assert declared[requirement.name].specifier.contains(version), requirement
