"""vf's images built and run with podman on this machine.

``engine`` finds podman and knows the flags this kernel needs; ``build`` makes the
Debian base, the worker image (``docker/Dockerfile``) and a pipeline image, each once per
digest of its inputs. Nothing here knows about ``vf run-tree``; it calls in.

Input: vf's checkout (``docker/``, ``runtime/``) or a project folder. Output: images in
podman's local store, tagged by the digest of what went into them.
"""
