"""Producers whose restart would apply items twice: not replayable, with an idempotent
consumer downstream, in a BATCH flow.

A producer that is not declared ``replayable`` mints ids from a fresh epoch in each life
(MSGID-3), so a restarted life re-emits its items under ids nobody has seen: the stream's
de-duplication and an idempotent consumer's records both take them as new items. Under
REALTIME nothing is promised past the freshest item, so only BATCH flows are judged.
"""

from __future__ import annotations

from vf.ir.graph import Graph
from vf_runtime.constants import BATCH


def replay_unsafe(graph: Graph) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """(producer, the idempotent consumers it reaches) for each producer of a BATCH flow
    that is not declared replayable and reaches at least one idempotent consumer."""
    if graph.flow_type != BATCH:
        return ()
    found = []
    for node in graph.nodes:
        if node.kind != "producer" or node.replayable:
            continue
        sinks = sorted(n for n in _descendants(graph, node.name) if graph.node(n).idempotent)
        if sinks:
            found.append((node.name, tuple(sinks)))
    return tuple(found)


def _descendants(graph: Graph, name: str) -> set[str]:
    seen: set[str] = set()
    todo = list(graph.node(name).children)
    while todo:
        child = todo.pop()
        if child not in seen:
            seen.add(child)
            todo.extend(graph.node(child).children)
    return seen


def replay_warnings(unsafe: tuple[tuple[str, tuple[str, ...]], ...]) -> list[str]:
    """One plan warning per producer of :func:`replay_unsafe`."""
    return [
        f"producer '{producer}': warning[VF_PRODUCER_NOT_REPLAYABLE] it is not declared "
        f"replayable, so a restart of it re-emits items under new ids, and idempotent "
        f"consumer(s) {', '.join(repr(s) for s in sinks)} apply them again. Set "
        "`replayable = True` on the producer class when next() yields the same items in "
        "the same order after a restart; a run where it restarted ends with exit 9"
        for producer, sinks in unsafe
    ]
