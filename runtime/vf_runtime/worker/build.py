"""Rebuilding a worker's node from its environment: ``VF_NODE_CLASS(**VF_NODE_PARAMS_JSON)``.

The class is imported from the image (the longest importable module prefix of its
dotted path), built with the recorded constructor arguments, checked against
``VF_NODE_KIND`` and against its parents (it must take one input per parent), and given
the name the environment says.
"""

from __future__ import annotations

import importlib
import sysconfig
import traceback
from pathlib import Path
from typing import Any

from vf_runtime.nodes import Consumer, Node, Processor, Producer
from vf_runtime.signature import arity_problem
from vf_runtime.worker.config import ConfigError, WorkerConfig

OPEN_FIX = (
    "a worker rebuilds the node in its pod from its constructor arguments, where the files, "
    "services and credentials of the machine that compiled the flow are absent: keep "
    "__init__ to storing arguments, and move I/O (files, models, connections) to open(), "
    "which runs in the worker before the first item"
)

KIND_CLASSES: dict[str, type[Node]] = {
    "producer": Producer,
    "processor": Processor,
    "consumer": Consumer,
}


def _resolve_class(path: str) -> Any:
    """Import ``module.Qualname``, trying the longest importable module prefix first.

    A module that is found but fails to import another one reports that one by name.
    """
    parts = path.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        module = ".".join(parts[:cut])
        try:
            target: Any = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            missing = exc.name or ""
            if missing and module != missing and not module.startswith(missing + "."):
                raise  # the module exists but imports one that is missing: the real cause
            continue
        for attribute in parts[cut:]:
            target = getattr(target, attribute)
        return target
    raise ModuleNotFoundError(f"no importable module in {path!r}")


class NodeInitError(ConfigError):
    """The node's own constructor raised in the worker: the node's code failed, not the
    environment. The message carries the exception and the traceback into the node's code."""

    code = "VF_NODE_INIT_FAILED"

    def __init__(self, *, node: str, call: str, exc: BaseException) -> None:
        self.node, self.call = node, call
        self.exception = f"{type(exc).__name__}: {exc}"
        # vf's own frames (the call below, the node metaclass) say nothing to the author.
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if not _ours(f.filename)]
        self.trace = traceback.format_list(frames)
        mine = [f for f in frames if not _library(f.filename)] or frames
        self.where = f"{mine[-1].filename}:{mine[-1].lineno}" if mine else ""
        super().__init__([f"node {node!r}: {call} raised {self.exception}"])

    def render(self) -> str:
        at = f" at {self.where}" if self.where else ""
        lines = [
            f"error[{self.code}] node {self.node!r}: its constructor {self.call} "
            f"failed{at}: {self.exception}"
        ]
        if self.trace:
            lines.append("  Traceback (most recent call last):")
            lines += [f"  {line}" for chunk in self.trace for line in chunk.rstrip().splitlines()]
            lines.append(f"  {self.exception}")
        lines.append(f"  = fix: {OPEN_FIX}")
        return "\n".join(lines)


_RUNTIME = Path(__file__).resolve().parent.parent
_LIBRARIES = tuple(
    {str(Path(sysconfig.get_path(key)).resolve()) for key in ("stdlib", "purelib", "platlib")}
)


def _ours(filename: str) -> bool:
    return Path(filename).resolve().is_relative_to(_RUNTIME)


def _library(filename: str) -> bool:
    """The standard library or an installed package: where the node's code called into."""
    path = Path(filename).resolve()
    return filename.startswith("<") or any(path.is_relative_to(lib) for lib in _LIBRARIES)


def build_node(config: WorkerConfig) -> Node:
    """Rebuild the node as ``cls(**params)`` and check it is the kind the plan says."""
    try:
        cls = _resolve_class(config.node_class)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(
            [
                f"VF_NODE_CLASS={config.node_class!r} cannot be imported: {exc} "
                "(is the module on PYTHONPATH inside the image?)"
            ]
        ) from exc
    params = dict(config.params)
    positional = [v for k in list(params) if k.startswith("*") for v in params.pop(k)]
    try:
        node = cls(*positional, **params)
    except Exception as exc:
        call = f"{config.node_class}(**VF_NODE_PARAMS_JSON)"
        raise NodeInitError(node=config.node_name, call=call, exc=exc) from exc
    expected = KIND_CLASSES[config.node_kind]
    if not isinstance(node, expected):
        raise ConfigError(
            [
                f"VF_NODE_CLASS {config.node_class} is not a {expected.__name__} "
                f"but VF_NODE_KIND is {config.node_kind!r}: recompile and redeploy together"
            ]
        )
    arity = arity_problem(node, parents=len(config.parents))
    if arity is not None:
        raise ConfigError([f"VF_NODE_CLASS {config.node_class}: {arity} (VF_PARENT_NAMES)"])
    node._name = config.node_name  # the environment names the node, not its params
    return node
