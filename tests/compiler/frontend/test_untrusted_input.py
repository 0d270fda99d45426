"""Text vf did not write is read within bounds: nesting without end, a FIFO, a link to a
device or an endless file is a named error (exit 2) or a note, never VF_INTERNAL, a hang
or all the memory. Covers vf debug decode, vf.yaml, component descriptors, the file
vf inventory merges into, a committed tree's plans and manifest, and vf teardown --tree."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.support import example_graph
from vf.cli import cli
from vf.commands.inventory.read import ClusterInventory
from vf.commands.inventory.write import merged_text
from vf.errors import VfError
from vf.ir.capabilities import Known
from vf.textio.safe_read import Unreadable, load_json

VF = str(Path(sys.executable).with_name("vf"))
DEEP = {"lists": "[" * 200_000, "objects": '{"a":' * 5_000}


def _invoke(*args: str, stdin: bytes | None = None) -> tuple[int, str]:
    done = CliRunner().invoke(cli, list(args), input=stdin)
    return done.exit_code, done.output


def _named(code: int, output: str, error: str) -> None:
    assert code == 2, output
    assert f"error[{error}]" in output and "VF_INTERNAL" not in output, output


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def _apart(*args: str) -> subprocess.CompletedProcess[str]:
    """``vf ARGS`` in its own process, under a memory cap and a time limit."""
    return subprocess.run(
        [VF, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        preexec_fn=_limited,
        env={**os.environ, "VF_DEBUG": ""},
    )


@pytest.mark.parametrize("shape", sorted(DEEP))
@pytest.mark.parametrize("encoding", ["auto", "json"])
def test_decode_of_deeply_nested_json_is_a_named_error(shape: str, encoding: str) -> None:
    code, output = _invoke(
        "debug", "decode", "-", "--encoding", encoding, stdin=DEEP[shape].encode()
    )
    print(output[:400])
    _named(code, output, "VF_DECODE_INPUT" if encoding == "json" else "VF_WIRE_DECODE")


@pytest.mark.parametrize(
    "text",
    [
        DEEP["objects"],  # Python 3.13 parses all 5,000 levels and stops at the end
        "[" * 300,  # deeper than vf reads, shallower than any Python's recursion limit
        '{"a": "}}}}", "b": ' * 300,  # brackets in strings are not nesting
    ],
)
@pytest.mark.parametrize("kind", [str, str.encode])
def test_json_cut_short_below_the_depth_vf_reads_is_said_to_nest_too_deeply(
    text: str, kind: Any
) -> None:
    with pytest.raises(Unreadable, match=r"^JSON nested deeper than the 200 levels vf reads$"):
        load_json(kind(text))


@pytest.mark.parametrize("text", ['["' + "[" * 300, '[{"a": 1}' * 150 + "x"])
def test_json_cut_short_that_nests_within_bounds_is_not_json(text: str) -> None:
    with pytest.raises(Unreadable, match=r"^not JSON"):
        load_json(text)


def test_decode_of_an_endless_file_stops_at_its_bound(tmp_path: Path) -> None:
    (tmp_path / "zero").symlink_to("/dev/zero")
    done = _apart("debug", "decode", str(tmp_path / "zero"))
    _named(done.returncode, done.stderr, "VF_DECODE_INPUT")
    assert "more than" in done.stderr


def _project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    shutil.copytree(Path(example_graph("batch_pipeline")).parent, folder)
    return folder


def test_a_fifo_vf_yaml_is_a_named_error(tmp_path: Path) -> None:
    folder = _project(tmp_path)
    (folder / "vf.yaml").unlink()
    os.mkfifo(folder / "vf.yaml")
    done = _apart("compile", str(folder / "graph.py"), "--out", str(tmp_path / "out"))
    _named(done.returncode, done.stderr, "VF_CONFIG_SYNTAX")
    assert "FIFO" in done.stderr


def test_a_fifo_component_descriptor_is_a_named_error_not_a_hang(tmp_path: Path) -> None:
    folder = tmp_path / "comp"
    folder.mkdir()
    os.mkfifo(folder / "component.yaml")
    graph = tmp_path / "graph.py"
    graph.write_text(
        "from vf import BATCH, Flow, component\n\n\n"
        "def build_flow() -> Flow:\n"
        "    return Flow([component('comp/component.yaml')], flow_type=BATCH)\n"
    )
    done = _apart("validate", str(graph))
    assert done.returncode == 2 and "VF_INTERNAL" not in done.stderr, done.stderr
    assert "error[VF_COMPONENT_NOT_FOUND]" in done.stderr or "FIFO" in done.stderr


@pytest.mark.parametrize("text", ["a: " * 1 + "[" * 5_000, "&a [*a]"])
def test_the_file_inventory_merges_into_is_read_within_bounds(tmp_path: Path, text: str) -> None:
    config = tmp_path / "vf.yaml"
    config.write_text(text)
    seen = ClusterInventory(
        context="lab",
        nodes=(),
        kubernetes_version=Known("1.34"),
        device_classes=Known(()),
        notes=(),
    )
    with pytest.raises(VfError) as caught:
        merged_text(config, environment="dev", inventory=seen)
    assert caught.value.code in ("VF_CONFIG_SYNTAX", "VF_CONFIG_ALIASES"), caught.value


def _tree(tmp_path: Path) -> Path:
    out = tmp_path / "deploy"
    assert _invoke("compile", example_graph("batch_pipeline"), "--out", str(out))[0] == 0
    return out


@pytest.mark.parametrize("shape", sorted(DEEP))
def test_a_committed_plan_nested_without_end_is_a_named_error(tmp_path: Path, shape: str) -> None:
    out = _tree(tmp_path)
    (out / "plan" / "dev.json").write_text(DEEP[shape])
    code, output = _invoke("diff", example_graph("batch_pipeline"), "--out", str(out))
    print(output[:400])
    _named(code, output, "VF_DIFF_TREE")


def test_a_manifest_nested_without_end_makes_the_folder_not_vfs(tmp_path: Path) -> None:
    out = _tree(tmp_path)
    (out / ".vf-manifest.json").write_text(DEEP["lists"])
    code, output = _invoke("compile", example_graph("batch_pipeline"), "--out", str(out))
    print(output[:400])
    assert code == 2 and "VF_INTERNAL" not in output and "error[VF_OUTPUT" in output, output


def test_teardown_reads_a_tree_within_bounds(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "plan").mkdir(parents=True)
    (tree / "plan" / "dev.json").write_text(DEEP["lists"])
    (tree / "plan" / "prod.json").symlink_to("/dev/zero")
    args = ("teardown", "--flow", "f", "--superseded", "--tree", str(tree))
    done = _apart(*args, "--nats", "nats://127.0.0.1:1", "--timeout", "2")
    _named(done.returncode, done.stderr, "VF_TEARDOWN_TREE")
    assert json.dumps("dev.json")[1:-1] in done.stderr


def test_a_committed_chart_yaml_nested_without_end_is_a_named_error(tmp_path: Path) -> None:
    out = _tree(tmp_path)
    (out / "chart" / "Chart.yaml").write_text("a: " + "[" * 100_000)
    code, output = _invoke("compile", example_graph("batch_pipeline"), "--out", str(out))
    print(output[:400])
    _named(code, output, "VF_CHART_VERSION")


def _in_child(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        preexec_fn=_limited,
    )


BOMB = "a: {k: &a [x, x, x, x, x, x, x, x, x]}\n" + "".join(
    f"{chr(98 + i)}: {{k: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
    f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]}}\n"
    for i in range(8)
)  # every value a mapping, as a secrets file's are; 'i' stands for 9 * 8**8 values


@pytest.mark.parametrize("kind", ["fifo", "aliases"])
def test_run_tree_secrets_are_read_within_bounds(tmp_path: Path, kind: str) -> None:
    secrets = tmp_path / "secrets.yaml"
    if kind == "fifo":
        os.mkfifo(secrets)
    else:
        secrets.write_text(BOMB)
    done = _in_child(
        "from pathlib import Path\n"
        "from vf.runtree.command import read_secrets\n"
        "from vf.errors import VfError\n"
        "try:\n"
        f"    read_secrets(Path({str(secrets)!r}))\n"
        "except VfError as exc:\n"
        "    print(exc.code)\n"
    )
    assert done.stdout.strip() == "VF_RUN_TREE_SECRETS", done.stderr[-2000:]


def test_run_tree_reads_a_tree_plan_within_bounds(tmp_path: Path) -> None:
    from vf.runtree.manifests import check_tree

    out = _tree(tmp_path)
    (out / "plan" / "dev.json").write_text(DEEP["lists"])
    with pytest.raises(VfError) as caught:
        check_tree(out, env="dev")
    assert caught.value.code.startswith("VF_RUN_TREE"), caught.value
