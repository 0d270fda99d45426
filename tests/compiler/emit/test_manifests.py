"""``manifests/<env>``: the plain-files delivery Argo CD reads instead of the overlays
(ADR 182) holds exactly the objects the overlays build, and is chosen as vf.yaml says."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from tests.support import example_graph, kustomize_build
from vf.commands.explain.text import explain
from vf.emit.manifests import reads_manifests
from vf.ir.delivery import ArgoCD, GitOps
from vf.pipeline import CompileRequest, CompileResult, compile_project
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


def test_only_an_explicit_source_reads_manifests() -> None:
    """``auto`` delivers a large environment in shards (ADR 220), never manifests/."""
    gitops = GitOps(
        repo_url="https://g.example/r.git", revision="main", path=".", argocd=None, flux=None
    )
    assert not reads_manifests(GitOps(**{**vars(gitops), "argocd": ArgoCD()}))
    assert not reads_manifests(gitops)  # no Applications: nothing reads them
    assert not reads_manifests(GitOps(**{**vars(gitops), "argocd": ArgoCD(source="overlay")}))
    assert reads_manifests(GitOps(**{**vars(gitops), "argocd": ArgoCD(source="manifests")}))
