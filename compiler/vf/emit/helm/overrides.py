"""The empty defaults of the overrides a Helm user expects of a workload chart, per node
and for every pod, and of ``image.tag``; the templates (``vf.pod``, ``vf.image``) combine
them with vf's own entries, which they never replace. Their schemas are the shipped one's.
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
