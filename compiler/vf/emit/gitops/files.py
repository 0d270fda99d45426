"""The names of the ``gitops/`` files a reader needs without the emitter: the tree README
names each environment's root, and a compile without ``gitops:`` never loads the rest."""

from __future__ import annotations

FLUX_SOURCE_FILE = "gitrepository.yaml"


def argocd_root_file(env: str) -> str:
    """The ``gitops/argocd`` file of ``env``'s root Application."""
    return f"root-{env}.yaml"


def flux_root_file(env: str) -> str:
    """The ``gitops/flux`` file of ``env``'s gitops Kustomization."""
    return f"kustomization-{env}-gitops.yaml"
