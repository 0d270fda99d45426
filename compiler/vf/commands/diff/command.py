"""``vf diff``: what compiling now would change in a committed tree, per environment.

Pipeline-level findings come from the plans (nodes, replicas, images, guarantees, GPUs,
runs); resource-level ones from the objects each overlay builds (added, removed and
changed objects, Jobs that will be re-created, selectors a controller cannot change);
the controller objects under ``gitops/`` from ``vf.commands.diff.gitops``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vf.commands.diff.claims import ARGOCD_REFUSAL, claim_findings
from vf.commands.diff.flow import FlowChange, flow_change
from vf.commands.diff.gitops import GitOpsChange, gitops_changes
from vf.commands.diff.plan import BREAKING, INFO, WARNING, Finding, plan_findings
from vf.commands.diff.shards import shard_findings
from vf.emit.kustomize.tree import json_patch
from vf.emit.ordering import without_tool_annotations
from vf.pipeline import CompileResult
from vf.textio.objects import Obj
from vf.tree.owned_read import read_owned
from vf.tree.read import build_overlay, committed_environments, committed_plan
from vf.tree.write import (
    MANIFEST,
    check_owned,
    diff_tree,
    stray_files,
    stray_notes,
    with_manifest,
)

Key = tuple[str, str]
_SELECTOR_KINDS = frozenset({"Deployment", "StatefulSet", "DaemonSet"})
_STATEFULSET_IMMUTABLE = ("serviceName", "podManagementPolicy", "volumeClaimTemplates")
MAX_FIELDS = 8


@dataclass(frozen=True, kw_only=True)
class ResourceChange:
    """One object an overlay builds: added, removed, changed, or replaced under a new run's
    name (``previous`` is the committed name; ``fields`` what differs besides the run)."""

    action: str
    kind: str
    name: str
    fields: tuple[str, ...] = ()
    previous: str = ""


@dataclass(frozen=True, kw_only=True)
class EnvDiff:
    environment: str
    status: str
    findings: tuple[Finding, ...]
    resources: tuple[ResourceChange, ...]


@dataclass(frozen=True, kw_only=True)
class TreeDiff:
    """The whole report; ``changed`` decides the exit code."""

    out: str
    changed: bool
    environments: tuple[EnvDiff, ...]
    files: tuple[str, ...]
    raw: str
    strays: tuple[str, ...] = ()  # files under chart/ vf did not write, which Helm renders
    flow: FlowChange | None = None  # the Markdown report's diagram; not in the JSON one
    gitops: tuple[GitOpsChange, ...] = ()  # the controller objects under gitops/


def read_tree(out: Path) -> dict[str, str]:
    """The files vf owns in ``out`` (empty when ``out`` does not exist yet)."""
    found = {rel: read_owned(out, rel) for rel in check_owned(out) if rel != MANIFEST}
    return {rel: text for rel, text in found.items() if text is not None}


def diff_project(
    result: CompileResult, *, out: Path, environments: Sequence[str] = (), raw: bool = False
) -> TreeDiff:
    """Compare ``result`` with the tree committed at ``out``, reporting ``environments``."""
    committed = read_tree(out)
    fresh = result.tree
    names = sorted(set(committed_environments(committed)) | set(result.objects))
    wanted = [e for e in names if not environments or e in environments]
    reports = tuple(_env_diff(env, committed=committed, fresh=fresh) for env in wanted)
    # With --env, only the chosen environments were compiled: the files only the others
    # make, and the files built from every environment, are not compared file by file;
    # each chosen environment's build and plan are.
    same_layout = set(committed_environments(committed)) == set(result.objects)
    keep = (
        (lambda rel: _compared(rel, environments, fresh, same_layout=same_layout))
        if environments
        else None
    )
    text = diff_tree(out, fresh, keep=keep) if out.is_dir() else _all_new(fresh)
    files = [f for f in _changed_files(committed, fresh=fresh) if keep is None or keep(f)]
    strays = stray_files(out, known=[*committed, *fresh, MANIFEST]) if out.is_dir() else []
    # With --env, only those environments decide; otherwise any generated file does. A
    # file vf did not write where Helm renders every file always does.
    changed = any(r.status != "unchanged" for r in reports) if environments else bool(files)
    return TreeDiff(
        out=str(out),
        changed=changed or bool(strays),
        environments=reports,
        files=tuple(files),
        strays=tuple(strays),
        raw=text + stray_notes(strays) if raw else "",
        flow=flow_change(committed, fresh, environments=wanted),
        gitops=gitops_changes(committed, fresh, environments=environments),
    )


def _compared(
    rel: str, environments: Sequence[str], fresh: Mapping[str, str], *, same_layout: bool
) -> bool:
    """Whether ``vf diff --env`` compares ``rel`` file by file: each chosen environment's
    plan, and its overlay when every committed environment was compiled too (how the
    overlays are laid out depends on how many environments there are, ADR 85; otherwise
    the overlay is compared as it builds, in the report above). Base, components, chart,
    GitOps and README files are built from every environment."""
    if rel not in fresh:
        return False
    return any(
        rel == f"plan/{e}.json" or (same_layout and rel.startswith(f"overlays/{e}/"))
        for e in environments
    )


def _all_new(tree: Mapping[str, str]) -> str:
    return "".join(f"+++ b/{path}\n" for path in sorted(with_manifest(tree)))


def _changed_files(committed: Mapping[str, str], *, fresh: Mapping[str, str]) -> list[str]:
    return sorted(p for p in set(committed) | set(fresh) if committed.get(p) != fresh.get(p))


def _env_diff(env: str, *, committed: Mapping[str, str], fresh: Mapping[str, str]) -> EnvDiff:
    old_plan = committed_plan(committed, env=env)
    new_plan = committed_plan(fresh, env=env)
    if new_plan is None:
        finding = Finding(
            category="environment",
            subject=env,
            message="environment removed from vf.yaml: its overlay and plan are deleted",
            severity=WARNING,
        )
        return EnvDiff(environment=env, status="removed", findings=(finding,), resources=())
    old_objects = _index(build_overlay(committed, env=env))
    new_objects = _index(build_overlay(fresh, env=env))
    renames = _renames(old_plan or {}, new=new_plan)
    resources = _resources(old_objects, new=new_objects, renames=renames)
    if old_plan is None:
        return EnvDiff(environment=env, status="added", findings=(), resources=resources)
    both = sorted(_plan_nodes(old_plan) & _plan_nodes(new_plan))
    findings = [
        *plan_findings(old_plan, new=new_plan),
        *_object_findings(old_objects, new=new_objects),
        *_replaced_jobs(resources),
        *shard_findings(env, committed=committed, fresh=fresh, nodes=both),
    ]
    changed = bool(findings or resources or old_plan != new_plan)
    return EnvDiff(
        environment=env,
        status="changed" if changed else "unchanged",
        findings=tuple(findings),
        resources=resources,
    )


def _plan_nodes(plan: Mapping[str, Any]) -> set[str]:
    return {str(w["node"]) for w in plan.get("workloads") or []}


def _index(objects: Sequence[Obj]) -> dict[Key, Obj]:
    return {
        (str(o["kind"]), str(o["metadata"]["name"])): without_tool_annotations(o) for o in objects
    }


def _names(plan: Mapping[str, Any]) -> dict[str, str]:
    """The names the plan gives a role that a change may rename (Jobs carry their tag)."""
    provision = plan.get("provision") or {}
    out = {"broker": plan.get("broker_configmap"), "provision": provision.get("job")}
    for w in plan.get("workloads") or []:
        out[f"node {w['node']}"] = w.get("name")
    for g in (plan.get("gpu") or {}).get("grants") or []:
        out[f"claim {g['node']}"] = g.get("claim_template")
    return {role: str(name) for role, name in out.items() if name}


@dataclass(frozen=True, kw_only=True)
class _Renames:
    """Committed names → the new plan's name of the same role, and the run id change."""

    names: Mapping[str, str]
    run: tuple[str, str] | None


