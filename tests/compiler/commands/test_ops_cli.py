"""The operator commands are on ``vf`` with their help, and refuse bad requests by name
before touching any broker."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from vf.cli import cli

HELP = {
    ("dlq", "ls"): ("--flow", "--run", "--node", "--code", "--limit", "--nats", "--format"),
    ("dlq", "show"): ("ID", "--redis", "--nats", "--format"),
    ("dlq", "replay"): ("--yes", "--dry-run", "--redis", "--limit"),
    ("dlq", "purge"): ("--flow", "--run", "--yes"),
    ("runs",): ("--flow", "--nats", "--timeout", "--format"),
    ("teardown",): ("--run", "--superseded", "--tree", "--yes", "--force", "--generation"),
    ("debug", "decode"): ("FILE|-", "--dlq", "--encoding", "--redis"),
}


@pytest.mark.parametrize("command", sorted(HELP), ids=" ".join)
def test_every_operator_command_has_help(command: tuple[str, ...]) -> None:
    done = CliRunner().invoke(cli, [*command, "--help"])
    assert done.exit_code == 0, done.output
    for option in HELP[command]:
        assert option in done.output, option


def test_the_top_level_help_lists_them() -> None:
    done = CliRunner().invoke(cli, ["--help"])
    for name in ("dlq", "runs", "teardown", "debug"):
        assert f"  {name} " in done.output, name


def test_a_command_without_its_broker_says_so() -> None:
    done = CliRunner(env={"VF_NATS_URL": None}).invoke(cli, ["runs", "--flow", "f"])
    assert done.exit_code == 2 and "--nats" in done.output


def test_a_malformed_dead_letter_id_is_named_before_connecting() -> None:
    done = CliRunner().invoke(cli, ["dlq", "show", "nocolon", "--nats", "nats://127.0.0.1:1"])
    assert done.exit_code == 2 and "error[VF_DLQ_ID]" in done.output
