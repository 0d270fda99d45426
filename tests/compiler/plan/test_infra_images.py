"""The servers vf runs for an environment that keeps data are pinned by digest, or `vf
compile` says which key to set (ADR 0239); a reference with a malformed digest is refused by
name."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.compiler.plan.test_stream_bytes import GRAPH
from vf.cli import cli
from vf.config.servers import NATS_IMAGE, STORE_IMAGE

DIGEST = "sha256:" + "0123456789abcdef" * 4
WORKER = f"r.io/a@{DIGEST}"  # the node images pinned: only the servers' are in question


def _config(broker: str, store: str) -> str:
    return (
        f"environments:\n  prod:\n    images:\n      default: {WORKER}\n"
        f"    broker: {broker}\n    payload_store: {store}\n"
    )


def _compile(write_graph: Callable[..., Path], tmp_path: Path, config: str) -> tuple[int, str]:
    path = write_graph(GRAPH.replace("FLOW_TYPE", "BATCH"), config)
    done = CliRunner().invoke(cli, ["compile", str(path), "--out", str(tmp_path / "out")])
    return done.exit_code, done.stderr


def test_compile_names_the_key_of_each_unpinned_server_of_a_durable_environment(
    write_graph: Callable[..., Path], tmp_path: Path
) -> None:
    code, stderr = _compile(
        write_graph, tmp_path, _config("{profile: durable}", "{profile: durable}")
    )
    assert code == 0, stderr
    warnings = [line for line in stderr.splitlines() if line.startswith("warning (prod)")]
    assert (
        f"warning (prod): broker.image {NATS_IMAGE} is not pinned by digest: set broker.image "
        f"to {NATS_IMAGE}@sha256:<the digest your registry gives for it> (docs/security.md)"
    ) in warnings, stderr
    assert any(
        line.startswith(f"warning (prod): payload_store.image {STORE_IMAGE} is not pinned")
        for line in warnings
    ), stderr


@pytest.mark.parametrize(
    ("broker", "store"),
    [
        (f"{{profile: durable, image: 'nats:2.15.1-alpine@{DIGEST}'}}", "{profile: none}"),
        ("{profile: dev}", "{profile: dev}"),  # made to try a flow: nothing kept
        ("{profile: external, url: 'nats://nats.example:4222'}", "{profile: none}"),
    ],
)
def test_pinned_dev_or_external_servers_are_not_warned_about(
    write_graph: Callable[..., Path], tmp_path: Path, broker: str, store: str
) -> None:
    code, stderr = _compile(write_graph, tmp_path, _config(broker, store))
    assert code == 0, stderr
    assert "not pinned by digest" not in stderr


def test_a_server_image_with_a_malformed_digest_is_refused_by_name(
    write_graph: Callable[..., Path], tmp_path: Path
) -> None:
    config = _config(
        "{profile: durable, image: 'nats:2.15.1-alpine@sha256:abc'}", "{profile: none}"
    )
    code, stderr = _compile(write_graph, tmp_path, config)
    assert code == 2, stderr
    assert "error[VF_CONFIG_SCHEMA] environments.prod.broker.image" in stderr
