"""Finding the other vf trees of a repository, and reading what each declares.

The trees are looked for where the repository keeps them: under the git work tree that
holds ``--out`` (the nearest folder above it with a ``.git``), else under the folder that
``gitops.path`` says the tree sits in (``--out`` is ``ROOT/deploy/batch`` for
``path: deploy/batch``), else beside ``--out``. The walk follows no link, skips hidden and
dependency folders, stops inside a vf tree, and looks at a bounded number of folders.
Without a repository root, only the folders beside ``--out`` are looked at.

Nothing of a neighbour is trusted: each file is read through ``vf.textio.safe_read``
(a regular file only, no link followed, bounded size and nesting), and a file that cannot
be read becomes a note naming it, never a failure of the compile.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vf.textio.safe_read import Unreadable, load_json, read_regular

MANIFEST = ".vf-manifest.json"
MAX_PLAN_BYTES = 256 * 1024 * 1024
MAX_GITOPS_BYTES = 1024 * 1024
MAX_FOLDERS = 5000
MAX_DEPTH = 8
_SKIPPED = frozenset({"node_modules", "venv", "__pycache__", "site-packages"})
IN_CLUSTER = "https://kubernetes.default.svc"


@dataclass(frozen=True, kw_only=True)
class Place:
    """What a tree says about the cluster one environment goes to; None: not said."""

    cluster: str | None = None  # vf.yaml's environments.<env>.cluster
    argocd: str | None = None  # the Application's destination: "name N" or "server URL"
    flux: str | None = None  # the Kustomization's kubeConfig Secret

    def same_cluster(self, other: Place) -> bool | None:
        """True or False where both trees say it in the same terms; None where unknown."""
        if self.cluster is not None and other.cluster is not None:
            return self.cluster == other.cluster
        for mine, theirs in ((self.argocd, other.argocd), (self.flux, other.flux)):
            if mine is not None and theirs is not None:
                return mine == theirs
        return None

    def describe(self) -> str:
        said = [
            f"{key} {value}"
            for key, value in (
                ("cluster", self.cluster),
                ("Argo CD destination", self.argocd),
                ("Flux kubeConfig", self.flux),
            )
            if value is not None
        ]
        return ", ".join(said) or "no cluster"


def argocd_place(*, name: str | None, server: str | None) -> str | None:
    """An Argo CD destination as a place; the controller's own cluster says nothing."""
    if name:
        return f"name {name}"
    if server and server.rstrip("/") != IN_CLUSTER:
        return f"server {server.rstrip('/')}"
    return None


@dataclass(kw_only=True)
class Neighbour:
    """One other tree: its plans, where each environment goes, and what could not be read."""

    root: Path
    plans: list[tuple[Path, dict[str, Any]]] = field(default_factory=list)
    places: dict[str, Place] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


@dataclass(kw_only=True)
class Search:
    """Where the trees were looked for, what was found, and what could not be looked at."""

    root: Path
    trees: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def search_root(out: Path, gitops_path: str | None) -> tuple[Path, int]:
    """The folder whose trees are compared with ``out``, and how deep to look in it: a
    repository's root is searched; without one, only the folders beside ``out`` (a home
    directory is not walked)."""
    for folder in out.parents:
        if os.path.lexists(folder / ".git"):
            return folder, MAX_DEPTH
    if gitops_path and gitops_path != ".":
        parts = Path(gitops_path).parts
        if out.parts[-len(parts) :] == parts and len(out.parts) > len(parts):
            return Path(*out.parts[: -len(parts)]), MAX_DEPTH
    return out.parent, 1


def find_trees(out: Path, gitops_path: str | None) -> Search:
    """Every vf tree under the search root but ``out``, in path order."""
    here = out.resolve() if out.exists() else out.absolute()
    root, deepest = search_root(here, gitops_path)
    search = Search(root=root)
    pending: list[tuple[Path, int]] = [(search.root, 0)]
    seen = 0
    while pending:
        folder, depth = pending.pop()
        seen += 1
        if seen > MAX_FOLDERS:
            search.notes.append(
                f"looked at {MAX_FOLDERS} folders under {search.root} and stopped; "
                "vf trees further in were not compared"
            )
            break
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        names = {e.name: e for e in entries}
        manifest = names.get(MANIFEST)
        if manifest is not None and folder != search.root:
            if folder != here and manifest.is_file(follow_symlinks=False):
                search.trees.append(folder)
            continue  # a tree's own folders hold no trees
        if depth >= deepest:
            continue
        for entry in reversed(entries):
            if _descend(entry):
                pending.append((Path(entry.path), depth + 1))
    search.trees.sort()
    return search


def _descend(entry: os.DirEntry[str]) -> bool:
    if entry.name.startswith(".") or entry.name in _SKIPPED:
        return False
    try:
        return stat.S_ISDIR(entry.stat(follow_symlinks=False).st_mode)
    except OSError:
        return False


def read_neighbour(tree: Path) -> Neighbour:
    """The plans of ``tree`` and where its environments go; unreadable files as notes."""
    found = Neighbour(root=tree)
    try:
        paths = sorted(p for p in (tree / "plan").iterdir() if p.suffix == ".json")
    except OSError:
        paths = []
    for path in paths:
        plan = _read_json(path, found)
        if isinstance(plan, dict):
            found.plans.append((path, plan))
            env = str(plan.get("environment", path.stem))
            cluster = plan.get("cluster")
            found.places[env] = Place(
                cluster=cluster if isinstance(cluster, str) else None,
                argocd=_argocd(tree, env, found),
                flux=_flux(tree, env, found),
            )
    return found


def _read_json(path: Path, found: Neighbour) -> Any:
    try:
        return load_json(read_regular(path, limit=MAX_PLAN_BYTES))
    except Unreadable as why:
        found.notes.append(f"{path}: {why}")
        return None


def _read_yaml(path: Path, found: Neighbour) -> Any:
    if not os.path.lexists(path):
        return None
    from ruamel.yaml.error import YAMLError  # only a tree with GitOps objects needs YAML

    from vf.textio.yaml_read import reader

    try:
        text = read_regular(path, limit=MAX_GITOPS_BYTES).decode("utf-8")
        return reader("safe").load(text)
    except Unreadable as why:
        found.notes.append(f"{path}: {why}")
    except (YAMLError, UnicodeDecodeError, RecursionError) as exc:
        found.notes.append(f"{path}: not YAML vf reads ({type(exc).__name__})")
    return None


def _spec(document: Any) -> dict[str, Any]:
    spec = document.get("spec") if isinstance(document, dict) else None
    return spec if isinstance(spec, dict) else {}


def _argocd(tree: Path, env: str, found: Neighbour) -> str | None:
    document = _read_yaml(tree / "gitops" / "argocd" / f"application-{env}.yaml", found)
    destination = _spec(document).get("destination")
    if not isinstance(destination, dict):
        return None
    name, server = destination.get("name"), destination.get("server")
    return argocd_place(
        name=name if isinstance(name, str) else None,
        server=server if isinstance(server, str) else None,
    )


def _flux(tree: Path, env: str, found: Neighbour) -> str | None:
    document = _read_yaml(tree / "gitops" / "flux" / f"kustomization-{env}.yaml", found)
    config = _spec(document).get("kubeConfig")
    ref = config.get("secretRef") if isinstance(config, dict) else None
    name = ref.get("name") if isinstance(ref, dict) else None
    return name if isinstance(name, str) and name else None
