"""A pod's container as an OCI container: the ``podman run`` flags the kubelet's choices map to.

The image's own configuration (``ENTRYPOINT``, ``CMD``, ``WORKDIR``, ``ENV``, ``USER``)
applies where the container does not override it, as with a CRI runtime. The pod's and
the container's ``securityContext`` (the container's fields win), ``resources`` and
``volumeMounts`` become podman's flags; ``runAsNonRoot`` is checked against the user the
container would run as, as the kubelet checks it before it creates the container.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vf.textio.objects import Obj

CONFIG_KINDS = ("configMap", "secret", "projected", "downwardAPI")
# containerd's default capabilities beyond podman's own default set (both start from Docker's)
CRI_EXTRA_CAPS = ("AUDIT_WRITE", "MKNOD", "NET_RAW")
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$")
_SUFFIX = {
    "": 1.0,
    "m": 1e-3,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "E": 1e18,
    "Ki": 2.0**10,
    "Mi": 2.0**20,
    "Gi": 2.0**30,
    "Ti": 2.0**40,
    "Pi": 2.0**50,
    "Ei": 2.0**60,
}


@dataclass(frozen=True, kw_only=True)
class ImageConfig:
    """What ``podman image inspect`` says of an image's run configuration."""

    ref: str
    user: str = ""
    env: Mapping[str, str] = field(default_factory=dict)
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    workdir: str = ""

    @classmethod
    def from_inspect(cls, ref: str, config: Obj) -> ImageConfig:
        env = dict(str(item).split("=", 1) for item in config.get("Env") or [] if "=" in item)
        return cls(
            ref=ref,
            user=str(config.get("User") or ""),
            env=env,
            entrypoint=tuple(config.get("Entrypoint") or ()),
            cmd=tuple(config.get("Cmd") or ()),
            workdir=str(config.get("WorkingDir") or ""),
        )


@dataclass(frozen=True, kw_only=True)
class Volume:
    """A host folder (or file) behind a mount, with the ownership the kubelet gives it."""

    host: Path
    config: bool  # a ConfigMap/Secret/projected volume: read-only, files by defaultMode
    claim: bool
    mode: int | None  # defaultMode of a config volume


@dataclass(frozen=True, kw_only=True)
class OciSpec:
    """One container for ``podman run``: image, command, flags, and what the kubelet refused."""

    image: str
    pod: str
    namespace: str
    entrypoint: tuple[str, ...] | None  # the container's command; None: the image's
    args: tuple[str, ...] | None  # None: the image's CMD (only when command is None too)
    flags: tuple[str, ...]
    volumes: tuple[Volume, ...] = ()
    fs_group: int | None = None
    memory_limit: str | None = None  # as the pod spec wrote it (for OOMKilled reports)
    refused: str | None = None  # CreateContainerConfigError's message, when refused

    def host_path(self, path: str) -> str:
        """``path`` inside the container as this machine sees it: under a bind mount, the
        mount's source (a Secret's file is a file of the run); anything else as given."""
        binds = []
        for flag in self.flags:
            if flag.startswith("type=bind,"):
                fields = dict(part.split("=", 1) for part in flag.split(",") if "=" in part)
                binds.append((fields["destination"].rstrip("/"), fields["source"]))
        for target, source in sorted(binds, key=lambda bind: -len(bind[0])):
            if path == target or path.startswith(target + "/"):
                return source + path[len(target) :]
        return path

    def command_line(self, image: ImageConfig) -> list[str]:
        """What runs in the container (for the log): ENTRYPOINT/CMD by Kubernetes' rules."""
        if self.entrypoint is not None:
            return [*self.entrypoint, *(self.args or ())]
        if self.args is not None:
            return [*image.entrypoint, *self.args]
        return [*image.entrypoint, *image.cmd]


def quantity(text: Any) -> float:
    """A Kubernetes resource quantity (``500m``, ``64Mi``, ``1e3``, ``2``) as a number."""
    match = _QUANTITY.match(str(text).strip())
    if match is None or match.group(2) not in _SUFFIX:
        raise ValueError(f"not a resource quantity: {text!r}")
    return float(match.group(1)) * _SUFFIX[match.group(2)]


def _merged(pod: Obj, container: Obj) -> Obj:
    """The effective security context: the container's fields over the pod's."""
    keys = ("runAsUser", "runAsGroup", "runAsNonRoot", "seccompProfile")
    merged = {k: pod[k] for k in keys if k in pod}
    merged.update(container)
    return merged


def _user(context: Obj, image: ImageConfig) -> tuple[str | None, str]:
    """(the --user flag's value or None, the user the container runs as)."""
    image_user, _, image_group = image.user.partition(":")
    uid, gid = context.get("runAsUser"), context.get("runAsGroup")
    if uid is None and gid is None:
        return None, image_user or "0"
    user = str(uid) if uid is not None else (image_user or "0")
    group = str(gid) if gid is not None else image_group
    return (f"{user}:{group}" if group else user), user


def non_root_refusal(context: Obj, image: ImageConfig) -> str | None:
    """The kubelet's refusal of a ``runAsNonRoot`` container that would run as root."""
    if not context.get("runAsNonRoot"):
        return None
    _, user = _user(context, image)
    if not user.isdigit():
        return (
            f"container has runAsNonRoot and image has non-numeric user ({user}), "
            "cannot verify user is non-root"
        )
    if int(user) == 0:
        return "container has runAsNonRoot and image will run as root"
    return None


