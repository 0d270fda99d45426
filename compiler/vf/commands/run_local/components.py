"""How ``vf run-local`` starts native components: their ``runtime.localCommand``, as
:func:`vf.frontend.component_descriptor.local_command` expands it. A component without a
local command needs its image, which vf cannot run here: a named error (exit 3).
"""

from __future__ import annotations

import os
import shutil

from vf.errors import EnvironmentProblem, Problem
from vf.frontend.component_descriptor import local_command
from vf.ir.graph import Graph


def _runnable(program: str) -> bool:
    if "/" in program:
        return os.path.isfile(program) and os.access(program, os.X_OK)
    return shutil.which(program) is not None


def local_commands(graph: Graph) -> dict[str, tuple[str, ...]]:
    """Node name → local argv for every native component; raise for any that cannot run."""
    commands: dict[str, tuple[str, ...]] = {}
    problems: list[Problem] = []
    for node in graph.nodes:
        spec = node.component
        if spec is None:
            continue
        argv = local_command(spec)
        if argv is None:
            problems.append(
                Problem(
                    code="VF_LOCAL_COMPONENT_IMAGE",
                    what=f"component {spec.name!r} (node '{node.name}') has no "
                    "runtime.localCommand: it runs only from its container image, which "
                    "vf run-local cannot start on this machine",
                    remedy="add runtime.localCommand to the component's descriptor, or run "
                    "the flow on a cluster (vf compile, then sync the tree)",
                    where=node.site,
                )
            )
        elif not _runnable(argv[0]):
            problems.append(
                Problem(
                    code="VF_LOCAL_COMPONENT_COMMAND",
                    what=f"component {spec.name!r} (node '{node.name}'): runtime.localCommand "
                    f"program {argv[0]!r} is not an executable here",
                    remedy="install the program or fix runtime.localCommand in the descriptor",
                    where=node.site,
                )
            )
        else:
            commands[node.name] = argv
    if problems:
        raise EnvironmentProblem.collect(problems)
    return commands
