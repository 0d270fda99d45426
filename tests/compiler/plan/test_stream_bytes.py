"""Each BATCH stream's byte limit is a share of the durable broker's store (ADR 0232):
the compiler sets ``VF_STREAM_MAX_BYTES`` for the provision Job and the workers (the broker
ConfigMap both read), records it in the plan and ``vf explain`` states it; an external
broker gets one only from vf.yaml, and a share below one replica's in-flight window is a
named error."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from ruamel.yaml import YAML

from tests.graph_sources import NODES
from vf.cli import cli

MIB = 1024 * 1024
GRAPH = (
    NODES
    + """

def build_flow():
    src = Src(name="src")
    work = Work(name="work")(src)
    sink = Sink(name="sink")(work)
    return Flow([sink], flow_type=FLOW_TYPE)
"""
)  # two streams: src's and work's


def _config(broker: str) -> str:
    return f"environments:\n  prod:\n    images:\n      default: r.io/a:1\n    broker: {broker}\n"


def _compile(
    write_graph: Callable[..., Path], tmp_path: Path, broker: str, flow_type: str = "BATCH"
) -> tuple[dict[str, Any], dict[str, str], str]:
    """The plan, the broker ConfigMap's data and ``vf explain``'s text."""
    path = write_graph(GRAPH.replace("FLOW_TYPE", flow_type), _config(broker))
    out = tmp_path / "out"
    compiled = CliRunner().invoke(cli, ["compile", str(path), "--out", str(out)])
    assert compiled.exit_code == 0, compiled.output
    plan = json.loads((out / "plan" / "prod.json").read_text())
    name = plan["broker_configmap"]
    found = list((out / "overlays" / "prod").rglob(f"configmap-{name}.yaml"))
    assert len(found) == 1, found
    data = YAML(typ="safe").load(found[0].read_text())["data"]
    explained = CliRunner().invoke(cli, ["explain", str(path)])
    assert explained.exit_code == 0, explained.output
    return plan, data, explained.output


def test_a_durable_brokers_batch_streams_share_its_store(
    write_graph: Callable[..., Path], tmp_path: Path
) -> None:
    """10Gi: max_file_store 9216 MiB, two streams, five shares: 1843 MiB each."""
    plan, data, explained = _compile(write_graph, tmp_path, "{profile: durable}")
    share = 9216 * MIB // 5 // MIB * MIB
    assert plan["infra"]["stream_bytes"] == {
        "max_bytes": share,
        "source": "volume",
        "streams": 2,
        "max_file_store": 9216 * MIB,
        "shares": 5,
    }
    assert data["VF_STREAM_MAX_BYTES"] == str(share)
    assert "each of 2 BATCH stream(s) holds at most 1843 MiB" in explained
    assert "max_file_store of 9216 MiB in 5 shares" in explained


@pytest.mark.parametrize(
    ("broker", "flow_type"),
    [
        ("{profile: external, url: 'nats://nats.example:4222'}", "BATCH"),
        ("{profile: dev}", "BATCH"),  # its emptyDir has no size to follow
        ("{profile: durable}", "REALTIME"),  # one message per subject, no backlog
    ],
)
def test_no_share_where_vf_does_not_size_the_store(
    write_graph: Callable[..., Path], tmp_path: Path, broker: str, flow_type: str
) -> None:
    plan, data, explained = _compile(write_graph, tmp_path, broker, flow_type)
    assert "stream_bytes" not in plan["infra"]
    assert "VF_STREAM_MAX_BYTES" not in data
    assert "stream bytes:" not in explained


def test_an_external_broker_takes_the_limit_vf_yaml_gives(
    write_graph: Callable[..., Path], tmp_path: Path
) -> None:
    broker = "{profile: external, url: 'nats://nats.example:4222', stream_max_bytes: 64Mi}"
    plan, data, explained = _compile(write_graph, tmp_path, broker)
    assert plan["infra"]["stream_bytes"] == {
        "max_bytes": 64 * MIB,
        "source": "vf.yaml",
        "streams": 2,
    }
    assert data["VF_STREAM_MAX_BYTES"] == str(64 * MIB)
    assert "holds at most 64 MiB (VF_STREAM_MAX_BYTES), from broker.stream_max_bytes" in explained


@pytest.mark.parametrize(
    ("broker", "fix"),
    [
        # 150Mi: 135 MiB in 5 shares is 27 MiB, below 32 MiB; 5 * 32 MiB / 0.9 is 178 MiB
        ("{profile: durable, storage_size: 150Mi}", "grow broker.storage_size to at least 178Mi"),
        (
            "{profile: external, url: 'nats://n:4222', stream_max_bytes: 16Mi}",
            "set broker.stream_max_bytes to at least 32Mi",
        ),
    ],
)
def test_a_share_below_a_replicas_in_flight_window_is_refused_by_name(
    write_graph: Callable[..., Path], tmp_path: Path, broker: str, fix: str
) -> None:
    path = write_graph(GRAPH.replace("FLOW_TYPE", "BATCH"), _config(broker))
    compiled = CliRunner().invoke(cli, ["compile", str(path), "--out", str(tmp_path / "out")])
    assert compiled.exit_code != 0
    assert "error[VF_STREAM_SHARE_TOO_SMALL]" in compiled.output, compiled.output
    assert "32 MiB (64 in-flight messages at the 512 KiB inline limit)" in compiled.output
    assert fix in compiled.output, compiled.output


def test_the_suggested_volume_gives_the_smallest_share() -> None:
    """The size the error names is enough, and one MiB less is not."""
    from vf.plan.streambytes import MIN_STREAM_BYTES, file_store_bytes, stream_shares

    for streams in (1, 2, 7, 40):
        shares = stream_shares(streams)
        need = -(-(MIN_STREAM_BYTES // MIB) * shares * 10 // 9)
        fits = file_store_bytes(f"{need}Mi")
        short = file_store_bytes(f"{need - 1}Mi")
        assert fits is not None and short is not None
        assert fits // shares // MIB * MIB >= MIN_STREAM_BYTES
        assert short // shares // MIB * MIB < MIN_STREAM_BYTES
