"""Day two: ordinary commits, each applied on top of what the cluster already holds
(ADR 206). Every controller reads its own objects (Applications, AppProjects,
Kustomizations, HelmReleases and their values ConfigMaps) as the cluster last received
them; only the gitops root brings a commit's version of them.

Each finding is shown twice: on the tree as vf writes it, and on the same tree without
its roots (the tree vf wrote before ADR 206, whose README had ``gitops/`` applied once by
hand), where the model must reproduce the failure. The first tests read the controller
objects only; the last drive real pods (real nats-server and store) through a sequence
of commits under each delivery."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests.compiler.runtree.test_run_tree_lifecycle import (
    FLOWS,
    applied,
    cluster,  # noqa: F401  (the fixture)
    compile_tree,
    config,
    finish,
    report,
    results,
)
from vf.runtree.argocd_sync import permits
from vf.runtree.cluster import Cluster
from vf.runtree.command import RunTreeRequest, prepare, workloads_done
from vf.runtree.gitops_state import GitopsState, is_root
from vf.runtree.manifests import render
from vf.runtree.sync import sync
from vf.runtree.teardown import delete_flow
from vf.textio.yaml_read import reader

pytestmark = pytest.mark.slow  # compiles and renders trees, some with real servers

GITOPS = (
    "gitops:\n  repo_url: https://git.example.com/a/b.git\n  path: deploy\n"
    "  argocd: {{project: video, app_project: true}}\n  flux: {flux}\n"
)
AUTOSCALING = "    autoscaling: {max_replicas: 4}\n"
OWNS_NAMESPACE = "    pod_security: {namespace_labels: true}\n"
METRICS = "    pods: {metrics: {service_monitor: true}}\n"
PROD = (
    "  prod:\n    namespace: lifecycle-prod\n    images: {default: registry.example.com/vf/x:9}\n"
)


def _settings(tmp: Path, *, image: str = "1", flux: str = "{}", extra: str = "") -> Path:
    return config(tmp, image=image, extra=extra + GITOPS.format(flux=flux))


def _live(
    tmp: Path, tree: Path, *, stage: str = "double", open_delay: str = "0", **settings: str
) -> Path:
    return compile_tree(
        "live.py",
        tree,
        config=_settings(tmp, **settings),
        out="/results/sink.jsonl",
        stage=stage,
        open_delay=open_delay,
    )


def without_roots(tree: Path) -> Path:
    """The tree as vf wrote it before the gitops roots: no root objects, and no
    ``dependsOn`` naming one."""
    for folder in ("argocd", "flux"):
        for path in sorted((tree / "gitops" / folder).glob("*.yaml")):
            docs = [d for d in reader("safe").load_all(path.read_text()) if isinstance(d, dict)]
            if any(is_root(d, mode=folder) for d in docs):
                path.unlink()
                continue
            text = path.read_text()
            path.write_text(re.sub(r"  - name: [a-z0-9-]+-gitops\n", "", text))
    return tree


def _commit(tmp: Path, name: str, tree: Path, *, roots: bool) -> Path:
    """A copy of ``tree`` as the next commit of a repository: with or without roots."""
    target = tmp / name
    shutil.copytree(tree, target)
    return target if roots else without_roots(target)


def _values(state: GitopsState) -> str:
    (config_map,) = [o for o in state.all() if o["kind"] == "ConfigMap"]
    return str(config_map["data"]["values.yaml"])


@pytest.mark.parametrize("roots", [True, False], ids=["with-roots", "before-roots"])
def test_a_helm_release_gets_each_commits_values(tmp_path: Path, roots: bool) -> None:
    """helm-controller reads valuesFrom from the cluster: an image change in vf.yaml
    changes the values ConfigMap, which only the gitops root applies."""
    made = tmp_path / "made"
    state = GitopsState()
    first = _commit(tmp_path, "c1", _live(tmp_path, made, flux="{helm_release: true}"), roots=roots)
    state.reconcile(first, env="dev", mode="flux")
    assert "tree-tests:1" in _values(state)
    flux = "{helm_release: true}"
    second = _commit(tmp_path, "c2", _live(tmp_path, made, image="2", flux=flux), roots=roots)
    changes = state.reconcile(second, env="dev", mode="flux")
    print(f"roots={roots}: {changes}")
    (release,) = state.held(env="dev", kind="HelmRelease")
    rendered = render(
        second, env="dev", renderer="helm", sync="flux", release=release, held=state.all()
    )
    images = {
        c["image"]
        for o in rendered.objects
        if o["kind"] == "Deployment"
        for c in o["spec"]["template"]["spec"]["containers"]
        if "tree-tests" in c["image"]
    }
    expected = "2" if roots else "1"  # before the roots, the release kept the first values
    assert images == {f"registry.example.com/vf/tree-tests:{expected}"}


@pytest.mark.parametrize("roots", [True, False], ids=["with-roots", "before-roots"])
def test_flux_health_checks_follow_a_new_run(tmp_path: Path, roots: bool) -> None:
    """A graph change starts a new run with new Deployment names; the workers
    Kustomization in the cluster must check those, not the ones its prune deletes."""
    made = tmp_path / "made"
    state = GitopsState()
    state.reconcile(
        _commit(tmp_path, "c1", _live(tmp_path, made), roots=roots), env="dev", mode="flux"
    )
    second = _commit(tmp_path, "c2", _live(tmp_path, made, stage="triple"), roots=roots)
    state.reconcile(second, env="dev", mode="flux")
    (workers,) = [
        k
        for k in state.held(env="dev", kind="Kustomization")
        if not k["metadata"]["name"].endswith(("-infra", "-optional"))
    ]
    checked = {c["name"] for c in workers["spec"]["healthChecks"]}
    print(f"roots={roots}: health checks {sorted(checked)}")
    assert any("triple" in n for n in checked) is roots
    assert any("double" in n for n in checked) is not roots


@pytest.mark.parametrize("roots", [True, False], ids=["with-roots", "before-roots"])
def test_argocd_admits_what_a_commit_adds(tmp_path: Path, roots: bool) -> None:
    """Switching autoscaling on adds ScaledObjects; the AppProject in the cluster must
    admit them before the Application's sync needs it."""
    made = tmp_path / "made"
    state = GitopsState()
    state.reconcile(
        _commit(tmp_path, "c1", _live(tmp_path, made), roots=roots), env="dev", mode="argocd"
    )
    second = _commit(tmp_path, "c2", _live(tmp_path, made, extra=AUTOSCALING), roots=roots)
    state.reconcile(second, env="dev", mode="argocd")
    (app,) = state.held(env="dev", kind="Application")
    (project,) = state.held(env="dev", kind="AppProject")
    assert app["spec"]["project"] == project["metadata"]["name"] == "video-dev"
    scaled = {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "metadata": {}}
    assert permits(project, scaled) is roots
    ignored = [d["name"] for d in app["spec"].get("ignoreDifferences") or []]
    assert bool(ignored) is roots  # the scaled Deployments' replicas, from the new commit


