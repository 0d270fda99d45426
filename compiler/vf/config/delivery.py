"""The delivery sections of vf.yaml: ``gitops:`` (top level) and ``autoscaling:`` (per env).

The JSON Schema has already checked shapes and patterns; this module turns the raw
mappings into frozen records and checks what a schema cannot (names of environments).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from vf.errors import Problem
from vf.ir.delivery import ArgoCD, Destination, Flux, GitOps, SourceRef

DEFAULT_MAX_REPLICAS = 10
DEFAULT_LAG_THRESHOLD = 10
DEFAULT_POLLING_SECONDS = 15
DEFAULT_COOLDOWN_SECONDS = 300
DEFAULT_NATS_ACCOUNT = "$G"  # a broker without accounts: its one global account


@dataclass(frozen=True, kw_only=True)
class Autoscaling:
    """KEDA scaling of an environment's long-running workers on their input lag."""

    enabled: bool = True
    min_replicas: int | None = None
    max_replicas: int = DEFAULT_MAX_REPLICAS
    lag_threshold: int = DEFAULT_LAG_THRESHOLD
    gpu_nodes: bool = False
    nodes: tuple[str, ...] = ()
    polling_interval_seconds: int = DEFAULT_POLLING_SECONDS
    cooldown_seconds: int = DEFAULT_COOLDOWN_SECONDS
    monitoring_endpoint: str | None = None
    # None: the flow's account on vf's broker with credentials (ADR 0212), else $G
    account: str | None = None


def parse_autoscaling(raw: Mapping[str, Any] | None) -> Autoscaling | None:
    """The ``autoscaling:`` block of one environment; None when absent."""
    if raw is None:
        return None
    fields = dict(raw)
    if "nodes" in fields:
        fields["nodes"] = tuple(sorted(set(fields["nodes"])))
    return Autoscaling(**fields)


def parse_gitops(
    raw: Mapping[str, Any] | None, *, environments: Iterable[str], source: str
) -> tuple[GitOps | None, list[Problem]]:
    """The top-level ``gitops:`` block and any environment it names that does not exist."""
    if raw is None:
        return None, []
    known = set(environments)
    dests = raw.get("environments") or {}
    problems = [
        Problem(
            code="VF_CONFIG_UNKNOWN_ENV",
            what=f"gitops.environments.{name}: no environment {name!r} in {source}",
            remedy=f"use one of: {', '.join(sorted(known))}",
            where=source,
        )
        for name in sorted(set(dests) - known)
    ]
    argocd, flux = raw.get("argocd"), raw.get("flux")
    flux_source = (flux or {}).get("source")
    gitops = GitOps(
        repo_url=raw["repo_url"],
        revision=raw.get("revision", "main"),
        path=raw["path"],
        argocd=None if argocd is None else ArgoCD(**argocd),
        flux=None
        if flux is None
        else Flux(
            **{k: v for k, v in flux.items() if k != "source"},
            source=None if flux_source is None else SourceRef(**flux_source),
        ),
        destinations=tuple((name, Destination(**dests[name])) for name in sorted(dests)),
    )
    problems.extend(_flux_chart_problems(gitops, source=source))
    if gitops.flux is not None and gitops.flux.source is None:
        problems.extend(_flux_url_problems(gitops, source=source))
        problems.extend(_flux_secret_problems(gitops, source=source))
    return gitops, problems


def _flux_chart_problems(gitops: GitOps, *, source: str) -> list[Problem]:
    """A HelmRelease builds its chart from a Git repository or a bucket; from an OCI
    artifact it takes ``spec.chartRef`` and an artifact that is a packaged chart, which the
    tree artifact (``flux push artifact --path=<out>``) is not."""
    flux = gitops.flux
    if flux is None or not flux.helm_release or flux.source is None:
        return []
    if flux.source.kind != "OCIRepository":
        return []
    return [
        Problem(
            code="VF_CONFIG_GITOPS",
            what="gitops.flux: helm_release: true with source kind OCIRepository; a "
            "HelmRelease's chart.spec.sourceRef takes a GitRepository or a Bucket, and the "
            "tree's OCI artifact is not a packaged chart",
            remedy="name a GitRepository or Bucket under gitops.flux.source, or drop "
            "helm_release to deliver the overlays from the OCI artifact",
            where=source,
        )
    ]


def _flux_secret_problems(gitops: GitOps, *, source: str) -> list[Problem]:
    if not gitops.repo_url.startswith("ssh://") or (gitops.flux and gitops.flux.secret_ref):
        return []
    return [
        Problem(
            code="VF_CONFIG_GITOPS",
            what=f"gitops.repo_url {gitops.repo_url!r}: Flux fetches an ssh:// repository "
            "only with a key, and gitops.flux.secret_ref names none",
            remedy="create the Secret (flux create secret git NAME --url=...) and set "
            "gitops.flux.secret_ref: NAME",
            where=source,
        )
    ]


def _flux_url_problems(gitops: GitOps, *, source: str) -> list[Problem]:
    if gitops.repo_url.startswith(("http://", "https://", "ssh://")):
        return []
    return [
        Problem(
            code="VF_CONFIG_GITOPS",
            what=f"gitops.repo_url {gitops.repo_url!r}: a Flux GitRepository needs an "
            "http(s):// or ssh:// URL",
            remedy="write the URL as ssh://git@host/org/repo.git, or name an existing "
            "source under gitops.flux.source",
            where=source,
        )
    ]
