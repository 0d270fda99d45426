"""Malformed graph modules: each gets a named error showing the user's frame, never vf's.

Covers what the graph-rule tests do not: errors raised by sibling modules, exceptions that
cannot be printed, BaseExceptions, deep recursion, slow modules stopped by the load
watchdog (``VF_LOAD_TIMEOUT_SECONDS``), stdout kept clean, and randomly damaged sources.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vf.cli import cli
from vf.errors import VfError
from vf.frontend.load import load_flow

VALID = """from vf import BATCH, Consumer, Flow, Processor, Producer


class Src(Producer):
    def next(self):
        raise StopIteration


class Step(Processor):
    def process(self, item):
        return item


class Sink(Consumer):
    def consume(self, item):
        pass


def build_flow():
    src = Src(name="src")
    step = Step(name="step")(src)
    return Flow([Sink(name="sink")(step)], flow_type=BATCH)
"""
CONFIG = "environments:\n  dev:\n    images: {default: registry.example.com/m/w:1}\n"
VF_SOURCES = ("vf/frontend/load.py", "vf/frontend/watchdog.py", "vf/cli.py", "vf_runtime/")


def run_cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), env=env)
    return result.exit_code, result.output


def write(tmp_path: Path, source: str, name: str = "graph.py") -> Path:
    path = tmp_path / name
    path.write_text(source, encoding="utf-8")
    (tmp_path / "vf.yaml").write_text(CONFIG, encoding="utf-8")
    return path


def assert_named(output: str, code: str, where: str | None) -> None:
    assert f"error[{code}]" in output, output
    assert "= fix: " in output
    assert "Traceback" not in output
    assert not any(source in output for source in VF_SOURCES), output
    if where is not None:
        assert where in output, output


def compile_module(tmp_path: Path, source: str, **env: str) -> tuple[int, str]:
    graph = write(tmp_path, source)
    return run_cli("compile", str(graph), "--out", str(tmp_path / "out"), env=env or None)


@pytest.mark.parametrize(
    ("source", "code", "line"),
    [
        ("x = (\n", "VF_LOAD_IMPORT_FAILED", 1),
        ("import helper_missing_dep\n", "VF_LOAD_IMPORT_FAILED", 1),
        ("build_flow = 3\n", "VF_LOAD_NO_FACTORY", None),
        ("def build_flow():\n    return None\n", "VF_LOAD_FACTORY_TYPE", None),
        ("import sys\n\nsys.exit('bye')\n", "VF_LOAD_EXIT", 3),
        ("def build_flow():\n    exit(0)\n", "VF_LOAD_EXIT", 2),
        ("def build_flow():\n    raise GeneratorExit\n", "VF_LOAD_FACTORY_FAILED", 2),
        (
            "class Odd(BaseException):\n    pass\n\n\ndef build_flow():\n    raise Odd('x')\n",
            "VF_LOAD_FACTORY_FAILED",
            6,
        ),
        (
            "class Mute(Exception):\n    def __str__(self):\n        raise RuntimeError\n\n\n"
            "def build_flow():\n    raise Mute()\n",
            "VF_LOAD_FACTORY_FAILED",
            7,
        ),
        (
            "def f(n):\n    return f(n + 1)\n\n\ndef build_flow():\n    f(0)\n",
            "VF_LOAD_FACTORY_FAILED",
            2,
        ),
        (
            "def __getattr__(name):\n    raise RuntimeError(name)\n",
            "VF_LOAD_IMPORT_FAILED",
            2,
        ),
        ("x = '\\x00'\nbuild_flow = None\0\n", "VF_LOAD_IMPORT_FAILED", None),
    ],
)
def test_malformed_modules_get_named_errors(
    tmp_path: Path, source: str, code: str, line: int | None
) -> None:
    exit_code, output = compile_module(tmp_path, source)
    assert exit_code == 2, output
    assert_named(output, code, f"graph.py:{line}" if line else None)
    assert not (tmp_path / "out").exists()


def test_a_deep_recursion_shows_only_the_last_frames(tmp_path: Path) -> None:
    source = "def f(n):\n    return f(n + 1)\n\n\ndef build_flow():\n    f(0)\n"
    _, output = compile_module(tmp_path, source)
    assert "RecursionError" in output
    assert "earlier frames" in output
    assert output.count("graph.py") < 20


def test_an_error_in_a_sibling_module_points_there(tmp_path: Path) -> None:
    (tmp_path / "helpers.py").write_text("def make():\n    return {}['camera']\n")
    source = "from helpers import make\n\n\ndef build_flow():\n    return make()\n"
    exit_code, output = compile_module(tmp_path, source)
    assert exit_code == 2
    assert_named(output, "VF_LOAD_FACTORY_FAILED", "helpers.py:2")
    assert "KeyError" in output and "graph.py" in output


def test_a_module_that_cannot_be_decoded(tmp_path: Path) -> None:
    graph = tmp_path / "graph.py"
    graph.write_bytes(b"x = '\xff\xfe'\n")
    exit_code, output = run_cli("compile", str(graph), "--out", str(tmp_path / "out"))
    assert exit_code == 2
    assert_named(output, "VF_LOAD_IMPORT_FAILED", None)


@pytest.mark.parametrize("target", ["a" * 300 + ".py", "folder.py"])
def test_odd_graph_paths_are_not_found(tmp_path: Path, target: str) -> None:
    (tmp_path / "folder.py").mkdir()
    exit_code, output = run_cli("compile", str(tmp_path / target), "--out", str(tmp_path / "o"))
    assert exit_code == 2
    assert_named(output, "VF_LOAD_NOT_FOUND", None)


def test_printing_modules_keep_stdout_clean(tmp_path: Path) -> None:
    source = "print('hello from import')\n" + VALID.replace(
        "def build_flow():\n", "def build_flow():\n    print('hello from build')\n"
    )
    graph = write(tmp_path, source)
    result = CliRunner().invoke(cli, ["plan", str(graph)])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["flow_id"]
    assert "hello from import" in result.stderr and "hello from build" in result.stderr


SLOW = {
    "sleep at import": ("import time\n\ntime.sleep(60)\n", 3),
    "busy factory": (VALID + "\n\ndef slow():\n    while True:\n        pass\n", 26),
    "swallowing factory": (
        VALID + "\n\ndef slow():\n    while True:\n        try:\n            while True:\n"
        "                pass\n        except BaseException:\n            return build_flow()\n",
        None,
    ),
}


@pytest.mark.parametrize("case", sorted(SLOW))
def test_a_slow_graph_is_stopped_by_the_watchdog(tmp_path: Path, case: str) -> None:
    source, line = SLOW[case]
    graph = write(tmp_path, source)
    target = f"{graph}:slow" if "def slow" in source else str(graph)
    env = {"VF_LOAD_TIMEOUT_SECONDS": "0.5"}
    exit_code, output = run_cli("compile", target, "--out", str(tmp_path / "out"), env=env)
    assert exit_code == 2, output
    assert_named(output, "VF_LOAD_TIMEOUT", f"graph.py:{line}" if line else "graph.py")
    assert "VF_LOAD_TIMEOUT_SECONDS" in output
    assert not (tmp_path / "out").exists()


def test_the_watchdog_also_guards_loads_off_the_main_thread(tmp_path: Path) -> None:
    graph = write(tmp_path, VALID + "\n\ndef slow():\n    while True:\n        pass\n")
    errors: list[BaseException] = []

    def load() -> None:
        try:
            load_flow(f"{graph}:slow")
        except BaseException as exc:
            errors.append(exc)

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("VF_LOAD_TIMEOUT_SECONDS", "0.5")
        worker = threading.Thread(target=load)
        worker.start()
        worker.join(30)
    assert not worker.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], VfError)
    assert errors[0].code == "VF_LOAD_TIMEOUT"


@pytest.mark.parametrize("value", ["soon", "-1", "nan", "inf"])
def test_a_bad_timeout_setting_is_named(tmp_path: Path, value: str) -> None:
    exit_code, output = compile_module(tmp_path, VALID, VF_LOAD_TIMEOUT_SECONDS=value)
    assert exit_code == 2
    assert_named(output, "VF_LOAD_TIMEOUT_SETTING", "VF_LOAD_TIMEOUT_SECONDS")


def test_a_fast_graph_loads_under_a_short_deadline(tmp_path: Path) -> None:
    exit_code, output = compile_module(tmp_path, VALID, VF_LOAD_TIMEOUT_SECONDS="30")
    assert exit_code == 0, output


def test_a_keyboard_interrupt_in_user_code_exits_130(tmp_path: Path) -> None:
    exit_code, output = compile_module(tmp_path, "raise KeyboardInterrupt\n")
    assert exit_code == 130
    assert "Traceback" not in output


LINES = VALID.splitlines(keepends=True)
damage = st.tuples(
    st.integers(0, len(LINES) - 1),
    st.sampled_from(["delete", "insert", "replace"]),
    st.sampled_from(
        [
            "(",
            "raise ValueError('x')\n",
            "import nope\n",
            "return 1\n",
            "    ",
            "\t",
            "yield\n",
            "del Flow\n",
            "Src = 3\n",
            "build_flow = lambda: Flow([])\n",
            "import sys; sys.exit(1)\n",
            "print('noise')\n",
            "src = Src(name='x y')\n",
            "    src = Src(name=object())\n",
            "    src = Src(name='src')(Src(name='src'))\n",
            "    return Flow([Sink(name='sink')(step)], flow_type='x')\n",
        ]
    ),
)


@pytest.mark.slow
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(edits=st.lists(damage, min_size=1, max_size=3))
def test_damaged_modules_compile_or_fail_by_name(
    tmp_path_factory: pytest.TempPathFactory, edits: list[tuple[int, str, str]]
) -> None:
    lines = list(LINES)
    for position, op, text in edits:
        index = min(position, len(lines) - 1) if lines else 0
        if op == "delete" and lines:
            del lines[index]
        elif op == "insert":
            lines.insert(index, text)
        elif lines:
            lines[index] = text
    root = tmp_path_factory.mktemp("damaged")
    exit_code, output = compile_module(root, "".join(lines))
    assert exit_code in (0, 2), output
    if exit_code == 2:
        assert "error[VF_" in output and "Traceback" not in output
        assert not (root / "out").exists()


def test_the_watchdog_gives_back_an_alarm_it_found_running(tmp_path: Path) -> None:
    graph = write(tmp_path, VALID)
    fired: list[int] = []
    previous = signal.signal(signal.SIGALRM, lambda signum, frame: fired.append(signum))
    try:
        signal.setitimer(signal.ITIMER_REAL, 30)
        load_flow(str(graph))
        left, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 0 < left <= 30
        assert signal.getsignal(signal.SIGALRM) is not previous and not fired
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# Graph modules that attack the load itself: each runs in a real ``vf`` process, which
# must end within its deadline with a named error, or succeed with clean output.
HOSTILE_LOADS = {
    "alarm ignored": "import signal, time\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
    "time.sleep(3600)\n",
    "timer disarmed": "import signal\n\n\ndef build_flow():\n"
    "    signal.setitimer(signal.ITIMER_REAL, 0)\n    while True:\n        pass\n",
    "alarm swallowed": "import signal, time\nsignal.signal(signal.SIGALRM, lambda *a: None)\n"
    "while True:\n    time.sleep(0.01)\n",
    "exit 0 at import": "import os\nos._exit(0)\n",
    "exit 0 in factory": VALID.replace(
        "def build_flow():\n", "def build_flow():\n    import os\n    os._exit(0)\n"
    ),
    "killed itself": "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
}
LOAD_CODES = {
    "alarm ignored": "VF_LOAD_TIMEOUT",
    "timer disarmed": "VF_LOAD_TIMEOUT",
    "alarm swallowed": "VF_LOAD_TIMEOUT",
    "exit 0 at import": "VF_LOAD_EXIT",
    "exit 0 in factory": "VF_LOAD_EXIT",
    "killed itself": "VF_LOAD_EXIT",
}


def run_vf(tmp_path: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "VF_LOAD_TIMEOUT_SECONDS": "1"}
    return subprocess.run(
        [sys.executable, "-m", "vf", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
        cwd=tmp_path,
    )


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(HOSTILE_LOADS))
@pytest.mark.parametrize("command", ["compile", "validate", "plan"])
def test_a_graph_that_attacks_the_load_is_bounded_and_named(
    tmp_path: Path, case: str, command: str
) -> None:
    write(tmp_path, HOSTILE_LOADS[case])
    extra = ["--out", "out", "--check"] if command == "compile" else []
    began = time.monotonic()
    try:
        done = run_vf(tmp_path, command, "graph.py", *extra, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{case}: vf {command} still running after 30 s")
    assert done.returncode == 2, f"{case}: exit {done.returncode}\n{done.stderr}"
    assert_named(done.stderr, LOAD_CODES[case], None)
    assert done.stdout == ""
    assert time.monotonic() - began < 20


def test_raw_writes_to_fd_1_never_reach_the_plan(tmp_path: Path) -> None:
    source = "import os\nos.write(1, b'{not json\\n')\n" + VALID.replace(
        "def build_flow():\n", "def build_flow():\n    os.write(1, b'noise')\n"
    )
    write(tmp_path, source)
    done = run_vf(tmp_path, "plan", "graph.py")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["flow_id"]
    assert "{not json" in done.stderr and "noise" in done.stderr


def test_a_thread_the_graph_leaves_running_does_not_hang_vf(tmp_path: Path) -> None:
    source = "import threading, time\nthreading.Thread(target=time.sleep, args=(3600,)).start()\n"
    write(tmp_path, source + VALID)
    try:
        done = run_vf(tmp_path, "validate", "graph.py", timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("vf validate hung on the graph's non-daemon thread")
    assert done.returncode == 0, done.stderr
