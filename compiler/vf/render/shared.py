"""One object for each equal part of an environment's pods: thousands of workers hold the same
security contexts, volumes, mounts, resources and variables.

Once ``render_plan`` returns, nothing changes a rendered object in place: every later stage
copies the mappings and lists on the way to what it changes (``vf.emit.ordering``, the
chart's slots, the Kustomize files). So the objects of one environment may share those
parts. A worker's Job holds about 7.9 KB of Python objects on its own and 3.1 KB with its
parts shared (ADR 198). The table of parts lives for one ``render_plan``: its keys are
garbage once the objects are made.
"""

from __future__ import annotations

import itertools
from typing import Any

from vf.memo import kept
from vf.textio.objects import Obj

_POD_TEMPLATE = ("spec", "template", "spec")


def with_shared_parts(obj: Obj, *, table: dict[Any, Any]) -> Obj:
    """``obj`` with the parts of its pod spec and its containers, and each of their
    variables, replaced by equal ones an earlier object of the render holds (``obj`` is
    changed in place and returned). ``table``: the parts met so far, one render's. Only
    the pod spec's and the containers' own keys may be set after this, never a part."""
    pod = _pod(obj)
    if pod is None:
        return obj
    for key, value in pod.items():
        if key != "containers":
            pod[key] = _shared(value, table)
    for container in pod.get("containers") or ():
        for key, value in container.items():
            if key == "env" and isinstance(value, list):
                container[key] = [_shared(entry, table) for entry in value]
            else:
                container[key] = _shared(value, table)
    return obj


def _shared(value: Any, table: dict[Any, Any]) -> Any:
    if not isinstance(value, dict | list) or not value:
        return value
    return kept(table, _key(value), lambda: value)


def _key(value: Any) -> Any:
    """A hashable form of a JSON value; equal only for values equal in type, order and
    content (so ``1`` and ``True``, or two orders of the same keys, stay apart). A mapping
    of strings (a variable, a selector) is one flat tuple: the table keeps every key."""
    if isinstance(value, dict):
        if all(type(v) is str for v in value.values()):
            return ("{s", *itertools.chain.from_iterable(value.items()))
        return ("{", *((k, _key(v)) for k, v in value.items()))
    if isinstance(value, list):
        return ("[", *(_key(v) for v in value))
    return (type(value), value)


def with_shared_labels(obj: Obj) -> Obj:
    """``obj`` with its pods' labels its own where they are equal: a workload's labels and
    its pods' are most often one set (``obj`` is changed in place and returned). The last
    change of a render: pod options merge into the two sets apart."""
    if _pod(obj) is None:
        return obj
    labels = obj["metadata"].get("labels")
    template = obj["spec"]["template"].get("metadata") or {}
    if "labels" in template and template["labels"] == labels:
        template["labels"] = labels
    return obj


def _pod(obj: Obj) -> Obj | None:
    pod: Any = obj
    for key in _POD_TEMPLATE:
        pod = pod.get(key) if isinstance(pod, dict) else None
    return pod if isinstance(pod, dict) else None
