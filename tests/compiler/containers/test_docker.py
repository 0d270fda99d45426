"""The worker images in docker/, checked without a container engine (none exists here):
their user is the pod's runAsUser, their entry point is a console script of the worker
distribution, their health port is the workers', what they copy exists, and they install
the worker distribution the way ``vf.runtree.worker_env`` does."""

from __future__ import annotations

import shlex
import stat
import subprocess
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.support import REPO
from vf.commands.scaffold import init_project
from vf.containers.appfiles import init_dockerfile, node_files
from vf.containers.engine import find_podman, require_podman
from vf.errors import EXIT_ENVIRONMENT, VfError
from vf.render.objects import RUN_AS
from vf.resources import worker_pins
from vf.runtree.worker_env import CONSTRAINTS_NAME, IMAGE_ENV
from vf_runtime.constants import HEALTH_PORT

DOCKERFILES = ["Dockerfile", "Dockerfile.gpu"]
RUNTIME_DEPENDENCIES = {"nats-py", "redis", "protobuf"}
OTEL_EXTRA = {
    "opentelemetry-sdk",
    "opentelemetry-exporter-otlp-proto-http",
    "opentelemetry-exporter-otlp-proto-grpc",
    "opentelemetry-proto",
}


def _logical_lines(name: str) -> list[str]:
    text = (REPO / "docker" / name).read_text().replace("\\\n", " ")
    return [line.strip() for line in text.splitlines() if line.strip() and line[0] != "#"]


def _final_stage(name: str) -> list[str]:
    lines = _logical_lines(name)
    start = max(i for i, line in enumerate(lines) if line.startswith("FROM "))
    return lines[start:]


def _instruction(lines: list[str], keyword: str) -> list[str]:
    return [line.split(" ", 1)[1] for line in lines if line.startswith(keyword + " ")]


def _pyproject(folder: Path) -> dict[str, object]:
    return tomllib.loads((folder / "pyproject.toml").read_text())  # type: ignore[no-any-return]


def _worker_project() -> dict[str, object]:
    return _pyproject(REPO / "runtime")["project"]  # type: ignore[return-value]


def _image_env(name: str) -> dict[str, str]:
    env: dict[str, str] = {}
    for line in _instruction(_final_stage(name), "ENV"):
        for item in shlex.split(line):
            key, value = item.split("=", 1)
            env[key] = value
    return env


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
    scripts = _worker_project()["scripts"]
    assert scripts == {
        "vf-worker": "vf_runtime.worker.replica:main",
        "vf-provision": "vf_runtime.broker.provision:main",  # the provision Job's command
    }


@pytest.mark.parametrize("name", DOCKERFILES)
def test_the_image_exposes_the_health_port(name: str) -> None:
    stage = _final_stage(name)
    assert _instruction(stage, "EXPOSE") == [str(HEALTH_PORT)]
    assert _image_env(name)["VF_HEALTH_PORT"] == str(HEALTH_PORT)


def test_image_env_is_the_dockerfiles_final_stage_env() -> None:
    assert _image_env("Dockerfile") == dict(IMAGE_ENV)


