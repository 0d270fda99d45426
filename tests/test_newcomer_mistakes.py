"""The usual first mistakes with vf: each gets a named error at the user's line, with the fix."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from vf.cli import cli

CONFIG = "environments:\n  dev:\n    images: {default: r.example.com/a/b:1}\n"
HEAD = "from vf import BATCH, Consumer, Flow, Processor, Producer\n\n\n"
SOURCE = """class Src(Producer):
    def __init__(self, *, count=3, **kw):
        {src_init}
        self.count = count

    def next(self):
        raise StopIteration
"""
WORK = """class Work(Processor):
    def __init__(self, *, factor=2, **kw):
        {work_init}
        self.factor = factor

    def process(self, item):
        return item
"""
SINK = """class Sink(Consumer):
    def __init__(self, *, path="x", **kw):
        {sink_init}
        self.path = path

    def consume(self, item):
        pass
"""
BUILD = """def build_flow():
    src = Src(name="src")
    work = Work(name="work", nb_tasks=2)(src)
    return Flow([Sink(name="store")(work)], flow_type=BATCH)
"""


def _project(tmp_path: Path, text: str, config: str = CONFIG) -> Path:
    (tmp_path / "graph.py").write_text(text, encoding="utf-8")
    (tmp_path / "vf.yaml").write_text(config, encoding="utf-8")
    return tmp_path / "graph.py"


def _validate(graph: Path) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["validate", str(graph)])
    return result.exit_code, result.output


def _graph(**inits: str) -> str:
    fields = {"src_init": "super().__init__(**kw)", "work_init": "super().__init__(**kw)"}
    fields["sink_init"] = "super().__init__(**kw)"
    fields.update(inits)
    return HEAD + "\n\n".join(
        [SOURCE.format(**fields), WORK.format(**fields), SINK.format(**fields), BUILD]
    )


def test_the_correct_graph_validates(tmp_path: Path) -> None:
    code, output = _validate(_project(tmp_path, _graph()))
    assert code == 0, output


@pytest.mark.parametrize(
    ("init", "line"),
    [
        ({"src_init": "pass"}, 5),
        ({"work_init": "pass"}, 14),
        ({"sink_init": "pass"}, 23),
        ({"sink_init": "super().__init__()"}, 23),
        ({"work_init": "super().__init__()"}, 14),
        ({"work_init": "super().__init__(name=kw.get('name'))"}, 14),
    ],
)
def test_a_base_init_skipped_or_starved_is_named(
    tmp_path: Path, init: dict[str, str], line: int
) -> None:
    code, output = _validate(_project(tmp_path, _graph(**init)))
    assert code == 2, output
    assert "error[VF_GRAPH_NODE_INIT]" in output, output
    assert f"graph.py:{line})" in output and "super().__init__(**kw)" in output
    assert "VF_INTERNAL" not in output and "Traceback" not in output


INIT = "super().__init__(**kw)"
NODES = HEAD + "\n\n".join(
    [SOURCE.format(src_init=INIT), WORK.format(work_init=INIT), SINK.format(sink_init=INIT)]
)


def _errors(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("error[")]


def test_a_cycle_names_only_its_members_and_where_they_are(tmp_path: Path) -> None:
    build = """

def build_flow():
    src = Src(name="src")
    a = Work(name="a")
    b = Work(name="b")(src, a)
    a(b)
    c = Work(name="c")(b)
    return Flow([Sink(name="sink")(c)], flow_type=BATCH)
"""
    code, output = _validate(_project(tmp_path, NODES + build))
    assert code == 2
    assert "these nodes wait on each other: a, b\n" in output, output
    line = NODES.count("\n") + build.splitlines().index("    a(b)") + 1
    assert f"graph.py:{line}, " in output, output  # a(b): the link that closes the loop
    assert f"graph.py:{line - 1}\n" in output, output  # where b was wired


def test_one_duplicate_name_is_one_error_and_a_collision_has_a_place(tmp_path: Path) -> None:
    build = """

def build_flow():
    src = Src(name="src")
    a = Work(name="work")(src)
    b = Work(name="work")(a)
    c = Work(name="my-node")(b)
    d = Work(name="my_node")(c)
    return Flow([Sink(name="sink")(d)], flow_type=BATCH)
