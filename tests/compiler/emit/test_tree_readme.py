"""The committed tree's README.md and the flow diagrams of real compiles: admission marks,
names the compiler admits that a diagram grammar reads as keywords, ``--check``, ``vf diff``
and a user's own README where vf now writes one."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.diagram_grammar import check_dot, check_mermaid
from tests.graph_sources import NODES
from vf.cli import cli
from vf.commands.diff.command import diff_project
from vf.commands.diff.report import render_markdown
from vf.commands.explain.formats import flow_diagram
from vf.emit.readme import markdown_mermaid, tree_readme
from vf.pipeline import CompileRequest, CompileResult, compile_project
from vf.render.diagram import EnvView, NodeView, diagram_of
from vf.render.diagram_syntax import dot, mermaid
from vf.tree.write import MANIFEST, write_tree

CHAIN = (
    NODES
    + """

def build_flow():
    src = Src(name=FIRST)
    work = Work(name=SECOND, nb_tasks=2, partition_by="k")(src)
    sinks = [Sink(name=n)(work) for n in THIRD]
    return Flow(sinks, flow_type=REALTIME, flow_id="chain")
"""
)
CONFIG = "environments:\n  dev:\n    images:\n      default: r.io/a:1\n"
EXTERNAL = CONFIG + "    broker:\n      profile: external\n      url: nats://nats.messaging:4222\n"


def chain(first: str = "src", second: str = "work", third: tuple[str, ...] = ("sink",)) -> str:
    return (
        CHAIN.replace("FIRST", repr(first))
        .replace("SECOND", repr(second))
        .replace("THIRD", repr(list(third)))
    )


def test_admission_warnings_mark_the_channel(write_graph: Callable[..., Path]) -> None:
    graph = write_graph(chain(), EXTERNAL)
    diagram = flow_diagram(compile_project(CompileRequest(graph=str(graph))))
    marked = {(a.source, a.target): a for a in diagram.arrows}
    assert marked[("src", "work")].verdict == "warning"
    assert marked[("src", "work")].note == "admission warning"
    text = mermaid(diagram)
    check_mermaid(text)
    assert 'n0 -.->|"live_latest<br/>⚠ admission warning"| n1' in text
    assert "linkStyle 0,1 stroke:#d97706,stroke-width:2px" in text
    assert "style=dashed" in dot(diagram)


@pytest.mark.parametrize(
    "names",
    [("end", "graph", ("subgraph",)), ("1st", "0", ("o1", "x2")), ("node", "edge", ("a.b",))],
)
def test_names_the_grammars_reserve_compile_to_valid_diagrams(
    write_graph: Callable[..., Path], names: tuple[str, str, tuple[str, ...]]
) -> None:
    first, second, third = names
    graph = write_graph(chain(first, second, third), CONFIG)
    result = compile_project(CompileRequest(graph=str(graph)))
    diagram = flow_diagram(result)
    shown = check_mermaid(mermaid(diagram))
    assert [lines[0] for lines in shown.values()] == [first, second, *third]
    assert [lines[0] for lines in check_dot(dot(diagram)).values()] == [first, second, *third]
    assert "fan-out to 2" in shown["n1"] or len(third) == 1


def test_readme_is_owned_checked_and_listed(
    write_graph: Callable[..., Path], tmp_path: Path
) -> None:
    graph = write_graph(chain(), CONFIG)
    out = tmp_path / "deploy"
    runner = CliRunner()
    assert runner.invoke(cli, ["compile", str(graph), "--out", str(out)]).exit_code == 0
    assert '"README.md"' in (out / MANIFEST).read_text(encoding="utf-8")
    readme = (out / "README.md").read_text(encoding="utf-8")
    assert "kubectl apply --server-side -k overlays/dev" in readme
    assert "helm upgrade --install chain ./chart -n" in readme
    (out / "README.md").write_text(readme.replace("flowchart LR", "flowchart TD"))
    stale = runner.invoke(cli, ["compile", str(graph), "--out", str(out), "--check"])
    assert stale.exit_code == 1 and "README.md" in stale.output


def test_a_users_readme_is_never_overwritten(
    write_graph: Callable[..., Path], tmp_path: Path
) -> None:
    graph = write_graph(chain(), CONFIG)
    out = tmp_path / "deploy"
    tree = compile_project(CompileRequest(graph=str(graph))).tree
    write_tree(out, {p: t for p, t in tree.items() if p != "README.md"})  # an older vf's tree
    (out / "README.md").write_text("ours\n", encoding="utf-8")
    done = CliRunner().invoke(cli, ["compile", str(graph), "--out", str(out)])
    assert done.exit_code == 2 and "error[VF_OUTPUT_USER_FILE]" in done.output
    assert (out / "README.md").read_text(encoding="utf-8") == "ours\n"
    assert '"README.md"' not in (out / MANIFEST).read_text(encoding="utf-8")


def test_diff_markdown_marks_changes_and_lists_removed_nodes(
    write_graph: Callable[..., Path], tmp_path: Path
) -> None:
    before = write_graph(chain(third=("sink", "audit")), CONFIG)
    out = tmp_path / "deploy"
    write_tree(out, compile_project(CompileRequest(graph=str(before))).tree)
    after = write_graph(chain(third=("sink",)), CONFIG + "    replicas:\n      work: 3\n")
    report = diff_project(compile_project(CompileRequest(graph=str(after))), out=out)
    text = render_markdown(report)
    section = text.split("### The flow after this change", 1)[1].split("### `dev`", 1)[0]
    diagram = section.split("```mermaid\n", 1)[1].split("```", 1)[0]
    check_mermaid(diagram)
    assert "class n1 changed" in diagram  # work: 2 → 3 replicas; its neighbours unmarked
    assert "Removed nodes: `audit`." in section
    assert text.index("### The flow after this change") < text.index("### `dev`")


def test_a_flow_too_large_for_mermaid_is_not_drawn() -> None:
    names = [f"node{i}" for i in range(502)]
    nodes = tuple(
        NodeView(
            name=name,
            node_kind="processor",
            workload="Deployment",
            replicas=1,
            parents=(names[i - 1],) if i else (),
            partition_by=None,
            join=None,
            gpu=None,
            native=None,
        )
        for i, name in enumerate(names)
    )
    view = EnvView(
        environment="dev",
        namespace="ns",
        kubernetes_version="1.34",
        flow_id="big",
        flow_type="realtime",
        broker_profile="dev",
        store_profile="none",
        gpu_mode=None,
        nodes=nodes,
        profiles=(),
        verdicts=(),
    )
    text = tree_readme([view], gitops=None, paths=())
    assert "```mermaid" not in text and "501 arrows, over Mermaid's 500" in text
    assert markdown_mermaid(diagram_of([view]))[0] == ""


def test_diff_draws_only_the_environments_asked_for(
    compiled_examples: dict[str, CompileResult], tmp_path: Path
) -> None:
    result = compiled_examples["realtime_cameras"]
    write_tree(tmp_path / "deploy", result.tree)
    flow = diff_project(result, out=tmp_path / "deploy", environments=["dev"]).flow
    assert flow is not None and not flow.highlight.changed and not flow.removed_nodes
    detector = next(b for b in flow.diagram.boxes if b.node == "detector")
    assert "replicas 1" in detector.facts  # not "replicas dev: 1, prod: 4"
