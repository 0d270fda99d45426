"""Whole-graph checks on the lowered IR: identity collisions, and where node classes live."""

from __future__ import annotations

from vf import names
from vf.errors import Problem
from vf.ir.graph import Graph, NodeIR
from vf_runtime.broker.naming import token


def graph_module_classes(graph: Graph) -> str | None:
    """A warning when node classes live in the graph module itself (None when none do).

    Workers import each node's class by module; the image ``vf init`` scaffolds copies the
    sibling nodes module, not the graph module, so such classes fail only in the cluster.
    """
    own = sorted(
        {
            n.node_class.rpartition(".")[2]
            for n in graph.nodes
            if n.component is None and n.node_class.rpartition(".")[0] == graph.source_stem
        }
    )
    if not own:
        return None
    return (
        f"warning[VF_GRAPH_NODE_IN_GRAPH] node class(es) {', '.join(own[:8])} are defined in "
        f"{graph.source_stem}.py, which a worker image built from vf init's Dockerfile lacks\n"
        f"  = fix: move them to a sibling module (e.g. {graph.source_stem}_nodes.py) and import "
        f"them in {graph.source_stem}.py, or copy {graph.source_stem}.py into the image\n"
    )


def identity_problems(nodes: list[NodeIR]) -> list[Problem]:
    """Two node names that map to one broker token or one Kubernetes name collide."""
    problems: list[Problem] = []
    for label, mapper in (("broker name", token), ("Kubernetes name", names.slug)):
        seen: dict[str, list[NodeIR]] = {}
        for node in nodes:
            seen.setdefault(mapper(node.name), []).append(node)
        for physical, group in sorted(seen.items()):
            logical = sorted({n.name for n in group})
            if len(logical) > 1:  # one name used twice is VF_GRAPH_DUPLICATE_NAME
                problems.append(
                    Problem(
                        code="VF_IDENTITY_COLLISION",
                        what=f"nodes {', '.join(repr(n) for n in logical)} map to one {label} "
                        f"{physical!r}",
                        remedy="rename one of them so the names differ in letters or digits",
                        where=", ".join(dict.fromkeys(n.site for n in group)),
                    )
                )
    return problems
