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

from vf.emit.helm.shapes import NAME, OBJECT, STRINGS, array, described, strict
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
# vf's own keys are refused, each at its own path (Helm's validator reported a failed
# propertyNames at the values' first key: `--set podLabels.vf\.dev/x=y` read '/environment')
_NOT_VFS = {**STRINGS, "patternProperties": {"^vf\\.dev/": False}}
_ENV_ITEM = {
    "type": "object",
    "required": ["name"],
    "properties": {"name": {**NAME, "not": {"pattern": "^VF_"}}},
}


_WHOSE = "of every worker and the provision Job (nodes.<node>.{0} adds to it for one node)"


def _whose(name: str, what: str, after: str = "") -> str:
    return f"{what} {_WHOSE.format(name)}{after}."


OVERRIDE_SCHEMAS: dict[str, Obj] = {
    "affinity": described(OBJECT, _whose("affinity", "Pod affinity")),
    "env": described(
        array(_ENV_ITEM), _whose("env", "Extra container variables", "; VF_ names are vf's")
    ),
    "imagePullSecrets": described(
        array(strict("name", name=NAME)), _whose("imagePullSecrets", "Pull Secrets")
    ),
    "nodeSelector": described(STRINGS, _whose("nodeSelector", "Node labels")),
    "podAnnotations": described(
        _NOT_VFS, _whose("podAnnotations", "Pod annotations", "; vf's own win")
    ),
    "podLabels": described(_NOT_VFS, _whose("podLabels", "Pod labels", "; vf's own win")),
    "serviceAccount": described(
        strict(name={"type": ["string", "null"], "minLength": 1}),
        _whose("serviceAccount", "The ServiceAccount", ", by name"),
    ),
    "tolerations": described(
        array(OBJECT), _whose("tolerations", "Tolerations", ", after vf's own")
    ),
}

# a node's overrides, which vf.jobKey reads on its own (vf.jobValues leaves them out)
FIELDS = frozenset(OVERRIDE_VALUES)