def test_the_gpu_image_env_adds_only_cuda_and_path_settings() -> None:
    gpu = _image_env("Dockerfile.gpu")
    extra = {key for key in gpu if key not in IMAGE_ENV}
    assert extra == {"PATH", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES"}
    assert {key: gpu[key] for key in IMAGE_ENV} == dict(IMAGE_ENV)


@pytest.mark.parametrize("name", DOCKERFILES)
def test_every_copied_path_exists_in_the_repository(name: str) -> None:
    copies = [shlex.split(line)[:-1] for line in _instruction(_logical_lines(name), "COPY")]
    sources = [s for words in copies if not words[0].startswith("--from") for s in words]
    assert sources, "no COPY from the build context"
    for source in sources:
        if not source.startswith("--"):
            assert (REPO / source).exists(), source


@pytest.mark.parametrize("name", DOCKERFILES)
def test_the_wheel_stage_copies_what_the_worker_build_reads(name: str) -> None:
    copied = " ".join(_instruction(_logical_lines(name), "COPY"))
    build = _pyproject(REPO / "runtime")["tool"]["hatch"]  # type: ignore[index]
    needed = ["runtime/pyproject.toml"]
    needed += [f"runtime/{p}" for p in build["build"]["targets"]["wheel"]["packages"]]
    needed += [
        str(Path("runtime", source)).replace("runtime/../", "")
        for source in build["build"]["targets"]["wheel"]["force-include"]
    ]
    for path in needed:
        assert path in copied.split(), path


@pytest.mark.parametrize("name", DOCKERFILES)
def test_the_image_installs_the_worker_distribution_with_the_shared_pins(name: str) -> None:
    run = " ".join(_instruction(_final_stage(name), "RUN"))
    assert "wheel=$(ls /tmp/wheels/vf_gitops_worker-*.whl)" in run
    install = f"pip install --constraint /tmp/{CONSTRAINTS_NAME}"
    assert f'{install} "pip==${{PIP_VERSION}}" "${{wheel}}[otel]"' in run  # traces exported
    assert "pip uninstall --yes setuptools wheel" in run
    assert "vf_runtime.worker.otel" in run  # the extra's imports checked at build
    assert 'rm -rf "$site/vf"' not in run and "/bin/vf " not in run  # nothing is deleted
    assert _instruction(_final_stage(name), "COPY")[0].startswith(f"docker/{CONSTRAINTS_NAME} ")
    assert "from vf import Producer" in run  # node modules' import is checked at build


def test_worker_pins_are_exactly_the_worker_dependencies_in_range() -> None:
    declared = {
        Requirement(item).name: Requirement(item)
        for item in _worker_project()["dependencies"]  # type: ignore[attr-defined]
    }
    assert set(declared) == RUNTIME_DEPENDENCIES
    extras = _worker_project()["optional-dependencies"]  # type: ignore[index]
    declared |= {Requirement(item).name: Requirement(item) for item in extras["otel"]}
    assert set(declared) == RUNTIME_DEPENDENCIES | OTEL_EXTRA
    pinned = [
        Requirement(line)
        for line in (REPO / "docker" / CONSTRAINTS_NAME).read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert {r.name for r in pinned} == RUNTIME_DEPENDENCIES | OTEL_EXTRA
    for requirement in pinned:
        (version,) = [s.version for s in requirement.specifier]
        assert declared[requirement.name].specifier.contains(version), requirement


def test_the_full_distribution_declares_the_worker_dependencies_alike() -> None:
    full = {
        Requirement(item).name: Requirement(item).specifier
        for item in _pyproject(REPO)["project"]["dependencies"]  # type: ignore[index]
    }
    for item in _worker_project()["dependencies"]:  # type: ignore[attr-defined]
        requirement = Requirement(item)
        assert full[requirement.name] == requirement.specifier, requirement.name
    full_extra = _pyproject(REPO)["project"]["optional-dependencies"]["otel"]  # type: ignore[index]
    assert full_extra == _worker_project()["optional-dependencies"]["otel"]  # type: ignore[index]


def test_missing_podman_is_a_named_environment_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VF_PODMAN", "vf-no-such-podman")
    assert find_podman() is None
    with pytest.raises(VfError) as caught:
        require_podman()
    assert caught.value.code == "VF_PODMAN_MISSING" and caught.value.exit_code == EXIT_ENVIRONMENT


def test_an_app_without_a_dockerfile_gets_vf_inits_copying_its_modules(tmp_path: Path) -> None:
    (tmp_path / "nodes_a.py").write_text("")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "deploy").mkdir()
    (tmp_path / "notes.txt").write_text("")
    assert node_files(tmp_path, None) == [("nodes_a.py", ""), ("pkg", "pkg/")]
    assert node_files(tmp_path, ["pkg.sub", "nodes_a"]) == [("nodes_a.py", ""), ("pkg", "pkg/")]
    text = init_dockerfile(tmp_path, ["pkg.sub"])
    assert "COPY pkg /app/pkg/\n" in text
    assert "nodes_a.py" not in text
    with pytest.raises(VfError) as caught:
        node_files(tmp_path, ["absent_nodes"])
    assert caught.value.code == "VF_PIPELINE_IMAGE" and "absent_nodes" in str(caught.value)


def _pins_file() -> list[str]:
    text = (REPO / "docker" / CONSTRAINTS_NAME).read_text()
    return [line for line in text.splitlines() if line.strip() and not line.startswith("#")]


@pytest.mark.parametrize("name", DOCKERFILES)
def test_app_is_roots_and_read_only_to_the_pod_user(name: str) -> None:
    """The workers' user owns nothing in the image: /app stays root's (mode 0755)."""
    stage = _final_stage(name)
    run = " ".join(_instruction(stage, "RUN"))
    assert "mkdir -p /app && chmod 0755 /app" in run
    assert "chown" not in run and not any("--chown" in c for c in _instruction(stage, "COPY"))


def _init_dockerfiles(tmp_path: Path) -> list[str]:
    """The Dockerfile ``vf init`` writes, both ways it is rendered: into a new project, and
    for an app folder without a Dockerfile of its own (``scripts/build-images --app``)."""
    init_project(tmp_path / "p", name="pins")
    (tmp_path / "bare").mkdir()
    (tmp_path / "bare" / "nodes_a.py").write_text("")
    return [(tmp_path / "p" / "Dockerfile").read_text(), init_dockerfile(tmp_path / "bare", None)]


def _stage_lines(text: str) -> list[str]:
    text = text.replace("\\\n", " ")
    return [line.strip() for line in text.splitlines() if line.strip() and line[0] != "#"]


def test_the_pipeline_image_installs_the_worker_within_the_shared_pins(tmp_path: Path) -> None:
    """``redis>=5`` alone would take whatever redis is newest: the pipeline image installs
    vf-gitops-worker with docker/worker-constraints.txt, as the worker image does."""
    assert list(worker_pins()) == _pins_file()
    for text in _init_dockerfiles(tmp_path):
        lines = _stage_lines(text)
        (arg,) = [a for a in _instruction(lines, "ARG") if a.startswith("VF_WORKER_CONSTRAINTS=")]
        (value,) = shlex.split(arg.split("=", 1)[1])  # one quoted word
        pins = value.split()
        assert pins == _pins_file()
        (install,) = [r for r in _instruction(lines, "RUN") if "VF_WORKER_REQUIREMENT" in r]
        # the shell turns the argument into the pins file pip reads, one pin a line
        make_file = install.split("&&", 1)[0].strip()
        assert make_file == "printf '%s\\n' ${VF_WORKER_CONSTRAINTS} > /tmp/worker-constraints.txt"
        written = subprocess.run(
            ["sh", "-c", make_file.split(" > ", 1)[0]],
            env={"VF_WORKER_CONSTRAINTS": " ".join(pins), "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert written.splitlines() == _pins_file()
        assert (
            'pip install --constraint /tmp/worker-constraints.txt "${VF_WORKER_REQUIREMENT}"'
            in install
        )


def test_the_pipeline_images_code_is_roots_and_read_only_to_the_pod_user(
    tmp_path: Path,
) -> None:
    """Node modules are copied as root and made read-only to everyone else before the image
    switches to the pod's user; /app itself is root's 0755 whatever the base left there."""
    for text in _init_dockerfiles(tmp_path):
        lines = _stage_lines(text)
        copies = [i for i, line in enumerate(lines) if line.startswith("COPY ")]
        assert copies and not any("--chown" in lines[i] for i in copies)
        user = lines.index(f"USER {RUN_AS}:{RUN_AS}")
        lock = lines.index("RUN chown -R root:root /app && chmod -R u=rwX,go=rX /app")
        assert max(copies) < lock < user
        assert lines[:user].count("USER root") == 1
        setup = " ".join(_instruction(lines[: min(copies)], "RUN"))
        assert "mkdir -p /app && chown root:root /app && chmod 0755 /app" in setup
        assert f"chown {RUN_AS}" not in text
    # what the chmod leaves of files a checkout made writable to all
    app = tmp_path / "app"
    (app / "pkg").mkdir(parents=True)
    for path in (app / "nodes.py", app / "pkg" / "__init__.py"):
        path.write_text("")
        path.chmod(0o666)
    (app / "pkg").chmod(0o777)
    subprocess.run(["chmod", "-R", "u=rwX,go=rX", str(app)], check=True)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (app / "nodes.py", app / "pkg")}
    assert modes == {"nodes.py": 0o644, "pkg": 0o755}
    assert stat.S_IMODE((app / "pkg" / "__init__.py").stat().st_mode) == 0o644
