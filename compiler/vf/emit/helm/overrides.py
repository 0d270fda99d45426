"""The overrides a Helm user expects of a workload chart, per node and for every pod:
``nodeSelector``, ``tolerations``, ``affinity``, extra ``env``, ``podAnnotations``,
``podLabels``, ``imagePullSecrets`` and ``serviceAccount``, and ``image.tag``.

The role templates write them (the ``vf.pod`` and ``vf.image`` helpers): ``nodes.<node>.<name>``
and the global ``<name>``, combined with what vf itself wrote (vf's own entries first and
never replaced: a selector label, a GPU toleration, a config hash). This module holds their
empty defaults and their schemas. With the values empty the chart renders the overlay's
objects unchanged.
"""

from __future__ import annotations

from typing import Any

from vf.textio.objects import Obj

# one tag for every image of the flow's own (workers, provision Job); renames every Job
IMAGE_TAG_VALUES: Obj = {"image": {"tag": None}}
# every pod's, none set: the chart renders the overlay's objects
OVERRIDE_VALUES: dict[str, Any] = {
    "affinity": {},
    "env": [],
    "imagePullSecrets": [],
    "nodeSelector": {},
    "podAnnotations": {},
    "podLabels": {},
    "serviceAccount": {"name": None},
    "tolerations": [],
}
_STRINGS = {"type": "object", "additionalProperties": {"type": "string"}}
# vf's own keys are refused, each at its own path (Helm's validator reported a failed
# propertyNames at the values' first key: `--set podLabels.vf\.dev/x=y` read '/environment')
_NOT_VFS = {"patternProperties": {"^vf\\.dev/": False}}
_ENV_ITEM = {
    "type": "object",
    "required": ["name"],
    "properties": {"name": {"type": "string", "minLength": 1, "not": {"pattern": "^VF_"}}},
}
_NAMED = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name"],
    "properties": {"name": {"type": "string", "minLength": 1}},
}
_WHOSE = "of every worker and the provision Job (nodes.<node>.{0} adds to it for one node)"
OVERRIDE_SCHEMAS: dict[str, dict[str, Any]] = {
    "affinity": {"type": "object", "description": f"Pod affinity {_WHOSE.format('affinity')}."},
    "env": {
        "type": "array",
        "items": _ENV_ITEM,
        "description": f"Extra container variables {_WHOSE.format('env')}; VF_ names are vf's.",
    },
    "imagePullSecrets": {
        "type": "array",
        "items": _NAMED,
        "description": f"Pull Secrets {_WHOSE.format('imagePullSecrets')}.",
    },
    "nodeSelector": {**_STRINGS, "description": f"Node labels {_WHOSE.format('nodeSelector')}."},
    "podAnnotations": {
        **_STRINGS,
        **_NOT_VFS,
        "description": f"Pod annotations {_WHOSE.format('podAnnotations')}; vf's own win.",
    },
    "podLabels": {
        **_STRINGS,
        **_NOT_VFS,
        "description": f"Pod labels {_WHOSE.format('podLabels')}; vf's own win.",
    },
    "serviceAccount": {
        "type": "object",
        "additionalProperties": False,
        "properties": {"name": {"type": ["string", "null"], "minLength": 1}},
        "description": f"The ServiceAccount {_WHOSE.format('serviceAccount')}, by name.",
    },
    "tolerations": {
        "type": "array",
        "items": {"type": "object"},
        "description": f"Tolerations {_WHOSE.format('tolerations')}, after vf's own.",
    },
}

# a node's overrides, which vf.jobKey reads on its own (vf.jobValues leaves them out)
FIELDS = frozenset(OVERRIDE_VALUES)
