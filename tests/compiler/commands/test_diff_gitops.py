"""``vf diff`` on the controller objects under ``gitops/``: AppProjects that widen,
Applications, Flux Kustomizations' health checks, HelmReleases' values, objects new and
removed, matched by kind, namespace and name whatever files hold them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support import EXAMPLES
from vf.cli import cli
from vf.commands.diff.command import TreeDiff, diff_project
from vf.commands.diff.gitops import GitOpsChange, gitops_changes, subject
from vf.commands.diff.report import render_markdown, render_text
from vf.pipeline import CompileRequest, CompileResult, compile_project
from vf.tree.write import write_tree

DEV_AUTOSCALING = "    autoscaling:\n      max_replicas: 3\n"
PROD_AUTOSCALING = (
    "    autoscaling:\n      max_replicas: 8\n      lag_threshold: 50\n      gpu_nodes: true\n"
    "      monitoring_endpoint: nats.messaging.svc:8222\n"
)
HELM_RELEASE = (
    "  flux:\n    interval: 5m\n",
    "  flux:\n    interval: 5m\n    helm_release: true\n",
)
DEV_IMAGE = ("cameras:0.3.1", "cameras:0.3.2")
Edits = list[tuple[str, str]]


def _cameras(root: Path, name: str, edits: Edits) -> str:
    """The cameras example (its vf.yaml has a gitops block) copied with vf.yaml edited."""
    folder = root / name
    shutil.copytree(EXAMPLES / "realtime_cameras", folder)
    config = folder / "vf.yaml"
    text = config.read_text(encoding="utf-8")
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    config.write_text(text, encoding="utf-8")
    return str(folder / "graph.py")


def _change(root: Path, *, before: Edits, after: Edits) -> CompileResult:
    """``root/deploy`` compiled from ``before``; the compile of ``after``."""
    graph = _cameras(root, "before", before)
    write_tree(root / "deploy", compile_project(CompileRequest(graph=graph)).tree)
    return compile_project(CompileRequest(graph=_cameras(root, "after", after)))


def _by_subject(report: TreeDiff) -> dict[str, GitOpsChange]:
    return {subject(c): c for c in report.gitops}


def _messages(change: GitOpsChange) -> list[str]:
    return [n.message for n in change.notes]


@pytest.fixture
def autoscaling_on(tmp_path: Path) -> CompileResult:
    """Committed: no environment autoscaled. Now: dev autoscaled, and prod's tracker on
    four replicas (a partitioned count, so prod starts a new run: every name changes)."""
    return _change(
        tmp_path,
        before=[(DEV_AUTOSCALING, ""), (PROD_AUTOSCALING, "")],
        after=[
            (PROD_AUTOSCALING, ""),
            ("      alerts: 2\n", "      alerts: 2\n      tracker: 4\n"),
        ],
    )


def test_autoscaling_widens_the_app_project(autoscaling_on: CompileResult, tmp_path: Path) -> None:
    report = diff_project(autoscaling_on, out=tmp_path / "deploy")
    changes = _by_subject(report)
    project = changes["AppProject argocd/vision-dev"]
    (widened,) = project.notes
    assert widened.message == "admits keda.sh/ScaledObject (widened)"
    assert widened.severity == "warning"
    ignored = _messages(changes["Application argocd/cameras-dev"])
    assert len(ignored) == 1 and ignored[0].startswith("ignoreDifferences now include Deployment/")
    assert "-alerts /spec/replicas" in ignored[0]
    assert "Application argocd/cameras-prod" not in changes  # prod is not autoscaled
    (checks,) = _messages(changes["Kustomization flux-system/cameras-prod"])
    assert checks.startswith("health checks now include Deployment/vf-cameras-r")
    assert "; no longer Deployment/vf-cameras-rce2b7c1-alerts" in checks
    assert "StatefulSet/vf-cameras-rce2b7c1-tracker" in checks
    assert "Kustomization flux-system/cameras-dev" not in changes  # dev's run is the same
    # dev's ScaledObjects come with the Flux part that holds what the flow runs without
    assert changes["Kustomization flux-system/cameras-dev-optional"].action == "added"
    assert sorted(c.action for c in report.gitops) == ["added"] + ["changed"] * 3

    text = render_text(report)
    assert "gitops objects: 1 new, 0 removed, 3 changed\n" in text
    assert "  !  AppProject argocd/vision-dev: admits keda.sh/ScaledObject (widened)\n" in text
    assert "gitops/" not in text.split("other generated files that change:")[1]
    markdown = render_markdown(report)
    assert "### GitOps objects: 1 new, 0 removed, 3 changed" in markdown
    assert (
        "- **warning** `AppProject argocd/vision-dev`: admits keda.sh/ScaledObject (widened)"
        in markdown
    )


def test_env_compares_only_that_environments_objects(
    autoscaling_on: CompileResult, tmp_path: Path
) -> None:
    """vf diff --env compiles only the chosen environments: the others' objects are not
    compared (each environment's AppProject is its own)."""
    report = diff_project(autoscaling_on, out=tmp_path / "deploy", environments=("dev",))
    assert list(_by_subject(report)) == [
        "AppProject argocd/vision-dev",
        "Application argocd/cameras-dev",
        "Kustomization flux-system/cameras-dev-optional",
    ]


def test_a_release_reports_its_values_change(tmp_path: Path) -> None:
    result = _change(tmp_path, before=[HELM_RELEASE], after=[HELM_RELEASE, DEV_IMAGE])
    report = diff_project(result, out=tmp_path / "deploy")
    # the HelmRelease itself is the same; its values ConfigMap is said with it
    assert list(_by_subject(report)) == ["HelmRelease flux-system/cameras-dev"]
    (values,) = report.gitops[0].notes
    assert values.message.startswith(
        "its values change (ConfigMap flux-system/cameras-dev-values): nodes, provision changed "
        "(nodes.alerts.image, "
    )
    assert values.message.endswith("; helm-controller upgrades the release")
    assert "-    image: registry.example.com/vf/cameras:0.3.1" in values.lines
    assert "+    image: registry.example.com/vf/cameras:0.3.2" in values.lines
    assert len(values.lines) == 25 and values.lines[-1].endswith("more lines")

    text = render_text(report)
    assert "     HelmRelease flux-system/cameras-dev: its values change (ConfigMap " in text
    assert "\n         +    image: registry.example.com/vf/cameras:0.3.2\n" in text
    markdown = render_markdown(report)
    assert "<details><summary>values diff</summary>" in markdown
    assert "  ```diff\n" in markdown
    assert "  +    image: registry.example.com/vf/cameras:0.3.2\n" in markdown


def test_switching_to_a_helm_release(tmp_path: Path) -> None:
    result = _change(tmp_path, before=[], after=[HELM_RELEASE])
    report = diff_project(result, out=tmp_path / "deploy")
    changes = _by_subject(report)
    release = changes["HelmRelease flux-system/cameras-prod"]
    assert release.action == "added"
    (installs,) = _messages(release)
    assert installs.startswith(
        "releases ./deploy/cameras/chart into cameras, values from ConfigMap "
        "flux-system/cameras-prod-values (keys "
    )
    assert changes["ConfigMap flux-system/cameras-prod-values"].action == "added"
    removed = [c for c in report.gitops if c.action == "removed"]
    assert [subject(c) for c in removed] == [
        "Kustomization flux-system/cameras-dev",
        "Kustomization flux-system/cameras-dev-infra",
        "Kustomization flux-system/cameras-dev-optional",
        "Kustomization flux-system/cameras-prod",
        "Kustomization flux-system/cameras-prod-infra",
        "Kustomization flux-system/cameras-prod-optional",
    ]
    for change in removed:
        (prune,) = change.notes
        assert prune.severity == "warning"
        assert prune.message == "deleting it deletes the objects it applied (prune: true)"
    text = render_text(report)
    assert "gitops objects: 4 new, 6 removed, 0 changed" in text
    assert "  !  removed: Kustomization flux-system/cameras-dev: deleting it" in text
    assert "     new: ConfigMap flux-system/cameras-dev-values\n" in text


def test_the_exit_code_still_follows_the_files(tmp_path: Path) -> None:
    graph = _cameras(tmp_path, "flow", [HELM_RELEASE])
    out = tmp_path / "deploy"
    write_tree(out, compile_project(CompileRequest(graph=graph)).tree)
    same = CliRunner().invoke(cli, ["diff", graph, "--out", str(out), "--format", "markdown"])
    assert same.exit_code == 0, same.output
    assert "GitOps objects" not in same.output
    config = Path(graph).parent / "vf.yaml"
    config.write_text(config.read_text(encoding="utf-8").replace(*DEV_IMAGE), encoding="utf-8")
    changed = CliRunner().invoke(cli, ["diff", graph, "--out", str(out), "--format", "markdown"])
    assert changed.exit_code == 1, changed.output
    assert "- `HelmRelease flux-system/cameras-dev`: its values change" in changed.output


def test_objects_are_matched_whatever_files_hold_them(
    compiled_examples: dict[str, CompileResult],
) -> None:
    """A new root object, objects moved between files, a removed Application, and the
    generic reading of fields vf has no words for."""
    committed = dict(compiled_examples["realtime_cameras"].tree)
    fresh = dict(committed)
    # two objects moved into one new file: no change
    moved = fresh.pop("gitops/flux/kustomization-prod.yaml")
    fresh["gitops/flux/all-prod.yaml"] = (
        moved + "---\n" + fresh.pop("gitops/flux/kustomization-prod-infra.yaml")
    )
    fresh["gitops/flux/kustomization.yaml"] += "- all-prod.yaml\n"
    fresh["gitops/flux/root.yaml"] = (
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n"
        "  name: cameras-prod-extra\n  namespace: flux-system\nspec:\n  interval: 5m\n"
        "  path: ./deploy/cameras/gitops\n  prune: true\n"
        "  sourceRef:\n    kind: GitRepository\n    name: cameras-deploy\n"
    )
    del fresh["gitops/argocd/application-dev.yaml"]
    repository = fresh["gitops/flux/gitrepository.yaml"]
    fresh["gitops/flux/gitrepository.yaml"] = repository.replace(
        'interval: "1m"', 'interval: "2m"'
    ).replace("vf.dev/flow: cameras", "vf.dev/flow: other")
    changes = {subject(c): c for c in gitops_changes(committed, fresh)}
    assert list(changes) == [
        "Application argocd/cameras-dev",
        "GitRepository flux-system/cameras-deploy",
        "Kustomization flux-system/cameras-prod-extra",
    ]
    root = changes["Kustomization flux-system/cameras-prod-extra"]
    assert root.action == "added"
    assert _messages(root) == ["applies ./deploy/cameras/gitops from GitRepository/cameras-deploy"]
    removed = changes["Application argocd/cameras-dev"]
    assert removed.action == "removed"
    assert removed.notes[0].severity == "warning"
    assert "resources-finalizer.argocd.argoproj.io" in removed.notes[0].message
    assert _messages(changes["GitRepository flux-system/cameras-deploy"]) == [
        'metadata.labels["vf.dev/flow"], spec.interval changed'
    ]
