"""The chart's ``generated`` values are named so a reviewer can read them (ADR 189): the
object by its kind and its own name, the field by its dotted path; unique, the same at
every compile, and held by the strict schema."""

from __future__ import annotations

import json
from typing import Any

import pytest
from ruamel.yaml import YAML

from vf.emit.helm.readable import field_path, short_names


@pytest.mark.parametrize(
    ("pointer", "path"),
    [
        ("/spec/backoffLimit", "spec.backoffLimit"),
        ("/metadata/labels/vf.dev~1profile", "metadata.labels['vf.dev/profile']"),
        ("/spec/template/spec/volumes/0/emptyDir", "spec.template.spec.volumes[0].emptyDir"),
        ("/data/nats.conf", "data['nats.conf']"),
        ("/metadata/annotations/a~0b", "metadata.annotations['a~b']"),
        ("/data/it's", "data['it\\'s']"),
    ],
)
def test_a_field_is_named_by_its_dotted_path(pointer: str, path: str) -> None:
    assert field_path(pointer) == path


def test_an_object_is_named_by_what_is_its_own_unless_two_would_meet() -> None:
    broker, other_broker = (
        "ConfigMap/vf-demo-re49dac6-broker-generation",
        "ConfigMap/vf-demo-broker",
    )
    names = short_names(
        [
            "Job/vf-demo-re49dac6-double-generation",
            "Job/vf-demo-re49dac6-provision-tag",
            "Deployment/vf-demo-redis",
            broker,
            other_broker,
            "Service/elsewhere",
        ],
        flow="demo",
    )
    assert names == {
        "Job/vf-demo-re49dac6-double-generation": "Job/double",
        "Job/vf-demo-re49dac6-provision-tag": "Job/provision",
        "Deployment/vf-demo-redis": "Deployment/redis",
        broker: broker,  # both would be ConfigMap/broker: each keeps its whole name
        other_broker: other_broker,
        "Service/elsewhere": "Service/elsewhere",
    }


@pytest.mark.parametrize("example", ["batch_pipeline", "realtime_cameras", "video_analytics"])
def test_every_generated_key_of_an_example_reads_as_object_and_field(
    example: str, compiled_examples: dict[str, Any]
) -> None:
    """Before, the keys were JSON pointers under the object's whole name
    (``Job/vf-batch-demo-re49dac6-double-generation: {/spec/backoffLimit: 3}``)."""
    tree = compiled_examples[example].tree
    yaml = YAML(typ="safe")
    envs = [p for p in tree if p.startswith("chart/values-")]
    section = json.loads(tree["chart/values.schema.json"])["properties"].get("generated")
    if section is None:  # every object of the chart is a role template's (ADR 235-241)
        assert not any(yaml.load(tree[path]).get("generated") for path in envs)
        return
    names = section.get("propertyNames", {}).get("enum") or list(section["properties"])
    own = section.get("properties") or {}
    known = {n: own.get(n, section.get("additionalProperties")) for n in names}
    seen: set[tuple[str, str]] = set()
    for path in envs:
        generated = yaml.load(tree[path]).get("generated") or {}
        for obj, fields in generated.items():
            kind, _, name = obj.partition("/")
            assert kind[:1].isupper() and not name.startswith("vf-"), obj
            assert not name.endswith(("-generation", "-tag")), obj
            assert set(fields) <= set(known[obj]["properties"]), obj
            for field in fields:
                assert not field.startswith("/") and "~" not in field, (obj, field)
                seen.add((obj, field))
    print(f"{example}: {len(seen)} generated keys, e.g. {sorted(seen)[:3]}")
    assert seen
    assert known and all(s["additionalProperties"] is False for s in known.values())
