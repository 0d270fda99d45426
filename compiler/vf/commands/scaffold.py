"""``vf init DIR``: a new pipeline project that compiles and runs as it is.

The project is rendered from ``templates/init/`` into a temporary sibling folder, compiled
there into ``deploy/`` (so ``vf compile --check`` passes from the first commit), and only
then moved to ``DIR``: a failure leaves nothing behind.
"""

from __future__ import annotations

import keyword
import os
import shutil
import tempfile
from functools import cache
from pathlib import Path

import jinja2

from vf import __version__, names
from vf.errors import VfError
from vf.resources import templates, worker_pins
from vf.textio.folders import unwritable

# template → path in the project ({module} is the nodes module's name)
FILES = (
    ("graph.py", "graph.py"),
    ("nodes.py", "{module}.py"),
    ("vf.yaml", "vf.yaml"),
    ("Dockerfile", "Dockerfile"),
    ("dockerignore", ".dockerignore"),
    ("ci.yaml", ".github/workflows/vf.yaml"),
    ("README.md", "README.md"),
)


@cache
def _jinja() -> jinja2.Environment:
    return templates("init", trim=False)


def project_names(directory: Path, name: str | None) -> tuple[str, str]:
    """(flow name, nodes module) for a project in ``directory``; a named error if unusable."""
    chosen = name if name is not None else names.slug(directory.resolve().name)
    module = chosen.replace("-", "_") + "_nodes"
    if not names.FLOW_ID.match(chosen) or not module.isidentifier() or keyword.iskeyword(module):
        raise VfError(
            "VF_INIT_NAME",
            f"{chosen!r} cannot name a pipeline (it becomes the flow id and a Python module)",
            "pass --name with 1-63 lowercase letters, digits or '-', starting with a letter",
            str(directory),
        )
    return chosen, module


def render_project(name: str, *, module: str) -> dict[str, str]:
    """Relative path → text of every file of a new project (``deploy/`` aside)."""
    context = {
        "name": name,
        "module": module,
        "version": __version__,
        "pins": worker_pins(),  # the Dockerfile installs the worker within them
        "node_files": [(f"{module}.py", "")],  # (source, folder under /app/) of the Dockerfile
    }
    return {
        target.format(module=module): _jinja().get_template(f"{template}.j2").render(**context)
        for template, target in FILES
    }


def _check_target(directory: Path) -> None:
    if directory.is_symlink():
        raise VfError(
            "VF_INIT_LINK",
            f"{directory} is a symbolic link (to {os.readlink(directory)!r}); vf init creates "
            "a folder of its own there",
            "remove the link, or pass the folder it points to",
            str(directory),
        )
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise VfError(
            "VF_INIT_NOT_EMPTY",
            f"{directory} already exists and is not an empty folder",
            "pick a new folder; vf init never writes over existing files",
            str(directory),
        )


def init_project(directory: Path, *, name: str | None = None) -> list[str]:
    """Create the project in ``directory`` and compile it; returns the files written."""
    from vf.pipeline import CompileRequest, compile_project
    from vf.tree.write import write_tree

    _check_target(directory)
    flow, module = project_names(directory, name)
    files = render_project(flow, module=module)
    parent = directory.resolve().parent
    try:  # the project is staged beside DIR: its folder must take new entries
        parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}.vf-init-", dir=parent))
    except OSError as exc:
        raise unwritable(
            parent, exc, what="the folder of the new project", other="pass a DIR elsewhere"
        ) from None
    try:
        umask = os.umask(0)
        os.umask(umask)
        staging.chmod(0o777 & ~umask)  # mkdtemp's 0700 is for the staging, not the project
        for relative, text in files.items():
            path = staging / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        result = compile_project(CompileRequest(graph=str(staging / "graph.py")))
        write_tree(staging / "deploy", result.tree)
        shutil.rmtree(staging / "__pycache__", ignore_errors=True)
        if directory.exists():
            directory.rmdir()  # checked empty above
        os.replace(staging, directory)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return [*sorted(files), "deploy/"]
