"""``vf run-tree --runtime podman``: each worker and provision container an OCI container.

A container runs from the image its pod names, in podman's local storage (built from
``--app`` when missing, unless ``--no-build``), attached (``podman run`` is the local
process the pod's bookkeeping polls, its output the container's log), on the host's
network so the per-pod loopback ports and the Service proxies stay as they are. Every
container carries the run's label and a name with the run's prefix; it is removed once
its exit is read, and whatever is left is removed at the end of the run, by the run's
guardian too when ``vf run-tree`` itself is killed.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from vf.containers.engine import Podman, find_podman, require_podman
from vf.errors import VfError
from vf.runtree.images import ImageResolver
from vf.runtree.ocispec import ImageConfig, OciSpec, Volume, entrypoint_flag
from vf.runtree.podspec import ContainerLaunch
from vf.runtree.runtime import Running, StartRefused, exit_reason
from vf_runtime.labels import RUN_TREE_LABEL
from vf_runtime.local.guardian import Guardian

_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"


def local_reference(ref: str) -> str:
    """The local tag of an image reference: a digest-pinned ``name@sha256:HEX`` cannot be
    a tag, so it is stored as ``name:sha256-HEX`` (the first 32 hex digits)."""
    if "@" not in ref:
        return ref
    name, _, digest = ref.partition("@")
    last = name.rsplit("/", 1)
    if ":" in last[-1]:
        name = name.rsplit(":", 1)[0]
    return f"{name}:{digest.replace(':', '-')[:39]}"


@dataclass
class RunningContainer:
    """An attached ``podman run`` and the container it runs."""

    runtime: PodmanRuntime
    name: str
    spec: OciSpec
    process: subprocess.Popen[bytes]
    folder: Path  # podman run's working folder: the pid file, and conmon's ``oom`` marker

    def poll(self) -> int | None:
        code = self.process.poll()
        if code is not None and self.runtime.guardian is not None:
            self.runtime.guardian.release(self.process.pid)
        return code

    def signal(self, sig: int) -> None:
        """Signal the container's first process, as the kubelet's runtime does: directly
        by its pid once podman wrote it (at once, like a kubelet signalling every pod of
        a deleted tree together), else through ``podman kill``."""
        if self.process.poll() is not None:
            return
        try:
            pid = int((self.folder / "pid").read_text().strip())
        except (OSError, ValueError):
            self.runtime.spawn("kill", f"--signal={int(sig)}", self.name)
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)

    def wait(self, timeout: float) -> None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=timeout)

    def exec_argv(self, command: Sequence[str]) -> list[str]:
        return self.runtime.argv("exec", self.name, *command)

    def finish(self) -> tuple[str, str]:
        code = self.process.returncode or 0
        state = self.runtime.inspect(self.name)
        self.runtime.spawn("rm", "--force", "--time=0", self.name)
        limit = f"memory limit {self.spec.memory_limit}" if self.spec.memory_limit else ""
        # conmon writes an empty ``oom`` file into its working folder when the kernel's OOM
        # killer ended the container; podman 4.3 looks for it elsewhere on a cgroup v1 host
        # and reports State.OOMKilled false, so the file itself is read too.
        if state.get("OOMKilled") or (self.folder / "oom").exists():
            return "OOMKilled", limit
        if state.get("Error"):
            return "StartError", str(state["Error"])
        return exit_reason(code), ""


@dataclass
class PodmanRuntime:
    """Starts the worker image's containers with podman; the rest stay processes."""

    podman: Podman
    guardian: Guardian | None = None  # set by attach()
    run_id: str = field(
        default_factory=lambda: "".join(secrets.choice(_ALPHABET) for _ in range(8))
    )
    name: str = "podman"
    images: dict[str, ImageConfig] = field(default_factory=dict)
    _spawned: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def attach(self, guardian: Guardian) -> None:
        """Adopt each container's ``podman run`` into ``guardian``, which also removes the
        run's containers when it ends (after a SIGKILL of vf, say)."""
        self.guardian = guardian
        guardian.on_close(self.remove_all_argv())

    def argv(self, *args: str) -> list[str]:
        return self.podman.command(*args)

    def remove_all_argv(self) -> list[str]:
        return self.argv(
            "rm", "--force", "--time=0", f"--filter=label={RUN_TREE_LABEL}={self.run_id}"
        )

    def spawn(self, *args: str) -> None:
        """Run a podman command without waiting for it (reaped later, awaited at close)."""
        self._spawned = [p for p in self._spawned if p.poll() is None]
        with contextlib.suppress(OSError):
            self._spawned.append(
                subprocess.Popen(
                    self.argv(*args),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )

    def inspect(self, name: str) -> dict[str, object]:
        done = subprocess.run(
            self.argv("container", "inspect", "--format={{json .State}}", name),
            capture_output=True,
            text=True,
            check=False,
        )
        with contextlib.suppress(ValueError):
            state = json.loads(done.stdout or "{}")
            if isinstance(state, dict):
                return state
        return {}

    def image(self, ref: str) -> ImageConfig:
        """The image's run configuration (``podman image inspect``), read once."""
        local = local_reference(ref)
        if local not in self.images:
            done = subprocess.run(
                self.argv("image", "inspect", "--format={{json .Config}}", local),
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode != 0:
                raise missing_image(ref, local)
            self.images[local] = ImageConfig.from_inspect(local, json.loads(done.stdout))
        return self.images[local]

    def takes(self, launch: ContainerLaunch) -> bool:
        return launch.oci is not None

    def start(self, launch: ContainerLaunch, *, log: BinaryIO, attempt: int) -> Running:
        spec = launch.oci
        assert spec is not None
        if spec.refused is not None:
            raise StartRefused("CreateContainerConfigError", spec.refused)
        for volume in spec.volumes:
            own(volume, spec.fs_group)
        name = f"vf-{self.run_id}-{spec.pod}-{launch.name}-{attempt}"
        folder = launch.cwd / f".{launch.name}-{attempt}"
        folder.mkdir(parents=True, exist_ok=True)
        argv = self.argv(
            "run",
            f"--name={name}",
            f"--pidfile={folder / 'pid'}",
            f"--label={RUN_TREE_LABEL}={self.run_id}",
            f"--label=io.kubernetes.pod.name={spec.pod}",
            f"--label=io.kubernetes.pod.namespace={spec.namespace}",
            f"--label=io.kubernetes.container.name={launch.name}",
            "--pull=never",
            "--log-driver=none",
            *self.podman.run_args(),
            *spec.flags,
            *(f"--env={k}={v}" for k, v in launch.env.items()),
        )
        if spec.entrypoint is not None:
            argv.append(entrypoint_flag(spec.entrypoint))
        argv += [spec.image, *(spec.args or ())]
        process = subprocess.Popen(
            argv,
            cwd=folder,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        if self.guardian is not None:
            self.guardian.adopt(process.pid)
        return RunningContainer(
            runtime=self,
            name=name,
            spec=spec,
            process=process,
            folder=folder,
        )

    def close(self) -> None:
        """Remove every container of this run (``podman ps -a`` shows none of them after)."""
        for process in self._spawned:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=30)
        self._spawned = []
        subprocess.run(
            self.remove_all_argv(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=120,
            check=False,
        )


def own(volume: Volume, fs_group: int | None) -> None:
    """Give a volume the ownership and modes the kubelet gives it: an emptyDir's or a
    claim's folder is writable by every user (0777); a config volume's files carry its
    ``defaultMode`` (0644). With ``fsGroup`` that group owns them, folders get the setgid
    bit and config files the group's read bit."""
    setgid = 0o2000 if fs_group is not None else 0
    if not volume.config:
        _set(volume.host, 0o777 | setgid, fs_group)
        return
    for path in [volume.host, *sorted(volume.host.rglob("*"))]:
        if path.is_dir():
            _set(path, 0o755 | setgid, fs_group)
        else:
            mode = volume.mode if volume.mode is not None else 0o644
            _set(path, mode | (0o440 if fs_group is not None else 0), fs_group)


def _set(path: Path, mode: int, group: int | None) -> None:
    with contextlib.suppress(OSError):
        if group is not None:
            os.chown(path, -1, group)
        path.chmod(mode)


def missing_image(ref: str, local: str) -> VfError:
    return VfError(
        "VF_RUN_TREE_NO_IMAGE",
        f"image {ref!r} is not in podman's local storage (as {local!r}) and --no-build "
        "keeps vf run-tree from building it",
        f"build it with `podman build -t {local} APP_DIR` (or drop --no-build and vf run-tree "
        "builds it from --app)",
        ref,
    )


def node_modules(plan: dict[str, Any], image: str) -> dict[str, str]:
    """Node → module of the node classes the plan runs from ``image`` (``VF_NODE_CLASS``)."""
    found = {
        str(w["node"]): str(w["env"]["VF_NODE_CLASS"]).rpartition(".")[0]
        for w in plan.get("workloads") or []
        if w.get("image") == image
        and not w.get("component")
        and w.get("env", {}).get("VF_NODE_CLASS")
    }
    return {node: module for node, module in sorted(found.items()) if module}


def prepare_images(
    runtime: PodmanRuntime,
    resolver: ImageResolver,
    *,
    app_dir: Path,
    build: bool,
    log: Callable[[str], None],
) -> None:
    """Build every worker image the plan names from ``app_dir``, with the node modules the
    plan names (podman's layer cache makes an unchanged folder a quick rebuild), so the
    containers run the code that is there now; with ``build`` off, use the image in local
    storage as it is, and a missing one is a named error. Then check that it holds the node
    modules the plan names, and read its configuration."""
    from vf.containers.build import check_node_modules, ensure_pipeline_image

    for ref, role in sorted(resolver.flow_images().items()):
        if role != "worker":
            continue
        local = local_reference(ref)
        nodes = node_modules(resolver.ctx.plan, ref)
        if build:
            modules = sorted(set(nodes.values())) or None
            ensure_pipeline_image(
                runtime.podman, tag=local, app_dir=app_dir, log=log, modules=modules
            )
        elif not runtime.podman.image_exists(local):
            raise missing_image(ref, local)
        check_node_modules(runtime.podman, tag=local, nodes=nodes, app_dir=app_dir)
        runtime.image(ref)


def select_runtime(
    choice: str,
    resolver: ImageResolver,
    *,
    app_dir: Path,
    build: bool,
    log: Callable[[str], None],
) -> PodmanRuntime | None:
    """``--runtime``: podman (its images ready), or None for local processes. ``auto`` is
    podman where it is installed, else processes."""
    if choice == "process" or (choice == "auto" and find_podman() is None):
        return None
    if choice == "auto":
        log(
            "podman is installed: the pods run as containers (the first run builds vf's "
            "images, a few minutes); --runtime process runs them as local processes"
        )
    runtime = PodmanRuntime(require_podman())
    prepare_images(runtime, resolver, app_dir=app_dir, build=build, log=log)
    return runtime
