"""The output tree under attack: planted links, concurrent writers, a killed swap."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.compiler.tree.test_kill_write import GRAPH as KILL_GRAPH
from tests.compiler.tree.test_kill_write import NODES as KILL_NODES
from tests.support import example_graph
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


# Two writers and a killed swap: real ``vf compile`` processes over a tree big enough
# that its write lasts about a second.
BIG = KILL_GRAPH.replace(f"range(1, {KILL_NODES // 10 - 1})", "range(1, 79)")
CONFIG_BOTH = """flow_id: race
environments:
  dev: {namespace: race-dev, images: {default: registry.example.com/race/w:1}}
  prod: {namespace: race, images: {default: registry.example.com/race/w:2}}
"""
CONFIG_DEV = """flow_id: race
environments:
  dev: {namespace: race-dev, images: {default: registry.example.com/race/w:3}}
"""
CONFIG_QA = """flow_id: race
environments:
  qa: {namespace: race-qa, images: {default: registry.example.com/race/w:4}}
"""


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    (project / "graph.py").write_text(BIG, encoding="utf-8")
    (project / "both.yaml").write_text(CONFIG_BOTH, encoding="utf-8")
    (project / "dev.yaml").write_text(CONFIG_DEV, encoding="utf-8")
    (project / "qa.yaml").write_text(CONFIG_QA, encoding="utf-8")
    return project


def _start(project: Path, config: str, out: Path, *prefix: str) -> subprocess.Popen[bytes]:
    args = [str(project / "graph.py"), "--config", str(project / config), "--out", str(out)]
    return subprocess.Popen(
        [sys.executable, *prefix, "compile", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _wait_for(path: Path, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120
    while not path.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.001)


def _manifest_agrees(out: Path) -> tuple[set[str], set[str]]:
    listed = set(json.loads((out / ".vf-manifest.json").read_text())["files"])
    on_disk = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    return on_disk - listed - {".vf-manifest.json"}, listed - on_disk


def test_two_concurrent_compiles_leave_one_consistent_tree(tmp_path: Path) -> None:
    project, out = _project(tmp_path), tmp_path / "deploy"
    first = _start(project, "both.yaml", out, "-m", "vf")
    _wait_for(tmp_path / f".deploy.vf-new-{first.pid}", first)
    second = _start(project, "qa.yaml", out, "-m", "vf")
    for proc in (first, second):
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err.decode()
    unlisted, missing = _manifest_agrees(out)
    print(f"files on disk the manifest does not list: {len(unlisted)}, listed but missing: 0")
    assert not unlisted and not missing, sorted(unlisted)[:5]
    assert sorted(os.listdir(out / "overlays")) in (["dev", "prod"], ["qa"])


# Runs vf with no renameat2 in its C library (the fallback of macOS, NFS and vfat) and
# kills it with SIGKILL right after the first of the fallback's two renames.
KILLED_BETWEEN_RENAMES = """
import ctypes, os, signal, sys
from pathlib import Path

_getattr = ctypes.CDLL.__getattr__
def _no_exchange(self, name):
    if name == "renameat2":
        raise AttributeError(name)
    return _getattr(self, name)
ctypes.CDLL.__getattr__ = _no_exchange

OUT = Path(sys.argv[-1]).resolve()
AFTER = os.environ["KILL_AFTER"]  # "first": old tree set aside; "second": new tree in place
_rename = os.rename
def _rename_then_die(src, dst, *args, **kwargs):
    _rename(src, dst, *args, **kwargs)
    if (Path(src) if AFTER == "first" else Path(dst)) == OUT:
        os.kill(os.getpid(), signal.SIGKILL)
os.rename = _rename_then_die

