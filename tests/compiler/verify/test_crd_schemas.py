"""Custom resources vf emits, validated against vf's own subset schemas (``schemas/crd``) and
against the upstream CRD schemas read in place from ``../shared/crd-schemas``.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from ruamel.yaml import YAML

from tests.support import EXAMPLE_NAMES, REPO, require
from vf.pipeline import CompileResult
from vf.resources import resource_dir

Obj = dict[str, Any]
UPSTREAM = REPO.parent / "shared" / "crd-schemas"
CORE_GROUPS = ("", "apps", "batch", "policy", "networking.k8s.io", "resource.k8s.io")


def _schema_file(obj: Obj) -> str:
    group, _, version = str(obj["apiVersion"]).rpartition("/")
    return f"{group}/{str(obj['kind']).lower()}_{version}.json"


@cache
def _load(path: Path) -> Obj:
    loaded: Obj = json.loads(path.read_text(encoding="utf-8"))
    return loaded


def own_schema(obj: Obj) -> Obj:
    return _load(resource_dir("schemas") / "crd" / _schema_file(obj))


def upstream_schema(obj: Obj) -> Obj:
    require(UPSTREAM.is_dir(), "../shared/crd-schemas absent: upstream CRD schema checks need it")
    return _load(UPSTREAM / _schema_file(obj))


def custom_resources(result: CompileResult) -> list[Obj]:
    """Every non-core object of the compile: ScaledObjects and the gitops/ manifests."""
    found = [
        o
        for objects in result.objects.values()
        for o in objects
        if str(o["apiVersion"]).rpartition("/")[0] not in CORE_GROUPS
    ]
    yaml = YAML(typ="safe")
    for path, text in sorted(result.tree.items()):
        if path.startswith("gitops/") and not path.endswith("/kustomization.yaml"):
            found.append(yaml.load(text))
    return found


def _errors(schema: Obj, obj: Obj) -> list[str]:
    validator_class = jsonschema.validators.validator_for(
        schema, default=jsonschema.Draft7Validator
    )
    validator = validator_class(schema, format_checker=validator_class.FORMAT_CHECKER)
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(obj)]


def test_every_kind_vf_emits_has_an_own_schema(compiled_examples: dict[str, CompileResult]) -> None:
    kinds = {
        (o["apiVersion"], o["kind"])
        for r in compiled_examples.values()
        for o in custom_resources(r)
    }
    assert ("keda.sh/v1alpha1", "ScaledObject") in kinds
    assert ("argoproj.io/v1alpha1", "Application") in kinds
    assert ("kustomize.toolkit.fluxcd.io/v1", "Kustomization") in kinds
    assert ("source.toolkit.fluxcd.io/v1", "GitRepository") in kinds
    for path in sorted((resource_dir("schemas") / "crd").rglob("*.json")):
        jsonschema.Draft202012Validator.check_schema(_load(path))


@pytest.mark.parametrize("example", EXAMPLE_NAMES)
def test_custom_resources_match_vfs_own_schemas(
    example: str, compiled_examples: dict[str, CompileResult]
) -> None:
    for obj in custom_resources(compiled_examples[example]):
        assert _errors(own_schema(obj), obj) == [], (obj["kind"], obj["metadata"]["name"])


@pytest.mark.parametrize("example", EXAMPLE_NAMES)
def test_custom_resources_match_the_upstream_crd_schemas(
    example: str, compiled_examples: dict[str, CompileResult]
) -> None:
    for obj in custom_resources(compiled_examples[example]):
        assert _errors(upstream_schema(obj), obj) == [], (obj["kind"], obj["metadata"]["name"])


def test_broken_objects_are_rejected_by_both(compiled_examples: dict[str, CompileResult]) -> None:
    scaled = next(
        o
        for o in custom_resources(compiled_examples["realtime_cameras"])
        if o["kind"] == "ScaledObject"
    )
    no_triggers = copy.deepcopy(scaled)
    del no_triggers["spec"]["triggers"]
    typo = copy.deepcopy(scaled)
    typo["spec"]["maxReplicas"] = typo["spec"].pop("maxReplicaCount")
    for broken in (no_triggers, typo):
        assert _errors(own_schema(broken), broken)
    for broken in (no_triggers, typo):
        assert _errors(upstream_schema(broken), broken)
