"""Every value a Job's template reads renames the chart's Jobs when set to something other
than what vf compiled (ADR 224), rendered with the real helm: each settable key of a node in
the chart's own schema, set to another valid value, renames every Job of a BATCH flow or is
refused; a REALTIME flow's Deployments and StatefulSets keep their names; no Job keeps its
name with another spec whatever top-level value is set; and the digest vf writes is the one
Helm's toJson makes of the same values."""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from vf.emit.helm.job_values import go_json
from vf.pipeline import CompileResult
from vf.tree.write import write_tree

Obj = dict[str, Any]
_TOP_SKIPPED = {"environment", "global", "enabled", "generated", "rows", "plannedReplicas"}


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


def _render(helm: str, chart: Path, env: str, values: Obj, tmp: Path) -> tuple[int, str, str]:
    extra = tmp / "set.json"
    extra.write_text(json.dumps(values), encoding="utf-8")
    argv = [helm, "template", "r", str(chart), "-n", "ns", "-f", str(chart / f"values-{env}.yaml")]
    done = subprocess.run([*argv, "-f", str(extra)], capture_output=True, text=True, check=False)
    return done.returncode, done.stdout, done.stderr


def _objects(text: str) -> list[Obj]:
    return [d for d in YAML(typ="safe").load_all(text) if d is not None]


def _by_name(objects: list[Obj], *kinds: str) -> dict[str, Obj]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] in kinds}


def _other(schema: Obj, current: Any) -> Any:
    """A valid value of ``schema`` other than ``current``, made from the schema alone."""
    for branch in schema.get("anyOf", []):
        if branch.get("type") != "null":
            return _other(branch, current)
    if "enum" in schema:
        return next(v for v in schema["enum"] if v not in (None, current))
    kinds = schema.get("type", "object")
    kind = next(k for k in ([kinds] if isinstance(kinds, str) else kinds) if k != "null")
    if kind == "array":
        return [_other(schema.get("items", {}), None)]
    if kind == "object":
        return _other_object(schema, current if isinstance(current, dict) else {})
    return _scalar(kind, schema, current)


def _scalar(kind: str, schema: Obj, current: Any) -> Any:
    if kind == "string":
        return f"{current if isinstance(current, str) else 'x'}-x"
    if kind == "boolean":
        return not current
    return max(schema.get("minimum", 0), current if isinstance(current, int) else 0) + 1


def _other_object(schema: Obj, current: Obj) -> Obj:
    props = schema.get("properties") or {}
    if props:
        names = schema.get("required") or [sorted(props)[-1]]
        return {n: _other(props[n], current.get(n)) for n in names}
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        return {"example.com/set": _other(extra, None)}
    return {"example": "x"}


def _node_keys(schema: Obj) -> dict[str, Obj]:
    """Each node's settable keys and their schema (the shared one and the odd nodes')."""
    nodes = schema["properties"]["nodes"]
    keys: dict[str, Obj] = {}
    for each in [nodes.get("additionalProperties"), *(nodes.get("properties") or {}).values()]:
        if isinstance(each, dict):
            for name, sub in each.get("properties", {}).items():
                keys.setdefault(name, sub)
    return keys


def _leaves(schema: Obj, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Obj]]:
    """The settable paths of a section of the schema, down to a value that is no section."""
    props = schema.get("properties")
    names = (schema.get("propertyNames") or {}).get("enum")
    if props and schema.get("additionalProperties") is False:
        for name, sub in props.items():
            yield from _leaves(sub, (*path, name))
    elif names and isinstance(schema.get("additionalProperties"), dict):
        each: Obj = schema["additionalProperties"]
        for name in names:
            yield from _leaves((props or {}).get(name, each), (*path, name))
    else:
        yield path, schema


def _nested(path: tuple[str, ...], value: Any) -> Obj:
    out: Obj = {path[-1]: value}
    for part in reversed(path[:-1]):
        out = {part: out}
    return out


def _at(values: Obj, path: tuple[str, ...]) -> Any:
    found: Any = values
    for part in path:
        found = found.get(part) if isinstance(found, dict) else None
    return found


def _inlined(schema: Any, definitions: Obj) -> Any:
    """``schema`` with each reference to a definition replaced by the definition (the
    node names' kept as a reference, as they name no value to set)."""
    if isinstance(schema, list):
        return [_inlined(each, definitions) for each in schema]
    if not isinstance(schema, dict):
        return schema
    ref = str(schema.get("$ref", ""))
    if ref.startswith("#/definitions/") and ref != "#/definitions/nodeName":
        rest = {k: v for k, v in schema.items() if k != "$ref"}
        return _inlined({**definitions[ref.rsplit("/", 1)[1]], **rest}, definitions)
    return {key: _inlined(value, definitions) for key, value in schema.items()}


def _schema_and_values(chart: Path, env: str) -> tuple[Obj, Obj]:
    schema = json.loads((chart / "values.schema.json").read_text(encoding="utf-8"))
    schema = _inlined(schema, schema.get("definitions") or {})
    values = YAML(typ="safe").load((chart / f"values-{env}.yaml").read_text(encoding="utf-8"))
    return schema, values


