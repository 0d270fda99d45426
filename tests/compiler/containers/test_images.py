"""vf's images, built for real with podman from the Debian base: the worker image
(docker/Dockerfile), the GPU image's Python layer (docker/Dockerfile.gpu without CUDA), and
pipeline images (an app's own Dockerfile, and the one vf init writes). Each container runs
as the pods run it: UID 65532, read-only root, no capabilities, no new privileges."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import REPO, require
from vf.commands.scaffold import init_project
from vf.containers.build import (
    GPU_PYTHON,
    base_reference,
    ensure_base_image,
    ensure_image,
    ensure_pipeline_image,
    ensure_worker_image,
    prune_superseded,
)
from vf.containers.engine import Podman, find_podman
from vf.errors import EXIT_USER, VfError
from vf.render.objects import RUN_AS
from vf.runtree.worker_env import IMAGE_ENV

PIPELINE_TAG = "localhost/vf-images-test:own-dockerfile"
SCAFFOLD_TAG = "localhost/vf-images-test:init-dockerfile"
POD_FLAGS = [
    "--read-only",
    f"--user={RUN_AS}:{RUN_AS}",
    "--cap-drop=ALL",
    "--security-opt=no-new-privileges",
    "--network=none",
]


@dataclass(frozen=True)
class Images:
    podman: Podman
    base: str
    worker: str
    gpu_python: str
    pipeline: str  # from the project's own Dockerfile (as vf init wrote it)
    scaffold: str  # from a folder with no Dockerfile: vf init's, rendered by vf
    module: str


@pytest.fixture(scope="session")
def images(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Images]:
    podman = find_podman()
    require(podman is not None, "podman is not installed (apt-get install podman runc mmdebstrap)")
    assert podman is not None
    require(
        shutil.which("mmdebstrap") is not None or podman.image_exists(base_reference()),
        "mmdebstrap is not installed and local storage lacks vf's base image "
        "(apt-get install mmdebstrap)",
    )
    lines: list[str] = []
    project = tmp_path_factory.mktemp("images") / "video-jobs"
    init_project(project)
    bare = tmp_path_factory.mktemp("images") / "bare"
    bare.mkdir()
    (bare / "video_jobs_nodes.py").write_text((project / "video_jobs_nodes.py").read_text())
    ensure_pipeline_image(podman, tag=PIPELINE_TAG, app_dir=project, log=lines.append)
    ensure_pipeline_image(podman, tag=SCAFFOLD_TAG, app_dir=bare, log=lines.append)
    yield Images(
        podman=podman,
        base=ensure_base_image(podman, log=lines.append),
        worker=ensure_worker_image(podman, log=lines.append),
        gpu_python=ensure_image(podman, GPU_PYTHON, log=lines.append),
        pipeline=PIPELINE_TAG,
        scaffold=SCAFFOLD_TAG,
        module="video_jobs_nodes",
    )
    podman.run(["rmi", "--force", PIPELINE_TAG, SCAFFOLD_TAG], timeout=120)


def _run(images: Images, image: str, *args: str, entrypoint: str | None = "python") -> str:
    """Run one container as the pod runs it; its stdout, or the test fails with its output."""
    flags = [*images.podman.run_args(), *POD_FLAGS]
    if entrypoint is not None:
        flags.append(f"--entrypoint={entrypoint}")
    done = images.podman.run(["run", "--rm", *flags, image, *args], timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _inspect(images: Images, image: str) -> dict[str, object]:
    done = images.podman.run(["image", "inspect", image], timeout=60)
    assert done.returncode == 0, done.stderr
    config: dict[str, object] = json.loads(done.stdout)[0]["Config"]
    return config


WORKERS = ["worker", "gpu_python", "pipeline", "scaffold"]
pytestmark = [pytest.mark.container, pytest.mark.slow]


@pytest.mark.parametrize("which", WORKERS)
def test_the_entry_points_are_vf_worker_and_vf_provision(images: Images, which: str) -> None:
    image = getattr(images, which)
    config = _inspect(images, image)
    assert config["Entrypoint"] == ["vf-worker"]
    assert config["User"] == f"{RUN_AS}:{RUN_AS}" and config["WorkingDir"] == "/app"
    # Both scripts start and stop on their own named error when given no configuration.
    for script in ("vf-worker", "vf-provision"):
        flags = [*images.podman.run_args(), *POD_FLAGS, f"--entrypoint={script}"]
        done = images.podman.run(["run", "--rm", *flags, image], timeout=120)
        assert done.returncode == EXIT_USER, done.stdout + done.stderr
        assert "error[VF_ENV]" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("which", WORKERS)
def test_node_modules_import_vf_as_the_pod_user_on_a_read_only_root(
    images: Images, which: str
) -> None:
    script = (
        "import os, sys, errno\n"
        "from vf import Producer, Processor, Consumer\n"
        "import vf_runtime.worker.replica, vf_runtime.broker.provision\n"
        "try:\n"
        "    open('/app/written', 'w')\n"
        "except OSError as e:\n"
        "    assert e.errno == errno.EROFS, e\n"
        "else:\n"
        "    raise SystemExit('the root filesystem is writable')\n"
        "print(os.getuid(), os.getgid(), sys.flags.dont_write_bytecode, sys.version_info[:2])\n"
    )
    out = _run(images, getattr(images, which), "-c", script)
    assert out.split() == [str(RUN_AS), str(RUN_AS), "1", "(3,", "11)"]


@pytest.mark.parametrize("which", WORKERS)
def test_the_image_holds_no_compiler(images: Images, which: str) -> None:
    script = (
        "import importlib.util as u\n"
        "print([m for m in ('vf.pipeline', 'vf.cli', 'click', 'jinja2', 'ruamel', "
        "'jsonschema') if u.find_spec(m) is not None])\n"
    )
    assert _run(images, getattr(images, which), "-c", script).strip() == "[]"
    flags = [*images.podman.run_args(), *POD_FLAGS, "--entrypoint=python"]
    done = images.podman.run(
        ["run", "--rm", *flags, getattr(images, which), "-c", "import vf.pipeline"], timeout=120
    )
    assert done.returncode == 1 and "No module named 'vf.pipeline'" in done.stderr


@pytest.mark.parametrize("which", ["worker", "gpu_python"])
def test_no_file_keeps_a_set_id_bit_and_pip_is_the_pinned_one(images: Images, which: str) -> None:
    """The worker images carry no set-user or set-group file (the Debian base had su, mount,
    passwd, …), pip at the Dockerfiles' PIP_VERSION, and no setuptools or wheel."""
    script = (
        "import os, stat, importlib.util as u, importlib.metadata as m\n"
        "found = []\n"
        "for top in ('/usr', '/bin', '/sbin', '/etc', '/opt', '/var', '/app'):\n"
        "    for root, dirs, files in os.walk(top):\n"
        "        for f in files:\n"
        "            p = os.path.join(root, f)\n"
        "            try:\n"
        "                mode = os.lstat(p).st_mode\n"
        "            except OSError:\n"
        "                continue\n"
        "            if stat.S_ISREG(mode) and mode & (stat.S_ISUID | stat.S_ISGID):\n"
        "                found.append(p)\n"
        "print(sorted(found), m.version('pip'),\n"
        "      [n for n in ('setuptools', 'wheel') if u.find_spec(n) is not None])\n"
    )
    pinned = next(
        line.split("=", 1)[1]
        for line in (REPO / "docker" / "Dockerfile").read_text().splitlines()
        if line.startswith("ARG PIP_VERSION=")
    )
    assert _run(images, getattr(images, which), "-c", script).split() == ["[]", pinned, "[]"]


