"""Rebuilding a worker's node from its environment: ``VF_NODE_CLASS(**VF_NODE_PARAMS_JSON)``.

The class is imported from the image (the longest importable module prefix of its
dotted path), built with the recorded constructor arguments, checked against
``VF_NODE_KIND`` and against its parents (it must take one input per parent), and given
the name the environment says.
"""

from __future__ import annotations

import importlib
from typing import Any

from vf_runtime.nodes import Consumer, Node, Processor, Producer
from vf_runtime.signature import arity_problem
from vf_runtime.worker.config import ConfigError, WorkerConfig

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
        raise ConfigError([f"{config.node_class}(**VF_NODE_PARAMS_JSON) raised {exc!r}"]) from exc
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
