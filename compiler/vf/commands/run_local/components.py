"""How ``vf run-local`` starts native components: their ``runtime.localCommand``.

``{python}`` in the command is the interpreter running vf and ``{dir}`` the descriptor's
folder; a relative program path (``bin/tool``) is relative to that folder too. A component
without a local command needs its image, which vf cannot run here: a named error (exit 3).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from vf.errors import EnvironmentProblem, Problem
from vf.ir.graph import Graph
from vf_runtime.components import ComponentSpec


def local_command(spec: ComponentSpec) -> tuple[str, ...] | None:
    """The argv that runs ``spec`` on this machine, or None when it declares none."""
    if spec.local_command is None:
        return None
    argv = [
        arg.replace("{python}", sys.executable).replace("{dir}", spec.directory)
        for arg in spec.local_command
    ]
    program = argv[0]
    if not os.path.isabs(program) and "/" in program:
        argv[0] = str(Path(spec.directory) / program)
    return tuple(argv)


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
