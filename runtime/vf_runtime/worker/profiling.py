"""``VF_PROFILE_DIR``: run a worker under cProfile, for diagnostics only.

The folder is created if it is missing; one that cannot be written is refused by name at
start-up (``VF_PROFILE_DIR``, exit 2) rather than at exit, when the profile is written.
Each worker writes ``{node}-r{replica}-{pid}.prof``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from vf_runtime.broker.naming import token
from vf_runtime.worker.exits import EXIT_CONFIG


def _profile_folder(directory: str) -> str | None:
    """Create the folder the profiles go to; the reason when it cannot be written."""
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as exc:
        return exc.strerror or str(exc)
    if not os.access(directory, os.W_OK | os.X_OK):
        return "it is not writable"
    return None


def profiled(directory: str, run: Callable[[], int]) -> int:
    """Diagnostics only: run under cProfile and write ``{node}-r{replica}-{pid}.prof``."""
    import cProfile

    problem = _profile_folder(directory)
    if problem is not None:
        print(
            f"error[VF_PROFILE_DIR] VF_PROFILE_DIR={directory!r} cannot hold profiles: "
            f"{problem}\n  = fix: point VF_PROFILE_DIR at a writable folder, or unset it",
            file=sys.stderr,
        )
        return EXIT_CONFIG

    profiler = cProfile.Profile()
    try:
        return profiler.runcall(run)
    finally:
        node = token(os.environ.get("VF_NODE_NAME", "worker"))
        target = f"{node}-r{os.environ.get('VF_REPLICA_ID', '0')}-{os.getpid()}.prof"
        profiler.dump_stats(os.path.join(directory, target))
