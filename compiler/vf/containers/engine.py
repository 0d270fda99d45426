"""podman as vf drives it: found on PATH, with the flags this machine needs.

Two facts of the machines vf is built on shape the flags (docs/adr/0143-images-from-debian.md):
podman's default runtime ``crun`` refuses a kernel with cgroups in hybrid mode, so ``runc`` is
named when it is installed; and podman raises a container's ``RLIMIT_NOFILE``/``RLIMIT_NPROC``
above what the calling process may hold, which fails the container's start with "Operation
not permitted", so every container (and every build step) is given limits podman itself
holds: the caller's hard ``nofile``, and ``nproc`` no higher than the kernel's ``pid_max``
(podman 4.3 was measured running with ``RLIMIT_NPROC`` lowered to it: 32768 under a hard
limit of 96369, and a container asking for 32769 failed to start).
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from vf.errors import EnvironmentProblem

DEFAULT_TIMEOUT = 600.0
"""Seconds one podman command may take (a build of the worker image takes well under one)."""

_LIMITS = (("nofile", resource.RLIMIT_NOFILE), ("nproc", resource.RLIMIT_NPROC))
_PID_MAX = Path("/proc/sys/kernel/pid_max")


def _ceiling(name: str, hard: int) -> int | None:
    """The highest limit a container may ask for (None: no flag needed)."""
    if name == "nproc" and _PID_MAX.is_file():
        pid_max = int(_PID_MAX.read_text())
        return pid_max if hard == resource.RLIM_INFINITY else min(hard, pid_max)
    return None if hard == resource.RLIM_INFINITY else hard


@dataclass(frozen=True)
class Podman:
    """One podman executable, the OCI runtime it is told to use (None: podman's default) and
    its image storage (None: podman's own; a folder: ``root/`` and ``run/`` in it)."""

    executable: str
    runtime: str | None
    storage: Path | None = None

    def base_args(self) -> list[str]:
        """Global flags that go before every podman subcommand."""
        args = ["--runtime", self.runtime] if self.runtime else []
        if self.storage is not None:
            args += ["--root", str(self.storage / "root"), "--runroot", str(self.storage / "run")]
        return args

    def with_storage(self, folder: Path) -> Podman:
        """The same podman over a storage of its own in ``folder`` (a cold cache, for one)."""
        return replace(self, storage=folder)

    def run_args(self) -> list[str]:
        """Per-container flags this kernel needs (``podman run``/``create``/``build``)."""
        args: list[str] = []
        for name, which in _LIMITS:
            limit = _ceiling(name, resource.getrlimit(which)[1])
            if limit is not None:
                args += ["--ulimit", f"{name}={limit}:{limit}"]
        return args

    def command(self, *args: str) -> list[str]:
        """The full argument vector of ``podman <global flags> <args>``."""
        return [self.executable, *self.base_args(), *args]

    def run(
        self,
        args: Sequence[str],
        *,
        timeout: float = DEFAULT_TIMEOUT,
        input_text: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run ``podman <args>`` and capture its output; a podman that cannot start is exit 3."""
        argv = self.command(*args)
        try:
            return subprocess.run(
                argv,
                input=input_text,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise EnvironmentProblem(
                "VF_PODMAN",
                f"podman {' '.join(args[:2])} did not complete: {exc}",
                "check that `podman info` works on this machine (docs/images.md)",
                self.executable,
            ) from exc

    def image_exists(self, ref: str) -> bool:
        """Whether local storage holds an image under ``ref``."""
        return self.run(["image", "exists", ref], timeout=60).returncode == 0

    def image_size(self, ref: str) -> int:
        """The image's size in bytes as podman reports it (all layers, uncompressed)."""
        done = self.run(["image", "inspect", "--format", "{{.Size}}", ref], timeout=60)
        if done.returncode != 0:
            raise EnvironmentProblem(
                "VF_PODMAN",
                f"podman cannot inspect image {ref}: {done.stderr.strip()}",
                "build it first (scripts/build-images, docs/images.md)",
                ref,
            )
        return int(done.stdout.strip())


def find_podman() -> Podman | None:
    """podman on PATH (``VF_PODMAN`` may name another), with ``runc`` where it is installed."""
    executable = shutil.which(os.environ.get("VF_PODMAN", "podman"))
    if executable is None:
        return None
    return Podman(executable=executable, runtime="runc" if shutil.which("runc") else None)


def require_podman() -> Podman:
    """podman, or the named error that says how to install it (exit 3)."""
    podman = find_podman()
    if podman is None:
        raise EnvironmentProblem(
            "VF_PODMAN_MISSING",
            "podman is not installed (vf builds and runs its images with podman)",
            "install it: apt-get install podman runc mmdebstrap (docs/images.md)",
            "PATH",
        )
    return podman
