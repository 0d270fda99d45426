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