@pytest.mark.parametrize("which", WORKERS)
def test_the_image_env_is_the_one_vf_run_tree_emulates(images: Images, which: str) -> None:
    env = dict(item.split("=", 1) for item in _inspect(images, getattr(images, which))["Env"])  # type: ignore[attr-defined]
    assert {key: env.get(key) for key in IMAGE_ENV} == dict(IMAGE_ENV)


@pytest.mark.parametrize("which", ["pipeline", "scaffold"])
def test_the_node_modules_are_under_app_owned_by_root_and_read_only_to_the_pod_user(
    images: Images, which: str
) -> None:
    script = (
        "import os, importlib\n"
        f"module = importlib.import_module({images.module!r})\n"
        "st = os.stat(module.__file__)\n"
        "app = os.stat('/app')\n"
        "print(module.__file__, st.st_uid, st.st_gid, app.st_uid, app.st_gid,\n"
        "      oct(st.st_mode & 0o777), oct(app.st_mode & 0o777))\n"
    )
    out = _run(images, getattr(images, which), "-c", script).split()
    assert out == [f"/app/{images.module}.py", "0", "0", "0", "0", "0o644", "0o755"]


def test_image_sizes_are_reported(images: Images, capsys: pytest.CaptureFixture[str]) -> None:
    sizes = {
        name: images.podman.image_size(getattr(images, name))
        for name in ("base", "worker", "gpu_python", "pipeline")
    }
    with capsys.disabled():
        print("\nimage sizes: " + ", ".join(f"{k} {v / 1e6:.0f} MB" for k, v in sizes.items()))
    assert sizes["base"] < sizes["worker"] <= sizes["pipeline"]
    # the worker distribution and its OpenTelemetry extra (OTLP over HTTP and gRPC; grpcio
    # is most of the 52 MB measured): nothing of the compiler
    assert sizes["worker"] - sizes["base"] < 60e6