def _security(context: Obj, pod: Obj) -> list[str]:
    flags: list[str] = []
    if context.get("privileged"):
        flags.append("--privileged")
    caps = context.get("capabilities") or {}
    drop = [str(c).upper().removeprefix("CAP_") for c in caps.get("drop") or []]
    add = [str(c).upper().removeprefix("CAP_") for c in caps.get("add") or []]
    if "ALL" not in drop:
        add = [c for c in CRI_EXTRA_CAPS if c not in drop] + add
    flags += [f"--cap-drop={c}" for c in drop] + [f"--cap-add={c}" for c in add]
    if context.get("allowPrivilegeEscalation") is False:
        flags += ["--security-opt", "no-new-privileges"]
    if context.get("readOnlyRootFilesystem"):
        flags += ["--read-only", "--read-only-tmpfs=false"]
    profile = (context.get("seccompProfile") or {}).get("type")
    if profile != "RuntimeDefault":  # the kubelet's default is Unconfined
        flags += ["--security-opt", "seccomp=unconfined"]
    groups = [pod.get("fsGroup"), *(pod.get("supplementalGroups") or [])]
    flags += [f"--group-add={int(g)}" for g in groups if g is not None]
    return flags


def _resources(resources: Obj) -> tuple[list[str], str | None]:
    limits = resources.get("limits") or {}
    requests = resources.get("requests") or {}
    flags: list[str] = []
    memory = limits.get("memory")
    if memory is not None:
        size = str(math.ceil(quantity(memory)))
        flags += [f"--memory={size}", f"--memory-swap={size}"]  # no swap, as on a node
    if "cpu" in limits:
        flags.append(f"--cpus={quantity(limits['cpu']):g}")
    cpu = requests.get("cpu", limits.get("cpu"))
    if cpu is not None:  # the kubelet's cpu.shares: millicores * 1024 / 1000, at least 2
        flags.append(f"--cpu-shares={max(2, int(quantity(cpu) * 1024))}")
    return flags, (str(memory) if memory is not None else None)


def _mounts(
    container: Obj, pod: Obj, folders: Mapping[str, Path], claims: Sequence[str]
) -> tuple[list[str], list[Volume]]:
    volumes = {v["name"]: v for v in pod.get("volumes") or []}
    flags: list[str] = []
    held: list[Volume] = []
    for mount in container.get("volumeMounts") or []:
        volume = volumes.get(mount["name"], {})
        target = str(mount["mountPath"])
        if (volume.get("emptyDir") or {}).get("medium") == "Memory":
            size = (volume.get("emptyDir") or {}).get("sizeLimit")
            extra = f",tmpfs-size={math.ceil(quantity(size))}" if size else ""
            flags += ["--mount", f"type=tmpfs,destination={target}{extra}"]
            continue
        base = folders.get(mount["name"])
        if base is None:
            continue
        host = base / mount["subPath"] if mount.get("subPath") else base
        config = any(k in volume for k in CONFIG_KINDS)
        claim = "persistentVolumeClaim" in volume or mount["name"] in claims
        mode = _default_mode(volume) if config else None
        held.append(Volume(host=base, config=config, claim=claim, mode=mode))
        readonly = ",readonly=true" if config or mount.get("readOnly") else ""
        flags += ["--mount", f"type=bind,source={host},destination={target}{readonly}"]
    return flags, held


def _default_mode(volume: Obj) -> int | None:
    for kind in CONFIG_KINDS:
        if kind in volume and (volume[kind] or {}).get("defaultMode") is not None:
            return int(volume[kind]["defaultMode"])
    return None


def oci_spec(
    container: Obj,
    pod: Obj,
    *,
    image: ImageConfig,
    folders: Mapping[str, Path],
    claims: Sequence[str],
    command: Sequence[str],
    args: Sequence[str],
    pod_name: str,
    namespace: str,
    hostname: str,
) -> OciSpec:
    """The container's ``podman run`` flags (environment and names are the runtime's)."""
    pod_context = pod.get("securityContext") or {}
    context = _merged(pod_context, container.get("securityContext") or {})
    flags = ["--network=host", f"--hostname={hostname}", "--pids-limit=-1", "--systemd=false"]
    user, _ = _user(context, image)
    if user is not None:
        flags.append(f"--user={user}")
    if container.get("workingDir"):
        flags.append(f"--workdir={container['workingDir']}")
    flags += _security(context, pod_context)
    limits, memory = _resources(container.get("resources") or {})
    mounts, volumes = _mounts(container, pod, folders, claims)
    return OciSpec(
        image=image.ref,
        pod=pod_name,
        namespace=namespace,
        entrypoint=tuple(command) if command else None,
        args=tuple(args) if (args or command) else None,
        flags=tuple(flags + limits + mounts),
        volumes=tuple(volumes),
        fs_group=pod_context.get("fsGroup"),
        memory_limit=memory,
        refused=non_root_refusal(context, image),
    )


def entrypoint_flag(entrypoint: Sequence[str]) -> str:
    """podman's ``--entrypoint`` in its JSON form (an argv, never a shell string)."""
    return "--entrypoint=" + json.dumps(list(entrypoint))
