"""What a Helm user overrides on the chart, rendered with the real helm: scheduling,
variables, pod metadata, pull Secrets and the ServiceAccount, per node and for every pod,
around vf's own entries; the schema refusing what would break the flow; appVersion; and
the ``helm test`` Pod that checks the broker and the store answer."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from vf import __version__
from vf.pipeline import CompileResult
from vf.tree.write import write_tree
from vf_runtime.labels import GENERATION_KEY, NODE_LABEL

Obj = dict[str, Any]
OVERRIDES = {
    "nodeSelector": {"pool": "batch"},
    "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
    "affinity": {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 1,
                    "podAffinityTerm": {
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": {"team": "media"}},
                    },
                }
            ]
        }
    },
    "env": [{"name": "LOG_LEVEL", "value": "debug"}],
    "podAnnotations": {"team.example.com/owner": "media"},
    "podLabels": {"team": "media"},
    "imagePullSecrets": [{"name": "registry-cred"}],
    "serviceAccount": {"name": "flows"},
}


@pytest.fixture(scope="module")
def charts(
    compiled_examples: dict[str, CompileResult], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path]:
    out = {}
    for example in ("batch_pipeline", "video_analytics", "realtime_cameras"):
        root = tmp_path_factory.mktemp(example) / "deploy"
        write_tree(root, compiled_examples[example].tree)
        out[example] = root / "chart"
    return out


def _render(helm: str, chart: Path, env: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            helm,
            "template",
            "r",
            str(chart),
            "-n",
            "ns",
            "-f",
            str(chart / f"values-{env}.yaml"),
            *args,
        ],
        capture_output=True,
        text=True,
        check=False,
    )


def _objects(text: str) -> list[Obj]:
    return [d for d in YAML(typ="safe").load_all(text) if d is not None]


def _pods(objects: list[Obj]) -> dict[str, Obj]:
    """Each worker's and the provision Job's pod template, by node ("" for provision)."""
    out = {}
    for obj in objects:
        if obj["kind"] not in ("Deployment", "StatefulSet", "Job"):
            continue
        template = obj["spec"]["template"]
        labels = template["metadata"].get("labels") or {}
        if NODE_LABEL in labels:
            out[labels[NODE_LABEL]] = template
        elif labels.get("app.kubernetes.io/component") == "provision":
            out[""] = template
    return out


def _values_file(tmp_path: Path, values: Obj) -> str:
    path = tmp_path / "overrides.yaml"
    path.write_text(json.dumps(values), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(
    ("example", "env"), [("batch_pipeline", "prod"), ("video_analytics", "lab")]
)
def test_every_pod_takes_the_global_overrides_around_vfs_own(
    example: str, env: str, charts: dict[str, Path], helm: str, tmp_path: Path
) -> None:
    chart = charts[example]
    plain = _render(helm, chart, env)
    assert plain.returncode == 0, plain.stderr
    before = _pods(_objects(plain.stdout))
    done = _render(helm, chart, env, "-f", _values_file(tmp_path, OVERRIDES))
    assert done.returncode == 0, done.stderr
    objects = _objects(done.stdout)
    after = _pods(objects)
    assert sorted(after) == sorted(before) and "" in after
    for node, pod in after.items():
        old, spec = before[node], pod["spec"]
        own = old["spec"]
        assert spec["nodeSelector"] == {**OVERRIDES["nodeSelector"], **own.get("nodeSelector", {})}
        assert spec["tolerations"] == own.get("tolerations", []) + OVERRIDES["tolerations"]
        assert spec["imagePullSecrets"] == [{"name": "registry-cred"}]
        assert spec["serviceAccountName"] == "flows"
        assert "podAntiAffinity" in spec["affinity"]
        assert set(own.get("affinity", {})) <= set(spec["affinity"]), node  # vf's GPU terms
        env_names = [e["name"] for e in spec["containers"][0]["env"]]
        assert env_names == [e["name"] for e in own["containers"][0]["env"]] + ["LOG_LEVEL"]
        labels, annotations = pod["metadata"]["labels"], pod["metadata"]["annotations"]
        assert labels == {**old["metadata"]["labels"], "team": "media"}
        renamed = {k: annotations[k] for k in old["metadata"]["annotations"] if k == GENERATION_KEY}
        expected = {**old["metadata"]["annotations"], "team.example.com/owner": "media", **renamed}
        assert annotations == expected
    infra = [o for o in objects if (o["metadata"].get("labels") or {}).get("vf.dev/infra")]
    for obj in infra:  # the broker and the store keep their own scheduling
        if "template" in obj.get("spec", {}):
            assert "serviceAccountName" not in obj["spec"]["template"]["spec"]


def test_a_nodes_own_overrides_come_after_the_global_ones(
    charts: dict[str, Path], helm: str, tmp_path: Path
) -> None:
    chart = charts["video_analytics"]
    values = {
        **OVERRIDES,
        "nodes": {
            "detector": {
                "nodeSelector": {"pool": "gpu-a100"},
                "tolerations": [{"key": "a100", "operator": "Exists"}],
                "env": [{"name": "MODEL", "value": "large"}],
                "podLabels": {"team": "vision"},
                "serviceAccount": {"name": "detector"},
            }
        },
    }
    done = _render(helm, chart, "lab", "-f", _values_file(tmp_path, values))
    assert done.returncode == 0, done.stderr
    pods = _pods(_objects(done.stdout))
    detector, other = pods["detector"], pods["embedder"]
    assert detector["spec"]["nodeSelector"]["pool"] == "gpu-a100"
    assert other["spec"]["nodeSelector"]["pool"] == "batch"
    assert detector["spec"]["tolerations"][-2:] == [
        *OVERRIDES["tolerations"],
        {"key": "a100", "operator": "Exists"},
    ]
    assert [e["name"] for e in detector["spec"]["containers"][0]["env"]][-2:] == [
        "LOG_LEVEL",
        "MODEL",
    ]
    assert detector["metadata"]["labels"]["team"] == "vision"
    assert detector["spec"]["serviceAccountName"] == "detector"
    assert other["spec"]["serviceAccountName"] == "flows"


@pytest.mark.parametrize(
    "setting",
    [
        "env[0].name=VF_NB_TASKS",  # a variable of vf's own
        "podLabels.vf\\.dev/node=x",  # a label the selector and the tools read
        "podAnnotations.vf\\.dev/config-hash=x",
        "nodes.double.nodeSelectr.a=b",  # a typo
        "nodes.double.imagePullSecrets[0].nam=x",
        "serviceAccount.create=true",  # the chart names one; it makes none
    ],
)
def test_the_schema_refuses_overrides_that_would_break_the_flow(
    setting: str, charts: dict[str, Path], helm: str
) -> None:
    done = _render(helm, charts["batch_pipeline"], "dev", "--set", setting)
    assert done.returncode != 0 and "schema" in done.stderr, setting
    field = setting.split(".", maxsplit=1)[0].split("[", maxsplit=1)[0]
    if field in ("podLabels", "podAnnotations"):  # refused where it was set (ADR 206)
        assert f"'/{field}/vf.dev~1" in done.stderr, done.stderr


def test_chart_yaml_names_the_app_version(charts: dict[str, Path]) -> None:
    meta = YAML(typ="safe").load((charts["batch_pipeline"] / "Chart.yaml").read_text())
    assert meta["appVersion"] == __version__


def test_helm_test_checks_the_charts_own_broker_and_store(
    charts: dict[str, Path], helm: str
) -> None:
    """``helm test`` runs a Pod that talks to the broker and the store the chart runs; an
    install never applies it, and an environment whose broker is external checks only
    what the chart runs."""
    chart = charts["batch_pipeline"]
    done = _render(helm, chart, "dev", "--show-only", "templates/tests/test-connection.yaml")
    assert done.returncode == 0, done.stderr
    (pod,) = _objects(done.stdout)
    assert pod["kind"] == "Pod"
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    assert pod["metadata"]["labels"]["vf.dev/flow"] == "batch-demo"  # the policies admit it
    env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
    assert env == {
        "VF_NATS_URL": "nats://vf-batch-demo-nats:4222",
        "VF_BLOB_REDIS_URL": "redis://vf-batch-demo-redis:6379/0",
    }
    script = pod["spec"]["containers"][0]["command"][-1]
    assert "PONG" in script and "nc -w 3 $broker" in script and "nc -w 3 $store" in script
    security = pod["spec"]["securityContext"]
    assert security["runAsNonRoot"] and security["seccompProfile"]["type"] == "RuntimeDefault"
    skipped = _render(helm, chart, "dev", "--skip-tests")
    assert skipped.returncode == 0 and "kind: Pod" not in skipped.stdout
    cameras = charts["realtime_cameras"]
    external = _render(helm, cameras, "prod", "--show-only", "templates/tests/test-connection.yaml")
    assert external.returncode != 0 and "could not find template" in external.stderr
    own = _render(helm, cameras, "dev", "--show-only", "templates/tests/test-connection.yaml")
    (dev_pod,) = _objects(own.stdout)
    dev_env = {e["name"]: e["value"] for e in dev_pod["spec"]["containers"][0]["env"]}
    assert dev_env["VF_NATS_URL"] == "nats://vf-cameras-nats:4222"


def test_replica_counts_the_chart_cannot_follow_are_refused_with_real_helm(
    charts: dict[str, Path], helm: str
) -> None:
    """A partitioned StatefulSet's count and any Job's, to zero (the schema) or another
    number (the chart, against the environment's plan)."""
    cameras = charts["realtime_cameras"]
    done = _render(helm, cameras, "prod", "--set", "nodes.tracker.replicas=4")
    assert done.returncode != 0 and "nodes.tracker.replicas is 4" in done.stderr, done.stderr
    assert "prod plans 3" in done.stderr
    done = _render(helm, cameras, "prod", "--set", "nodes.tracker.replicas=0")
    assert done.returncode != 0 and "/nodes/tracker/replicas" in done.stderr
    batch = charts["batch_pipeline"]
    done = _render(helm, batch, "prod", "--set", "nodes.record-reader.replicas=0")
    assert done.returncode != 0 and "/nodes/record-reader/replicas" in done.stderr


def test_the_values_name_only_values(charts: dict[str, Path]) -> None:
    """An override's slot reads the values and writes none: the values files hold the keys
    the schema documents, nothing made of a template's own keys."""
    for chart in charts.values():
        schema = json.loads((chart / "values.schema.json").read_text(encoding="utf-8"))
        for path in chart.glob("values*.yaml"):
            keys = set(YAML(typ="safe").load(path.read_text(encoding="utf-8")))
            assert keys <= set(schema["properties"]), (path.name, keys - set(schema["properties"]))


def _names(objects: list[Obj], kind: str) -> set[str]:
    return {o["metadata"]["name"] for o in objects if o["kind"] == kind}


@pytest.mark.parametrize(
    ("example", "env", "values"),
    [
        ("batch_pipeline", "prod", {"tolerations": OVERRIDES["tolerations"]}),
        ("batch_pipeline", "dev", {"nodes": {"merge": {"podLabels": {"team": "media"}}}}),
        ("batch_pipeline", "dev", {"serviceAccount": {"name": "flows"}}),
        ("realtime_cameras", "dev", {"nodeSelector": {"pool": "cameras"}}),
    ],
)
def test_an_override_renames_every_job_and_no_other_workload(
    example: str, env: str, values: Obj, charts: dict[str, Path], helm: str, tmp_path: Path
) -> None:
    """A Job's pod template is immutable (Kubernetes refuses an upgrade that changes it), so
    an override that reaches a pod renames every Job, as image.tag does: a BATCH flow gets a
    new generation (fresh streams); Deployments and StatefulSets roll under their names."""
    plain = _objects(_render(helm, charts[example], env).stdout)
    done = _render(helm, charts[example], env, "-f", _values_file(tmp_path, values))
    assert done.returncode == 0, done.stderr
    changed = _objects(done.stdout)
    before, after = _names(plain, "Job"), _names(changed, "Job")
    assert before and len(after) == len(before) and not before & after, (before, after)
    for kind in ("Deployment", "StatefulSet", "ConfigMap"):
        kept = _names(plain, kind) == _names(changed, kind)
        assert kept or kind == "ConfigMap", kind
    generations = {
        o["spec"]["template"]["metadata"].get("annotations", {}).get(GENERATION_KEY)
        for o in changed
        if o["kind"] == "Job"
    } - {None}
    old = {
        o["spec"]["template"]["metadata"].get("annotations", {}).get(GENERATION_KEY)
        for o in plain
        if o["kind"] == "Job"
    } - {None}
    assert len(generations) <= 1 and not generations & old


def test_no_override_keeps_every_name_as_vf_compile_wrote_it(
    charts: dict[str, Path], helm: str, tmp_path: Path
) -> None:
    chart = charts["batch_pipeline"]
    plain = _render(helm, chart, "dev").stdout
    empty = _values_file(tmp_path, {"tolerations": [], "nodes": {"merge": {"env": []}}})
    assert _render(helm, chart, "dev", "-f", empty).stdout == plain
