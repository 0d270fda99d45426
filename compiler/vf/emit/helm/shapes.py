"""What the role modules share: the release's namespace in a value, a values entry of the
keys a record sets, and a worker's entry of what its templates cannot derive."""

from __future__ import annotations

from typing import Any

from vf.textio.objects import Obj
from vf_runtime.labels import COMPONENT, INSTANCE, MANAGED_BY, NODE_LABEL, OPTIONAL_LABEL
from vf_runtime.labels import NAME as NAME_LABEL

# a name in the environment's namespace names the release's: the template puts the
# release's namespace in place of this text (a plain replace, nothing evaluated)
RELEASE_NAMESPACE = "{{ .Release.Namespace }}"


def in_release(namespace: str, value: str) -> str:
    """``value`` with a Service of ``namespace`` named in the release's namespace."""
    return value.replace(f".{namespace}.svc", f".{RELEASE_NAMESPACE}.svc")


def entry(**keys: Any) -> Obj:
    """A values entry of ``keys`` but those that are ``None``: an entry holds what its record
    sets, and a template takes a key it lacks for one not set."""
    return {key: value for key, value in keys.items() if value is not None}


def worker_entry(node: str, labels: dict[str, str], *, flow: Obj, name: str, suffix: str) -> Obj:
    """A worker's entry: its component, and its object's name, instance label and node
    label only where they are not what ``vf.workerName`` and ``vf.workerLabels`` derive
    from the node's name (a name vf shortened, ADR 209), so an entry is a few bytes."""
    labels.pop(MANAGED_BY, None)
    labels.pop(OPTIONAL_LABEL, None)  # the ScaledObject's template adds it
    head = f"{flow['id']}-{flow['run']}-{node}"
    out: Obj = {"component": labels.get(COMPONENT)}
    if name != f"vf-{head}{suffix}":
        out["name"] = name
    label = labels.get(NODE_LABEL, "")
    if label != node:
        out["label"] = label
    if labels.get(INSTANCE) != head:
        out["instance"] = labels.get(INSTANCE)
    derived = {
        **flow["labels"],
        COMPONENT: out["component"],
        INSTANCE: out.get("instance", head),
        NAME_LABEL: label,
        NODE_LABEL: label,
    }
    if derived != labels:  # labels of another shape: written out whole
        return {"name": name, "labels": dict(sorted(labels.items()))}
    return out
