"""The worker image's Python environment, built on this machine for ``vf run-tree``.

A venv that holds what ``docker/Dockerfile`` installs and nothing else: the
``vf-gitops-worker`` distribution (``vf_runtime`` plus the authoring package
``vf/__init__.py``), installed with the same constraints file and the same command
shape. From a checkout the worker wheel is built from the repository; from an
installed ``vf-gitops`` it comes from the package index at vf's own version. The
venv is built once per digest of its inputs, under a file lock, and used only
once its completion stamp exists (a killed build is redone, never half-used).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from vf import __version__
from vf.errors import EnvironmentProblem

APP_DIR = "/app"
"""Where the image puts a pipeline's node modules (on ``PYTHONPATH``)."""

IMAGE_ENV: Mapping[str, str] = MappingProxyType(
    {
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        "PIP_NO_CACHE_DIR": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PYTHONPATH": APP_DIR,
        "VF_HEALTH_PORT": "8080",
    }
)
"""The final stage's ``ENV`` of ``docker/Dockerfile``, exactly (tests compare them)."""

WORKER_DISTRIBUTION = "vf-gitops-worker"
CONSTRAINTS_NAME = "worker-constraints.txt"
TRACING_EXTRA = "otel"
STAMP_NAME = ".vf-worker-env-complete"
INSTALL_TIMEOUT = 900.0

_PACKAGE_DIR = Path(__file__).resolve().parents[1]  # the vf package: vf/runtree/worker_env.py
_REPO = _PACKAGE_DIR.parent.parent


@dataclass(frozen=True)
class WorkerEnv:
    """A built worker environment: its venv root, its python, and the folder of its scripts."""

    root: Path
    python: Path
    bin_dir: Path  # holds vf-worker and vf-provision


@dataclass(frozen=True)
class _Source:
    """Where the worker distribution comes from: a checkout's ``runtime/``, or the index."""

    project: Path | None  # runtime/ of a checkout; None: install from the package index
    constraints: Path


def constraints_file() -> Path:
    """The pins file the Dockerfiles and this module share (a checkout's or the wheel's copy)."""
    for candidate in (
        _REPO / "docker" / CONSTRAINTS_NAME,
        _PACKAGE_DIR / "docker" / CONSTRAINTS_NAME,
    ):
        if candidate.is_file():
            return candidate
    raise EnvironmentProblem(
        "VF_WORKER_ENV",
        f"the worker's pins file {CONSTRAINTS_NAME} is missing from this vf installation",
        "reinstall vf-gitops (pip install --force-reinstall vf-gitops) or run from a checkout",
        str(_PACKAGE_DIR),
    )


def _source() -> _Source:
    project = _REPO / "runtime"
    checkout = (project / "pyproject.toml").is_file() and (project / "vf_runtime").is_dir()
    return _Source(project=project if checkout else None, constraints=constraints_file())


def _source_files(project: Path) -> Iterator[Path]:
    yield project / "pyproject.toml"
    yield _PACKAGE_DIR / "__init__.py"
    for path in sorted((project / "vf_runtime").rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            yield path


def environment_digest(source: _Source) -> str:
    """A digest of everything the venv is made from: sources, pins, the interpreter."""
    digest = hashlib.sha256()
    python = f"{sys.implementation.name} {sys.version} {sys.platform} {sys.base_prefix}"
    digest.update(python.encode())
    digest.update(source.constraints.read_bytes())
    if source.project is None:
        digest.update(f"{WORKER_DISTRIBUTION}=={__version__}".encode())
    else:
        for path in _source_files(source.project):
            digest.update(str(path.relative_to(_REPO)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/vf/worker-env``, else ``~/.cache/vf/worker-env``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "vf" / "worker-env"


def _env_at(root: Path) -> WorkerEnv:
    bin_dir = root / "bin"
    return WorkerEnv(root=root, python=bin_dir / "python", bin_dir=bin_dir)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _run(command: list[str], *, step: str, remedy: str, where: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    try:
        done = subprocess.run(
            command,
            env=env,
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EnvironmentProblem(
            "VF_WORKER_ENV",
            f"building the worker environment failed at {step}: {exc}",
            remedy,
            str(where),
        ) from exc
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip()[-1500:]
        raise EnvironmentProblem(
            "VF_WORKER_ENV",
            f"building the worker environment failed at {step} (exit {done.returncode}):\n{tail}",
            remedy,
            str(where),
        )


def _install(env: WorkerEnv, source: _Source, *, scratch: Path) -> None:
    pip = [str(env.python), "-m", "pip"]
    extra = f"{WORKER_DISTRIBUTION}[{TRACING_EXTRA}]"  # the images' traces (ADR 0221)
    if source.project is None:
        requirement = f"{WORKER_DISTRIBUTION}=={__version__}"
        remedy = (
            f"make the package index reachable (or set PIP_INDEX_URL) so that pip can install "
            f"{requirement}; if that release is not published, run vf from a checkout of vf, "
            "which builds the worker wheel from its sources"
        )
    else:
        remedy = "make the package index reachable (pip fetches hatchling to build the wheel)"
        _run(
            [*pip, "wheel", "--no-deps", "--wheel-dir", str(scratch), str(source.project)],
            step=f"building the {WORKER_DISTRIBUTION} wheel from {source.project}",
            remedy=remedy,
            where=source.project,
        )
        (wheel,) = scratch.glob("vf_gitops_worker-*.whl")
        requirement = str(wheel)
    # The command shape of docker/Dockerfile: pip install --constraint <pins> <worker> <extra>.
    _run(
        [*pip, "install", "--constraint", str(source.constraints), requirement, extra],
        step=f"pip install --constraint {source.constraints.name} {requirement} {extra}",
        remedy=remedy,
        where=env.root,
    )


def _build(env: WorkerEnv, source: _Source) -> None:
    shutil.rmtree(env.root, ignore_errors=True)
    _run(
        [sys.executable, "-m", "venv", str(env.root)],
        step="python -m venv",
        remedy="install Python's venv module (e.g. apt-get install python3-venv)",
        where=env.root,
    )
    with tempfile.TemporaryDirectory(prefix="vf-worker-wheel-") as scratch:
        _install(env, source, scratch=Path(scratch))
    (env.root / STAMP_NAME).write_text(f"{WORKER_DISTRIBUTION} {__version__}\n")


def ensure_worker_env(
    cache_dir: Path | None = None, *, log: Callable[[str], None] = lambda _line: None
) -> WorkerEnv:
    """The worker environment for this vf and this Python, built on first use and cached."""
    source = _source()
    base = cache_dir if cache_dir is not None else default_cache_dir()
    env = _env_at(base / environment_digest(source))
    if (env.root / STAMP_NAME).is_file():
        return env
    with _locked(base / f"{env.root.name}.lock"):
        if (env.root / STAMP_NAME).is_file():  # another process built it meanwhile
            return env
        origin = str(source.project) if source.project else f"{WORKER_DISTRIBUTION}=={__version__}"
        log(f"building the worker environment in {env.root} from {origin} (once)")
        _build(env, source)
    return env