def _renames(old: Mapping[str, Any], *, new: Mapping[str, Any]) -> _Renames:
    before, after = _names(old), _names(new)
    pairs = {before[r]: after[r] for r in before if r in after and before[r] != after[r]}
    runs = (str(old.get("run_id", "")), str(new.get("run_id", "")))
    return _Renames(names=pairs, run=runs if runs[0] and runs[0] != runs[1] else None)


def _as_run(old: Mapping[Key, Obj], *, renames: _Renames) -> dict[Key, tuple[str, Obj]]:
    """Old objects as the new plan would name them, each with its committed name."""
    out: dict[Key, tuple[str, Obj]] = {}
    for (kind, name), obj in old.items():
        new_name, text = renames.names.get(name, name), json.dumps(obj)
        for before, after in renames.names.items():
            text = text.replace(f'"{before}"', f'"{after}"')
        if renames.run is not None:
            new_name, text = new_name.replace(*renames.run), text.replace(*renames.run)
        out[(kind, new_name)] = (name, obj if text == json.dumps(obj) else json.loads(text))
    return out


_REPLACED = {
    "Job": (
        "job",
        "a Job's pod template is immutable, so its name carries the template's tag): Argo "
        "CD, Flux and Helm create it and delete the old one at once, so a batch still "
        "running is stopped and the work runs again from the start",
    ),
    "ResourceClaimTemplate": (
        "gpu",
        "a claim template's spec is immutable, so its name carries a digest of it): the "
        "sync creates it, the pods that use it roll onto new claims, the prune removes the old",
    ),
}