def test_a_failing_app_dockerfile_is_the_users_error(images: Images, tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text(
        "ARG PYTHON_IMAGE\nFROM ${PYTHON_IMAGE}\nCOPY absent.py /app/\n"
    )
    with pytest.raises(VfError) as caught:
        ensure_pipeline_image(
            images.podman, tag="localhost/vf-images-test:broken", app_dir=tmp_path, log=print
        )
    assert caught.value.code == "VF_PIPELINE_IMAGE" and caught.value.exit_code == EXIT_USER
    assert "absent.py" in str(caught.value)
    assert not images.podman.image_exists("localhost/vf-images-test:broken")


def test_an_app_folder_that_is_not_a_directory_is_named(images: Images, tmp_path: Path) -> None:
    for app in (tmp_path / "absent", tmp_path / "file.py"):
        if app.name == "file.py":
            app.write_text("")
        with pytest.raises(VfError) as caught:
            ensure_pipeline_image(
                images.podman, tag="localhost/vf-images-test:x", app_dir=app, log=print
            )
        assert caught.value.code == "VF_PIPELINE_IMAGE" and caught.value.exit_code == EXIT_USER


def test_a_node_module_missing_from_the_app_folder_is_named(images: Images, tmp_path: Path) -> None:
    (tmp_path / "other.py").write_text("")
    with pytest.raises(VfError) as caught:
        ensure_pipeline_image(
            images.podman,
            tag="localhost/vf-images-test:missing",
            app_dir=tmp_path,
            log=print,
            modules=["video_jobs_nodes"],
        )
    assert caught.value.code == "VF_PIPELINE_IMAGE" and "video_jobs_nodes" in str(caught.value)


def test_run_args_stay_within_what_podman_may_grant(images: Images) -> None:
    """The limits run_args asks for start a container (asking above them fails to start)."""
    args = images.podman.run_args()
    assert args.count("--ulimit") == 2
    limits = _run(
        images,
        images.base,
        "-c",
        "import resource as r; print(r.getrlimit(r.RLIMIT_NOFILE)[1], "
        "r.getrlimit(r.RLIMIT_NPROC)[1])",
    )
    wanted = [a.split("=")[1].split(":")[1] for a in args if "=" in a]
    assert limits.split() == wanted


def test_prune_removes_only_older_tags_of_the_images_built(images: Images) -> None:
    older = images.base.rsplit(":", 1)[0] + ":older-digest"
    assert images.podman.run(["tag", images.base, older], timeout=60).returncode == 0
    removed = prune_superseded(images.podman, {images.base}, log=print)
    assert older in removed and not images.podman.image_exists(older)
    assert images.podman.image_exists(images.base) and images.podman.image_exists(images.worker)
