"""A Job named after its own template's digest: one object across environments, its name a
value of each environment.

Without a BATCH generation, a Job's name ends in a digest of its own plan record (ADR 80,
``vf.plan.jobs``): the provision Job of a REALTIME flow carries the topology, replica counts
included, so dev's ``…-provision-t382c85a`` is prod's ``…-provision-t5080372`` and a dev
replica change renames dev's. Left to its name, each would be a template of its own, named
after it, and a dev change would rewrite the chart's templates. Matched by the name without
the digest instead, it is one template whose name is ``<owner>.jobName`` in every
environment's values, equal or not, so a change of one environment's Job changes only that
environment's values (ADR 192).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from vf.emit.helm.slots import Slot, owner
from vf.textio.objects import Obj

Key = tuple[str, str]
ANY_TAG = "?"  # no Kubernetes name holds it, so a matched key never meets a real one
JOB_NAME = "jobName"
NAME_PATH = ("metadata", "name")
_TAG = re.compile(r"-t[0-9a-f]{7}")
_TAG_LEN = 8  # "t" and 7 hex digits (vf.plan.jobs.TAG_LEN)


def tag_matched(key: Key, obj: Obj, *, several: bool) -> Key:
    """A Job's key with the digest at the end of its name as ``?``, when there are several
    environments and the Job is vf's (a node's or the provision Job)."""
    kind, name = key
    if not several or kind != "Job" or not _TAG.fullmatch(name[-_TAG_LEN - 1 :]):
        return key
    if owner(obj) is None:
        return key
    return (kind, name[:-_TAG_LEN] + ANY_TAG)


def with_job_name(slots: list[Slot], *, versions: Mapping[str, Obj], key: Key) -> list[Slot]:
    """``slots`` with a matched Job's name read from ``<owner>.jobName``, equal or not."""
    if not key[1].endswith(ANY_TAG):
        return slots
    base = owner(versions[sorted(versions)[0]])
    assert base is not None
    names = {env: v["metadata"]["name"] for env, v in versions.items()}
    out = [s for s in slots if s.path != NAME_PATH]
    out.append(Slot(path=NAME_PATH, values=names, key=(*base, JOB_NAME)))
    return out
