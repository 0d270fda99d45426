"""A container's limits must be at least its requests: the API server refuses a pod whose
limit is below its request, so vf refuses it while compiling."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from vf.config.targets import Environment
from vf.errors import Problem
from vf.ir.plan import ContainerResources, Workload

# Kubernetes quantity suffixes (k8s.io/apimachinery pkg/api/resource/suffix.go), longest first
# so that ``Mi`` is not read as ``M``.
_SUFFIXES = (
    *((f"{p}i", Decimal(1024) ** (i + 1)) for i, p in enumerate("KMGTPE")),
    ("m", Decimal("0.001")),
    ("k", Decimal(10) ** 3),
    ("M", Decimal(10) ** 6),
    ("G", Decimal(10) ** 9),
    ("T", Decimal(10) ** 12),
    ("P", Decimal(10) ** 15),
    ("E", Decimal(10) ** 18),
)
_PAIRS = (("cpu", "cpu_limit"), ("memory", "memory_limit"))


def quantity(text: str) -> Decimal | None:
    """A Kubernetes quantity (``500m``, ``1.5Gi``, ``2``) as an exact number; None when it
    is not one (the schema refuses those before this runs)."""
    number, factor = text.strip(), Decimal(1)
    for suffix, value in _SUFFIXES:
        if number.endswith(suffix):
            number, factor = number[: -len(suffix)], value
            break
    try:
        parsed = Decimal(number) * factor
    except InvalidOperation:
        return None
    return parsed if parsed.is_finite() else None


def limit_problems(env: Environment, workloads: tuple[Workload, ...]) -> list[Problem]:
    """Every worker whose CPU or memory limit is below the request it gets."""
    problems = []
    for workload in workloads:
        res = workload.resources
        for request_field, limit_field in _PAIRS:
            request, limit = getattr(res, request_field), getattr(res, limit_field)
            if request is None or limit is None:
                continue  # without a request, Kubernetes requests the limit
            wanted, allowed = quantity(request), quantity(limit)
            if wanted is None or allowed is None or allowed >= wanted:
                continue
            node = workload.node
            problems.append(
                Problem(
                    code="VF_CONFIG_LIMIT_BELOW_REQUEST",
                    what=f"node '{node}': {limit_field} {limit} is below its {request_field} "
                    f"request {request} ({_origin(env, node, request_field, res)}); the API "
                    "server refuses a pod whose limit is below its request",
                    remedy=f"raise {limit_field} to at least {request}, or lower "
                    f"{request_field} to at most {limit}",
                    where=env.place_of(_entry(env, node, limit_field)),
                )
            )
    return problems


def _entry(env: Environment, node: str, field: str) -> str:
    """The ``resources`` entry that sets ``field`` for ``node``: its own, else ``*``."""
    table = dict(env.resources)
    own = table.get(node)
    return f"resources.{node}" if getattr(own, field, None) is not None else "resources.*"


def _origin(env: Environment, node: str, field: str, res: ContainerResources) -> str:
    """Where a request came from, in the user's words."""
    table = dict(env.resources)
    for key in (node, "*"):
        if getattr(table.get(key), field, None) == getattr(res, field):
            return f"resources.{key}.{field}"
    default = env.pods.default_cpu if field == "cpu" else env.pods.default_memory
    if default == getattr(res, field):
        return f"the default request, pods.default_requests.{field}"
    return "the component's descriptor"
