"""The chart's ``values.schema.json``: the schema shipped with vf
(``templates/helm/values.schema.json``, written as a chart author writes one), with what
only the flow knows filled in: its node names, its environments, and the sections every
environment's values hold (required once the values name an environment).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import cache

from vf.resources import resource_dir
from vf.textio.jsontext import json_text
from vf.textio.objects import Obj


@cache
def _shipped() -> str:
    path = resource_dir("templates") / "helm" / "values.schema.json"
    return path.read_text(encoding="utf-8")


def schema_text(values: Mapping[str, Obj], *, nodes: Sequence[str] = ()) -> str:
    """The JSON Schema (draft-07) every environment's ``values`` satisfy. It holds nothing
    of one environment's that another's change could alter: each environment's planned Job
    and partitioned counts are in its own values (``plannedReplicas``), which the chart
    checks (ADR 176)."""
    schema: Obj = json.loads(_shipped())
    # (an enum may not be empty: a chart of no nodes takes no node's entry)
    names: Obj = {"enum": sorted(nodes)} if nodes else {"not": {}}
    schema["definitions"]["nodeName"] = names
    props = schema["properties"]
    props["environment"]["enum"] = [*sorted(values), None]
    envs = [values[env] for env in sorted(values)]
    unknown = sorted({key for v in envs for key in v} - set(props))
    if unknown:  # a section a role's values gained without its schema
        raise AssertionError(f"templates/helm/values.schema.json lacks {unknown}")
    # values.yaml names no environment and holds none's values (ADR 188): what every
    # environment sets is required once the values name one; without, the chart's own check
    # refuses to render, naming the values files, which a schema error could not
    required = [
        key
        for key in sorted(props)
        if key != "environment" and envs and all(v.get(key) is not None for v in envs)
    ]
    if required:
        named = {"properties": {"environment": {"type": "string"}}, "required": ["environment"]}
        schema["if"] = named
        schema["then"] = {"required": required}
    if nodes and all(len(v.get("nodes") or {}) == len(nodes) for v in envs):
        props["nodes"]["minProperties"] = len(nodes)  # with the names fixed: every one
    return json_text(schema, ascii=True)
