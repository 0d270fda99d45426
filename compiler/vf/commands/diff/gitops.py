"""What a change does to the controller objects under ``gitops/``: Argo CD Applications and
AppProjects, Flux Kustomizations, sources and HelmReleases, and the ConfigMaps a release
reads its values from.

Every document with a ``kind`` in a ``gitops/**/*.yaml`` file of either tree is an object
(the ``kustomization.yaml`` indexes, Kustomize's own kind, are not), matched by kind,
namespace and name, so how the files are named or split does not matter. Each change is
said in a reviewer's words where vf knows the kind and field (ADR 205), and otherwise as
the dotted paths that changed.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ruamel.yaml.error import YAMLError

from vf import names
from vf.commands.diff.paths import changed_paths, segment
from vf.commands.diff.plan import INFO, WARNING
from vf.emit.helm.job_values import JOB_VALUES
from vf.textio import yamlout
from vf.textio.objects import Obj
from vf.textio.yaml_guard import amplified
from vf.textio.yaml_read import reader
from vf.tree.read import yaml_documents
from vf_runtime.labels import ENVIRONMENT_LABEL

Key = tuple[str, str, str]  # kind, namespace, name
MAX_PATHS = 5  # dotted paths named per object by the generic reading
MAX_NAMES = 8  # names listed per added or dropped set
MAX_VALUES_LINES = 24  # lines of a release's values diff
MAX_DIFFED_LINES = 5_000  # longer values texts are not diffed line by line
_INDEX_API = "kustomize.config.k8s.io/v1beta1"
_FINALIZER = "resources-finalizer.argocd.argoproj.io"
_DEFAULT_VALUES_KEY = "values.yaml"  # helm-controller's default valuesKey
_ACTIONS = ("added", "removed", "changed")


@dataclass(frozen=True, kw_only=True)
class GitOpsNote:
    """One thing a change does to an object; ``lines``: a release's values diff."""

    message: str
    severity: str = INFO
    lines: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class GitOpsChange:
    """An object under ``gitops/`` added, removed or changed, and what that does."""

    action: str
    kind: str
    namespace: str
    name: str
    notes: tuple[GitOpsNote, ...] = ()


def subject(change: GitOpsChange) -> str:
    """``Kind namespace/name``, or ``Kind name`` for an object with no namespace."""
    where = f"{change.namespace}/{change.name}" if change.namespace else change.name
    return f"{change.kind} {where}"


def counts(changes: Sequence[GitOpsChange]) -> str:
    words = {"added": "new", "removed": "removed", "changed": "changed"}
    return ", ".join(f"{sum(c.action == a for c in changes)} {words[a]}" for a in _ACTIONS)


def gitops_objects(files: Mapping[str, str]) -> dict[Key, Obj]:
    """Every object of a tree's ``gitops/`` YAML files (the first of two with one key)."""
    found: dict[Key, Obj] = {}
    for path in sorted(files):
        if not path.startswith("gitops/") or not path.endswith((".yaml", ".yml")):
            continue
        for doc in yaml_documents(files, path=path):
            if not isinstance(doc, dict) or not isinstance(doc.get("kind"), str):
                continue
            if doc["kind"] == "Kustomization" and doc.get("apiVersion") == _INDEX_API:
                continue
            meta = _map(doc.get("metadata"))
            key = (doc["kind"], str(meta.get("namespace") or ""), str(meta.get("name") or ""))
            found.setdefault(key, doc)
    return found


