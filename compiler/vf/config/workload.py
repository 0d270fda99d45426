"""Workload options of an environment: mounts, rollout policy, supervision, provision image."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field, replace
from typing import Any

from vf.errors import Problem
from vf.ir.records import Mount, Rollout, Supervision

ROLLOUTS = ("drain", "surge")
# Container paths vf mounts itself in every worker (its scratch space and the topology).
RESERVED_PATHS = ("/", "/tmp", "/etc/vf/topology")
_CLAIM_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-.")


@dataclass(frozen=True, kw_only=True)
class WorkloadOptions:
    mounts: tuple[tuple[str, tuple[Mount, ...]], ...] = ()
    rollout: tuple[tuple[str, Rollout], ...] = ()
    supervision: Supervision = field(default_factory=Supervision)
    provision_image: str | None = None

    def mounts_for(self, node: str) -> tuple[Mount, ...]:
        """``*`` mounts plus the node's own, in declaration order."""
        table = dict(self.mounts)
        return table.get("*", ()) + table.get(node, ())

    def rollout_for(self, node: str) -> Rollout | None:
        table = dict(self.rollout)
        return table.get(node, table.get("*"))


def parse_mount(
    text: str, *, env: str, key: str, source: str
) -> tuple[Mount | None, list[Problem]]:
    """``/host[:/container][:ro]`` or ``claim:/path[:ro]`` at ``environments.<env>.<key>``:
    the mount, or None and the problem, as every parser of vf.yaml reports them."""
    mount = _mount_or_reason(text)
    if isinstance(mount, Mount):
        return mount, []
    remedy = (
        "write /host[:/container][:ro] or claim:/path[:ro], at a path "
        "other than /, /tmp and /etc/vf/topology"
    )
    return None, [_problem(env, key, f"{text!r}: {mount}", remedy, source)]


def _mount_or_reason(text: str) -> Mount | str:
    """The mount ``text`` writes, or the reason it is bad."""
    parts = text.split(":")
    read_only = parts[-1] == "ro"
    if read_only:
        parts = parts[:-1]
    if not parts or not parts[0]:
        return "empty mount"
    if parts[0].startswith("/"):
        return _host_mount(parts, read_only=read_only)
    if len(parts) == 1:
        return f"path {parts[0]!r} is not absolute"
    if len(parts) != 2 or not parts[1].startswith("/"):
        return "a claim mount is claim:/path[:ro] with an absolute path"
    if not _claim_name(parts[0]):
        return f"claim {parts[0]!r} is not a PersistentVolumeClaim name (lowercase DNS name)"
    return _checked(Mount(path=posixpath.normpath(parts[1]), read_only=read_only, claim=parts[0]))


def _claim_name(name: str) -> bool:
    labels = name.split(".")
    return len(name) <= 253 and all(
        label and label[0] != "-" and label[-1] != "-" and set(label) <= _CLAIM_CHARS
        for label in labels
    )


def _checked(mount: Mount) -> Mount | str:
    path = "/" + mount.path.lstrip("/")  # normpath keeps a leading "//"
    if path == "/":
        return "container path / is the container's root"
    if path in RESERVED_PATHS:
        return f"container path {path} is where vf mounts its own volume"
    return replace(mount, path=path)


def _host_mount(parts: list[str], *, read_only: bool) -> Mount | str:
    if len(parts) > 2:
        return "too many ':' fields"
    path = parts[1] if len(parts) == 2 else parts[0]
    if not path.startswith("/"):
        return f"container path {path!r} is not absolute"
    return _checked(
        Mount(
            path=posixpath.normpath(path), read_only=read_only, source=posixpath.normpath(parts[0])
        )
    )


def _problem(env: str, key: str, what: str, remedy: str, source: str) -> Problem:
    return Problem(
        code="VF_CONFIG_WORKLOAD",
        what=f"environments.{env}.{key}: {what}",
        remedy=remedy,
        where=f"{source} (environment '{env}')",
    )


def parse_workloads(
    raw: dict[str, Any], *, env: str, source: str
) -> tuple[WorkloadOptions, list[Problem]]:
    """Mounts, rollout, supervision and provision image of one environment."""
    problems: list[Problem] = []
    mounts: list[tuple[str, tuple[Mount, ...]]] = []
    for key, entries in sorted((raw.get("mounts") or {}).items()):
        parsed: list[Mount] = []
        for entry in entries:
            mount, found = parse_mount(entry, env=env, key=f"mounts.{key}", source=source)
            problems += found
            parsed += [mount] if mount is not None else []
        mounts.append((key, tuple(parsed)))
    options = WorkloadOptions(
        mounts=tuple(mounts),
        rollout=tuple(sorted((raw.get("rollout") or {}).items())),
        supervision=_supervision(raw.get("supervision") or {}),
        provision_image=raw.get("provision_image"),
    )
    table = dict(options.mounts)
    for key in sorted(table):
        combined = options.mounts_for(key) if key != "*" else table["*"]
        paths = [m.path for m in combined]
        for path in sorted({p for p in paths if paths.count(p) > 1}):
            problems.append(
                _problem(
                    env,
                    f"mounts.{key}",
                    f"container path {path} is mounted twice",
                    "mount each container path once",
                    source,
                )
            )
    return options, problems


def _supervision(raw: dict[str, Any]) -> Supervision:
    default = Supervision()
    return Supervision(
        max_restarts=raw.get("max_restarts", default.max_restarts),
        backoff_seconds=tuple(raw.get("backoff_seconds", default.backoff_seconds)),
        local_backoff_seconds=tuple(
            raw.get("local_backoff_seconds", default.local_backoff_seconds)
        ),
    )


def pod_mounts(mounts: tuple[Mount, ...]) -> tuple[Mount, ...]:
    """What the pod mounts: a host path at or under a claim's path is served by the claim."""
    claims = [m.path for m in mounts if m.claim is not None]
    return tuple(
        m
        for m in mounts
        if m.claim is not None
        or not any(m.path == c or m.path.startswith(c.rstrip("/") + "/") for c in claims)
    )
