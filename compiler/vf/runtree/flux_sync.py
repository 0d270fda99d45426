"""What Flux's controllers decide, read from the tree's ``gitops/flux`` objects (ADR 150).

- kustomize-controller builds each Kustomization of an environment (its ``patches`` delete,
  by label selector, what the other part owns), applies it once every Kustomization it
  ``dependsOn`` is Ready, and is Ready itself once its wait set is healthy within its
  ``timeout``: every object with ``wait: true``, else the ``healthChecks`` it lists.
- A Job's health comes from the first status reader that claims ``batch/Job``. Without
  impersonation (no ``serviceAccountName``, no ``kubeConfig``) that is Flux's own Job
  reader, registered before the ``healthCheckExprs`` ones: a Job is healthy only once it
  has completed. With impersonation the expressions come first.
- helm-controller waits for a release's workloads, Jobs until they complete unless
  ``disableWaitForJobs``; a failed install with ``remediation.retries`` uninstalls the
  release, ``strategy: RetryOnFailure`` retries it in place.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from vf.runtree.controllers import Controller
from vf.textio.objects import Obj
from vf.textio.yaml_read import reader

_DURATION = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def seconds(duration: str) -> float:
    """A Kubernetes duration (``5m``, ``1h30m``, ``500ms``) in seconds."""
    return sum(float(n) * _UNITS[unit] for n, unit in _DURATION.findall(duration))


def kustomizations(tree: Path, *, env: str) -> list[Obj]:
    """The environment's Kustomizations, each after those it depends on (infra, workers,
    then the objects the flow runs without); [] without any."""
    folder = tree / "gitops" / "flux"
    found: list[Obj] = []
    names = ("-infra", "", "-optional")
    for name in (f"kustomization-{env}{part}.yaml" for part in names):
        path = folder / name
        if path.is_file():
            loaded = reader("safe").load(path.read_text(encoding="utf-8"))
            if isinstance(loaded, dict) and loaded.get("kind") == "Kustomization":
                found.append(loaded)
    return found


def _requirement(term: str, labels: Mapping[str, str]) -> bool:
    if term.startswith("!"):
        return term[1:] not in labels
    if "!=" in term:
        k, v = term.split("!=", 1)
        return labels.get(k) != v
    if "=" in term:
        k, v = term.split("=", 1)
        return labels.get(k.rstrip("=")) == v
    return term in labels


def matches(selector: str, labels: Mapping[str, str]) -> bool:
    """A Kubernetes label selector (``a``, ``!a``, ``a=b``, ``a!=b``, comma-joined)."""
    return all(_requirement(t.strip(), labels) for t in selector.split(",") if t.strip())


def part_objects(spec: Obj, objects: Sequence[Obj]) -> list[Obj]:
    """The objects a Kustomization applies: the overlay less what its delete patches match."""
    selectors = [
        str((p.get("target") or {}).get("labelSelector"))
        for p in spec.get("patches") or []
        if "$patch: delete" in str(p.get("patch", ""))
    ]
    return [
        o
        for o in objects
        if not any(matches(s, o["metadata"].get("labels") or {}) for s in selectors)
    ]


def impersonates(spec: Obj) -> bool:
    """kustomize-controller builds its client (and status poller) through impersonation."""
    return bool(spec.get("serviceAccountName") or spec.get("kubeConfig"))


def job_reader(spec: Obj) -> str:
    """Which reader decides a Job's health: ``expression`` (vf's ``healthCheckExprs``) or
    ``complete`` (Flux's own Job reader, first unless the controller impersonates)."""
    expressions = any(e.get("kind") == "Job" for e in spec.get("healthCheckExprs") or [])
    return "expression" if expressions and impersonates(spec) else "complete"


def wait_set(spec: Obj, objects: Sequence[Obj]) -> set[tuple[str, str, str]]:
    """The objects whose health makes the Kustomization Ready."""
    if spec.get("wait"):
        return {(o["kind"], o["metadata"]["namespace"], o["metadata"]["name"]) for o in objects}
    return {
        (str(c["kind"]), str(c.get("namespace", "")), str(c["name"]))
        for c in spec.get("healthChecks") or []
    }


def healthy(controller: Controller, *, reader: str) -> bool:
    """One workload's health as Flux's poller reads it."""
    if controller.kind != "Job":
        return controller.healthy()
    if reader == "expression":  # started, and not failed
        return controller.status != "Failed" and (
            bool(controller.pods) or controller.status == "Complete"
        )
    return controller.status == "Complete"
