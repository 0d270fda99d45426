"""The overrides a Helm user expects of a workload chart, per node and for every pod:
``nodeSelector``, ``tolerations``, ``affinity``, extra ``env``, ``podAnnotations``,
``podLabels``, ``imagePullSecrets`` and ``serviceAccount``, and ``image.tag``.

The role templates write them (the ``vf.pod`` and ``vf.image`` helpers): ``nodes.<node>.<name>``
and the global ``<name>``, combined with what vf itself wrote (vf's own entries first and
never replaced: a selector label, a GPU toleration, a config hash). This module holds their
empty defaults, their schemas are in ``templates/helm/values.schema.json``. With the values
empty the chart renders the overlay's objects unchanged.
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
# a node's overrides, which vf.jobKey reads on its own (vf.jobValues leaves them out)
FIELDS = frozenset(OVERRIDE_VALUES)
