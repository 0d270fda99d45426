"""The objects of one environment of a committed tree, rendered by the real tools."""

from __future__ import annotations

import functools
import re
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ruamel.yaml.error import YAMLError

from vf.errors import EnvironmentProblem, VfError
from vf.runtree.flux_chart import FluxChart, flux_chart, helm_release
from vf.runtree.tools import find_tool, where_looked
from vf.textio.objects import Obj
from vf.textio.safe_read import load_json, read_regular
from vf.textio.yaml_read import reader

RENDERERS = ("kustomize", "helm")
_RENDER_TIMEOUT = 120.0

TREE_FILE_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True, kw_only=True)
class TreeEnvironment:
    """One environment of a tree vf wrote: its plan and the objects a cluster receives."""

    tree: Path
    env: str
    plan: Obj
    objects: tuple[Obj, ...]
    renderer: str = "kustomize"
    # the credential Secrets run-tree made up for this run (runtree/credentials.py): in
    # memory only, and given to the cluster as the operator's would be
    run_secrets: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # in an environment delivered in shards, the Argo CD Application whose objects these
    # are (vf.runtree.shards); empty: the environment's one Application
    application: str = ""


def _not_a_tree(tree: Path, why: str) -> VfError:
    return VfError(
        "VF_RUN_TREE_NOT_VF",
        f"{tree} is not a tree vf wrote: {why}",
        "give the --out folder of `vf compile` (it holds .vf-manifest.json)",
        str(tree),
    )


def check_tree(tree: Path, *, env: str) -> Obj:
    """The environment's committed plan; refuse folders vf did not write, unknown envs."""
    manifest = tree / ".vf-manifest.json"
    if not tree.is_dir():
        raise _not_a_tree(tree, "no such directory")
    try:
        owner = load_json(read_regular(manifest, limit=TREE_FILE_BYTES)).get("generator")
    except (ValueError, AttributeError):  # a link, a FIFO, deep nesting: not vf's
        raise _not_a_tree(tree, ".vf-manifest.json is missing or unreadable") from None
    if owner != "vf":
        raise _not_a_tree(tree, ".vf-manifest.json was not written by vf")
    known = sorted(p.stem for p in (tree / "plan").glob("*.json"))
    plan_file = tree / "plan" / f"{env}.json"
    if env not in known or not (tree / "overlays" / env).is_dir():
        raise VfError(
            "VF_RUN_TREE_ENV",
            f"environment {env!r} is not in this tree (it has: {', '.join(known) or 'none'})",
            "pass --env with one of the tree's environments, or add it to vf.yaml and compile",
            str(tree / "overlays"),
        )
    try:
        plan = load_json(read_regular(plan_file, limit=TREE_FILE_BYTES))
    except ValueError as exc:
        raise _not_a_tree(tree, f"plan/{env}.json is unreadable: {exc}") from None
    if not isinstance(plan, dict):
        raise _not_a_tree(tree, f"plan/{env}.json is not a JSON object")
    return plan


def _tool(name: str) -> str:
    found = find_tool(name)  # PATH, then the .tools/bin that make setup fills
    if found is None:
        raise EnvironmentProblem(
            "VF_RUN_TREE_TOOL",
            f"{name} is not on PATH nor in a .tools/bin (looked in {where_looked(name)}): "
            "vf run-tree renders the tree with the real tool",
            f"run scripts/fetch-tools (or make setup, which runs it; make demo does not) to "
            f"put {name} in .tools/bin, or install {name} "
            "(kubectl >= 1.27 for kustomize, helm >= 3.12) and put it on PATH",
        )
    return found


_ASKED = re.compile(r'\.Capabilities\.APIVersions\.Has "([^"]+)"')


def asked_apis(chart: Path) -> list[str]:
    """The APIs (``group/version/Kind``) the chart's templates ask Helm whether the cluster
    serves: those of the objects it renders only where they are (ADR 0202)."""
    found = {
        m.group(1)
        for path in sorted((chart / "templates").rglob("*.yaml"))
        for m in _ASKED.finditer(path.read_text(encoding="utf-8"))
    }
    return sorted(found)


