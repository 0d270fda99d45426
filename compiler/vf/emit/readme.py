"""Emit the tree's ``README.md``: what the tree is, the flow's diagram, each environment's
settings and how to apply it with Argo CD, Flux, Helm or ``kubectl apply -k``."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from vf.emit import shards as sharding
from vf.emit.gitops.files import FLUX_SOURCE_FILE, argocd_root_file, flux_root_file
from vf.emit.manifests import MANIFESTS_DIR, source_path
from vf.emit.retired import Retired
from vf.emit.shards import Shard, argocd_shards, flux_shards, shard_path
from vf.ir.delivery import GitOps
from vf.render.diagram import Diagram, EnvView, diagram_of
from vf.render.diagram_syntax import mermaid
from vf.resources import templates

README = "README.md"
# GitHub's Mermaid refuses larger diagrams (its maxTextSize and maxEdges defaults).
MERMAID_MAX_CHARS = 50_000
MERMAID_MAX_EDGES = 500
TABLE_NODES = 12  # nodes named per table cell; plan/<env>.json has every one


def markdown_mermaid(diagram: Diagram, **options: Any) -> tuple[str, str]:
    """The Mermaid text of ``diagram`` and, when GitHub would refuse to draw it, why not
    (then the text is empty)."""
    if len(diagram.arrows) > MERMAID_MAX_EDGES:
        return "", f"{len(diagram.arrows)} arrows, over Mermaid's {MERMAID_MAX_EDGES}"
    text = mermaid(diagram, **options)
    if len(text) > MERMAID_MAX_CHARS:
        return "", f"{len(text)} characters, over Mermaid's {MERMAID_MAX_CHARS}"
    return text, ""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("`", "'").replace("\n", " ") or "-"


def _differing_replicas(views: Sequence[EnvView]) -> dict[str, str]:
    """Per environment, the nodes whose replica count is not the same everywhere."""
    counts: dict[str, set[int]] = {}
    for view in views:
        for node in view.nodes:
            counts.setdefault(node.name, set()).add(node.replicas)
    differ = {name for name, seen in counts.items() if len(seen) > 1}
    found = {}
    for view in views:
        shown = [f"{n.name} x{n.replicas}" for n in view.nodes if n.name in differ]
        more = f" and {len(shown) - TABLE_NODES} more" if len(shown) > TABLE_NODES else ""
        found[view.environment] = ", ".join(shown[:TABLE_NODES]) + more
    return found


def _source(gitops: GitOps | None, env: str, *, manifests: bool = False) -> str:
    if gitops is None:
        return ""
    return source_path(gitops, env=env, manifests=manifests)


def _environment(
    view: EnvView,
    *,
    gitops: GitOps | None,
    paths: Collection[str],
    replicas: str,
    needs: Sequence[str],
    shards: Sequence[Shard],
    retired: Retired,
) -> dict[str, Any]:
    env = view.environment
    root = f"gitops/argocd/{argocd_root_file(env)}"
    manifests = any(p.startswith(f"{MANIFESTS_DIR}/") for p in paths)
    flux = [f"gitops/flux/{n}" for n in (FLUX_SOURCE_FILE, flux_root_file(env))]
    return {
        "name": env,
        "namespace": view.namespace,
        "kubernetes": _cell(view.kubernetes_version),
        "broker": _cell(
            ", ".join(t for t in (view.broker_profile, view.broker_auth, view.broker_tls) if t)
        ),
        "store": _cell(
            ", ".join(t for t in (view.store_profile, view.store_auth, view.store_tls) if t)
        ),
        "gpu": _cell(", ".join(t for t in (view.gpu_mode or "", view.gpu_cost) if t)),
        "replicas": _cell(replicas),
        "argocd": root if root in paths else "",
        "argocd_project": f"gitops/argocd/appproject-{env}.yaml" in paths,
        "flux": " ".join(f"-f {p}" for p in flux if p in paths),
        "flux_release": f"gitops/flux/helmrelease-{env}.yaml" in paths,
        "flux_source": f"gitops/flux/{FLUX_SOURCE_FILE}" in paths,
        "source": _source(gitops, env),
        "argocd_source": _source(gitops, env, manifests=manifests),
        "manifests": manifests,
        "needs": list(needs),
        **_sharding(gitops, env, shards),
        "retired": _retired(retired),
        "renumbered": retired.sharded,
    }


def _retired(retired: Retired) -> str:
    """Which controller objects of an environment's old shards stay, retired (ADRs 0256,
    0258)."""
    kinds = [
        *(["Argo CD Applications"] if retired.argocd else []),
        *(["Flux Kustomizations"] if retired.flux else []),
    ]
    return " and ".join(kinds)


def _sharding(gitops: GitOps | None, env: str, shards: Sequence[Shard]) -> dict[str, Any]:
    """What the README says of an environment delivered in shards (ADR 220)."""
    if gitops is None or not shards:
        return {"shards": [], "argocd_shards": False, "flux_shards": False}
    count = sum(len(s.objects) for s in shards)
    return {
        "shards": [
            {"number": s.number, "holds": s.holds(), "kib": f"{s.size / 1024:,.0f}"} for s in shards
        ],
        "shard_objects": f"{count:,}",
        "shared_path": shard_path(gitops, env=env, number=shards[0].number),
        "argocd_shards": argocd_shards(gitops, count=count),
        "flux_shards": flux_shards(gitops, count=count),
    }


def _tls_certs(views: Sequence[EnvView]) -> list[dict[str, Any]]:
    """Each TLS Secret of a server vf runs (ADR 0222), once, with its namespace and the
    names its certificate must carry, for the README's TLS section."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for view in views:
        for secret, names in view.tls_certs:
            found.setdefault(
                (view.namespace, secret),
                {"secret": secret, "namespace": view.namespace, "names": list(names)},
            )
    return list(found.values())


