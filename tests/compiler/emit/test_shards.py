"""An environment past ``SHARD_OVER`` objects is delivered in shards (ADR 220): the shards
together hold exactly the overlay's objects, each within Argo CD's and etcd's limits, with
a node's shard fixed by its name; each shard has its own Application and Kustomization;
below the threshold nothing changes (the goldens)."""

from __future__ import annotations

import importlib.util
import math
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

import vf.emit.shards as shards_module
from tests.support import REPO, example_graph, kustomize_build
from vf.commands.explain.text import explain
from vf.emit.shards import (
    SHARD_BUCKETS,
    SHARD_MAX_BYTES,
    SHARD_MAX_OBJECTS,
    bucket,
    shards_of,
)
from vf.pipeline import CompileRequest, CompileResult, compile_project
from vf.runtree.manifests import parse_objects
from vf.tree.write import write_tree

Obj = dict[str, Any]
ROOT = REPO
GITOPS = "gitops:\n  repo_url: https://g.example/d.git\n  path: .\n  argocd: {}\n  flux: {}\n"
EXAMPLES = ("batch_pipeline", "realtime_cameras", "thumbnails", "video_analytics")


def _key(obj: Obj) -> tuple[str, str]:
    return (str(obj["kind"]), str(obj["metadata"]["name"]))


def _load(text: str) -> list[Obj]:
    """Objects as the API server's YAML reader takes them: a scalar such as the hash
    ``765375e546887432``, which kustomize writes unquoted, stays a string (Go's float
    parse of it overflows), where a YAML 1.2 reader would make it infinite."""
    return [d for d in _GO_YAML.load_all(text) if d is not None]


def _go_float(constructor: Any, node: Any) -> Any:
    value = constructor.construct_yaml_float(node)
    return node.value if math.isinf(value) and "inf" not in node.value.lower() else value


_GO_YAML = YAML(typ="safe", pure=True)
_GO_YAML.constructor.add_constructor("tag:yaml.org,2002:float", _go_float)


def _shard_objects(out: Path, env: str) -> dict[str, list[Obj]]:
    """Each shard folder's objects, read as a directory source reads them."""
    found: dict[str, list[Obj]] = {}
    for folder in sorted((out / "shards" / env).iterdir()):
        assert not (folder / "kustomization.yaml").exists()
        files = sorted(folder.iterdir())
        assert files and all(f.suffix == ".yaml" for f in files)
        found[folder.name] = [o for f in files for o in _load(f.read_text(encoding="utf-8"))]
    return found


def _lowered(monkeypatch: pytest.MonkeyPatch, *, over: int = 5) -> None:
    monkeypatch.setattr(shards_module, "SHARD_OVER", over)


def _compile(graph: Path, config: Path | None = None) -> CompileResult:
    return compile_project(CompileRequest(graph=str(graph), config=str(config) if config else None))


def _assert_exactly_the_overlay(out: Path, env: str, kubectl: str) -> dict[str, list[Obj]]:
    shards = _shard_objects(out, env)
    seen = Counter(_key(o) for objs in shards.values() for o in objs)
    assert max(seen.values()) == 1, [k for k, n in seen.items() if n > 1]  # disjoint
    union = {_key(o): o for objs in shards.values() for o in objs}
    built = {_key(o): o for o in _load(kustomize_build(kubectl, out / "overlays" / env))}
    assert union == built, env
    return shards


@pytest.mark.parametrize("example", EXAMPLES)
def test_shards_of_every_example_are_exactly_its_overlay(
    example: str, kubectl: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _lowered(monkeypatch)
    project = tmp_path / example
    shutil.copytree(Path(example_graph(example)).parent, project)
    config = project / "vf.yaml"
    if "gitops:" not in config.read_text(encoding="utf-8"):  # shards are for the controllers
        with config.open("a", encoding="utf-8") as text:
            text.write(GITOPS)
    result = _compile(project / "graph.py", config)
    out = tmp_path / "tree"
    write_tree(out, result.tree)
    for env in result.objects:
        shards = _assert_exactly_the_overlay(out, env, kubectl)
        assert len(shards) > 2, sorted(shards)  # lowered: the shared part and several
        assert all("vf.dev/node" not in (o["metadata"].get("labels") or {}) for o in shards["00"])
        for number, objs in shards.items():
            if number != "00":
                assert all("vf.dev/node" in o["metadata"]["labels"] for o in objs)


def test_below_the_threshold_nothing_is_sharded(compiled_examples: dict[str, Any]) -> None:
    for result in compiled_examples.values():
        assert not [p for p in result.tree if p.startswith("shards/") or "-shard-" in p]
        assert "shards" not in explain(result)


def _node_objects(node: str, *, count: int = 2, size: int = 10) -> list[Obj]:
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"{node}-{i}", "namespace": "ns", "labels": {"vf.dev/node": node}},
            "data": {"x": "y" * size},
        }
        for i in range(count)
    ]