def render_command(
    tree: Path,
    *,
    env: str,
    renderer: str,
    namespace: str,
    chart: FluxChart | None = None,
    absent_kinds: frozenset[str] = frozenset(),
) -> list[str]:
    """The command a GitOps controller's renderer runs for this environment; ``chart`` is a
    chart Flux packaged and the values it gives Helm (``vf.runtree.flux_chart``). Helm
    reads the APIs the cluster serves from its discovery: here every API the chart asks
    about, less those of ``absent_kinds``."""
    if renderer == "kustomize":
        return [_tool("kubectl"), "kustomize", str(tree / "overlays" / env)]
    folder, values = tree / "chart", tree / "chart" / f"values-{env}.yaml"
    if chart is not None:
        folder, values = chart.chart, chart.values
    served = [a for a in asked_apis(folder) if a.rpartition("/")[2] not in absent_kinds]
    return [
        _tool("helm"),
        "template",
        "vf",
        str(folder),
        "--skip-tests",  # helm test's hooks: never part of an install or upgrade
        "--namespace",
        namespace,
        "-f",
        str(values),
        *(f"--api-versions={api}" for api in served),
    ]


def parse_objects(text: str, *, source: str) -> list[Obj]:
    """Every object of a multi-document YAML stream, in order; lists are flattened."""
    try:
        docs = list(reader("safe").load_all(text))
    except YAMLError as exc:
        raise VfError(
            "VF_RUN_TREE_RENDER",
            f"{source} produced invalid YAML ({str(exc).splitlines()[0]})",
            "recompile the tree (vf compile GRAPH --out DIR)",
        ) from None
    objects: list[Obj] = []
    for doc in docs:
        if isinstance(doc, dict) and doc.get("kind") == "List":
            objects.extend(i for i in doc.get("items") or [] if isinstance(i, dict))
        elif isinstance(doc, dict) and doc.get("kind"):
            objects.append(doc)
    return objects


def render(
    tree: Path,
    *,
    env: str,
    renderer: str,
    sync: str = "kubectl",
    release: Obj | None = None,
    held: Sequence[Obj] | None = None,
    absent_kinds: frozenset[str] = frozenset(),
) -> TreeEnvironment:
    """Check the tree, run the renderer, and return the objects with the plan. Under
    ``--sync flux`` the chart is the one Flux builds for a HelmRelease: ``release`` as the
    cluster holds it, with the values of the ConfigMaps it holds (``held``), else the
    tree's own; the chart renders for a cluster that serves no CRD of ``absent_kinds``."""
    plan = check_tree(tree, env=env)
    if release is None and sync == "flux" and renderer == "helm":
        release = helm_release(tree, env=env)
    render = functools.partial(
        _render, tree, env=env, renderer=renderer, plan=plan, absent_kinds=absent_kinds
    )
    if release is None:
        return render(chart=None)
    with tempfile.TemporaryDirectory(prefix="vf-flux-chart-") as scratch:
        return render(chart=flux_chart(tree, release=release, into=Path(scratch), held=held))


def _render(
    tree: Path,
    *,
    env: str,
    renderer: str,
    plan: Obj,
    chart: FluxChart | None,
    absent_kinds: frozenset[str],
) -> TreeEnvironment:
    command = render_command(
        tree,
        env=env,
        renderer=renderer,
        namespace=plan["namespace"],
        chart=chart,
        absent_kinds=absent_kinds,
    )
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=_RENDER_TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired:
        raise EnvironmentProblem(
            "VF_RUN_TREE_RENDER",
            f"{Path(command[0]).name} did not finish in {_RENDER_TIMEOUT:.0f}s",
            "check the tool on a smaller tree",
        ) from None
    if done.returncode != 0:
        raise VfError(
            "VF_RUN_TREE_RENDER",
            f"`{' '.join([Path(command[0]).name, *command[1:]])}` failed: "
            f"{done.stderr.strip()[-800:]}",
            "recompile the tree with vf compile; never edit generated files",
            str(tree),
        )
    objects = parse_objects(done.stdout, source=renderer)
    for obj in objects:
        obj.setdefault("metadata", {}).setdefault("namespace", plan["namespace"])
    return TreeEnvironment(tree=tree, env=env, plan=plan, objects=tuple(objects), renderer=renderer)


def key(obj: Obj) -> tuple[str, str, str]:
    """An object's identity: kind, namespace, name."""
    meta = obj.get("metadata") or {}
    return (str(obj.get("kind")), str(meta.get("namespace", "")), str(meta.get("name", "")))
