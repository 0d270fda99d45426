"""``vf explain --format``: the text summary, its JSON form, and the flow as a diagram."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import replace

from vf.errors import EXIT_USER, EnvironmentProblem
from vf.ir.plan import plan_to_json
from vf.pipeline import CompileRequest, CompileResult, compile_project
from vf.render.diagram import Diagram, diagram_of, env_view
from vf.render.diagram_syntax import dot, mermaid

DOT_TIMEOUT_S = 120


def flow_diagram(result: CompileResult) -> Diagram:
    """The diagram of every environment compiled, from their plans."""
    return diagram_of([env_view(plan_to_json(plan)) for plan in result.plans])


def run_explain(request: CompileRequest, *, fmt: str) -> tuple[str, int]:
    """Compile without enforcing admission, so rejected channels are explained, not fatal;
    the exit code is still 2 when any channel is rejected."""
    from vf.commands.explain.text import has_rejections

    result = compile_project(replace(request, enforce_admission=False))
    return explain_output(result, fmt=fmt), EXIT_USER if has_rejections(result) else 0


def explain_output(result: CompileResult, *, fmt: str) -> str:
    """What ``vf explain --format fmt`` prints."""
    if fmt == "json":
        from vf.commands.explain.summary import explain_document, json_text

        return json_text(explain_document(result))
    if fmt == "mermaid":
        return mermaid(flow_diagram(result))
    if fmt == "dot":
        return dot(flow_diagram(result))
    if fmt == "svg":
        return svg(dot(flow_diagram(result)))
    from vf.commands.explain.text import explain

    return explain(result)


def svg(graph: str) -> str:
    """``graph`` (DOT) rendered by Graphviz's ``dot``; a missing or failing ``dot`` is an
    environment problem (exit 3), not a wrong graph."""
    program = shutil.which("dot")
    if program is None:
        raise EnvironmentProblem(
            "VF_TOOL_DOT",
            "--format svg renders through Graphviz's dot, which is not on PATH",
            "install Graphviz (apt-get install graphviz, brew install graphviz, or "
            "https://graphviz.org/download/), or print --format dot or --format mermaid instead",
        )
    try:
        done = subprocess.run(
            [program, "-Tsvg"],
            input=graph,
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=DOT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EnvironmentProblem(
            "VF_TOOL_DOT",
            f"Graphviz's dot ({program}) did not finish: {exc}",
            "check the Graphviz installation, or print --format dot and render it elsewhere",
        ) from None
    if done.returncode != 0:
        raise EnvironmentProblem(
            "VF_TOOL_DOT",
            f"Graphviz's dot ({program}) failed: {done.stderr.strip()[:500]}",
            "check the Graphviz installation, or print --format dot and render it elsewhere",
        )
    return done.stdout
