"""vf's images, built with podman: a Debian base, the worker image, a pipeline image.

The base is made of Debian's packages (``mmdebstrap``, then ``podman import``) because no
container registry need be reachable: Python 3.11 in a venv at ``/opt/python`` that is
first on ``PATH``, so ``python`` and ``pip`` in a Dockerfile mean what they mean in the
public ``python`` image (docs/adr/0143-images-from-debian.md). The worker image is
``docker/Dockerfile`` FROM that base (its ``PYTHON_IMAGE`` build argument), built from a
context of only the files it copies; pip inside the build reaches the package index through
the host's network and CA bundle (docs/adr/0144-pip-inside-image-builds.md). Each image is
tagged with a digest of its inputs and built only when local storage lacks that tag, under a
file lock.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import platform
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from vf import __version__
from vf.containers import appfiles
from vf.containers.engine import Podman
from vf.errors import EnvironmentProblem, VfError

Log = Callable[[str], None]

BASE_REPOSITORY = "localhost/vf-python-base"
WORKER_REPOSITORY = "localhost/vf-worker-base"
BASE_PYTHON = "3.11"  # bookworm's python3; the worker image's Python
VENV = "/opt/python"
BASE_RECIPE: dict[str, object] = {
    "suite": "bookworm",
    "variant": "minbase",
    "include": ["ca-certificates", "python3", "python3-venv"],
    # Documentation and translations are no use in a worker image (about 50 MB).
    "dpkgopt": [
        "path-exclude=/usr/share/doc/*",
        "path-include=/usr/share/doc/*/copyright",
        "path-exclude=/usr/share/man/*",
        "path-exclude=/usr/share/info/*",
        "path-exclude=/usr/share/locale/*",
    ],
    "customize": [f'chroot "$1" python3 -m venv {VENV}'],
    "config": [
        f"ENV PATH={VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "ENV LANG=C.UTF-8",
        'CMD ["python3"]',
    ],
}
WORKER_SOURCES = (
    "docker/worker-constraints.txt",
    "runtime/pyproject.toml",
    "runtime/vf_runtime",
    "compiler/vf/__init__.py",
    "compiler/vf/py.typed",
)
BUILD_TIMEOUT = 900.0


@dataclass(frozen=True)
class Recipe:
    """One of vf's Dockerfiles built FROM the Debian base through its base-image argument."""

    dockerfile: str
    repository: str
    base_arg: str
    what: str


