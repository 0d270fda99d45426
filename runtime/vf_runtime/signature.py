"""Whether a node's ``process``/``consume`` can take one input per parent (ENV-3).

A join of two parents whose ``process`` takes one argument would fail on every input
at run time; the compiler refuses it when lowering the graph and a worker at start.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from vf_runtime.context import context_parameter
from vf_runtime.nodes import Consumer, Node, Processor

_SEEN: dict[tuple[type, Any, int], str | None] = {}  # (class, function, parents): verdict


def arity_problem(node: Node, *, parents: int) -> str | None:
    """Why ``node`` cannot be called with ``parents`` inputs, or None (also when unknowable)."""
    if isinstance(node, Processor):
        method = "process"
    elif isinstance(node, Consumer):
        method = "consume"
    else:
        return None
    call = getattr(node, method, None)
    if call is None or parents < 1:
        return None
    if not (inspect.ismethod(call) and call.__self__ is node):
        return _problem(node, method=method, call=call, parents=parents)
    # A method of the node's class: every node of that class has the same verdict, read once.
    key = (type(node), call.__func__, parents)
    if key not in _SEEN:
        _SEEN[key] = _problem(node, method=method, call=call, parents=parents)
    return _SEEN[key]


def _problem(node: Node, *, method: str, call: Callable[..., Any], parents: int) -> str | None:
    try:
        signature = inspect.signature(call)
    except (TypeError, ValueError):  # a builtin or C callable: nothing to read
        return None
    context = context_parameter(call)  # taken by keyword, not one of the inputs
    try:
        signature.bind(*([None] * parents), **({context: None} if context else {}))
    except TypeError:
        return (
            f"{type(node).__name__}.{method}{signature} cannot take {parents} input(s), "
            f"one per parent"
        )
    return None
