"""Native components: nodes implemented outside the graph module, in any language.

The compiler reads and validates a component's descriptor (``component.yaml``) and
hands it here as a :class:`ComponentSpec`; :func:`component_node` builds the graph node
that stands for it. The component runs as its own process (its image's command in a
cluster, ``runtime.localCommand`` under ``vf run-local``) and speaks the worker protocol;
a component written in Python can do that with :func:`serve`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

from vf_runtime.constants import CPU, GPU
from vf_runtime.errors import AuthoringError
from vf_runtime.nodes import Consumer, Node, Processor, Producer

COMPONENT_REF_ENV = "VF_COMPONENT_REF"

# The graph keywords a component accepts, per kind; the rest comes from its descriptor.
OPTIONS: Mapping[str, frozenset[str]] = {
    "producer": frozenset({"name", "image"}),
    "processor": frozenset(
        {"name", "image", "nb_tasks", "partition_by", "join_policy", "delivery", "warmup_seconds"}
    ),
    "consumer": frozenset({"name", "image", "join_policy", "delivery", "idempotent"}),
}


@dataclass(frozen=True, kw_only=True)
class ComponentPort:
    """An extra container port the component listens on."""

    name: str
    port: int
    protocol: str = "TCP"


@dataclass(frozen=True, kw_only=True)
class ComponentSpec:
    """A validated descriptor: everything vf needs to plan, render and run the component.

    ``ref`` (``name@sha256:<digest of the descriptor>``) is what workers receive as
    ``VF_COMPONENT_REF``; ``directory`` is where the descriptor lies on this machine and
    only ever resolves ``local_command`` (it never reaches a plan or a manifest).
    """

    name: str
    kind: str
    ref: str
    image: str | None
    command: tuple[str, ...]
    ports: tuple[ComponentPort, ...]
    finite: bool
    gpu_count: int | None
    gpu_memory_gib: float | None
    cpu: str | None
    memory: str | None
    local_command: tuple[str, ...] | None
    directory: str


class _NativeMixin:
    """What the component nodes share: the spec and a body that never runs in-process."""

    _vf_component: ComponentSpec

    def _native(self) -> NoReturn:
        raise NotImplementedError(
            f"component {self._vf_component.name!r} runs in its own process, not in vf's"
        )


class ComponentProducer(_NativeMixin, Producer):
    def next(self) -> Any:
        self._native()


class ComponentProcessor(_NativeMixin, Processor):
    def process(self, *inputs: Any) -> Any:
        self._native()


class ComponentConsumer(_NativeMixin, Consumer):
    def consume(self, *inputs: Any) -> None:
        self._native()


_CLASSES: Mapping[str, type[Node]] = {
    "producer": ComponentProducer,
    "processor": ComponentProcessor,
    "consumer": ComponentConsumer,
}


def component_spec(node: Node) -> ComponentSpec | None:
    """The spec of a component node; None for a node written as a Python class."""
    spec = getattr(node, "_vf_component", None)
    return spec if isinstance(spec, ComponentSpec) else None


def component_node(spec: ComponentSpec, *, params_json: str, options: Mapping[str, Any]) -> Node:
    """The graph node of ``spec``: its params (canonical JSON, already checked against the
    descriptor) and the graph's keywords (name, nb_tasks, …)."""
    allowed = OPTIONS[spec.kind]
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise AuthoringError(
            "VF_COMPONENT_OPTION",
            f"component {spec.name!r} is a {spec.kind} and does not take {', '.join(unknown)}",
            f"pass only {', '.join(sorted(allowed))}; GPUs, finiteness and the image's "
            "defaults come from the descriptor",
        )
    values: dict[str, Any] = {"name": spec.name, "image": spec.image, **options}
    if spec.kind == "producer":
        values["is_finite"] = spec.finite
    if spec.kind == "processor":
        values["device_type"] = GPU if spec.gpu_count is not None else CPU
        values["gpu_count"] = spec.gpu_count or 1
        values["gpu_memory_gib"] = spec.gpu_memory_gib
    node = _CLASSES[spec.kind](**values)
    node._vf_component = spec  # type: ignore[attr-defined]
    node._vf_component_params = params_json  # type: ignore[attr-defined]
    return node


def component_params(node: Node) -> str:
    """The canonical params JSON of a component node."""
    return str(getattr(node, "_vf_component_params", "{}"))


def _builder(node_class: type[Node]) -> Any:
    from vf_runtime.worker.build import KIND_CLASSES, NodeInitError
    from vf_runtime.worker.config import ConfigError, WorkerConfig

    def build(config: WorkerConfig) -> Node:
        try:
            node = node_class(**dict(config.params))
        except Exception as exc:
            call = f"{node_class.__name__}(**VF_NODE_PARAMS_JSON)"
            raise NodeInitError(node=config.node_name, call=call, exc=exc) from exc
        expected = KIND_CLASSES[config.node_kind]
        if not isinstance(node, expected):
            raise ConfigError(
                [
                    f"{node_class.__name__} is not a {expected.__name__} but VF_NODE_KIND is "
                    f"{config.node_kind!r}: the descriptor's kind and the code disagree"
                ]
            )
        node._name = config.node_name
        return node

    return build


def serve(node_class: type[Node], env: Mapping[str, str] | None = None) -> NoReturn:
    """Run one replica of a component written in Python: ``node_class(**params)`` under the
    worker protocol, configured by the ``VF_*`` environment vf wrote for the component."""
    import asyncio  # here, not above: the compiler imports this module and needs no event loop
    import logging  # likewise: a compile never logs

    from vf_runtime.worker.replica import run_worker

    logging.basicConfig(
        level=os.environ.get("VF_LOG_LEVEL", "INFO").upper(),
        format="%(asctime)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    environ = os.environ if env is None else env
    sys.exit(asyncio.run(run_worker(environ, build=_builder(node_class))))


__all__ = [
    "COMPONENT_REF_ENV",
    "ComponentConsumer",
    "ComponentPort",
    "ComponentProcessor",
    "ComponentProducer",
    "ComponentSpec",
    "component_node",
    "component_params",
    "component_spec",
    "serve",
]