def test_each_root_applies_its_own_environment_only(tmp_path: Path) -> None:
    """The dev root never applies prod's objects, so two environments' roots in one
    cluster never manage the same object (the GitRepository aside, which is alike)."""
    made = tmp_path / "made"
    prod = (
        "  prod:\n    namespace: lifecycle-prod\n    images:\n"
        "      default: registry.example.com/vf/tree-tests:1\n"
    )
    tree = _live(tmp_path, made, extra=prod)
    state = GitopsState()
    state.reconcile(tree, env="dev", mode="flux")
    names = sorted(k[2] for k in state.objects)
    print(names)
    assert not [n for n in names if "prod" in n]
    assert {"tree-live-dev-gitops", "tree-live-dev-infra", "tree-live-dev"} <= set(names)


def _sync(into: Cluster, tree: Path, *, mode: str, renderer: str) -> list[str]:
    request = RunTreeRequest(tree=tree, env="dev", renderer=renderer, app=FLOWS, sync=mode)
    rendered, resolver = prepare(request, log=print)
    return sync(into, rendered, resolver, mode=mode, app="live", timeout=60)


def _images(into: Cluster, tree: Path) -> set[str]:
    """The images the cluster runs in the Deployments of the commit ``tree``."""
    plan = reader("safe").load((tree / "plan" / "dev.json").read_text())
    return {
        c["image"]
        for (kind, _, name), o in into.objects.items()
        if kind == "Deployment" and f"-{plan['run_id']}-" in name
        for c in o["spec"]["template"]["spec"]["containers"]
        if "tree-tests" in c["image"]
    }