def tree_readme(
    views: Sequence[EnvView],
    *,
    gitops: GitOps | None,
    paths: Collection[str],
    needs: Mapping[str, Sequence[str]] | None = None,
    counts: Mapping[str, int] | None = None,
    shards: Mapping[str, Sequence[Shard]] | None = None,
    retired: Mapping[str, Retired] | None = None,
) -> str:
    """The README of a compiled tree; ``paths`` are the tree's other files, ``needs`` what
    each environment's objects assume of its cluster (``vf.emit.prerequisites``),
    ``counts`` each environment's number of objects, ``shards`` those of each environment
    delivered in shards, ``retired`` the old shards of each environment that no longer is."""
    arrows = max((sum(len(n.parents) for n in v.nodes) for v in views), default=0)
    if arrows > MERMAID_MAX_EDGES:  # known too large: spare drawing it
        diagram, too_large = "", f"{arrows} arrows, over Mermaid's {MERMAID_MAX_EDGES}"
    else:
        diagram, too_large = markdown_mermaid(diagram_of(views))
    replicas = _differing_replicas(views)
    context = {
        "flow_id": views[0].flow_id,
        "flow_type": views[0].flow_type,
        "batch": views[0].flow_type == "batch",
        "chart": views[0].flow_id,
        "diagram": diagram,
        "too_large": too_large,
        "gitops": gitops is not None,
        "manifests": any(p.startswith(f"{MANIFESTS_DIR}/") for p in paths),
        "sharded": bool(shards) or bool(retired),
        "shard_over": f"{sharding.SHARD_OVER:,}",
        "shard_max_objects": f"{sharding.SHARD_MAX_OBJECTS:,}",
        "shard_max_mb": f"{sharding.SHARD_MAX_BYTES / 1e6:g}",
        "tls": _tls_certs(views),
        "environments": [
            _environment(
                v,
                gitops=gitops,
                paths=paths,
                replicas=replicas[v.environment],
                needs=(needs or {}).get(v.environment, ()),
                shards=(shards or {}).get(v.environment, ()),
                retired=(retired or {}).get(v.environment, Retired()),
            )
            for v in views
        ],
    }
    return templates("tree").get_template("README.md.j2").render(context)
