"""The flow as a diagram: ``vf explain --format mermaid|dot|svg``, goldens of every example,
the grammar rules of ``tests/diagram_grammar.py``, and hostile node names (a fuzz class).

The real ``dot`` checks every DOT output where Graphviz is installed (``scripts/setup``
installs it as root; under ``CI=true`` its absence fails those tests), and the grammar checker
of our own checks every output everywhere.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode
from syrupy.location import PyTestLocation
from syrupy.types import SnapshotIndex

from tests.compiler.frontend.test_hostile_strings import GRAPH, compile_work, hostile
from tests.diagram_grammar import check_dot, check_mermaid
from tests.support import EXAMPLE_NAMES, REPO, example_graph, require
from vf import names as vf_names
from vf.cli import cli
from vf.commands.explain.formats import flow_diagram
from vf.errors import VfError
from vf.pipeline import CompileResult
from vf.render.diagram import Diagram, EnvView, NodeView, diagram_of
from vf.render.diagram_syntax import Highlight, dot, mermaid, printable

GOLDEN = REPO / "tests" / "golden" / "diagrams"
DOT = shutil.which("dot")


@pytest.fixture(scope="module")
def real_dot() -> None:
    require(DOT is not None, "Graphviz's dot is not on PATH (apt-get install graphviz)")


needs_dot = pytest.mark.usefixtures("real_dot")
HOSTILE = [
    "end", "END", "graph", "subgraph", "flowchart", "class", "o1", "x-ray", "1st", "0",
    'say "hi"', "a[b]", "(x)", "{y}", "a|b", "a;b", "#35;", "#quot;", "&amp;", "<b>x</b>",
    "<br/>", "a\\b", "a\\", "\\n", "line\nbreak", "tab\tbed", "%%{init: {}}%%", "`md`",
    "카메라", "📷", "\u202eevil", "\ufeff", "\x00\x1b[31m", "-->", "---oB", "A---xB", " ",
    "node", "digraph", "strict", "edge",
]  # fmt: skip


class Diagrams(SingleFileSnapshotExtension):
    """One golden per example and syntax: ``golden/diagrams/<example>.<syntax>.golden``."""

    _write_mode = WriteMode.TEXT
    file_extension = "golden"

    @classmethod
    def dirname(cls, *, test_location: PyTestLocation) -> str:
        return str(GOLDEN)

    @classmethod
    def discovery_dirname(cls, *, test_location: PyTestLocation) -> str:
        return str(GOLDEN)

    @classmethod
    def get_snapshot_name(cls, *, test_location: PyTestLocation, index: SnapshotIndex = 0) -> str:
        return str(index)


def dot_accepts(text: str) -> None:
    assert DOT is not None
    done = subprocess.run(
        [DOT, "-Tsvg"], input=text, capture_output=True, text=True, check=False, timeout=60
    )
    assert done.returncode == 0 and not done.stderr, done.stderr
    assert "<svg" in done.stdout


@pytest.mark.parametrize("example", EXAMPLE_NAMES)
@pytest.mark.parametrize("syntax", ["mermaid", "dot"])
def test_every_example_diagram_matches_golden(
    example: str,
    syntax: str,
    compiled_examples: dict[str, CompileResult],
    snapshot: SnapshotAssertion,
) -> None:
    diagram = flow_diagram(compiled_examples[example])
    text = mermaid(diagram) if syntax == "mermaid" else dot(diagram)
    labels = check_mermaid(text) if syntax == "mermaid" else check_dot(text)
    assert [lines[0] for lines in labels.values()] == [b.node for b in diagram.boxes]
    assert text == snapshot.use_extension(Diagrams)(name=f"{example}.{syntax}")


@needs_dot
@pytest.mark.parametrize("example", EXAMPLE_NAMES)
def test_real_dot_draws_every_example(
    example: str, compiled_examples: dict[str, CompileResult]
) -> None:
    dot_accepts(dot(flow_diagram(compiled_examples[example])))


def test_the_tree_readme_carries_the_mermaid_diagram(
    compiled_examples: dict[str, CompileResult],
) -> None:
    for result in compiled_examples.values():
        text = mermaid(flow_diagram(result))
        assert f"```mermaid\n{text}```\n" in result.tree["README.md"]


def test_no_stale_diagram_goldens() -> None:
    expected = {f"{e}.{s}.golden" for e in EXAMPLE_NAMES for s in ("mermaid", "dot")}
    assert {p.name for p in GOLDEN.iterdir()} == expected


def test_replicas_gpu_partition_and_joins_are_shown(
    compiled_examples: dict[str, CompileResult],
) -> None:
    video = {b.node: b.facts for b in flow_diagram(compiled_examples["video_analytics"]).boxes}
    assert "gpu cloud: DRA claim of 2 (dra), lab: 2 whole GPU (mix)" in video["reranker"]
    assert "join of 2 (trace)" in video["reranker"]
    assert "partition_by trace_id" in video["reranker"]
    assert "fan-out to 2" in video["clip-reader"]
    cameras = {b.node: b.facts for b in flow_diagram(compiled_examples["realtime_cameras"]).boxes}
    assert "replicas dev: 1, prod: 4" in cameras["detector"]
    assert cameras["tracker"][0] == "processor · StatefulSet"
    thumbnails = flow_diagram(compiled_examples["thumbnails"])
    native = next(b for b in thumbnails.boxes if b.node == "thumbnailer")
    assert native.native and any(f.startswith("native component ") for f in native.facts)
    assert '[["thumbnailer<br/>' in mermaid(thumbnails)


def test_cli_formats(tmp_path: Path, compiled_examples: dict[str, CompileResult]) -> None:
    runner = CliRunner()
    graph = example_graph("realtime_cameras")
    expected = mermaid(flow_diagram(compiled_examples["realtime_cameras"]))
    done = runner.invoke(cli, ["explain", graph, "--format", "mermaid"])
    assert done.exit_code == 0 and done.output == expected
    done = runner.invoke(cli, ["explain", graph, "--format", "dot"])
    assert done.exit_code == 0 and done.output.startswith("digraph vf {")
    text = runner.invoke(cli, ["explain", graph]).output
    assert text.startswith("flow cameras (realtime)")


def test_svg_without_dot_names_the_tool_and_exits_3(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty PATH: no Graphviz on it
    done = CliRunner().invoke(
        cli, ["explain", example_graph("realtime_cameras"), "--format", "svg"]
    )
    assert done.exit_code == 3
    assert "error[VF_TOOL_DOT]" in done.output and "apt-get install graphviz" in done.output


@needs_dot
def test_svg_with_dot() -> None:
    done = CliRunner().invoke(cli, ["explain", example_graph("thumbnails"), "--format", "svg"])
    assert done.exit_code == 0 and "<svg" in done.output and "thumbnailer" in done.output


def _view(names: list[str], *, env: str = "dev", warned: str | None = None) -> EnvView:
    nodes = tuple(
        NodeView(
            name=name,
            node_kind=("producer", "processor", "consumer")[min(i, 2)],
            workload="Deployment",
            replicas=1 + i,
            parents=(names[i - 1],) if i else (),
            partition_by=name if i == 1 else None,
            join=None,
            gpu=name if i == 2 else None,
            native=name if i == 1 else None,
        )
        for i, name in enumerate(names)
    )
    return EnvView(
        environment=env,
        namespace=env,
        kubernetes_version="1.34",
        flow_id="hostile",
        flow_type="realtime",
        broker_profile=names[0],
        store_profile="dev",
        gpu_mode=None,
        nodes=nodes,
        profiles=tuple((n, names[-1]) for n in names),
        verdicts=((names[0], warned),) if warned else (),
    )


def _assert_valid(diagram: Diagram, names: list[str]) -> None:
    marks = Highlight(
        added=frozenset(names[:1]),
        changed=frozenset(names[1:2]),
        arrows=frozenset((a.source, a.target) for a in diagram.arrows[:1]),
    )
    for highlight in (Highlight(), marks):
        shown = check_mermaid(mermaid(diagram, highlight=highlight))
        assert [lines[0] for lines in shown.values()] == [printable(n) for n in names]
        shown = check_dot(dot(diagram, highlight=highlight))
        assert [lines[0] for lines in shown.values()] == [printable(n) for n in names]


@pytest.fixture(scope="module")
def hostile_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile-diagram")
    (root / "graph.py").write_text(GRAPH, encoding="utf-8")
    return root


class TestHostileNodeNames:
    """Whatever a plan names its nodes (the compiler admits few names, a committed plan
    may hold any), the diagrams keep the grammar and show the name."""

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(name=st.one_of(hostile, st.from_regex(vf_names.NODE_NAME)))
    def test_names_the_compiler_admits(self, hostile_project: Path, name: str) -> None:
        outcome = compile_work(hostile_project, work={"name": name})
        if isinstance(outcome, VfError):  # refused by name: test_hostile_strings' concern
            return
        diagram = flow_diagram(outcome)
        text = mermaid(diagram)
        shown = ["source", printable(name), "sink"]  # the grammar lets a trailing LF through
        assert [lines[0] for lines in check_mermaid(text).values()] == shown
        assert [lines[0] for lines in check_dot(dot(diagram)).values()] == shown
        assert text in outcome.tree["README.md"]

    @pytest.mark.parametrize("name", HOSTILE)
    def test_known_hostile_names(self, name: str) -> None:
        names = [name, f"{name}2", f"3{name}"]
        _assert_valid(diagram_of([_view(names), _view(names, env="prod", warned="warning")]), names)

    @settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(names=st.lists(st.text(min_size=1, max_size=30), min_size=3, max_size=5, unique=True))
    def test_any_names(self, names: list[str]) -> None:
        _assert_valid(diagram_of([_view(names, warned="rejected")]), names)

    @needs_dot
    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(names=st.lists(st.text(min_size=1, max_size=20), min_size=3, max_size=3, unique=True))
    def test_real_dot_accepts_any_names(self, names: list[str]) -> None:
        dot_accepts(dot(diagram_of([_view(names)])))

    @needs_dot
    @pytest.mark.parametrize("name", HOSTILE)
    def test_real_dot_accepts_known_hostile_names(self, name: str) -> None:
        dot_accepts(dot(diagram_of([_view([name, f"{name}2", f"3{name}"])])))


@pytest.mark.parametrize(
    "text",
    [
        'flowchart LR\n  end["x"]\n',
        'flowchart LR\n  o1["x"]\n',
        'flowchart LR\n  1a["x"]\n',
        "flowchart LR\n  n0[x y]\n",
        'flowchart LR\n  n0["say "hi""]\n',
        'flowchart LR\n  n0["a#b"]\n',
        'flowchart LR\n  n0["a<b>"]\n',
        'flowchart LR\n  n0["a;b"]\n',
        'flowchart LR\n  n0["`md`"]\n',
        'flowchart LR\n  n0["a"]\n  n0 -->|"x"| n1\n',
        'flowchart LR\n  n0["a"]\n  n1["b"]\n  n0 -->|"a|b"| n1\n',
        'flowchart LR\n  n0["a"]\n  n1["b"]\n  n0 -->|"x"| n1\n  linkStyle 1 stroke:#000\n',
        'flowchart LR\n  n0["a"]\n  class n0 changed\n',
    ],
)
def test_the_mermaid_checker_refuses_what_the_grammar_misreads(text: str) -> None:
    with pytest.raises(AssertionError):
        check_mermaid(text)


@pytest.mark.parametrize(
    "text",
    [
        'digraph vf {\n  n0 [label="a"b"];\n}\n',
        'digraph vf {\n  n0 [label="a\\lb"];\n}\n',
        'digraph vf {\n  strict [label="a"];\n}\n',
        'digraph vf {\n  0n [label="a"];\n}\n',
        'digraph vf {\n  n0 [label="a"];\n  n0 -> n1 [label="x"];\n}\n',
    ],
)
def test_the_dot_checker_refuses_what_the_grammar_misreads(text: str) -> None:
    with pytest.raises(AssertionError):
        check_dot(text)


def test_the_project_readme_shows_the_cameras_diagram(
    compiled_examples: dict[str, CompileResult],
) -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    text = mermaid(flow_diagram(compiled_examples["realtime_cameras"]))
    assert f"```mermaid\n{text}```\n" in readme, "README.md: paste vf explain --format mermaid"
