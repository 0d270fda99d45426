"""``manifests/<env>``: the plain-files delivery Argo CD reads instead of the overlays
(ADR 182) holds exactly the objects the overlays build, and is chosen as vf.yaml says."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from tests.support import example_graph, kustomize_build
from vf.commands.explain.text import delivery_lines, explain
from vf.emit.manifests import MANIFESTS_OVER, reads_manifests
from vf.emit.readme import tree_readme
from vf.ir.delivery import ArgoCD, Flux, GitOps
from vf.pipeline import CompileRequest, CompileResult, compile_project
from vf.render.diagram import env_view
from vf.tree.write import write_tree

Obj = dict[str, Any]
EXAMPLE = Path(example_graph("batch_pipeline")).parent


def _objects(text: str) -> dict[tuple[str, str], Obj]:
    docs = [d for d in YAML(typ="safe").load_all(text) if d is not None]
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def _compile(tmp_path: Path, source: str | None) -> CompileResult:
    config = (EXAMPLE / "vf.yaml").read_text(encoding="utf-8")
    assert "  argocd: {}\n" in config
    if source is not None:
        config = config.replace("  argocd: {}\n", f"  argocd: {{source: {source}}}\n")
    path = tmp_path / "vf.yaml"
    path.write_text(config, encoding="utf-8")
    return compile_project(CompileRequest(graph=str(EXAMPLE / "graph.py"), config=str(path)))


@pytest.fixture(scope="module")
def chosen(tmp_path_factory: pytest.TempPathFactory) -> CompileResult:
    return _compile(tmp_path_factory.mktemp("manifests"), "manifests")


def test_manifests_hold_what_the_overlays_build(
    chosen: CompileResult, kubectl: str, tmp_path: Path
) -> None:
    out = tmp_path / "deploy"
    write_tree(out, chosen.tree)
    for env in ("dev", "prod"):
        files = sorted((out / "manifests" / env).iterdir())
        assert files and all(f.suffix == ".yaml" for f in files)
        assert not (out / "manifests" / env / "kustomization.yaml").exists()
        plain = _objects("---\n".join(f.read_text(encoding="utf-8") for f in files))
        built = _objects(kustomize_build(kubectl, out / "overlays" / env))
        assert plain == built, env
        assert len(plain) == len(chosen.objects[env])


def test_applications_read_the_manifests(chosen: CompileResult) -> None:
    for env in ("dev", "prod"):
        app = YAML(typ="safe").load(chosen.tree[f"gitops/argocd/application-{env}.yaml"])
        assert app["spec"]["source"]["path"] == f"deploy/batch/manifests/{env}"
        assert app["spec"]["source"]["directory"] == {"recurse": False}
    readme = chosen.tree["README.md"]
    assert "the Application syncs `deploy/batch/manifests/dev`, plain files" in readme
    assert "- `manifests/<env>/`:" in readme
    assert "Argo CD reads manifests/<env>" in explain(chosen)
    flux = chosen.tree["gitops/flux/kustomization-dev.yaml"]
    assert 'path: "./deploy/batch/overlays/dev"' in flux  # Flux builds with kustomize anyway


@pytest.mark.parametrize("source", [None, "overlay"])
def test_small_flows_and_overlay_keep_the_overlays(tmp_path: Path, source: str | None) -> None:
    result = _compile(tmp_path, source)
    assert not [p for p in result.tree if p.startswith("manifests/")]
    app = YAML(typ="safe").load(result.tree["gitops/argocd/application-dev.yaml"])
    assert app["spec"]["source"]["path"] == "deploy/batch/overlays/dev"
    assert "directory" not in app["spec"]["source"]
    assert "Argo CD reads overlays/<env>" in explain(result)


def test_auto_chooses_manifests_past_the_limit() -> None:
    gitops = GitOps(
        repo_url="https://g.example/r.git", revision="main", path=".", argocd=None, flux=None
    )
    auto = GitOps(**{**vars(gitops), "argocd": ArgoCD()})
    over, under = {"dev": 10, "prod": MANIFESTS_OVER + 1}, {"dev": MANIFESTS_OVER}
    assert reads_manifests(auto, counts=over)
    assert not reads_manifests(auto, counts=under)
    assert not reads_manifests(gitops, counts=over)  # no Applications: nothing reads them
    forced = GitOps(**{**vars(gitops), "argocd": ArgoCD(source="overlay")})
    assert not reads_manifests(forced, counts=over)
    chosen = GitOps(**{**vars(gitops), "argocd": ArgoCD(source="manifests")})
    assert reads_manifests(chosen, counts=under)


def test_explain_says_what_flux_builds_and_when_it_is_too_large() -> None:
    """Flux builds any path with kustomize: past the limit vf says what that costs and
    which delivery avoids it; a HelmRelease delivery renders with Helm."""
    plain = GitOps(
        repo_url="https://g.example/r.git", revision="main", path=".", argocd=None, flux=Flux()
    )
    released = GitOps(**{**vars(plain), "flux": Flux(helm_release=True)})
    over, under = {"dev": MANIFESTS_OVER + 1}, {"dev": MANIFESTS_OVER}
    (small,) = delivery_lines(plain, counts=under)
    assert small == f"Flux builds overlays/<env> with kustomize (at most {MANIFESTS_OVER} objects)"
    (large,) = delivery_lines(plain, counts=over)
    assert "grows with the square of the objects" in large
    assert "gitops.flux.helm_release: true" in large
    (chart,) = delivery_lines(released, counts=over)
    assert chart.startswith("Flux installs chart/ with a HelmRelease")
    both = GitOps(**{**vars(plain), "argocd": ArgoCD()})
    assert [line.split(" ")[0] for line in delivery_lines(both, counts=over)] == ["Argo", "Flux"]
    assert delivery_lines(None, counts=over) == []


@pytest.mark.parametrize(("helm_release", "count"), [(False, MANIFESTS_OVER + 1), (True, 10**5)])
def test_the_readme_says_when_flux_should_take_the_chart(
    chosen: CompileResult, helm_release: bool, count: int
) -> None:
    """The tree README tells a Flux user when the kustomize build is too large, and only
    when Flux builds one."""
    gitops = chosen.targets.gitops
    assert gitops is not None and gitops.flux is not None
    gitops = replace(gitops, flux=replace(gitops.flux, helm_release=helm_release))
    views = [env_view(json.loads(chosen.tree[f"plan/{env}.json"])) for env in ("dev", "prod")]
    paths = frozenset(chosen.tree)
    crowded = tree_readme(views, gitops=gitops, paths=paths, counts={"dev": 5, "prod": count})
    calm = tree_readme(views, gitops=gitops, paths=paths, counts={"dev": 5, "prod": 5})
    advice = "deliver this flow with\n  `gitops.flux.helm_release: true`"
    assert (advice in crowded) is not helm_release
    assert advice not in calm
