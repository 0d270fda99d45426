"""Resolve per-node inputs of an environment (replicas, images), checked against the graph."""

from __future__ import annotations

from vf.config.targets import Environment
from vf.errors import Problem
from vf.ir.graph import Graph


def resolve_replicas(graph: Graph, env: Environment, problems: list[Problem]) -> dict[str, int]:
    counts = {node.name: node.nb_tasks for node in graph.nodes}
    kinds = {node.name: node for node in graph.nodes}
    for name, count in env.replicas:
        node = kinds.get(name)
        if node is None:
            continue
        if node.kind == "producer" and count != 1:
            problems.append(
                Problem(
                    code="VF_CONFIG_REPLICAS",
                    what=f"environments.{env.name}.replicas.{name}: producers run one replica",
                    remedy="remove the entry; replicate the processors after the producer instead",
                    where=env.place_of(f"replicas.{name}"),
                )
            )
        elif len(node.parents) > 1 and count > 1 and node.partition_by is None:
            problems.append(
                Problem(
                    code="VF_GRAPH_JOIN_PARTITION",
                    what=f"environments.{env.name}.replicas.{name}={count}: node joins "
                    f"{len(node.parents)} parents but has no partition_by",
                    remedy="set partition_by='trace_id' on the node, or keep one replica",
                    where=node.site,
                )
            )
        counts[name] = count
    return counts


def resolve_images(graph: Graph, env: Environment, problems: list[Problem]) -> dict[str, str]:
    overrides = dict(env.image_overrides)
    images: dict[str, str] = {}
    for node in graph.nodes:
        image = overrides.get(node.name) or node.image or env.default_image
        if image is None:
            problems.append(
                Problem(
                    code="VF_CONFIG_NO_IMAGE",
                    what=f"node '{node.name}' has no container image in environment '{env.name}'",
                    remedy=f"declare image= on the node, or set environments.{env.name}.images."
                    f"default (or images.overrides.{node.name}) in vf.yaml",
                    where=node.site,
                )
            )
            image = ""
        images[node.name] = image
    return images


def check_config_nodes(graph: Graph, env: Environment, problems: list[Problem]) -> None:
    known = {node.name for node in graph.nodes}
    sections = (
        ("images.overrides", [k for k, _ in env.image_overrides]),
        ("replicas", [k for k, _ in env.replicas]),
        ("resources", [k for k, _ in env.resources if k != "*"]),
        ("mounts", [k for k, _ in env.workloads.mounts if k != "*"]),
        ("rollout", [k for k, _ in env.workloads.rollout if k != "*"]),
    )
    for section, keys in sections:
        for key in keys:
            if key not in known:
                import difflib  # only a misspelt node name needs a suggestion

                close = difflib.get_close_matches(key, sorted(known), n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                problems.append(
                    Problem(
                        code="VF_CONFIG_UNKNOWN_NODE",
                        what=f"environments.{env.name}.{section} names unknown node {key!r}",
                        remedy=f"{hint}the flow's nodes: {', '.join(sorted(known)[:12])}",
                        where=env.place_of(f"{section}.{key}"),
                    )
                )