"""
    code, output = _validate(_project(tmp_path, NODES + build))
    assert code == 2
    errors = _errors(output)
    assert sum("'work'" in e for e in errors) == 1, output
    collision = output.split("error[VF_IDENTITY_COLLISION]")[1].splitlines()[1]
    assert "graph.py:" in collision and "node 'my_node'" in collision, output


def test_an_unknown_node_in_vf_yaml_has_its_line_and_a_suggestion(tmp_path: Path) -> None:
    config = CONFIG + "    replicas:\n      wrok: 2\n"
    code, output = _validate(_project(tmp_path, _graph(), config))
    assert code == 2
    assert "vf.yaml:5" in output and "did you mean 'work'?" in output, output


@pytest.mark.parametrize(
    ("text", "line", "fix"),
    [
        ("environments:\n  dev:\n    namespace x\n    images: {default: a}\n", 3, "key: value"),
        ("environments:\n  dev:\n    images: {default: a\n    namespace: x\n", 3, "close the {"),
        ("environments:\n  dev: {}\n  dev: {}\n", 3, "one of the two keys"),
        ("environments:\n\tdev: {}\n", 2, "spaces"),
        ('environments:\n  dev:\n    namespace: "abc\n    images: 1\n', 3, "close the quote"),
    ],
)
def test_broken_yaml_is_reported_at_its_line_with_a_fix_for_it(
    tmp_path: Path, text: str, line: int, fix: str
) -> None:
    code, output = _validate(_project(tmp_path, _graph(), text))
    assert code == 2
    assert "error[VF_CONFIG_SYNTAX]" in output
    assert f"vf.yaml:{line}\n" in output and fix in output, output
    assert "duplicate keys are not allowed" not in output or "dev" in text.split("\n")[2]


def test_node_classes_inside_the_graph_module_are_warned_about(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["validate", str(_project(tmp_path, _graph()))])
    assert result.exit_code == 0, result.output
    assert "warning[VF_GRAPH_NODE_IN_GRAPH]" in result.stderr
    assert "Src, Work, Sink" in result.stderr or "Sink, Src, Work" in result.stderr
    assert "graph_nodes.py" in result.stderr


def test_node_classes_in_a_sibling_module_are_not_warned_about(tmp_path: Path) -> None:
    (tmp_path / "demo_nodes.py").write_text(NODES, encoding="utf-8")
    graph = "from demo_nodes import Sink, Src, Work\n\nfrom vf import BATCH, Flow\n" + BUILD
    result = CliRunner().invoke(cli, ["validate", str(_project(tmp_path, graph))])
    assert result.exit_code == 0, result.output
    assert "warning[" not in result.stderr


ENV = "environments:\n  dev:\n    images: {default: r.example.com/a/b:1}\n"


def test_an_unquoted_kubernetes_version_says_to_quote_it(tmp_path: Path) -> None:
    """YAML reads ``1.30`` as the number 1.3: the message shows what was written and the
    quoted line to write instead."""
    config = ENV + "    kubernetes_version: 1.30\n"
    code, output = _validate(_project(tmp_path, _graph(), config))
    assert code == 2, output
    what = "environments.dev.kubernetes_version: YAML reads 1.30 as a number (1.3)"
    assert f"error[VF_CONFIG_SCHEMA] {what}" in output, output
    assert 'fix: put it in quotes: kubernetes_version: "1.30"' in output, output
    assert "vf.yaml:4" in output


@pytest.mark.parametrize(
    ("written", "suggested"),
    [("256MB", "write 256Mi (mebibytes) or 256M (megabytes)"), ("1GiB", "write 1Gi (gibibytes)")],
)
def test_a_memory_size_written_as_a_file_size_names_the_forms_kubernetes_takes(
    tmp_path: Path, written: str, suggested: str
) -> None:
    config = (
        ENV + f'    resources:\n      "*": {{cpu: 1, memory: 256Mi, memory_limit: {written}}}\n'
    )
    code, output = _validate(_project(tmp_path, _graph(), config))
    assert code == 2, output
    assert f"memory_limit: '{written}' is not a Kubernetes quantity" in output, output
    assert f"for '{written}' {suggested}" in output, output
    assert "256Mi, 1Gi or 512M" in output


@pytest.mark.parametrize(
    ("args", "message", "helps"),
    [
        (
            ["validate", "--bogus", "graph.py"],
            "vf validate: No such option '--bogus'",
            "vf validate",
        ),
        (["validate"], "vf validate: Missing argument 'GRAPH'", "vf validate"),
        (["compile", "graph.py"], "vf compile: Missing option '--out'", "vf compile"),
        (["frobnicate"], "vf: No such command 'frobnicate'", "vf"),
        (
            ["dlq", "ls", "--nats", "nats://x", "--flow", "f", "--format", "xml"],
            "vf dlq ls: Invalid value for '--format'",
            "vf dlq ls",
        ),
    ],
)
def test_a_usage_mistake_is_a_named_error_that_points_at_help(
    args: list[str], message: str, helps: str
) -> None:
    result = CliRunner().invoke(cli, args, prog_name="vf")
    assert result.exit_code == 2, result.output
    assert result.output.startswith(f"error[VF_USAGE] {message}"), result.output
    assert f"`{helps} --help`" in result.output and "usage: " in result.output
    assert "Usage:" not in result.output and "Error:" not in result.output


def test_vf_runs_without_a_broker_mentions_the_environment_variable() -> None:
    result = CliRunner().invoke(cli, ["runs"], env={"VF_NATS_URL": None}, prog_name="vf")
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error[VF_USAGE] vf runs: Missing option '--nats'")
    assert "or set VF_NATS_URL in the environment" in result.output, result.output
