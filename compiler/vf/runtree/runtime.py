"""What starts a pod's container: the seam between the kubelet's bookkeeping and a runtime.

``pods.py`` decides when a container starts, restarts, is probed and is stopped; a
``ContainerRuntime`` decides what a start is. The process runtime starts the container's
argv as a local process; the podman runtime (``podman_runtime.py``) starts an OCI
container from the pod's image. Both hand back a ``Running`` that ``pods.py`` polls and
signals the same way, so restart policy, probes and graceful stop are one piece of code.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from typing import BinaryIO, Protocol

from vf.runtree.podspec import ContainerLaunch
from vf_runtime.local.guardian import Guardian


class StartRefused(Exception):
    """The kubelet would not start this container (``CreateContainerConfigError``)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class Running(Protocol):
    """One started container: polled, signalled, and described once it exited."""

    @property
    def process(self) -> subprocess.Popen[bytes]: ...

    def poll(self) -> int | None: ...

    def signal(self, sig: int) -> None: ...

    def wait(self, timeout: float) -> None: ...

    def exec_argv(self, command: Sequence[str]) -> list[str]:
        """The argv that runs an ``exec`` probe's command where the container runs."""
        ...

    def finish(self) -> tuple[str, str]:
        """After exit: the termination reason (``Completed``, ``Error``, ``OOMKilled``,
        ...) and what explains it (``memory limit 64Mi``), or an empty text."""
        ...


class ContainerRuntime(Protocol):
    """Starts containers; ``name`` is what the run's opening notice says ran them."""

    name: str

    def takes(self, launch: ContainerLaunch) -> bool:
        """Whether this runtime runs ``launch`` (else the process runtime does)."""
        ...

    def start(self, launch: ContainerLaunch, *, log: BinaryIO, attempt: int) -> Running:
        """Start ``launch``; raise ``StartRefused`` or ``OSError`` when it cannot start."""
        ...

    def close(self) -> None:
        """Remove whatever this runtime still holds (containers, cgroups)."""
        ...


def exit_reason(code: int) -> str:
    return "Completed" if code == 0 else "Error"


@dataclass
class RunningProcess:
    """A container run as a local process, leading a process group of its own."""

    process: subprocess.Popen[bytes]
    guardian: Guardian | None

    def poll(self) -> int | None:
        code = self.process.poll()
        if code is not None and self.guardian is not None:
            self.guardian.release(self.process.pid)
        return code

    def signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, sig)

    def wait(self, timeout: float) -> None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=timeout)

    def exec_argv(self, command: Sequence[str]) -> list[str]:
        return list(command)

    def finish(self) -> tuple[str, str]:
        return exit_reason(self.process.returncode or 0), ""


@dataclass
class ProcessRuntime:
    """Every container a process on this machine, in the translated environment."""

    guardian: Guardian | None = None  # ends each container's group if vf itself is killed
    name: str = "process"

    def takes(self, launch: ContainerLaunch) -> bool:
        return True

    def start(self, launch: ContainerLaunch, *, log: BinaryIO, attempt: int) -> Running:
        process = subprocess.Popen(
            launch.argv,
            env=launch.env,
            cwd=launch.cwd,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        if self.guardian is not None:
            self.guardian.adopt(process.pid)
        return RunningProcess(process=process, guardian=self.guardian)

    def close(self) -> None:
        return None
