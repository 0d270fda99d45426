"""The chart: ``helm template`` with an environment's values equals that overlay's build,
``helm lint --strict`` passes, the schema is strict, and user text cannot inject templates.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support import (
    EXAMPLE_ENVS,
    EXAMPLE_NAMES,
    as_overlay,
    by_identity,
    helm_lint,
    helm_template,
    kustomize_build,
    parse_docs,
)
from vf.emit.ordering import HELM_ONLY, KUSTOMIZE_ONLY, without_tool_annotations
from vf.pipeline import CompileRequest, CompileResult, compile_project
from vf.tree.write import write_tree

Obj = dict[str, Any]


def _annotations(obj: Obj) -> dict[str, str]:
    return dict(obj["metadata"].get("annotations") or {})


@pytest.fixture(scope="module")
def trees(
    compiled_examples: dict[str, CompileResult], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path]:
    """Every example's tree written to disk once."""
    out = {}
    for example, result in compiled_examples.items():
        root = tmp_path_factory.mktemp(example) / "deploy"
        write_tree(root, result.tree)
        out[example] = root
    return out


def _plan(result: CompileResult, env: str) -> Any:
    return next(p for p in result.plans if p.environment == env)


@pytest.mark.parametrize(("example", "env"), EXAMPLE_ENVS)
def test_helm_template_equals_the_overlay(
    example: str,
    env: str,
    trees: dict[str, Path],
    compiled_examples: dict[str, CompileResult],
    helm: str,
    kubectl: str,
) -> None:
    root = trees[example]
    plan = _plan(compiled_examples[example], env)
    rendered = helm_template(
        helm,
        root / "chart",
        "-f",
        str(root / "chart" / f"values-{env}.yaml"),
        "--namespace",
        plan.namespace,
        "--kube-version",
        plan.kubernetes_version,
    )
    assert rendered.returncode == 0, rendered.stderr
    tests = [
        o for o in parse_docs(rendered.stdout) if _annotations(o).get("helm.sh/hook") == "test"
    ]
    assert {o["kind"] for o in tests} <= {"Pod"}  # helm test's, which no install applies
    from_helm = by_identity([o for o in parse_docs(rendered.stdout) if o not in tests])
    from_kustomize = by_identity(parse_docs(kustomize_build(kubectl, root / "overlays" / env)))
    namespace = ("Namespace", "", plan.namespace)  # the release's, made by --create-namespace
    from_kustomize.pop(namespace, None)
    assert sorted(from_helm) == sorted(from_kustomize)
    for key, obj in from_kustomize.items():
        assert as_overlay(from_helm[key]) == without_tool_annotations(obj), key
        assert not set(_annotations(from_helm[key])) & set(KUSTOMIZE_ONLY), key
        assert not set(_annotations(obj)) & set(HELM_ONLY), key


@pytest.mark.parametrize(("example", "env"), EXAMPLE_ENVS)
def test_helm_lint_strict_passes(example: str, env: str, trees: dict[str, Path], helm: str) -> None:
    chart = trees[example] / "chart"
    for values in (chart / "values.yaml", chart / f"values-{env}.yaml"):
        done = helm_lint(helm, chart, values)
        assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("example", EXAMPLE_NAMES)
def test_the_chart_without_an_environments_values_is_refused(
    example: str, trees: dict[str, Path], compiled_examples: dict[str, CompileResult], helm: str
) -> None:
    """``helm install x ./chart`` without ``-f`` once installed whichever environment sorted
    first; now the chart refuses, naming the values files."""
    chart = trees[example] / "chart"
    plain = helm_template(helm, chart, "-n", "ns")
    assert plain.returncode != 0
    for plan in compiled_examples[example].plans:
        assert f"-f values-{plan.environment}.yaml" in plain.stderr


def test_a_replica_count_the_chart_cannot_follow_is_refused(
    trees: dict[str, Path], helm: str
) -> None:
    """``--set nodes.<node>.replicas`` works for a Deployment (ADR 88); for a Job (its count
    is part of its name's tag) and a partitioned worker (its parents' readers, the
    topology) the chart holds the count the environment's values plan (ADR 176), and no
    node runs zero replicas (the schema)."""
    chart = trees["batch_pipeline"] / "chart"
    values = ("-n", "ns", "-f", str(chart / "values-dev.yaml"))
    assert helm_template(helm, chart, *values).returncode == 0
    for setting in ("nodes.merge.replicas=3", "nodes.double.replicas=2"):
        refused = helm_template(helm, chart, *values, "--set", setting)
        node = setting.split(".")[1]
        assert refused.returncode != 0, setting
        assert f"nodes.{node}.replicas is {setting[-1]}" in refused.stderr, refused.stderr
    cameras = trees["realtime_cameras"] / "chart"
    dev = ("-n", "ns", "-f", str(cameras / "values-dev.yaml"))
    assert helm_template(helm, cameras, *dev, "--set", "nodes.alerts.replicas=3").returncode == 0
    zero = helm_template(helm, cameras, *dev, "--set", "nodes.alerts.replicas=0")
    assert zero.returncode != 0 and "/nodes/alerts/replicas" in zero.stderr