WORKER = Recipe("docker/Dockerfile", WORKER_REPOSITORY, "PYTHON_IMAGE", "worker image")
GPU_PYTHON = Recipe(
    "docker/Dockerfile.gpu",
    "localhost/vf-worker-base-gpu-python",
    "CUDA_IMAGE",
    "GPU worker image's Python layer (without CUDA)",
)
_REPO = Path(__file__).resolve().parents[3]  # the checkout: compiler/vf/containers/build.py


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/vf/images``, else ``~/.cache/vf/images`` (the builds' locks)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "vf" / "images"


@contextmanager
def _locked(name: str) -> Iterator[None]:
    path = default_cache_dir() / f"{name}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _digest(*parts: bytes) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(len(part).to_bytes(8, "big") + part)
    return digest.hexdigest()[:12]


def base_reference() -> str:
    """The base image's reference: its recipe and this machine's architecture, digested."""
    recipe = json.dumps(BASE_RECIPE, sort_keys=True).encode()
    return (
        f"{BASE_REPOSITORY}:{BASE_PYTHON}-bookworm-{_digest(recipe, platform.machine().encode())}"
    )


def _fail(
    code: str,
    what: str,
    remedy: str,
    where: str,
    *,
    tail: str = "",
    kind: type[VfError] = EnvironmentProblem,
) -> VfError:
    detail = f":\n{tail.strip()[-2000:]}" if tail.strip() else ""
    return kind(code, what + detail, remedy, where)


def _run(
    argv: list[str],
    *,
    code: str,
    step: str,
    remedy: str,
    where: str,
    kind: type[VfError] = EnvironmentProblem,
) -> None:
    """Run one build step; a failure is ``kind`` (exit 3 for vf's images, 2 for the app's)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    try:
        done = subprocess.run(
            argv, env=env, capture_output=True, text=True, timeout=BUILD_TIMEOUT, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise _fail(code, f"{step} did not complete: {exc}", remedy, where, kind=kind) from exc
    if done.returncode != 0:
        tail = done.stdout + done.stderr
        raise _fail(
            code, f"{step} failed (exit {done.returncode})", remedy, where, tail=tail, kind=kind
        )


def ensure_base_image(podman: Podman, *, log: Log) -> str:
    """The Debian base (Python 3.11 in a venv on PATH), built once; returns its reference."""
    ref = base_reference()
    if podman.image_exists(ref):
        return ref
    with _locked("base"):
        if podman.image_exists(ref):  # another process built it meanwhile
            return ref
        mmdebstrap = shutil.which("mmdebstrap")
        if mmdebstrap is None:
            raise _fail(
                "VF_IMAGE_BASE",
                "mmdebstrap is not installed (vf makes its base image from Debian's packages)",
                "install it: apt-get install mmdebstrap (docs/images.md)",
                "PATH",
            )
        log(f"building the base image {ref} from Debian packages (once)")
        with tempfile.TemporaryDirectory(prefix="vf-base-") as scratch:
            rootfs = str(Path(scratch) / "rootfs.tar")
            argv = [
                mmdebstrap,
                f"--variant={BASE_RECIPE['variant']}",
                "--include=" + ",".join(_strings("include")),
                *[f"--dpkgopt={option}" for option in _strings("dpkgopt")],
                *[f"--customize-hook={hook}" for hook in _strings("customize")],
                str(BASE_RECIPE["suite"]),
                rootfs,
            ]
            _run(
                argv,
                code="VF_IMAGE_BASE",
                step="mmdebstrap",
                remedy="check that Debian's mirror is reachable (docs/images.md)",
                where=ref,
            )
            changes = [word for line in _strings("config") for word in ("--change", line)]
            _run(
                podman.command("import", *changes, rootfs, ref),
                code="VF_IMAGE_BASE",
                step="podman import",
                remedy="check that `podman info` works on this machine (docs/images.md)",
                where=ref,
            )
    return ref


def _strings(key: str) -> list[str]:
    value = BASE_RECIPE[key]
    assert isinstance(value, list)
    return [str(item) for item in value]


def _checkout() -> Path:
    if not (_REPO / "docker" / "Dockerfile").is_file():
        raise _fail(
            "VF_IMAGE_SOURCE",
            "vf's image sources (docker/Dockerfile, runtime/) are not part of this installation",
            "run vf from a checkout of its repository to build the worker image, or build it "
            "there once (scripts/build-images) and keep it in local storage",
            str(_REPO),
        )
    return _REPO


def _source_files(repo: Path, recipe: Recipe) -> list[Path]:
    files: list[Path] = []
    for name in (recipe.dockerfile, *WORKER_SOURCES):
        path = repo / name
        found = sorted(path.rglob("*")) if path.is_dir() else [path]
        files += [f for f in found if f.is_file() and "__pycache__" not in f.parts]
    return [f for f in files if f.suffix != ".pyc"]


def image_reference(base: str, recipe: Recipe = WORKER) -> str:
    """An image's reference: its base and every file its Dockerfile reads, digested."""
    repo = _checkout()
    parts = [base.encode()]
    for path in _source_files(repo, recipe):
        parts += [str(path.relative_to(repo)).encode(), path.read_bytes()]
    return f"{recipe.repository}:{__version__}-{_digest(*parts)}"


def _stage_context(repo: Path, recipe: Recipe, context: Path) -> None:
    """Copy only what the Dockerfile reads, in the repository's layout."""
    for path in _source_files(repo, recipe):
        target = context / path.relative_to(repo)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)


def index_access() -> list[str]:
    """podman build flags that let pip (and apt) in a build reach the package index as the
    host does: the host's network, and the host's CA bundle where Debian's pip reads it."""
    return ["--network=host", *appfiles.host_certificates()]


def ensure_image(podman: Podman, recipe: Recipe, *, log: Log) -> str:
    """``recipe``'s Dockerfile FROM the Debian base, built once per digest of its inputs."""
    ref = image_reference(base_reference(), recipe)
    if podman.image_exists(ref):  # the base may be gone; the image holds its layers
        return ref
    base = ensure_base_image(podman, log=log)
    repo = _checkout()
    with _locked(recipe.repository.rsplit("/", 1)[-1]):
        if podman.image_exists(ref):
            return ref
        log(f"building the {recipe.what} {ref} from {recipe.dockerfile} (once)")
        with tempfile.TemporaryDirectory(prefix="vf-image-") as scratch:
            context = Path(scratch)
            _stage_context(repo, recipe, context)
            argv = [
                "build",
                *podman.run_args(),
                "--pull=never",
                # The tag is the cache: no intermediate layers or stages are kept beside it.
                "--layers=false",
                *index_access(),
                "--build-arg",
                f"{recipe.base_arg}={base}",
                "--file",
                str(context / recipe.dockerfile),
                "--tag",
                ref,
                str(context),
            ]
            _run(
                podman.command(*argv),
                code="VF_IMAGE_BUILD",
                step=f"podman build of {ref}",
                remedy="read the build's output above; docs/images.md says how to build by hand",
                where=ref,
            )
    return ref


