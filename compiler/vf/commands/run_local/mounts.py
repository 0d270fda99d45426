"""Where a ``vf run-local`` worker finds the paths its pod would mount.

A claim mount (``claim:/path`` in ``mounts:``) is a folder of the run directory,
``RUN_DIR/claims/NAMESPACE/CLAIM``: the folder ``vf run-tree`` gives the same claim, so
the two runners keep a node's outputs in the same place. A host-path mount
(``/host:/container``) is this machine's ``/host``. There are no mount namespaces here:
the container paths are rewritten in the worker's environment (its node parameters
among them) as ``vf run-tree`` rewrites them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from vf.ir.plan import Plan, Workload
from vf.runtree.podspec import Translator


def claim_folder(run_dir: Path, namespace: str, claim: str) -> Path:
    """The folder of one claim in a run directory, for both runners."""
    return run_dir / "claims" / namespace / claim


def local_paths(workload: Workload, *, run_dir: Path, namespace: str) -> dict[str, Path]:
    """Each mount's container path and the folder of this machine behind it."""
    paths: dict[str, Path] = {}
    for mount in workload.mounts:
        if mount.claim is not None:
            folder = claim_folder(run_dir, namespace, mount.claim)
            folder.mkdir(parents=True, exist_ok=True)
            paths[mount.path] = folder
        elif mount.source is not None and mount.source != mount.path:
            paths[mount.path] = Path(mount.source)
    return paths


def mounted_env(env: Mapping[str, str], paths: Mapping[str, Path]) -> dict[str, str]:
    """The environment with each mount's container path rewritten to its local folder."""
    if not paths:
        return dict(env)
    translate = Translator(paths, lambda text: text)
    return {name: translate(value) for name, value in env.items()}


def claims(plan: Plan, run_dir: Path) -> list[tuple[str, str, Path]]:
    """(node, container path, folder) of every claim mount of the plan, in plan order."""
    return [
        (w.node, m.path, claim_folder(run_dir, plan.namespace, m.claim))
        for w in plan.workloads
        for m in w.mounts
        if m.claim is not None
    ]