def test_provision_job_is_a_helm_hook_only_in_the_chart(
    compiled_examples: dict[str, CompileResult],
) -> None:
    tree = compiled_examples["batch_pipeline"].tree
    chart_job = tree["chart/templates/provision.yaml"]  # its role template (ADR 243)
    base_job = next(
        v
        for k, v in tree.items()
        if k.startswith(("base/job-", "overlays/")) and "/job-" in k and "provision" in k
    )
    assert '"helm.sh/hook" "post-install,post-upgrade"' in chart_job
    assert "argocd.argoproj.io" not in chart_job
    assert 'argocd.argoproj.io/sync-wave: "-1"' in base_job
    assert "helm.sh/" not in base_job
    for path, text in tree.items():
        if path.startswith("chart/"):
            assert "argocd.argoproj.io/sync-wave" not in text, path
        elif path.startswith(("base/", "overlays/", "components/")):
            assert "helm.sh/hook" not in text, path


def test_schema_is_strict_but_allows_global(trees: dict[str, Path], helm: str) -> None:
    chart = trees["realtime_cameras"] / "chart"
    dev = ("-f", str(chart / "values-dev.yaml"))
    typo = helm_template(helm, chart, *dev, "--set", "imagePullPolicyy=Always")
    assert typo.returncode != 0
    assert "imagePullPolicyy" in typo.stderr
    wrong = helm_template(helm, chart, *dev, "--set", "imagePullPolicy=Sometimes")
    assert wrong.returncode != 0
    shared = helm_template(
        helm, chart, *dev, "--set", "global.registry=example.com", "--set", "enabled=true"
    )
    assert shared.returncode == 0, shared.stderr
    schema = json.loads((chart / "values.schema.json").read_text(encoding="utf-8"))
    assert schema["additionalProperties"] is False
    assert schema["properties"]["global"] == {
        "type": "object",
        "description": "Values a parent chart shares with its subcharts.",
    }


def test_an_operator_can_change_an_image_per_release(trees: dict[str, Path], helm: str) -> None:
    chart = trees["realtime_cameras"] / "chart"
    dev = ("-f", str(chart / "values-dev.yaml"))
    done = helm_template(helm, chart, *dev, "--set", "nodes.alerts.image=registry.example.com/a:2")
    assert done.returncode == 0, done.stderr
    alerts = next(
        o
        for o in parse_docs(done.stdout)
        if o["kind"] == "Deployment" and o["metadata"]["name"].endswith("-alerts")
    )
    assert (
        alerts["spec"]["template"]["spec"]["containers"][0]["image"] == "registry.example.com/a:2"
    )


INJECTION = """
from vf import BATCH, Consumer, Flow, Producer


class Source(Producer):
    def __init__(self, text: str = "", **kw):
        super().__init__(**kw)
        self.text = text

    def next(self):
        raise StopIteration


class Sink(Consumer):
    def __init__(self, note: str = "", **kw):
        super().__init__(**kw)
        self.note = note

    def consume(self, item):
        pass


def build_flow() -> Flow:
    source = Source(text='{{ .Release.Name }} {{- fail "boom" }} }}', name="src")
    return Flow([Sink(note="{{", name="sink")(source)], flow_type=BATCH, flow_id="inject")
"""

CONFIG = """
environments:
  dev:
    images:
      default: registry.example.com/x:1
  prod:
    images:
      default: registry.example.com/x:2
"""


def _envs(obj: Obj) -> list[Obj]:
    pod = obj.get("spec", {}).get("template", {}).get("spec", {})
    return [e for c in pod.get("containers", []) for e in c.get("env", [])]