@pytest.mark.parametrize(
    ("example", "env", "nodes"),
    [
        ("batch_pipeline", "dev", ("merge", "double")),  # a template of its own; a row's
        ("video_analytics", "lab", ("detector",)),  # GPU fields
    ],
)
def test_every_node_value_renames_every_batch_job_or_is_refused(
    example: str,
    env: str,
    nodes: tuple[str, ...],
    charts: dict[str, Path],
    helm: str,
    tmp_path: Path,
) -> None:
    chart = charts[example]
    schema, values = _schema_and_values(chart, env)
    keys = _node_keys(schema)
    assert {"image", "resources", "replicas", "tolerations"} <= set(keys)
    rc, text, err = _render(helm, chart, env, {}, tmp_path)
    assert rc == 0, err
    plain = _objects(text)
    jobs, kept = _by_name(plain, "Job"), _by_name(plain, "Deployment", "StatefulSet")
    renamed, refused, unchanged = [], [], []
    for node in nodes:
        for key, sub in sorted(keys.items()):
            value = _other(sub, values["nodes"][node].get(key))
            rc, text, err = _render(helm, chart, env, {"nodes": {node: {key: value}}}, tmp_path)
            if rc != 0:
                assert "schema" in err or f"nodes.{node}.{key}" in err, (key, err)
                refused.append(f"{node}.{key}")
                continue
            after = _objects(text)
            now = _by_name(after, "Job")
            assert _by_name(after, "Deployment", "StatefulSet").keys() == kept.keys()
            if len(now) == len(jobs) and not now.keys() & jobs.keys():
                renamed.append(f"{node}.{key}")
            else:
                unchanged.append((f"{node}.{key}", value))
    assert not unchanged, unchanged
    assert {f"{n}.{k}" for n in nodes for k in ("image", "resources")} <= set(renamed)
    assert {f"{n}.replicas" for n in nodes} <= set(refused)  # a Job's count: the plan's


def test_a_realtime_flows_deployments_and_statefulsets_are_never_renamed(
    charts: dict[str, Path], helm: str, tmp_path: Path
) -> None:
    chart = charts["realtime_cameras"]
    schema, values = _schema_and_values(chart, "dev")
    rc, text, err = _render(helm, chart, "dev", {}, tmp_path)
    assert rc == 0, err
    kept = _by_name(_objects(text), "Deployment", "StatefulSet")
    assert kept
    done = 0
    for node, mine in sorted(values["nodes"].items()):
        for key, sub in sorted(_node_keys(schema).items()):
            value = _other(sub, mine.get(key))
            rc, text, _ = _render(helm, chart, "dev", {"nodes": {node: {key: value}}}, tmp_path)
            if rc == 0:
                done += 1
                assert _by_name(_objects(text), "Deployment", "StatefulSet").keys() == kept.keys()
    assert done


@pytest.mark.parametrize(
    ("example", "env"), [("batch_pipeline", "prod"), ("realtime_cameras", "prod")]
)
def test_no_top_level_value_changes_a_job_under_its_name(
    example: str, env: str, charts: dict[str, Path], helm: str, tmp_path: Path
) -> None:
    """Whatever value outside ``nodes`` is set, a Job that keeps its name keeps its spec
    (the API server refuses a changed template), and a BATCH flow renames all or none."""
    chart = charts[example]
    schema, values = _schema_and_values(chart, env)
    rc, text, err = _render(helm, chart, env, {}, tmp_path)
    assert rc == 0, err
    jobs = _by_name(_objects(text), "Job")
    renamed = []
    for top, sub in sorted(schema["properties"].items()):
        if top in _TOP_SKIPPED or top == "nodes":
            continue
        for path, leaf in _leaves(sub, (top,)):
            value = _other(leaf, _at(values, path))
            rc, text, _ = _render(helm, chart, env, _nested(path, value), tmp_path)
            if rc != 0:
                continue
            now = _by_name(_objects(text), "Job")
            for name in now.keys() & jobs.keys():
                assert now[name]["spec"] == jobs[name]["spec"], (path, name)
            if now.keys() != jobs.keys():
                renamed.append(".".join(path))
                if example == "batch_pipeline":
                    assert not now.keys() & jobs.keys(), path
    assert {"imagePullPolicy", "provision.image", "provision.resources.requests"} <= set(renamed)


def test_the_digest_vf_writes_is_the_one_helm_makes(helm: str, tmp_path: Path) -> None:
    """``go_json`` writes what Helm's toJson writes of the same values read from YAML:
    escapes, numbers as float64, key order."""
    values = {
        "s": '<a&b> \u2028 \b\f\x01 é " \\ \n\t',
        "n": [0, 1, -3, 2.5, 1e-7, 1e22, 123456789012, 0.000001, 1e21, True, None],
        "m": {"b": {}, "a": [], "é": "x", "B": None},
    }
    chart = tmp_path / "c"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: c\nversion: 0.1.0\n")
    (chart / "templates" / "t.yaml").write_text("d: {{ toJson .Values.v | sha256sum | quote }}\n")
    (tmp_path / "v.json").write_text(json.dumps({"v": values}))
    done = subprocess.run(
        [helm, "template", "r", str(chart), "-f", str(tmp_path / "v.json")],
        capture_output=True,
        text=True,
        check=True,
    )
    rendered = YAML(typ="safe").load(done.stdout.split("\n", 2)[-1])["d"]
    assert rendered == hashlib.sha256(go_json(values).encode()).hexdigest()
