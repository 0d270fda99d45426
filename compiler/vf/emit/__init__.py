"""Emitting: rendered objects into the files of the output tree, in memory.

Input: each environment's plan and objects. Output: the tree's files as text (Kustomize
overlays, the Helm chart, GitOps manifests, the tree README); nothing touches disk.
"""