def gitops_changes(
    committed: Mapping[str, str], fresh: Mapping[str, str], *, environments: Sequence[str] = ()
) -> tuple[GitOpsChange, ...]:
    """What changes under ``gitops/``, in kind, namespace and name order. With
    ``environments`` (``vf diff --env``, which compiles only those), only the objects
    labelled with one of them are compared."""
    old, new = gitops_objects(committed), gitops_objects(fresh)
    if environments:
        labels = {names.label_value(e) for e in environments}
        old = {k: o for k, o in old.items() if _environment(o) in labels}
        new = {k: o for k, o in new.items() if _environment(o) in labels}
    values = _values_keys(old) | _values_keys(new)
    changes = []
    for key in sorted(set(old) | set(new)):
        kind, namespace, name = key
        if key not in old:
            action, notes = "added", _added(new[key], objects=new)
        elif key not in new:
            action, notes = "removed", _removed(old[key])
        else:
            action = "changed"
            notes = _changed(old[key], new[key], skip=values.get(key, ()))
            if kind == "HelmRelease":
                notes = _release_values(old[key], new[key], old=old, new=new) + notes
            if not notes:  # the same, or only a release's values, said with the release
                continue
        changes.append(
            GitOpsChange(
                action=action, kind=kind, namespace=namespace, name=name, notes=tuple(notes)
            )
        )
    return tuple(changes)


