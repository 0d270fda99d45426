"""What a node method can ask about where it runs: ``ctx`` (or ``context``), on request.

A ``process``/``consume`` method that declares a parameter named ``ctx`` or ``context``
gets a :class:`RuntimeContext` there, by keyword, on every call; one that does not is
called exactly as before. The context names the flow, run, generation, node and replica,
carries the node's logger, and lets the method route its next output:
``ctx.set_partition_key(v)`` puts ``v`` in that output's ``_partition_key`` metadata
(once; it is never carried further), which a child partitioned with
``partition_by='_partition_key'`` reads (PART-2).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import logging  # the worker's logger; the compiler, which imports this module, never logs

PARAMETERS = ("ctx", "context")
_UNSET = object()


@dataclass
class RuntimeContext:
    """The run a node's call belongs to; one per replica, reused for every call."""

    flow_id: str
    run_id: str
    generation: str
    node_name: str
    replica_id: int
    logger: logging.Logger
    _partition_key: Any = field(default=_UNSET, repr=False)

    def set_partition_key(self, value: Any) -> None:
        """Route the next output by ``value`` (a child with ``partition_by='_partition_key'``)."""
        self._partition_key = value

    def take_partition_key(self) -> Any:
        """The key set during the last call, or None; it applies to one output only."""
        value, self._partition_key = self._partition_key, _UNSET
        return None if value is _UNSET else value


def context_parameter(method: Callable[..., Any]) -> str | None:
    """The name under which ``method`` takes the context, or None when it takes none."""
    try:
        parameters = inspect.signature(method).parameters
    except (TypeError, ValueError):  # a builtin or C callable: nothing to read
        return None
    for name in PARAMETERS:
        parameter = parameters.get(name)
        if parameter is not None and parameter.kind in (
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            inspect.Parameter.KEYWORD_ONLY,
        ):
            return name
    return None


def with_context(
    method: Callable[..., Any], context: RuntimeContext, name: str
) -> Callable[..., tuple[Any, Any]]:
    """``method`` called with the context; returns (its result, the partition key it set)."""

    def called(*values: Any) -> tuple[Any, Any]:
        result = method(*values, **{name: context})
        return result, context.take_partition_key()

    return called
