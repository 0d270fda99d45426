"""The checks of one node's keyword values that stand apart from the graph's shape: text,
GPU memory, warm-up and join rules. Each reports through ``bad(message)``."""

from __future__ import annotations

import math
from typing import Any

from vf import names
from vf.frontend.params import safe_repr
from vf_runtime.constants import GPU
from vf_runtime.policies import JoinPolicy

# The longest warm-up a node may declare: HPAScalingPolicy.periodSeconds is at most 1800.
MAX_WARMUP_SECONDS = 1800


def check_strings(values: dict[str, Any], bad: Any) -> None:
    """An image reference and a partition key reach manifests verbatim: check their grammar."""
    image, key = values["image"], values["partition_by"]
    if isinstance(image, str) and (
        len(image) > names.IMAGE_REF_MAX or not names.IMAGE_REF.match(image)
    ):
        bad(
            "VF_GRAPH_IMAGE",
            f"image={safe_repr(image)} is not a valid image reference",
            "pass registry/path[:tag][@sha256:digest] in lowercase, e.g. "
            "registry.example.com/team/worker:1.2",
        )
    if isinstance(key, str) and not names.PARTITION_KEY.match(key):
        bad(
            "VF_GRAPH_FIELD_TYPE",
            f"partition_by={safe_repr(key)} is not a field name",
            "pass the name of a message field: letters, digits, '_', '.', ':', '/' or '-'",
        )


def check_gpu_memory(values: dict[str, Any], bad: Any) -> None:
    memory = values["gpu_memory_gib"]
    if memory is None:
        return
    if (
        not isinstance(memory, int | float)
        or isinstance(memory, bool)
        or not math.isfinite(memory)
        or memory <= 0
    ):
        bad(
            "VF_GRAPH_GPU",
            f"gpu_memory_gib={safe_repr(memory)} is not a positive number",
            "pass the GiB the node needs",
        )
    if values["device_type"] != GPU:
        bad(
            "VF_GRAPH_GPU",
            "gpu_memory_gib needs device_type=GPU",
            "pass device_type=GPU or drop gpu_memory_gib",
        )
    if positive_int(values["gpu_count"]) and values["gpu_count"] > 1:
        bad(
            "VF_GRAPH_GPU",
            "gpu_memory_gib cannot be combined with gpu_count > 1 (a shared slice is one device)",
            "drop gpu_memory_gib to claim whole GPUs, or set gpu_count=1",
        )


def check_warmup(values: dict[str, Any], bad: Any) -> None:
    """A warm-up becomes a Kubernetes startup budget and an HPA policy period, which
    allows at most 1800 s (``HPAScalingPolicy.periodSeconds``)."""
    warmup = values["warmup_seconds"]
    if warmup is None:
        return
    if not positive_int(warmup) or warmup > MAX_WARMUP_SECONDS:
        bad(
            "VF_GRAPH_WARMUP",
            f"warmup_seconds={safe_repr(warmup)} is not an integer from 1 to {MAX_WARMUP_SECONDS}",
            f"pass the seconds open() takes to load, 1 <= warmup_seconds <= "
            f"{MAX_WARMUP_SECONDS} (the longest period a Kubernetes scaling policy allows), "
            "or drop it for a node that starts at once",
        )
        values["warmup_seconds"] = None


def check_join_rules(values: dict[str, Any], parents: tuple[str, ...], bad: Any) -> None:
    nb_tasks = values["nb_tasks"] if positive_int(values["nb_tasks"]) else 1
    if len(parents) > 1 and nb_tasks > 1 and not values["partition_by"]:
        bad(
            "VF_GRAPH_JOIN_PARTITION",
            f"joins {len(parents)} parents with nb_tasks={nb_tasks} but no partition_by; "
            "replicas would receive the halves of a join on different workers",
            "set partition_by='trace_id' (recommended for joins) or nb_tasks=1",
        )
    join = values["join_policy"]
    if isinstance(join, JoinPolicy) and join.mode == "time" and len(parents) > 1 and nb_tasks > 1:
        bad(
            "VF_POLICY_JOIN",
            "a time-mode join cannot run on more than one replica",
            "set nb_tasks=1 for time-aligned joins",
        )
    if isinstance(join, JoinPolicy):
        unknown = sorted((k for k, _ in join._collect_items() if k not in parents), key=safe_repr)
        if unknown:
            bad(
                "VF_POLICY_JOIN",
                f"collect names unknown parents: {', '.join(map(safe_repr, unknown))}",
                "collect by parent node names",
            )


def positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1
