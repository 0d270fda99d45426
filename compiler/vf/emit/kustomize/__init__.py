"""The Kustomize tree: ``overlays/<env>/`` per environment and shared ``components/``.

Input: each environment's objects. Output: the Kustomize files, whose build of an
overlay equals that environment's objects.
"""