def _placement(objects: list[Obj]) -> dict[str, str]:
    return {node: s.number for s in shards_of(objects) for node in s.nodes}


def test_a_node_keeps_its_shard_when_others_come_and_go() -> None:
    nodes = [f"n-{i}" for i in range(600)]
    before = _placement([o for n in nodes for o in _node_objects(n)])
    assert len(set(before.values())) == SHARD_BUCKETS
    grown = _placement([o for n in [*nodes, "new-one"] for o in _node_objects(n)])
    assert {n: grown[n] for n in nodes} == before  # adding a node moves no other
    fewer = _placement([o for n in nodes[1:] for o in _node_objects(n)])
    assert {n: fewer[n] for n in nodes[1:]} == {n: before[n] for n in nodes[1:]}
    # ten times the nodes: still the same shards (ADR 249); before, the count followed the
    # size, and growing from 1,200 to 4,200 node objects moved three nodes in four
    many = _placement([o for n in [*nodes, *map(str, range(5400))] for o in _node_objects(n)])
    assert {n: many[n] for n in nodes} == before


def test_a_doubling_past_the_limits_numbers_every_shard_anew(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past the limits the buckets double, and ``n`` buckets are numbered ``n + 1`` to
    ``2n``: no number holds nodes under two counts, so no live shard loses a node to
    another (ADR 0258); each old shard still splits in two."""
    nodes = [f"n-{i}" for i in range(600)]
    before = _placement([o for n in nodes for o in _node_objects(n)])
    assert sorted(set(before.values())) == [f"{n:02d}" for n in range(1, SHARD_BUCKETS + 1)]
    placements = []
    for limit in (60, 30):  # 1,200 objects in 16: ~75 a shard
        monkeypatch.setattr(shards_module, "SHARD_MAX_OBJECTS", limit)
        placed = _placement([o for n in nodes for o in _node_objects(n)])
        numbers = {int(n) for n in placed.values()}
        buckets = 1 << ((min(numbers) - 1).bit_length() - 1)  # a power of two below it
        assert numbers <= set(range(buckets + 1, 2 * buckets + 1))
        assert len(numbers) > buckets // 2  # an empty bucket's number is unused
        assert {len(n) for n in placed.values()} == {len(str(2 * buckets))}
        placements.append(placed)
    assert min(int(n) for n in placements[0].values()) == 2 * SHARD_BUCKETS + 1
    doubled = placements[0]
    assert not set(doubled.values()) & set(before.values())
    assert not set(doubled.values()) & set(placements[1].values())
    for node, number in before.items():  # a doubling splits each shard, never mixes two
        assert (int(doubled[node]) - 33) % SHARD_BUCKETS == int(number) - 1
    assert bucket("n-1", buckets=32) % 16 == bucket("n-1", buckets=16)


def test_no_shard_passes_the_object_or_size_limits() -> None:
    many = [o for i in range(300) for o in _node_objects(f"big-{i}", count=1, size=60_000)]
    shards = shards_of(many)  # 18 MB of node objects: 4 buckets would hold ~4.5 MB each
    assert all(s.size <= SHARD_MAX_BYTES for s in shards)
    crowded = [o for o in _node_objects("one", count=SHARD_MAX_OBJECTS + 1)]
    (shared, alone) = shards_of(crowded)  # one node's objects cannot be split: kept whole
    assert not shared.objects and len(alone.objects) == SHARD_MAX_OBJECTS + 1


def _app(result: CompileResult, name: str) -> Obj:
    loaded = YAML(typ="safe").load(result.tree[f"gitops/{name}"])
    assert isinstance(loaded, dict)
    return loaded


def test_each_shard_has_its_application_and_kustomization(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _lowered(monkeypatch)
    result = _compile(Path(example_graph("realtime_cameras")))
    numbers = sorted({p.split("/")[2] for p in result.tree if p.startswith("shards/dev/")})
    others = [n for n in numbers if n != "00"]
    shared = _app(result, "argocd/application-dev.yaml")
    assert shared["spec"]["source"]["path"] == "deploy/cameras/shards/dev/00"
    assert shared["metadata"]["annotations"]["vf.dev/shard"] == "00"
    root = _app(result, "argocd/root-dev.yaml")
    for number in others:
        app = _app(result, f"argocd/application-dev-shard-{number}.yaml")
        assert app["metadata"]["name"] == f"cameras-dev-shard-{number}"
        assert app["spec"]["source"] == {
            **shared["spec"]["source"],
            "path": f"deploy/cameras/shards/dev/{number}",
        }
        assert app["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"] == "1"
        assert " node" in app["metadata"]["annotations"]["vf.dev/shard-holds"]
        # the same policy, but the shared Application alone prunes only what says
        # Prune=true: the nodes it held before the shards are theirs to take (ADR 0238)
        options = shared["spec"]["syncPolicy"]["syncOptions"]
        assert options[-1] == "Prune=false"
        assert app["spec"]["syncPolicy"] == {
            **shared["spec"]["syncPolicy"],
            "syncOptions": options[:-1],
        }
        assert (
            f"application-dev-shard-{number}.yaml" in root["spec"]["source"]["directory"]["include"]
        )
        part = _app(result, f"flux/kustomization-dev-shard-{number}.yaml")
        assert part["spec"]["path"] == f"./deploy/cameras/shards/dev/{number}"
        assert part["spec"]["prune"] is True
        # no live shard waits for another: none takes another's nodes (ADR 0258)
        assert [d["name"] for d in part["spec"]["dependsOn"]] == [
            "cameras-dev-gitops",
            "cameras-dev-infra",
        ]
        assert part["spec"]["healthChecks"]
    workers = _app(result, "flux/kustomization-dev.yaml")  # applies after every shard
    assert [d["name"] for d in workers["spec"]["dependsOn"]] == [
        "cameras-dev-gitops",
        "cameras-dev-infra",
        *(f"cameras-dev-shard-{n}" for n in others),
    ]
    scaled = [
        p for p in result.tree if p.startswith("gitops/flux/") and p.endswith("-optional.yaml")
    ]
    assert any("-shard-" in p for p in scaled)  # ScaledObjects: apart, as ADR 202 wants
    infra = _app(result, "flux/kustomization-dev-infra.yaml")
    assert infra["spec"]["path"] == "./deploy/cameras/shards/dev/00"
    text = explain(result)
    count = len(result.objects["dev"])
    shards = len(numbers)
    assert f"dev: {count} objects, over 5: Argo CD and Flux read it in {shards} shards" in text
    readme = result.tree["README.md"]
    assert "`dev` has" in readme and "| `00` | what the workers share:" in readme
    assert "- `shards/<env>/<nn>/`:" in readme


def _bench_project(tmp: Path, n: int) -> Path:
    spec = importlib.util.spec_from_file_location("bench_compile", ROOT / "bench" / "compile.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    graph: Path = bench.write_project(tmp, n)
    config = graph.parent / "vf.yaml"
    config.write_text(config.read_text(encoding="utf-8") + GITOPS, encoding="utf-8")
    return graph


@pytest.mark.slow
def test_a_large_flow_is_sharded_within_every_limit(kubectl: str, tmp_path: Path) -> None:
    """1,100 nodes: past 1,000 objects per environment without lowering anything."""
    graph = _bench_project(tmp_path, 1100)
    result = _compile(graph, graph.parent / "vf.yaml")
    out = tmp_path / "tree"
    write_tree(out, result.tree)
    assert len(result.objects["dev"]) > shards_module.SHARD_OVER
    shards = _assert_exactly_the_overlay(out, "dev", kubectl)
    assert len(shards) == 1 + SHARD_BUCKETS  # 1,100 node objects: about 69 a shard
    for number, objs in shards.items():
        files = (out / "shards" / "dev" / number).iterdir()
        assert len(objs) <= SHARD_MAX_OBJECTS
        assert sum(f.stat().st_size for f in files) <= SHARD_MAX_BYTES
    apps = [p for p in result.tree if p.startswith("gitops/argocd/application-dev")]
    assert len(apps) == len(shards)
    assert not [p for p in result.tree if p.startswith("manifests/")]


def test_run_tree_reads_a_hash_as_kustomize_wrote_it(kubectl: str, tmp_path: Path) -> None:
    """A config hash kustomize writes is text to the API server; run-tree reads the same:
    ``1234567890``, ``12e4`` and ``0123`` are quoted by kustomize (Go's YAML would take
    them for numbers), ``765375e546887432`` is written bare since Go's float parse of it
    overflows, and stays text."""
    literals = ["1234567890", "12e4", "0123", "765375e546887432", "2456789245"]
    (tmp_path / "kustomization.yaml").write_text(
        "configMapGenerator:\n- name: cfg\n  literals: ["
        + ", ".join(f"h{i}={v}" for i, v in enumerate(literals))
        + "]\n"
    )
    built = kustomize_build(kubectl, tmp_path)
    assert "h3: 765375e546887432\n" in built  # bare, as Go's resolver leaves it text
    (config_map,) = parse_objects(built, source="kustomize")
    assert config_map["data"] == {f"h{i}": v for i, v in enumerate(literals)}
    assert str(config_map["metadata"]["name"]).startswith("cfg-")