def _replaced_jobs(resources: Sequence[ResourceChange]) -> list[Finding]:
    """Objects whose immutable spec changed, made safe by a new name: what will happen."""
    return [
        Finding(
            category=_REPLACED[r.kind][0],
            subject=f"{r.kind}/{r.name}",
            message=f"replaces {r.kind}/{r.previous} ({_REPLACED[r.kind][1]}",
            severity=WARNING,
        )
        for r in resources
        if r.kind in _REPLACED and r.action == "replaced"
    ]


def _fields(old: Obj, *, new: Obj) -> tuple[str, ...]:
    paths = sorted({str(op["path"]) for op in json_patch(old, new)})
    extra = [f"… {len(paths) - MAX_FIELDS} more"] if len(paths) > MAX_FIELDS else []
    return tuple(paths[:MAX_FIELDS] + extra)


def _resources(
    old: Mapping[Key, Obj], *, new: Mapping[Key, Obj], renames: _Renames
) -> tuple[ResourceChange, ...]:
    """Objects added, removed, changed, or replaced by the new object of that role."""
    renamed = _as_run(old, renames=renames)
    changes = []
    for key in sorted(set(renamed) | set(new)):
        kind, name = key
        if key not in renamed:
            changes.append(ResourceChange(action="added", kind=kind, name=name))
            continue
        previous, before = renamed[key]
        if key not in new:
            changes.append(ResourceChange(action="removed", kind=kind, name=previous))
        elif previous != name:
            fields = _fields(before, new=new[key])
            changes.append(
                ResourceChange(
                    action="replaced", kind=kind, name=name, fields=fields, previous=previous
                )
            )
        elif before != new[key]:
            fields = _fields(before, new=new[key])
            changes.append(ResourceChange(action="changed", kind=kind, name=name, fields=fields))
    return tuple(changes)


def _object_findings(old: Mapping[Key, Obj], *, new: Mapping[Key, Obj]) -> list[Finding]:
    found: list[Finding] = []
    for key in sorted(set(old) & set(new)):
        a, b = old[key], new[key]
        if a != b:
            found.extend(_changed(key, old=a.get("spec") or {}, new=b.get("spec") or {}))
    for key in sorted(set(new) - set(old)):
        if key[0] == "ScaledObject":
            message = "KEDA now scales this worker; its Deployment leaves replicas to KEDA"
            found.append(Finding(category="autoscaling", subject=key[1], message=message))
    for key in sorted(set(old) - set(new)):
        if key[0] == "ScaledObject":
            message = "no longer autoscaled; replicas come from the plan again"
            found.append(Finding(category="autoscaling", subject=key[1], message=message))
    return found


def _changed(key: Key, *, old: Obj, new: Obj) -> list[Finding]:
    """What the API server does with an object changed in place under the same name."""
    kind, name = key
    found: list[Finding] = []
    if kind in ("Job", "ResourceClaimTemplate") and old != new:
        what = "pod template" if kind == "Job" else "spec"
        found.append(
            Finding(
                category="immutable",
                subject=f"{kind}/{name}",
                message=f"its {what} changed under the same name: the API server refuses "
                f"it. vf names every {kind} by its {what}; recompile rather than edit the tree",
                severity=BREAKING,
            )
        )
    if kind in _SELECTOR_KINDS and old.get("selector") != new.get("selector"):
        found.append(_immutable(key, field="spec.selector"))
    if kind == "StatefulSet":
        for field in _STATEFULSET_IMMUTABLE:
            if old.get(field) != new.get(field):
                found.append(_immutable(key, field=f"spec.{field}"))
    if kind == "PersistentVolumeClaim":
        found.extend(claim_findings(name, old=old, new=new))
    return found


def _immutable(key: Key, *, field: str) -> Finding:
    kind, name = key
    return Finding(
        category="selector" if field == "spec.selector" else "immutable",
        subject=f"{kind}/{name}",
        message=f"{field} changed: the API server refuses this in place; delete the "
        f"{kind} before syncing (kubectl delete {kind.lower()} {name} --cascade=orphan keeps "
        "its pods and claims; existing claims keep their old class and size), or change the "
        "flow so vf starts a new run" + ARGOCD_REFUSAL,
        severity=BREAKING,
    )


def diff_json(report: TreeDiff) -> dict[str, Any]:
    """The report as plain data (``--format json``)."""
    fields = {name: _plain(getattr(report, name)) for name in _JSON_FIELDS}
    document: dict[str, Any] = json.loads(json.dumps(fields))
    return document


_JSON_FIELDS = ("out", "changed", "environments", "gitops", "files", "strays", "raw")


def _plain(value: Any) -> Any:
    if hasattr(value, "__dataclass_fields__"):
        return {name: _plain(getattr(value, name)) for name in value.__dataclass_fields__}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value


SEVERITIES = (BREAKING, WARNING, INFO)