@pytest.mark.parametrize(
    ("mode", "renderer", "flux"),
    [
        ("argocd", "kustomize", "{}"),
        ("flux", "kustomize", "{}"),
        ("flux", "helm", "{helm_release: true}"),
        ("helm", "helm", "{}"),
        ("kubectl", "kustomize", "{}"),
    ],
    ids=["argocd", "flux", "flux-helmrelease", "helm", "kubectl"],
)
def test_a_realtime_flow_lives_through_ordinary_commits(
    cluster: Cluster,  # noqa: F811
    tmp_path: Path,
    mode: str,
    renderer: str,
    flux: str,
) -> None:
    """One cluster, eight commits: first sync, an image change, autoscaling on, a graph
    change (a new run), autoscaling off with another image, metrics on (a ServiceMonitor),
    a new environment beside dev, metrics off. After each, what runs is what the commit
    says, the sink keeps receiving, the shared Namespace stays, and a commit that only adds
    another environment leaves dev's pods alone. Then the flow is deleted as its delivery's
    user deletes it: nothing of it is left but the shared Namespace."""
    sink = results(cluster, "sink.jsonl")
    made = tmp_path / "made"
    commits = [
        {"image": "1", "extra": OWNS_NAMESPACE},
        {"image": "2", "extra": OWNS_NAMESPACE},
        {"image": "2", "extra": OWNS_NAMESPACE + AUTOSCALING},
        {"image": "2", "extra": OWNS_NAMESPACE + AUTOSCALING, "stage": "triple"},
        {"image": "3", "extra": OWNS_NAMESPACE, "stage": "triple"},
        {"image": "3", "extra": OWNS_NAMESPACE + METRICS, "stage": "triple"},
        {"image": "3", "extra": OWNS_NAMESPACE + METRICS + PROD, "stage": "triple"},
        {"image": "3", "extra": OWNS_NAMESPACE + PROD, "stage": "triple"},
    ]
    templates: dict[tuple[str, str, str], object] = {}
    for number, commit in enumerate(commits, start=1):
        tree = _commit(
            tmp_path, f"c{number}", _live(tmp_path, made, flux=flux, **commit), roots=True
        )
        before = sum(applied(sink).values())
        errors = _sync(cluster, tree, mode=mode, renderer=renderer)
        assert errors == [], (number, errors)
        assert cluster.run_until(lambda: workloads_done(cluster, batch=False), timeout=90), number
        assert cluster.run_until(
            lambda seen=before: sum(applied(sink).values()) > seen + 5, timeout=60
        ), number
        image = f"registry.example.com/vf/tree-tests:{commit['image']}"
        stage = commit.get("stage", "double")
        other = "double" if stage == "triple" else "triple"
        assert _images(cluster, tree) == {image}, (number, _images(cluster, tree))
        workers = {k[2] for k in cluster.objects if k[0] == "Deployment" and "nats" not in k[2]}
        print(f"{mode}: commit {number}: {sorted(workers)}")
        if mode != "kubectl":  # kubectl apply without --prune leaves what left the tree
            assert not [w for w in workers if other in w], (number, workers)
        if renderer == "kustomize":  # the chart leaves the Namespace to Helm's createNamespace
            namespaces = [k for k in cluster.objects if k[0] == "Namespace"]
            assert [k[2] for k in namespaces] == ["lifecycle"], number  # never pruned
        monitors = [k for k in cluster.objects if k[0] == "ServiceMonitor"]
        if mode != "kubectl":  # Flux: the -optional part goes, and its finalizer with it
            assert bool(monitors) is (METRICS in commit.get("extra", "")), (number, monitors)
        now = {k: o["spec"]["template"] for k, o in cluster.objects.items() if k[0] == "Deployment"}
        if number == 7:  # an environment added beside dev changes nothing of dev's
            assert now == templates, number
        templates = now
    delete_flow(cluster, env="dev", mode=mode, app="live")  # as the delivery's user does
    left = sorted(k for k in cluster.objects if k[0] != "Namespace")
    print(f"{mode}: after the flow's deletion: {left}")
    assert not left and not cluster.pods()
    namespaces = [k[2] for k in cluster.objects if k[0] == "Namespace"]
    # the shared Namespace outlives the flow (kubectl delete -k takes it, as it would)
    assert namespaces == ([] if mode == "kubectl" or renderer == "helm" else ["lifecycle"])
    assert not [o for o in cluster.gitops.all() if o["kind"] != "GitRepository"]


