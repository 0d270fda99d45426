"""What the chart checks before it renders: that the values name an environment, and that
a Job's or a partitioned worker's count is the one its environment plans (ADR 154, 176).

Each environment's planned counts are in its own values file (``plannedReplicas``), not in
the schema every environment shares, so a change of one environment's counts changes no
file of another's. ``values.yaml`` holds no environment's values at all (ADR 188): every
other template renders only when the values name an environment, so a release without
``-f values-<env>.yaml`` is refused by this check's message, not by a template that
finds no values.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence

from vf.emit.helm.overrides import IMAGE_TAG_VALUES, OVERRIDE_VALUES
from vf.textio.filetext import Chunks, FileText
from vf.textio.objects import Obj
from vf_runtime.labels import NODE_LABEL

PLANNED_REPLICAS = "plannedReplicas"  # per environment: counts a --set must keep
# without an environment every other template renders nothing, so environment.yaml's
# refusal is what Helm reports (helm lint, which takes `fail` for a note, passes)
_OPEN, _CLOSE = "{{- if .Values.environment -}}\n", "{{- end }}\n"


def neutral_values() -> Obj:
    """``values.yaml``'s own keys: no environment and the overrides' empty defaults, no
    environment's values (ADR 188)."""
    return {"environment": None, **IMAGE_TAG_VALUES, **OVERRIDE_VALUES}


def guarded(path: str, text: FileText) -> FileText:
    """A template that Helm renders, rendered only when the values name an environment;
    any other file as it is."""
    name = path.rsplit("/", 1)[-1]
    if not path.startswith("templates/") or name.startswith("_") or name == "environment.yaml":
        return text
    if isinstance(text, str):
        return f"{_OPEN}{text}{_CLOSE}"
    return Chunks(_led(text))


def _led(text: Chunks) -> Iterator[str]:
    yield _OPEN
    yield from text.pieces
    yield _CLOSE


def environment_guard(envs: Sequence[str]) -> str:
    """A template that renders nothing, or refuses a release whose values name no
    environment (``helm install x ./chart`` without ``-f values-<env>.yaml``), or set a
    Job's or a partitioned worker's count other than its environment's plan (ADR 176)."""
    files = " or ".join(f"-f values-{env}.yaml" for env in envs)
    message = f"this chart renders one environment of the flow: give its values, {files}"
    count = (
        "nodes.%s.replicas is %v, but the count of a Job or a partitioned worker is part of "
        "other objects (its Job's name and indexes, its parents' readers, the topology): "
        "%s plans %v; change it in vf.yaml and compile again"
    )
    return (
        "{{- if not .Values.environment }}\n"
        f"{{{{- fail {json.dumps(message)} }}}}\n"
        "{{- end }}\n"
        f"{{{{- range $node, $count := .Values.{PLANNED_REPLICAS} }}}}\n"
        '{{- $set := index $.Values.nodes $node "replicas" }}\n'
        "{{- if ne (toString $set) (toString $count) }}\n"
        f"{{{{- fail (printf {json.dumps(count)} $node $set $.Values.environment $count) }}}}\n"
        "{{- end }}\n"
        "{{- end }}\n"
    )


_PINNED_KINDS = ("Job", "StatefulSet")


def planned_replicas(
    per_env: Mapping[str, Sequence[Obj]],
    values: Mapping[str, Obj],
    *,
    pinned: frozenset[str] = frozenset(),
) -> dict[str, dict[str, int]]:
    """Per environment, the planned count of each node whose workload is a Job or a
    StatefulSet, or whose node is in ``pinned``: a Job's count is part of its name's tag
    and its pods' indexes, a partitioned worker's of its parents' readers, the topology and
    the run id, also while it is one replica of a Deployment (ADR 154)."""
    out: dict[str, dict[str, int]] = {}
    for env, objects in per_env.items():
        nodes = values[env].get("nodes") or {}
        for obj in objects:
            node = str((obj["metadata"].get("labels") or {}).get(NODE_LABEL))
            if node not in nodes or (obj.get("kind") not in _PINNED_KINDS and node not in pinned):
                continue
            count = (nodes[node] or {}).get("replicas")
            if isinstance(count, int):
                out.setdefault(env, {})[node] = count
    return out
