"""The delivery records vf.yaml's ``gitops:`` declares, which the emitters act on.

``vf.config.delivery`` reads and checks the section and makes these records; the GitOps
emitters (Argo CD Applications and AppProject, Flux sources, Kustomizations and
HelmReleases, the tree README) read them, never vf.yaml itself. They are per tree, not per
environment, so they sit beside the Plan rather than in it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class SourceRef:
    """A Flux source the operator already runs (vf references it, never creates it)."""

    kind: str
    name: str
    namespace: str | None = None


@dataclass(frozen=True, kw_only=True)
class ArgoCD:
    namespace: str = "argocd"
    project: str = "default"
    server: str = "https://kubernetes.default.svc"
    auto_sync: bool = True
    app_project: bool = False  # also emit the AppProject ``project``, locked to this flow
    source: str = "auto"  # overlay, manifests or auto: what the Applications read (ADR 182)


@dataclass(frozen=True, kw_only=True)
class Flux:
    namespace: str = "flux-system"
    interval: str = "10m"
    retry_interval: str = "2m"
    timeout: str = "5m"  # how long Flux waits for an apply (and a release) to be Ready
    source: SourceRef | None = None
    revision_type: str | None = None  # branch, tag, semver, commit or name; None: inferred
    secret_ref: str | None = None  # the Secret with the credentials of a private repository
    service_account: str | None = None  # who applies (Flux impersonation)
    helm_release: bool = False  # a HelmRelease of the chart per environment, not Kustomizations


@dataclass(frozen=True, kw_only=True)
class Destination:
    """Where one environment is delivered, when it is not the controller's own cluster."""

    server: str | None = None
    cluster: str | None = None
    kubeconfig_secret: str | None = None


@dataclass(frozen=True, kw_only=True)
class GitOps:
    """The repository the compiled tree is committed to, and the controllers that sync it."""

    repo_url: str
    revision: str
    path: str
    argocd: ArgoCD | None
    flux: Flux | None
    destinations: tuple[tuple[str, Destination], ...] = ()

    def destination(self, env: str) -> Destination:
        return dict(self.destinations).get(env, Destination())
