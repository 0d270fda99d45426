"""The values of the flow-wide role templates (ADR 236), built from one environment's plan.

Each section feeds one hand-written template under ``templates/helm/roles/``, the same bytes
in every flow's chart: ``resourceClaimTemplates.<node>`` (a DRA GPU worker's claim).
``vf.emit.helm.roles`` registers them beside ADR 229's roles; the diff path
(``vf.emit.helm.chart``) no longer sees their objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vf.ir.gpu import DraClaim
from vf.ir.plan import Plan
from vf.textio.objects import Obj

CLAIMS = "resourceClaimTemplates"
# the role's kind → its template
FLOW_ROLE_FILES = {
    "ResourceClaimTemplate": "resourceclaimtemplate.yaml",
}


def is_flow_role_object(obj: Obj) -> bool:
    """An object one of these role templates renders, which the diff path leaves out."""
    return obj.get("kind") in FLOW_ROLE_FILES


def flow_role_values(plan: Plan) -> Obj:
    """This module's values sections for one environment."""
    return {CLAIMS: _claims(plan)}


def neutral_flow_roles() -> Obj:
    """The sections in ``values.yaml``, which holds no environment's values."""
    return {CLAIMS: {}}


def flow_role_names(roles: Mapping[str, Obj]) -> dict[str, set[str]]:
    """The names of the objects of each role kind, in any environment."""
    out: dict[str, set[str]] = {kind: set() for kind in FLOW_ROLE_FILES}
    for values in roles.values():
        out["ResourceClaimTemplate"] |= {c["name"] for c in (values.get(CLAIMS) or {}).values()}
    return out


def _claims(plan: Plan) -> Obj:
    """Each DRA GPU worker's claim template, by node: the devices each of its pods claims."""
    if plan.gpu is None:
        return {}
    by_name = {claim.template: claim for claim in plan.gpu.claims}
    return {
        grant.node: _claim(by_name[grant.claim_template])
        for grant in sorted(plan.gpu.grants, key=lambda g: g.node)
        if grant.claim_template is not None
    }


def _claim(claim: DraClaim) -> Obj:
    out: Obj = {"name": claim.template, "deviceClassName": claim.device_class}
    out["count"] = claim.count
    if claim.selectors:
        out["selectors"] = list(claim.selectors)
    if claim.capacity_memory is not None:
        out["memory"] = claim.capacity_memory
    if claim.mps:
        out["mps"] = True
    return out


_NAME = {"type": "string", "minLength": 1}
_CLAIM = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name", "deviceClassName", "count"],
    "properties": {
        "name": _NAME,
        "deviceClassName": _NAME,
        "count": {"type": "integer", "minimum": 1},
        "selectors": {"type": "array", "items": _NAME},
        "memory": _NAME,
        "mps": {"type": "boolean"},
    },
}


def flow_role_schemas(names: Mapping[str, Any]) -> dict[str, Any]:
    """The schemas of this module's sections; ``names`` is what limits a section keyed by
    node to the flow's nodes (``roles.role_schemas``)."""
    return {
        CLAIMS: {
            "type": "object",
            **names,
            "additionalProperties": _CLAIM,
            "description": "DRA ResourceClaimTemplates of the GPU workers by node (from the "
            "plan): each pod claims count devices of deviceClassName, matching the CEL "
            "selectors and at least memory each; mps shares them through MPS.",
        },
    }
