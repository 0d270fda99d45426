"""The output tree under attack: planted links, concurrent writers, a killed swap."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.conftest import example_graph
from vf.cli import cli

GRAPH = example_graph("batch_pipeline")
SECRET = "ci-token-5f3a9c"


def _invoke(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), env=env)
    return result.exit_code, result.output


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    out = tmp_path / "deploy"
    code, output = _invoke("compile", GRAPH, "--out", str(out))
    assert code == 0, output
    return out


def _secret_file(tmp_path: Path) -> Path:
    secret = tmp_path / "secret.env"
    secret.write_text(f"TOKEN={SECRET}\n")
    return secret


def _link_file(out: Path, tmp: Path) -> None:
    target = out / "plan" / "dev.json"
    target.unlink()
    target.symlink_to(_secret_file(tmp))


def _link_environ(out: Path, tmp: Path) -> None:
    target = out / "plan" / "dev.json"
    target.unlink()
    target.symlink_to("/proc/self/environ")


def _link_folder(out: Path, tmp: Path) -> None:
    elsewhere = tmp / "elsewhere"
    elsewhere.mkdir()
    for name in os.listdir(out / "plan"):
        (elsewhere / name).write_text(f"TOKEN={SECRET}\n")
        os.unlink(out / "plan" / name)
    os.rmdir(out / "plan")
    (out / "plan").symlink_to(elsewhere)


def _link_manifest(out: Path, tmp: Path) -> None:
    (out / ".vf-manifest.json").unlink()
    (out / ".vf-manifest.json").symlink_to(_secret_file(tmp))


def _fifo(out: Path, tmp: Path) -> None:
    target = out / "plan" / "dev.json"
    target.unlink()
    os.mkfifo(target)


PLANTS: dict[str, Callable[[Path, Path], None]] = {
    "link to a file": _link_file,
    "link to /proc/self/environ": _link_environ,
    "link to a folder": _link_folder,
    "linked manifest": _link_manifest,
    "fifo": _fifo,
}
READERS = {
    "check": lambda out: ("compile", GRAPH, "--out", str(out), "--check"),
    "diff": lambda out: ("diff", GRAPH, "--out", str(out), "--raw"),
}


@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_a_link_planted_at_an_owned_path_is_refused_unread(
    tree: Path, tmp_path: Path, plant: str, reader: str
) -> None:
    PLANTS[plant](tree, tmp_path)
    code, output = _invoke(*READERS[reader](tree), env={"VF_CI_TOKEN": SECRET})
    assert SECRET not in output
    assert code == 2, output
    assert "error[VF_OUTPUT_NOT_REGULAR]" in output


def test_a_non_utf8_committed_file_is_a_named_error(tree: Path) -> None:
    (tree / "plan" / "dev.json").write_bytes(b'{"a": "\xff\xfe"}\n')
    for reader in sorted(READERS):
        code, output = _invoke(*READERS[reader](tree))
        assert code == 2, output
        assert "error[VF_OUTPUT_NOT_UTF8]" in output and "plan/dev.json" in output