def test_user_text_cannot_inject_go_templates(
    write_graph: Callable[..., Path], tmp_path: Path, helm: str
) -> None:
    graph = write_graph(INJECTION, CONFIG)
    result = compile_project(CompileRequest(graph=str(graph)))
    out = tmp_path / "deploy"
    write_tree(out, result.tree)
    done = helm_template(helm, out / "chart", "-f", str(out / "chart" / "values-prod.yaml"))
    assert done.returncode == 0, done.stderr
    rendered = {(o["kind"], o["metadata"]["name"]): o for o in parse_docs(done.stdout)}
    for obj in result.objects["prod"]:
        if obj["kind"] in ("ConfigMap", "Deployment", "Job"):
            got = rendered[(obj["kind"], obj["metadata"]["name"])]
            assert got.get("data") == obj.get("data")
            assert _envs(got) == _envs(obj)
    params = [
        entry["value"]
        for o in rendered.values()
        for entry in _envs(o)
        if entry["name"] == "VF_NODE_PARAMS_JSON"
    ]
    assert any('{{ .Release.Name }} {{- fail \\"boom\\" }} }}' in p for p in params), params


@pytest.mark.parametrize("example", EXAMPLE_NAMES)
def test_the_chart_installs_into_any_namespace_with_helms_labels(
    example: str, trees: dict[str, Path], compiled_examples: dict[str, CompileResult], helm: str
) -> None:
    """``helm template -n team-b``: nothing names the namespace the tree was compiled for,
    no Namespace object (Helm cannot adopt it; --create-namespace makes it), Helm's labels."""
    result = compiled_examples[example]
    chart = trees[example] / "chart"
    for plan in result.plans:
        values = str(chart / f"values-{plan.environment}.yaml")
        rendered = helm_template(helm, chart, "-n", "team-b", "-f", values)
        assert rendered.returncode == 0, rendered.stderr
        assert f".{plan.namespace}.svc" not in rendered.stdout
        objects = parse_docs(rendered.stdout)
        assert objects and not [o for o in objects if o["kind"] == "Namespace"]
        for obj in objects:
            meta = obj["metadata"]
            assert meta.get("namespace", "team-b") == "team-b", meta
            assert meta["labels"]["helm.sh/chart"] == plan.flow_id
            assert meta["labels"]["app.kubernetes.io/managed-by"] == "Helm"
    readme = result.tree["chart/README.md"]
    assert "--create-namespace" in readme


@pytest.mark.parametrize("example", ["batch_pipeline", "realtime_cameras"])
def test_set_image_tag_retags_the_flows_images_and_renames_its_jobs(
    example: str, trees: dict[str, Path], compiled_examples: dict[str, CompileResult], helm: str
) -> None:
    """``--set image.tag=`` is accepted; it reaches the flow's own images (not the broker's),
    and every Job gets a new name (and a BATCH flow a new generation), so ``helm upgrade``
    creates new Jobs instead of changing an immutable template."""
    chart = trees[example] / "chart"
    plan = compiled_examples[example].plans[0]
    values = str(chart / f"values-{plan.environment}.yaml")
    plain = parse_docs(helm_template(helm, chart, "-f", values).stdout)
    done = helm_template(helm, chart, "-f", values, "--set", "image.tag=9.9.9")
    assert done.returncode == 0, done.stderr
    tagged = parse_docs(done.stdout)
    jobs = {o["metadata"]["name"] for o in plain if o["kind"] == "Job"}
    new_jobs = {o["metadata"]["name"] for o in tagged if o["kind"] == "Job"}
    print(f"{example}: {len(jobs)} Jobs renamed, e.g. {sorted(new_jobs)[:1]}")
    assert jobs and len(new_jobs) == len(jobs) and not jobs & new_jobs
    assert all(len(name) <= 63 for name in new_jobs)
    for obj in tagged:
        labels = obj["metadata"].get("labels") or {}
        template = (obj.get("spec") or {}).get("template")
        if template is None:
            continue
        images = [c["image"] for c in template["spec"]["containers"]]
        if "vf.dev/infra" in labels:
            assert not any(i.endswith(":9.9.9") for i in images)
        elif obj["kind"] in ("Job", "Deployment", "StatefulSet"):
            assert all(i.endswith(":9.9.9") for i in images), images
    generations = {
        o["metadata"].get("annotations", {}).get("vf.dev/generation")
        for o in (t["spec"]["template"] for t in tagged if t["kind"] == "Job")
    } | {o["data"]["VF_GENERATION"] for o in tagged if "VF_GENERATION" in o.get("data", {})}
    if plan.generation is not None:
        assert len(generations) == 1 and plan.generation not in generations
    refused = helm_template(helm, chart, "-f", values, "--set", "image.tag=bad tag")
    assert refused.returncode != 0
