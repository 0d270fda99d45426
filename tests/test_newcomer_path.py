"""What a new user meets when a config is refused: the file they passed (``--config``) and
its line, each rejected channel once with values written as in vf.yaml, and the profile
that fixes it."""

from __future__ import annotations

import shutil
from pathlib import Path

from click.testing import CliRunner

from tests.support import example_graph
from vf.cli import cli

SOURCE = Path(example_graph("batch_pipeline")).parent


def _project(tmp_path: Path, change: tuple[str, str]) -> Path:
    folder = tmp_path / "project"
    shutil.copytree(SOURCE, folder)
    config = folder / "vf.yaml"
    text = config.read_text()
    assert change[0] in text
    (folder / "vf-tight.yaml").write_text(text.replace(*change))
    config.unlink()
    return folder


def _compile(folder: Path, tmp_path: Path) -> tuple[int, str]:
    config = str(folder / "vf-tight.yaml")
    out = str(tmp_path / "out")
    argv = ["compile", str(folder / "graph.py"), "--config", config, "--env", "dev", "--out", out]
    done = CliRunner().invoke(cli, argv)
    return done.exit_code, done.output


def test_a_planner_error_names_the_config_file_given_and_its_line(tmp_path: Path) -> None:
    folder = _project(tmp_path, ("      double: 1\n", "      double: 1\n      record-reader: 2\n"))
    code, output = _compile(folder, tmp_path)
    print(output)
    line = folder.joinpath("vf-tight.yaml").read_text().splitlines().index("      record-reader: 2")
    assert code == 2 and "error[VF_CONFIG_REPLICAS]" in output
    assert f"--> vf-tight.yaml:{line + 1} (environment 'dev')" in output


def test_admission_errors_say_each_channel_once_in_yaml_terms_with_the_fix(tmp_path: Path) -> None:
    folder = _project(
        tmp_path,
        ("    payload_store:\n      profile: dev\n", "    payload_store:\n      profile: cache\n"),
    )
    code, output = _compile(folder, tmp_path)
    print(output)
    errors = [line for line in output.splitlines() if line.startswith("error[")]
    channels = [line.split(": ", 1)[0] for line in errors]
    assert code == 2 and errors and len(channels) == len(set(channels)), errors
    assert "is False" not in output and "is True" not in output
    assert "durability is false" in output and "is true" in output
    assert "set payload_store.profile to dev or durable" in output
