"""``vf teardown --superseded --tree`` keeps what the tree can deploy (on a real
nats-server, with the generation real ``helm`` renders for ``--set image.tag``), refuses a
tree of another flow, and keeps a superseded BATCH generation that has not finished
unless ``--unfinished`` names it."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from nats.js import JetStreamContext
from ruamel.yaml import YAML

from tests.runtime.opshelp import Servers, fresh_servers, stream_names, vf, with_js
from tests.support import example_graph
from vf.cli import cli
from vf_runtime.broker.naming import RunNames
from vf_runtime.broker.provision import RunTopology, provision
from vf_runtime.broker.topology import NodeTopology

FLOW = "batch-demo"  # examples/batch_pipeline
NODES = tuple(
    NodeTopology(
        name=name,
        parents=parents,
        replicas=1,
        partitioned=False,
        has_children=name != "sink",
        max_deliver=1,
    )
    for name, parents in (("src", ()), ("mid", ("src",)), ("sink", ("mid",)))
)


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[Servers]:
    yield from fresh_servers(tmp_path / "servers")


def _provision(url: str, run: str, generation: str, *, finished: bool) -> RunNames:
    """A BATCH generation's streams and durables; ``finished``: every producer's
    end-of-stream marker is stored and nothing is pending (what a done generation leaves)."""
    names = RunNames(FLOW, run, generation)

    async def body(js: JetStreamContext) -> None:
        topology = RunTopology(
            flow_id=FLOW, run_id=run, flow_type="batch", nodes=NODES, generation=generation
        )
        await provision(js, topology)
        if finished:
            for node in ("src", "mid"):
                await js.publish(names.eos_subject(node, replica=0), b"eos")

    with_js(url, body)
    return names


def _tree(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    out = tmp_path / "deploy"
    done = CliRunner().invoke(cli, ["compile", example_graph("batch_pipeline"), "--out", str(out)])
    assert done.exit_code == 0, done.output
    return out, json.loads((out / "plan" / "dev.json").read_text())


def _helm_generation(helm: str, tree: Path, tag: str) -> str:
    """The generation the chart deploys with ``--set image.tag=TAG`` (docs/gitops.md §7)."""
    chart = tree / "chart"
    args = ["template", "demo", str(chart), "-f", str(chart / "values-dev.yaml")]
    done = subprocess.run(
        [helm, *args, "--set", f"image.tag={tag}"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    found = {
        doc["data"]["VF_GENERATION"]
        for doc in YAML(typ="safe").load_all(done.stdout)
        if doc and doc.get("kind") == "ConfigMap" and "VF_GENERATION" in (doc.get("data") or {})
    }
    assert len(found) == 1, found
    return found.pop()


def _dry(url: str, tree: Path, *extra: str) -> Any:
    done = vf(
        "teardown", "--flow", FLOW, "--superseded", "--tree", str(tree), *extra,
        "--format", "json", nats_url=url,
    )  # fmt: skip
    assert done.code in (0, 2), done.err
    return done


def test_a_generation_the_chart_deploys_with_image_tag_is_kept(
    servers: Servers, tmp_path: Path, helm: str
) -> None:
    url = servers.nats.url
    tree, plan = _tree(tmp_path)
    tagged = _helm_generation(helm, tree, "1.4.2")
    assert tagged != plan["generation"]
    deployed = _provision(url, plan["run_id"], tagged, finished=False)
    old = _provision(url, "rold", "gold1", finished=True)
    dry = _dry(url, tree)
    removed = {(r["run"], r["generation"]) for r in dry.json()["runs"]}
    kept = {(r["run"], r["generation"]) for r in dry.json()["kept"]}
    print(f"[teardown image.tag] helm generation {tagged}: would remove {removed}, keep {kept}")
    assert removed == {(old.run_id, old.generation)}
    assert (deployed.run_id, deployed.generation) in kept
    done = vf(
        "teardown", "--flow", FLOW, "--superseded", "--tree", str(tree), "--yes", nats_url=url
    )
    assert done.code == 0, done.err
    assert deployed.stream("src") in stream_names(url)
    assert old.stream("src") not in stream_names(url)


def test_a_tree_of_another_flow_is_refused_and_nothing_is_removed(
    servers: Servers, tmp_path: Path
) -> None:
    url = servers.nats.url
    names = _provision(url, "rone", "gone1", finished=True)
    other = tmp_path / "other" / "plan"
    other.mkdir(parents=True)
    (other / "dev.json").write_text(json.dumps({"flow_id": "renamed", "run_id": "r1"}))
    done = vf(
        "teardown", "--flow", FLOW, "--superseded", "--tree", str(other.parent), "--yes",
        nats_url=url,
    )  # fmt: skip
    print(done.err)
    assert done.code == 2 and "error[VF_TEARDOWN_TREE]" in done.err
    assert f"deploys no run of flow {FLOW}" in done.err and "renamed" in done.err
    assert names.stream("src") in stream_names(url)


def test_an_unfinished_superseded_generation_is_kept_unless_named(
    servers: Servers, tmp_path: Path
) -> None:
    """Jobs in restart back-off or waiting for a node leave no live reader: without its
    terminators the generation may still run, so --superseded keeps it."""
    url = servers.nats.url
    tree, plan = _tree(tmp_path)
    _provision(url, plan["run_id"], plan["generation"], finished=False)
    waiting = _provision(url, "rwait", "gwait1", finished=False)
    done_one = _provision(url, "rdone", "gdone1", finished=True)
    runs = vf("runs", "--flow", FLOW, "--format", "json", nats_url=url).json()["runs"]
    states = {r["generation"]: r["state"] for r in runs}
    dry = _dry(url, tree)
    held = [(r["generation"], r["unfinished"]) for r in dry.json()["held"]]
    print(f"[teardown unfinished] states {states}; held {held}")
    assert states["gwait1"] == "idle" and states["gdone1"] == "finished"
    assert [r["generation"] for r in dry.json()["runs"]] == ["gdone1"]
    assert held == [("gwait1", "2 of 2 stream(s) hold no end-of-stream marker yet")]
    text = vf("teardown", "--flow", FLOW, "--superseded", "--tree", str(tree), nats_url=url)
    assert "Pass --unfinished gwait1 to remove it" in text.out
    typo = vf(
        "teardown", "--flow", FLOW, "--superseded", "--tree", str(tree),
        "--unfinished", "gwiat1", "--yes", nats_url=url,
    )  # fmt: skip
    assert typo.code == 2 and "error[VF_TEARDOWN_ARGS]" in typo.err and "gwiat1" in typo.err
    assert waiting.stream("src") in stream_names(url), "a mistyped --unfinished removed something"
    named = vf(
        "teardown", "--flow", FLOW, "--superseded", "--tree", str(tree),
        "--unfinished", "gwait1", "--yes", nats_url=url,
    )  # fmt: skip
    assert named.code == 0, named.err
    left = stream_names(url)
    assert waiting.stream("src") not in left and done_one.stream("src") not in left
    assert RunNames(FLOW, plan["run_id"], plan["generation"]).stream("src") in left