def _map(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _environment(obj: Obj) -> str | None:
    label = _map(_map(obj.get("metadata")).get("labels")).get(ENVIRONMENT_LABEL)
    return None if label is None else str(label)


def _get(obj: Any, path: str) -> Any:
    for part in path.split("."):
        obj = _map(obj).get(part)
    return obj


def _text(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, dict):
        return " ".join(f"{k} {_text(v)}" for k, v in sorted(value.items(), key=str))
    return str(value)


def _names(items: Sequence[str]) -> str:
    more = f" and {len(items) - MAX_NAMES} more" if len(items) > MAX_NAMES else ""
    return ", ".join(items[:MAX_NAMES]) + more


# -- reading a set: what joins it and what leaves it ----------------------------------


def _set_change(old: Iterable[str], new: Iterable[str], *, now: str, no_longer: str) -> str:
    """``now X, Y; no longer Z``: the items that join and leave a list, in their order."""
    before, after = list(old), list(new)
    joined = [x for x in after if x not in before]
    left = [x for x in before if x not in after]
    parts = [f"{now} {_names(joined)}"] if joined else []
    parts += [f"{no_longer} {_names(left)}"] if left else []
    return "; ".join(parts)


def _ref(item: Any) -> str:
    """A reference to an object: ``Kind/name``, ``name``, or ``namespace/name``."""
    ref = _map(item)
    where = f"{ref['namespace']}/" if ref.get("namespace") and not ref.get("kind") else ""
    kind = f"{ref['kind']}/" if ref.get("kind") else ""
    return f"{kind}{where}{ref.get('name', '')}" if ref else str(item)


def _kind_ref(item: Any) -> str:
    """An AppProject whitelist entry: ``group/Kind``, or ``Kind`` in the core group."""
    entry = _map(item)
    group = str(entry.get("group") or "")
    return f"{group}/{entry.get('kind')}" if group else str(entry.get("kind"))


def _destination(item: Any) -> str:
    dest = _map(item)
    where = dest.get("server") or dest.get("name") or "any cluster"
    return f"{where} namespace {dest.get('namespace') or '*'}"


def _ignored(item: Any) -> str:
    entry = _map(item)
    pointers = " ".join(str(p) for p in _list(entry.get("jsonPointers")))
    expressions = " ".join(str(p) for p in _list(entry.get("jqPathExpressions")))
    what = f"{entry.get('kind')}/{entry.get('name') or '*'}"
    return " ".join(p for p in (what, pointers, expressions) if p)


# -- each kind's fields, in words --------------------------------------------------------

_Reading = Callable[[Any, Any], GitOpsNote | str | None]


def _listed(what: str, item: Callable[[Any], str]) -> _Reading:
    def read(old: Any, new: Any) -> str:
        before = [item(x) for x in _list(old)]
        after = [item(x) for x in _list(new)]
        return _set_change(before, after, now=f"{what} now include", no_longer="no longer")

    return read


def _admits(what: str, item: Callable[[Any], str]) -> _Reading:
    """An AppProject list: what it admits beyond the old list widens it (a warning)."""

    def read(old: Any, new: Any) -> GitOpsNote | None:
        before = [item(x) for x in _list(old)]
        after = [item(x) for x in _list(new)]
        joined = [x for x in after if x not in before]
        left = [x for x in before if x not in after]
        parts = [f"admits {what}{_names(joined)} (widened)"] if joined else []
        parts += [f"no longer admits {what}{_names(left)} (narrowed)"] if left else []
        if not parts:
            return None
        return GitOpsNote(message="; ".join(parts), severity=WARNING if joined else INFO)

    return read


def _from_to(what: str, item: Callable[[Any], str] = _text) -> _Reading:
    return lambda old, new: f"{what} {item(old)} → {item(new)}"


def _depends(old: Any, new: Any) -> str:
    before = [_ref(x) for x in _list(old)]
    after = [_ref(x) for x in _list(new)]
    if not after:
        return f"no longer depends on {_names(before)}"
    return _set_change(before, after, now="now depends on", no_longer="no longer on")


def _prune(old: Any, new: Any) -> GitOpsNote:
    if new is True:
        return GitOpsNote(message="prune on: objects removed from the tree are deleted")
    return GitOpsNote(
        message="prune off: objects removed from the tree stay in the cluster", severity=WARNING
    )


def _automated(old: Any, new: Any) -> str:
    if new is None:
        return "automated sync off: a change waits for a manual sync"
    if old is None:
        return f"automated sync on ({_text(new) or 'no prune, no self-heal'})"
    return f"automated sync {_text(old)} → {_text(new)}"


def _finalizers(old: Any, new: Any) -> str | None:
    had, has = _FINALIZER in _list(old), _FINALIZER in _list(new)
    if had == has:
        return None
    if has:
        return f"{_FINALIZER} added: deleting the Application deletes the objects it synced"
    return f"{_FINALIZER} removed: deleting the Application leaves the objects it synced"


_FLUX_DEPENDS: dict[str, _Reading] = {"spec.dependsOn": _depends}
_READINGS: dict[str, dict[str, _Reading]] = {
    "Kustomization": {
        "spec.healthChecks": _listed("health checks", _ref),
        **_FLUX_DEPENDS,
        "spec.path": _from_to("path"),
        "spec.sourceRef": _from_to("source", _ref),
        "spec.prune": _prune,
        "spec.targetNamespace": _from_to("target namespace"),
    },
    "Application": {
        "spec.ignoreDifferences": _listed("ignoreDifferences", _ignored),
        "spec.source.path": _from_to("source.path"),
        "spec.source.repoURL": _from_to("source.repoURL"),
        "spec.source.targetRevision": _from_to("source.targetRevision"),
        "spec.destination": _from_to("destination", _destination),
        "spec.project": _from_to("project"),
        "spec.syncPolicy.automated": _automated,
        "spec.syncPolicy.syncOptions": _listed("syncOptions", str),
        "metadata.finalizers": _finalizers,
    },
    "AppProject": {
        "spec.namespaceResourceWhitelist": _admits("", _kind_ref),
        "spec.clusterResourceWhitelist": _admits("cluster-scoped ", _kind_ref),
        "spec.destinations": _admits("destination ", _destination),
        "spec.sourceRepos": _admits("repository ", str),
    },
    "HelmRelease": {
        **_FLUX_DEPENDS,
        "spec.chart.spec.chart": _from_to("chart"),
        "spec.chart.spec.version": _from_to("chart version"),
        "spec.chart.spec.sourceRef": _from_to("chart source", _ref),
        "spec.valuesFrom": _listed("valuesFrom", _ref),
        "spec.targetNamespace": _from_to("target namespace"),
    },
    "GitRepository": {"spec.ref": _from_to("ref"), "spec.url": _from_to("url")},
    "OCIRepository": {"spec.ref": _from_to("ref"), "spec.url": _from_to("url")},
}


def _changed(old: Obj, new: Obj, *, skip: Sequence[str]) -> list[GitOpsNote]:
    """The kind's readings of the fields that changed, then the other changed paths."""
    readings = _READINGS.get(str(new.get("kind")), {})
    notes: list[GitOpsNote] = []
    explained = list(skip)
    for path, read in readings.items():
        before, after = _get(old, path), _get(new, path)
        if before == after:
            continue
        note = read(before, after)
        if note:
            notes.append(note if isinstance(note, GitOpsNote) else GitOpsNote(message=note))
            explained.append(path)
    paths = [p for p in changed_paths(old, new) if not _under(p, explained)]
    if paths:
        notes.append(GitOpsNote(message=f"{_paths(paths)} changed"))
    return notes


def _paths(paths: Sequence[str]) -> str:
    more = f" and {len(paths) - MAX_PATHS} more" if len(paths) > MAX_PATHS else ""
    return ", ".join(paths[:MAX_PATHS]) + more


def _under(path: str, prefixes: Sequence[str]) -> bool:
    return any(path == p or path.startswith((f"{p}.", f"{p}[")) for p in prefixes)


# -- a HelmRelease's values ----------------------------------------------------------------


def _values_refs(release: Obj) -> list[tuple[str, str]]:
    """The ConfigMaps (name, key) a release reads its values from."""
    refs = []
    for item in _list(_get(release, "spec.valuesFrom")):
        ref = _map(item)
        if ref.get("kind") == "ConfigMap" and ref.get("name"):
            refs.append((str(ref["name"]), str(ref.get("valuesKey") or _DEFAULT_VALUES_KEY)))
    return refs


def _values_keys(objects: Mapping[Key, Obj]) -> dict[Key, tuple[str, ...]]:
    """The data keys of each ConfigMap that holds a release's values: said with the release."""
    found: dict[Key, tuple[str, ...]] = {}
    for (kind, namespace, _), obj in objects.items():
        if kind == "HelmRelease":
            for name, key in _values_refs(obj):
                where = ("ConfigMap", namespace, name)
                found[where] = (*found.get(where, ()), f"data{segment(key)}")
    return found


def _values(release: Obj, *, objects: Mapping[Key, Obj]) -> dict[str, str | None]:
    """Each values source of a release, named, with its text (None: not in the tree)."""
    namespace = str(_map(release.get("metadata")).get("namespace") or "")
    found: dict[str, str | None] = {}
    for name, key in _values_refs(release):
        config_map = objects.get(("ConfigMap", namespace, name))
        text = None if config_map is None else _map(config_map.get("data")).get(key)
        found[f"ConfigMap {namespace}/{name}" if namespace else f"ConfigMap {name}"] = (
            None if text is None else str(text)
        )
    inline = _get(release, "spec.values")
    if isinstance(inline, dict) and inline:
        found["spec.values"] = yamlout.dump(inline)
    return found


def _top_keys(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        loaded = reader("safe").load(text)
    except (YAMLError, RecursionError):
        return None
    if amplified(loaded, text_length=len(text)):  # vf writes no aliases
        return None
    return {str(k): v for k, v in loaded.items()} if isinstance(loaded, dict) else None


def _keys_change(old: str | None, new: str | None) -> str:
    """The top-level keys that changed, with their changed paths. ``jobValues`` is left
    out: it is a digest of other keys (ADR 224), changed only with one of them."""
    before, after = _top_keys(old), _top_keys(new)
    if before is None or after is None:
        return "its text changed"
    before.pop(JOB_VALUES, None)
    after.pop(JOB_VALUES, None)
    changed = [k for k in sorted(set(before) & set(after)) if before[k] != after[k]]
    added, removed = sorted(set(after) - set(before)), sorted(set(before) - set(after))
    paths = [p for k in changed for p in changed_paths(before[k], after[k], prefix=segment(k))]
    detail = f" ({_paths(paths)})" if paths != changed else ""
    parts = [f"{', '.join(changed)} changed{detail}"] if changed else []
    parts += [f"{', '.join(added)} added"] if added else []
    parts += [f"{', '.join(removed)} removed"] if removed else []
    return "; ".join(parts) or "its text changed, not its keys' values"


def values_diff(old: str, new: str) -> tuple[str, ...]:
    """A unified diff of two values texts, one line of context, at most
    ``MAX_VALUES_LINES`` lines."""
    before, after = old.splitlines(), new.splitlines()
    if max(len(before), len(after)) > MAX_DIFFED_LINES:
        return (f"(more than {MAX_DIFFED_LINES} lines: see vf diff --raw)",)
    lines = list(difflib.unified_diff(before, after, lineterm="", n=1))[2:]
    if len(lines) > MAX_VALUES_LINES:
        rest = len(lines) - MAX_VALUES_LINES
        lines = [*lines[:MAX_VALUES_LINES], f"… {rest} more lines"]
    return tuple(lines)


def _release_values(
    old_release: Obj, new_release: Obj, *, old: Mapping[Key, Obj], new: Mapping[Key, Obj]
) -> list[GitOpsNote]:
    """How the values a release installs with change: helm-controller upgrades the release
    when they do, even though the HelmRelease itself is the same."""
    before, after = _values(old_release, objects=old), _values(new_release, objects=new)
    notes = []
    for source in sorted(set(before) & set(after)):
        a, b = before[source], after[source]
        if a == b or a is None or b is None:
            continue
        notes.append(
            GitOpsNote(
                message=f"its values change ({source}): {_keys_change(a, b)}; "
                "helm-controller upgrades the release",
                lines=values_diff(a, b),
            )
        )
    return notes


# -- objects new or removed ---------------------------------------------------------------


def _added(obj: Obj, *, objects: Mapping[Key, Obj]) -> list[GitOpsNote]:
    """What a new object does, for the kinds vf writes."""
    kind = obj.get("kind")
    message = ""
    if kind == "Kustomization":
        message = f"applies {_get(obj, 'spec.path')} from {_ref(_get(obj, 'spec.sourceRef'))}"
        checks = [_ref(x) for x in _list(_get(obj, "spec.healthChecks"))]
        if checks:
            message += f", health checks {_names(checks)}"
        depends = [_ref(x) for x in _list(_get(obj, "spec.dependsOn"))]
        if depends:
            message += f", depends on {_names(depends)}"
    elif kind == "Application":
        message = (
            f"syncs {_get(obj, 'spec.source.path')} to "
            f"{_destination(_get(obj, 'spec.destination'))} in project {_get(obj, 'spec.project')}"
        )
    elif kind == "AppProject":
        namespaced = [_kind_ref(x) for x in _list(_get(obj, "spec.namespaceResourceWhitelist"))]
        cluster = [_kind_ref(x) for x in _list(_get(obj, "spec.clusterResourceWhitelist"))]
        message = f"admits {_names(namespaced) or 'no namespaced kind'}"
        message += f"; cluster-scoped {_names(cluster)}" if cluster else ""
    elif kind == "HelmRelease":
        message = (
            f"releases {_get(obj, 'spec.chart.spec.chart')} into "
            f"{_get(obj, 'spec.targetNamespace') or 'its own namespace'}"
        )
        for source, text in sorted(_values(obj, objects=objects).items()):
            keys = _top_keys(text)
            message += f", values from {source}"
            message += f" (keys {_names(sorted(keys))})" if keys else ""
    elif kind in ("GitRepository", "OCIRepository"):
        message = f"reads {_get(obj, 'spec.url')} at {_text(_get(obj, 'spec.ref'))}"
    return [GitOpsNote(message=message)] if message else []


def _removed(obj: Obj) -> list[GitOpsNote]:
    """What deleting a removed object from the cluster does (removing its file does not
    delete it by itself, unless something syncs gitops/ with pruning)."""
    kind = obj.get("kind")
    message = ""
    if kind == "Kustomization" and _get(obj, "spec.prune") is True:
        message = "deleting it deletes the objects it applied (prune: true)"
    elif kind == "Application" and _FINALIZER in _list(_get(obj, "metadata.finalizers")):
        message = f"deleting it deletes the objects it synced ({_FINALIZER})"
    elif kind == "HelmRelease":
        message = "deleting it uninstalls the release"
    return [GitOpsNote(message=message, severity=WARNING)] if message else []