def ensure_worker_image(podman: Podman, *, log: Log) -> str:
    """docker/Dockerfile FROM the Debian base, built once per digest of its inputs."""
    return ensure_image(podman, WORKER, log=log)


def prune_superseded(podman: Podman, current: set[str], *, log: Log) -> list[str]:
    """Remove the other tags (older digests) of the repositories of vf's images in
    ``current``; an image a container still uses stays. Returns the references removed."""
    ours = {BASE_REPOSITORY, WORKER.repository, GPU_PYTHON.repository}
    removed: list[str] = []
    for repository in sorted(ours & {ref.rsplit(":", 1)[0] for ref in current}):
        listed = podman.run(
            [
                "images",
                "--format",
                "{{.Repository}}:{{.Tag}}",
                "--filter",
                f"reference={repository}",
            ],
            timeout=60,
        )
        for ref in sorted(set(listed.stdout.split()) - current):
            if podman.run(["rmi", ref], timeout=120).returncode == 0:
                log(f"removed {ref} (superseded)")
                removed.append(ref)
    return removed


def ensure_pipeline_image(
    podman: Podman,
    *,
    tag: str,
    app_dir: Path,
    log: Log,
    modules: list[str] | None = None,
) -> None:
    """The pipeline image ``tag``: ``app_dir``'s Dockerfile, or the one ``vf init`` writes
    (copying ``modules``, or every top-level module and package of ``app_dir``), FROM the
    worker image. podman's layer cache makes a rebuild of unchanged files quick."""
    if not app_dir.is_dir():
        raise VfError(
            "VF_PIPELINE_IMAGE",
            f"the app folder {app_dir} is not a directory",
            "pass the project folder that holds the node modules (and its Dockerfile, if any)",
            str(app_dir),
        )
    worker = ensure_worker_image(podman, log=log)
    dockerfile = app_dir / "Dockerfile"
    with tempfile.TemporaryDirectory(prefix="vf-pipeline-image-") as scratch:
        root = Path(scratch)
        if not dockerfile.is_file():
            dockerfile = root / "Dockerfile"
            dockerfile.write_text(appfiles.init_dockerfile(app_dir, modules))
            log(f"building {tag} from {app_dir} with the Dockerfile vf init writes")
        else:
            log(f"building {tag} from {dockerfile}")
        argv = [
            "build",
            *podman.run_args(),
            "--pull=never",
            *index_access(),
            "--build-arg",
            f"PYTHON_IMAGE={worker}",
            "--file",
            str(dockerfile),
            "--tag",
            tag,
            str(app_dir),
        ]
        _run(
            podman.command(*argv),
            code="VF_PIPELINE_IMAGE",
            step=f"podman build of {tag}",
            remedy=f"fix the Dockerfile or the files it copies from {app_dir}, then run again",
            where=str(app_dir),
            kind=VfError,  # the app's Dockerfile or files: the user's to fix (exit 2)
        )


_FIND_MODULES = (
    "import importlib.util, sys\n"
    "print(' '.join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))\n"
)


def check_node_modules(podman: Podman, *, tag: str, nodes: dict[str, str], app_dir: Path) -> None:
    """Refuse a pipeline image whose Python cannot find a node module the plan names
    (``nodes``: node → module), as its workers would, before any pod runs from it. Only
    each module's top-level name is looked up, so nothing of the user's code runs here."""
    tops = sorted({module.split(".")[0] for module in nodes.values()})
    if not tops:
        return
    argv = ["run", "--rm", *podman.run_args(), "--network=none", "--entrypoint=python"]
    done = podman.run([*argv, tag, "-c", _FIND_MODULES, *tops], timeout=120)
    if done.returncode != 0:
        raise _fail(
            "VF_PIPELINE_IMAGE",
            f"image {tag} cannot run python to look for its node modules (exit {done.returncode})",
            f"fix the Dockerfile in {app_dir}: the image must be FROM vf's worker image",
            str(app_dir),
            tail=done.stdout + done.stderr,
            kind=VfError,
        )
    absent = set(done.stdout.split())
    if not absent:
        return
    lacking = sorted(f"'{m}' (node '{n}')" for n, m in nodes.items() if m.split(".")[0] in absent)
    dockerfile = app_dir / "Dockerfile"
    source = str(dockerfile) if dockerfile.is_file() else "the Dockerfile vf init writes"
    raise VfError(
        "VF_PIPELINE_IMAGE",
        f"image {tag}, built from {source}, lacks the node module {', '.join(lacking)} "
        "that the plan runs from it: its workers could not import their node class",
        "copy each node module into the image under /app (e.g. "
        f"`COPY {sorted(absent)[0]}.py /app/`), or put it on the image's PYTHONPATH",
        str(dockerfile if dockerfile.is_file() else app_dir),
    )