from vf.cli import main
sys.argv = ["vf", *sys.argv[1:]]
main()
"""


@pytest.mark.slow  # above the fast tier's 1.5 s on a busy 2-core machine
@pytest.mark.parametrize("after", ["first", "second"])
def test_a_kill_between_the_fallback_renames_loses_nothing(
    tmp_path: Path, after: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    project, out = _project(tmp_path), tmp_path / "deploy"
    (project / "kill.py").write_text(KILLED_BETWEEN_RENAMES, encoding="utf-8")
    first = _start(project, "dev.yaml", out, "-m", "vf")
    assert first.wait(timeout=300) == 0
    (out / "NOTES.md").write_text("the user's own file\n", encoding="utf-8")
    monkeypatch.setenv("KILL_AFTER", after)
    killed = _start(project, "both.yaml", out, str(project / "kill.py"))
    assert killed.wait(timeout=300) == -signal.SIGKILL
    assert out.exists() == (after == "second"), "the kill did not land between the renames"
    assert list(tmp_path.glob(".deploy.vf-*")), "no tree was set aside"
    again = _start(project, "both.yaml", out, "-m", "vf")
    _, err = again.communicate(timeout=300)
    assert again.returncode == 0, err.decode()
    assert (out / "NOTES.md").read_text() == "the user's own file\n"
    assert (out / "overlays" / "prod").is_dir()
    assert not list(tmp_path.glob(".deploy.vf-*"))


def test_compiling_one_environment_never_deletes_anothers(tree: Path) -> None:
    before = {p: p.read_bytes() for p in tree.rglob("*") if p.is_file()}
    code, output = _invoke("compile", GRAPH, "--out", str(tree), "--env", "dev")
    assert code == 2, output
    assert "error[VF_OUTPUT_PARTIAL]" in output and "prod" in output
    assert {p: p.read_bytes() for p in tree.rglob("*") if p.is_file()} == before


def test_one_environment_compiles_into_a_tree_of_its_own(tmp_path: Path) -> None:
    out = tmp_path / "dev-only"
    assert _invoke("compile", GRAPH, "--out", str(out), "--env", "dev")[0] == 0
    code, output = _invoke("compile", GRAPH, "--out", str(out), "--env", "dev")
    assert code == 0, output
    assert sorted(os.listdir(out / "plan")) == ["dev.json"]


def test_diff_with_env_ignores_the_other_environments_errors(tree: Path, tmp_path: Path) -> None:
    config = (Path(GRAPH).parent / "vf.yaml").read_text()
    broken = tmp_path / "vf.yaml"
    unknown = "      overrides:\n        nosuchnode: registry.example.com/a/b:1\n"
    assert config.count("      overrides:\n") == 1
    broken.write_text(config.replace("      overrides:\n", unknown))
    code, output = _invoke("diff", GRAPH, "--config", str(broken), "--out", str(tree))
    assert code == 2 and "VF_CONFIG_UNKNOWN_NODE" in output, output
    args = ("diff", GRAPH, "--config", str(broken), "--out", str(tree), "--env", "dev", "--raw")
    code, output = _invoke(*args)
    assert code == 0, output
    assert "other generated files" not in output and "+++" not in output, output


def test_check_on_a_missing_tree_says_so_in_a_line(tmp_path: Path) -> None:
    code, output = _invoke("compile", GRAPH, "--out", str(tmp_path / "none"), "--check")
    assert code == 1
    said = [line for line in output.splitlines() if not line.startswith("warning (")]
    assert len(said) <= 3, f"{len(said)} lines"
    assert "does not exist" in output


def test_a_recompile_keeps_the_users_links_empty_folders_mode_and_owner(tree: Path) -> None:
    (tree / "docs").mkdir()
    (tree / "docs" / "empty").mkdir()
    (tree / "shared").symlink_to(tree.parent)
    (tree / "readme-link").symlink_to("docs/nowhere.md")
    tree.chmod(0o750)
    owner = (65534, 65534) if os.geteuid() == 0 else (os.getuid(), os.getgid())
    os.chown(tree, *owner)
    code, output = _invoke("compile", GRAPH, "--out", str(tree))
    assert code == 0, output
    assert (tree / "docs" / "empty").is_dir()
    assert (tree / "shared").is_symlink() and os.readlink(tree / "shared") == str(tree.parent)
    assert os.readlink(tree / "readme-link") == "docs/nowhere.md"
    info = tree.stat()
    assert (info.st_mode & 0o777, info.st_uid, info.st_gid) == (0o750, *owner)


INTERRUPTED_AFTER_SWAP = """
import os, signal, sys
import vf.tree.write

_fsync_dir = vf.tree.write._fsync_dir
def _fsync_then_interrupt(path):
    _fsync_dir(path)
    if path == vf.tree.write.Path(sys.argv[-1]).resolve().parent:
        os.kill(os.getpid(), signal.SIGINT)
vf.tree.write._fsync_dir = _fsync_then_interrupt

from vf.cli import main
sys.argv = ["vf", *sys.argv[1:]]
main()
"""


def test_an_interrupt_right_after_the_swap_is_not_a_failure(tree: Path, tmp_path: Path) -> None:
    script = tmp_path / "interrupt.py"
    script.write_text(INTERRUPTED_AFTER_SWAP, encoding="utf-8")
    config = tmp_path / "vf.yaml"
    config.write_text((Path(GRAPH).parent / "vf.yaml").read_text().replace("0.1.0", "0.2.0"))
    args = [sys.executable, str(script), "compile", GRAPH, "--config", str(config)]
    done = subprocess.run([*args, "--out", str(tree)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "interrupted" not in done.stderr and "wrote" in done.stderr
    assert "0.2.0" in (tree / "plan" / "dev.json").read_text()


def test_vf_init_into_a_link_is_a_named_error(tmp_path: Path) -> None:
    for name, target in (("dangling", tmp_path / "missing"), ("linked", tmp_path)):
        link = tmp_path / name
        link.symlink_to(target)
        code, output = _invoke("init", str(link))
        assert code == 2, output
        assert "error[VF_INIT_LINK]" in output
    assert not (tmp_path / "missing").exists()


CHDIR_GRAPH = """import os
from pathlib import Path

from vf import BATCH, Consumer, Flow, Producer

os.chdir(Path(__file__).parent / "elsewhere")


class Src(Producer):
    def next(self):
        raise StopIteration


class Sink(Consumer):
    def consume(self, item):
        pass


def build_flow():
    return Flow([Sink(name="sink")(Src(name="src"))], flow_type=BATCH)
"""


def test_a_graph_that_changes_directory_still_writes_where_asked(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "keep.txt").write_text("mine\n")
    (tmp_path / "graph.py").write_text(CHDIR_GRAPH, encoding="utf-8")
    (tmp_path / "vf.yaml").write_text(CONFIG_DEV.replace("race", "chdir"), encoding="utf-8")
    for extra in ((), ("--check",)):
        done = subprocess.run(
            [sys.executable, "-m", "vf", "compile", "graph.py", "--out", "deploy", *extra],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
    assert (tmp_path / "deploy" / ".vf-manifest.json").is_file()
    assert sorted(os.listdir(tmp_path / "elsewhere")) == ["keep.txt"]