@pytest.mark.parametrize("roots", [True, False], ids=["with-roots", "before-roots"])
def test_flux_stays_ready_after_a_new_run(
    cluster: Cluster,  # noqa: F811
    tmp_path: Path,
    roots: bool,
) -> None:
    """Before the roots, the in-cluster workers Kustomization kept checking the first
    run's Deployments, which its own prune had deleted: not Ready for good."""
    made = tmp_path / "made"
    flux = "{timeout: 15s}"  # how long the part waits for its health checks
    first = _commit(tmp_path, "c1", _live(tmp_path, made, flux=flux), roots=roots)
    assert _sync(cluster, first, mode="flux", renderer="kustomize") == []
    second = _commit(tmp_path, "c2", _live(tmp_path, made, flux=flux, stage="triple"), roots=roots)
    errors = _sync(cluster, second, mode="flux", renderer="kustomize")
    print(f"roots={roots}: {errors}")
    if roots:
        assert errors == []
    else:
        assert len(errors) == 1 and "not found" in errors[0] and "double" in errors[0]


@pytest.mark.parametrize("prune_last", [False, True], ids=["as-written", "prune-last"])
def test_an_argocd_generation_change_ends_once_the_new_jobs_exist(
    cluster: Cluster,  # noqa: F811
    tmp_path: Path,
    prune_last: bool,
) -> None:
    """A BATCH change prunes the old generation's broker ConfigMap. Marked PruneLast it
    adds a wave after the workers', and the operation waits for every Job to complete;
    as vf writes it, the operation ends once the new Jobs exist."""
    sink = results(cluster, "sink.jsonl")
    first = dict(out="/results/sink.jsonl", count="20", interval="0.3", tag="a")
    tree = compile_tree("batch.py", tmp_path / "tree", **first)
    if prune_last:  # the annotation vf wrote on the broker ConfigMap before ADR 206; the
        _prune_last(tree)  # live object's annotations decide its prune wave
    assert _sync_batch(cluster, tree) == []
    finish(cluster)
    compile_tree("batch.py", tree, **{**first, "tag": "b"})
    assert _sync_batch(cluster, tree) == []
    complete = workloads_done(cluster, batch=True)
    print(f"prune_last={prune_last}: batch complete when the sync ended: {complete}")
    assert complete is prune_last
    finish(cluster)
    assert report("second generation", applied(sink, tag="b"), 20) == (20, 0, 0)


def _prune_last(tree: Path) -> None:
    key = "argocd.argoproj.io/sync-options: "
    for path in (tree / "overlays" / "dev").rglob("configmap-*-broker-*.yaml"):
        text = path.read_text()
        if key in text:  # its Prune=true (ADR 0238), PruneLast=true beside it
            text = text.replace(key, key + "PruneLast=true,", 1)
        else:
            text = text.replace("  annotations:\n", f"  annotations:\n    {key}PruneLast=true\n", 1)
        path.write_text(text)


def _sync_batch(into: Cluster, tree: Path) -> list[str]:
    request = RunTreeRequest(tree=tree, env="dev", renderer="kustomize", app=FLOWS, sync="argocd")
    rendered, resolver = prepare(request, log=print)
    return sync(into, rendered, resolver, mode="argocd", app="batch", timeout=60)


def test_a_failed_release_upgrade_of_a_live_flow_rolls_back(
    cluster: Cluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A REALTIME flow of Deployments only: its HelmRelease remediates a failed upgrade by
    rollback, and helm-controller applies the previous release again (ADR 206)."""
    made = tmp_path / "made"
    flux = "{helm_release: true, timeout: 10s}"
    first = _commit(tmp_path, "c1", _live(tmp_path, made, flux=flux), roots=True)
    assert _sync(cluster, first, mode="flux", renderer="helm") == []
    assert cluster.run_until(lambda: workloads_done(cluster, batch=False), timeout=90)
    (sink,) = [k for k in cluster.objects if k[0] == "Deployment" and k[2].endswith("-sink")]
    good = cluster.objects[sink]["spec"]["template"]
    slow = _live(tmp_path, made, flux=flux, open_delay="600")  # never ready within 10 s
    errors = _sync(cluster, _commit(tmp_path, "c2", slow, roots=True), mode="flux", renderer="helm")
    print(errors)
    assert len(errors) == 1 and "upgrade failed" in errors[0] and "rolled back" in errors[0]
    assert cluster.objects[sink]["spec"]["template"] == good
    assert cluster.run_until(lambda: workloads_done(cluster, batch=False), timeout=90)
