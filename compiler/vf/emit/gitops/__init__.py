"""GitOps delivery: Argo CD Applications and AppProjects, Flux Kustomizations and HelmReleases.

Input: the plans and the ``gitops:`` section they carry. Output: the ``gitops/`` files.
"""
