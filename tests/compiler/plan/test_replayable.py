"""A BATCH producer not declared replayable, upstream of an idempotent consumer, is a named
plan warning, and a run where it restarted never ends as a success (ADR 0215)."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.graph_sources import NODES
from vf.cli import cli
from vf_runtime.local.deadletters import DeadLetterReport
from vf_runtime.local.outcome import exit_code, replayed_producers, settled

GRAPH = (
    NODES
    + """

class Replayed(Src):
    replayable = True


def build_flow():
    src = SOURCE(name="src")
    other = Src(name="other")
    work = Work(name="work")(src)
    sink = Sink(name="sink", idempotent=IDEMPOTENT)(work)
    return Flow([sink, Sink(name="log")(other)], flow_type=FLOW_TYPE)
"""
)
CONFIG = "environments:\n  dev:\n    images:\n      default: r.io/a:1\n"
WARNING = "producer 'src': warning[VF_PRODUCER_NOT_REPLAYABLE]"


def _graph(*, source: str = "Src", idempotent: bool = True, flow_type: str = "BATCH") -> str:
    return (
        GRAPH.replace("SOURCE", source)
        .replace("IDEMPOTENT", str(idempotent))
        .replace("FLOW_TYPE", flow_type)
    )


@pytest.mark.parametrize(
    ("source", "idempotent", "flow_type", "warned"),
    [
        ("Src", True, "BATCH", True),
        ("Replayed", True, "BATCH", False),  # re-emits the same ids: de-duplicated
        ("Src", False, "BATCH", False),  # at-least-once was all the sink asked for
        ("Src", True, "REALTIME", False),  # nothing is promised past the freshest item
    ],
)
def test_a_producer_not_replayable_before_an_idempotent_sink_is_warned(
    source: str,
    idempotent: bool,
    flow_type: str,
    warned: bool,
    write_graph: Callable[..., Path],
    tmp_path: Path,
) -> None:
    path = write_graph(_graph(source=source, idempotent=idempotent, flow_type=flow_type), CONFIG)
    explained = CliRunner().invoke(cli, ["explain", str(path)])
    assert explained.exit_code == 0, explained.output
    assert (f"warning: {WARNING}" in explained.output) is warned, explained.output
    assert "producer 'other'" not in explained.output  # it reaches no idempotent consumer
    out = tmp_path / "out"
    compiled = CliRunner().invoke(cli, ["compile", str(path), "--out", str(out)])
    assert compiled.exit_code == 0, compiled.output
    plan = json.loads((out / "plan" / "dev.json").read_text())
    assert plan.get("unreplayable_producers") == (["src"] if warned else None)
    assert any(WARNING in w for w in plan["warnings"]) is warned


NONE = DeadLetterReport(nodes=())


def test_a_restarted_unreplayable_producer_is_its_own_outcome_never_a_success() -> None:
    out = io.StringIO()
    replayed = replayed_producers(["src"], {"src": 1, "work": 2}, out=out)
    assert replayed == ("src",)
    assert "warning[VF_PRODUCER_NOT_REPLAYABLE] producer src restarted 1 time(s)" in (
        out.getvalue()
    )
    assert settled("ok", NONE, replayed=replayed) == "replayed"
    assert exit_code("replayed") == 9
    # a producer that did not restart, or one not listed, changes nothing
    assert replayed_producers(["src"], {"src": 0, "work": 2}, out=out) == ()
    assert settled("ok", NONE, replayed=()) == "ok"
    # a worse outcome keeps its own code
    assert settled("lost", NONE, replayed=replayed) == "lost"
