"""The admission planner: every rule table-tested, every profile validation refused by name."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.graph_sources import NODES
from vf.cli import cli

GRAPH_TEMPLATE = (
    NODES
    + """

def build_flow():
    src = Src(name="src")
    work = Work(name="work")(src)
    return Flow([Sink(name="sink", delivery=DELIVERY)(work)], flow_type=FLOW_TYPE)
"""
)


def _graph(flow_type: str = "BATCH", delivery: str = "None") -> str:
    return GRAPH_TEMPLATE.replace("FLOW_TYPE", flow_type).replace("DELIVERY", delivery)


def _env(body: str) -> str:
    lines = "".join(f"    {line}\n" for line in body.strip("\n").splitlines())
    return "environments:\n  dev:\n    images:\n      default: r.io/a:1\n" + lines


def _run(
    write_graph: Callable[..., Path],
    graph: str,
    config: str,
    *flags: str,
    command: str = "validate",
) -> tuple[int, str]:
    path = write_graph(graph, config)
    result = CliRunner().invoke(cli, [command, str(path), *flags])
    return result.exit_code, result.output


ADMITTED = [
    ("batch on dev broker, no store", "BATCH", "None", "broker: {profile: dev}"),
    ("batch on dev broker and dev store", "BATCH", "None", "payload_store: {profile: dev}"),
    ("batch on durable store", "BATCH", "None", "payload_store: {profile: durable}"),
    ("realtime on dev", "REALTIME", "None", "broker: {profile: dev}"),
    ("realtime with cache store", "REALTIME", "None", "payload_store: {profile: cache}"),
    (
        "tolerated failure on durable everything",
        "BATCH",
        "None",
        "broker: {profile: durable}\npayload_store: {profile: durable}\n"
        "requirements: {tolerated_failures: 1}",
    ),
    (
        "restart safe with a durable store",
        "BATCH",
        "None",
        "payload_store: {profile: dev}\nrequirements: {restart_safe: true}",
    ),
    (
        "durable control on a durable store",
        "BATCH",
        "None",
        "payload_store: {profile: durable}\nrequirements: {profiles: {work: durable_control}}",
    ),
    (
        "replay archive on a durable broker",
        "BATCH",
        "None",
        "broker: {profile: durable}\nrequirements: {profiles: {src: replay_archive}}",
    ),
    (
        "external broker with declared capabilities",
        "BATCH",
        "None",
        "broker:\n  profile: external\n  url: nats://nats.shared:4222\n  capabilities:\n"
        "    retained_backlog: true\n    recoverable_delivery: true\n"
        "    max_payload_bytes: 8388608",
    ),
]


@pytest.mark.parametrize(
    ("label", "flow", "delivery", "env"), ADMITTED, ids=[a[0] for a in ADMITTED]
)
def test_admitted(
    label: str, flow: str, delivery: str, env: str, write_graph: Callable[..., Path]
) -> None:
    code, output = _run(write_graph, _graph(flow, delivery), _env(env))
    assert code == 0, output


REJECTED = [
    ("batch on an evictable cache", "BATCH", "None", "payload_store: {profile: cache}", "eviction"),
    (
        "realtime cannot carry reliable_work",
        "REALTIME",
        "DeliveryPolicy(delivery='at-least-once')",
        "",
        "REALTIME flow's streams",
    ),
    (
        "batch cannot carry live_latest",
        "BATCH",
        "DeliveryPolicy(delivery='best-effort')",
        "",
        "BATCH flow's streams",
    ),
    (
        "exactly once effects",
        "BATCH",
        "None",
        "requirements: {exactly_once_effects: true}",
        "idempotent sink",
    ),
    (
        "tolerated failures on a dev broker",
        "BATCH",
        "None",
        "requirements: {tolerated_failures: 1}",
        "persistent storage",
    ),
    (
        "replication too low for two failures",
        "BATCH",
        "None",
        "broker: {profile: durable}\nrequirements: {tolerated_failures: 2}",
        "needs >= 5",
    ),
    (
        "tolerated failures with a store on an emptyDir",
        "BATCH",
        "None",
        "broker: {profile: durable}\npayload_store: {profile: dev}\n"
        "requirements: {tolerated_failures: 1}",
        "payload store's persistent storage",
    ),
    (
        "restart safe without a store",
        "BATCH",
        "None",
        "requirements: {restart_safe: true}",
        "runtime store's durability",
    ),
    (
        "durable control without a store",
        "BATCH",
        "None",
        "requirements: {profiles: {work: durable_control}}",
        "runtime store's durability",
    ),
    (
        "replay archive on a dev broker",
        "BATCH",
        "None",
        "requirements: {profiles: {src: replay_archive}}",
        "archive",
    ),
    (
        "explicit profile on an external broker with undeclared capabilities",
        "BATCH",
        "None",
        "broker: {profile: external, url: 'nats://x:4222'}\n"
        "requirements: {profiles: {work: reliable_work}}",
        "was required explicitly",
    ),
]


@pytest.mark.parametrize(
    ("label", "flow", "delivery", "env", "reason"), REJECTED, ids=[r[0] for r in REJECTED]
)
def test_rejected(
    label: str, flow: str, delivery: str, env: str, reason: str, write_graph: Callable[..., Path]
) -> None:
    code, output = _run(write_graph, _graph(flow, delivery), _env(env))
    assert code == 2, output
    assert "error[VF_ADMISSION_REJECTED]" in output
    assert reason in output


def test_unknown_capabilities_only_warn_without_an_explicit_request(
    write_graph: Callable[..., Path],
) -> None:
    env = _env("broker: {profile: external, url: 'nats://x:4222'}")
    code, output = _run(write_graph, _graph(), env, command="explain")
    assert code == 0, output
    assert (
        "warning: channel work: reliable_work: the broker's retained backlog is unknown" in output
    )


def test_require_profile_flag_makes_unknown_fatal(write_graph: Callable[..., Path]) -> None:
    env = _env("broker: {profile: external, url: 'nats://x:4222'}")
    code, output = _run(write_graph, _graph(), env, "--require-profile", "work=reliable_work")
    assert code == 2
    assert "was required explicitly (--require-profile)" in output


def test_explain_shows_rejections_and_exits_2(write_graph: Callable[..., Path]) -> None:
    code, output = _run(
        write_graph, _graph(), _env("payload_store: {profile: cache}"), command="explain"
    )
    assert code == 2
    assert "rejected: channel src: reliable_work: the payload store's eviction" in output


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--require-profile", "work"], "malformed"),
        (["--require-profile", "work=fastest"], "unknown profile"),
        (["--require-profile", "ghost=reliable_work"], "is not a node of the flow"),
        (["--require-profile", "sink=reliable_work"], "is a consumer"),
        (
            ["--require-profile", "work=reliable_work", "--require-profile", "work=reliable_work"],
            "named twice",
        ),
    ],
)
def test_bad_profile_requests(
    flags: list[str], message: str, write_graph: Callable[..., Path]
) -> None:
    code, output = _run(write_graph, _graph(), _env(""), *flags)
    assert code == 2
    assert "error[VF_CONFIG_PROFILE_REQUEST]" in output
    assert message in output


def test_channel_named_in_config_and_flag(write_graph: Callable[..., Path]) -> None:
    env = _env("requirements: {profiles: {work: reliable_work}}")
    code, output = _run(write_graph, _graph(), env, "--require-profile", "work=reliable_work")
    assert code == 2
    assert "named twice" in output


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ("broker: {profile: durable, replicas: 4}", "cannot elect a leader"),
        ("broker: {profile: durable, replicas: 3, stream_replicas: 5}", "5 stream replicas on 3"),
        ("broker: {profile: dev, replicas: 3}", "applies only to profile durable"),
        ("broker: {profile: dev, storage_class: fast}", "applies only to profile durable"),
        ("broker: {profile: external}", "exactly one of url or url_secret"),
        ("broker: {profile: dev, url: 'nats://x:4222'}", "applies only to profile external"),
        ("payload_store: {profile: dev, storage_size: 5Gi}", "applies only to profile durable"),
        ("payload_store: {profile: external}", "exactly one of url or url_secret"),
    ],
)
def test_profile_validation(env: str, message: str, write_graph: Callable[..., Path]) -> None:
    code, output = _run(write_graph, _graph(), _env(env))
    assert code == 2
    assert "error[VF_CONFIG_PROFILE]" in output
    assert message in output


@pytest.mark.parametrize(
    ("flow", "store", "warned"),
    [
        ("BATCH", "dev", True),  # 2 streams x 10,000 x 512 KiB = 9.8 GiB > 4 GiB
        ("BATCH", "durable", True),
        ("BATCH", "none", False),  # nothing is offloaded
        ("REALTIME", "dev", False),  # one message per stream: 1 MiB
    ],
)
def test_streams_that_can_outgrow_the_store_are_a_named_warning(
    flow: str, store: str, warned: bool, write_graph: Callable[..., Path]
) -> None:
    """ADR 0208: the shipped store's maxmemory (4 GiB) against what the streams can hold in
    offloaded payloads; the plan and vf explain say so by name."""
    env = _env(f"payload_store: {{profile: {store}}}")
    code, output = _run(write_graph, _graph(flow), env, command="explain")
    assert code == 0, output
    line = (
        "warning: payload_store: warning[VF_ADMISSION_STORE_SIZE] 2 streams can keep "
        "10,000 messages each"
    )
    assert (line in output) is warned, output
    if warned:
        assert "at least 9.8 GiB, more than the store's maxmemory of 4.0 GiB" in output
