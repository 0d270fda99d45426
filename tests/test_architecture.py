"""The stages show in the code: stage packages with their contract, and the import contract."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
COMPILER = ROOT / "compiler" / "vf"
RUNTIME = ROOT / "runtime" / "vf_runtime"
# What stays at the top of vf: entry points, the facade, and what every stage shares.
TOP_LEVEL = {
    "__init__", "__main__", "cli", "codes", "collector", "errors", "memo", "names", "pipeline",
    "resources",
}  # fmt: skip
STAGES = (
    "frontend", "config", "plan", "verify", "render", "emit", "textio", "tree", "commands",
    "runtree", "containers",
)  # fmt: skip
RUNTIME_PACKAGES = ("worker", "broker", "store", "wire", "local")


def lint_imports() -> str:
    found = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert found, "lint-imports is missing: install the dev extra (pip install -e '.[dev]')"
    return found


def test_the_import_contract_holds() -> None:
    done = subprocess.run(
        [lint_imports(), "--no-cache"],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout
    assert done.stdout.count("KEPT") >= 5


def test_the_compiler_top_level_holds_no_stage_module() -> None:
    top = {path.stem for path in COMPILER.glob("*.py")}
    assert top <= TOP_LEVEL, f"modules to move into a stage package: {sorted(top - TOP_LEVEL)}"


@pytest.mark.parametrize(
    "package",
    [COMPILER / name for name in STAGES] + [RUNTIME / name for name in RUNTIME_PACKAGES],
    ids=lambda path: path.name,
)
def test_each_stage_package_says_its_job_input_and_output(package: Path) -> None:
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
    assert doc.strip(), f"{package.name}/__init__.py has no docstring"
    assert "Input:" in doc and "Output:" in doc, f"{package.name}: say its input and output"


def test_no_module_is_over_500_lines() -> None:
    long = [
        f"{path.relative_to(ROOT)}: {n}"
        for path in sorted([*COMPILER.rglob("*.py"), *RUNTIME.rglob("*.py")])
        if (n := len(path.read_text().splitlines())) > 500
    ]
    assert not long, long


def _sources() -> list[Path]:
    return sorted([*COMPILER.rglob("*.py"), *RUNTIME.rglob("*.py")])


def test_label_keys_are_written_in_one_module() -> None:
    owner = RUNTIME / "labels.py"
    spelled = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in _sources()
        if path != owner
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"[\"'](vf\.dev|app\.kubernetes\.io)/[a-z-]+[\"']", line)
    ]
    assert not spelled, f"use vf_runtime.labels instead of spelling label keys: {spelled}"


def test_the_compiler_spells_no_broker_name() -> None:
    spelled = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sorted(COMPILER.rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if "--from--" in line or "broker_token" in line
    ]
    assert not spelled, f"broker names come from vf_runtime.broker.naming: {spelled}"


def test_tests_import_no_private_name_and_no_conftest() -> None:
    found = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or not node.module:
                continue
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            if node.module.split(".")[-1] == "conftest":
                found.append(f"{where} imports from {node.module}")
            elif node.module.split(".")[0] in ("vf", "vf_runtime"):
                private = [a.name for a in node.names if re.match(r"_[^_]", a.name)]
                found += [f"{where} imports {node.module}.{name}" for name in private]
    assert not found, found


def test_no_function_is_over_60_lines() -> None:
    long = [
        f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {n}"
        for path in _sources()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and (n := (node.end_lineno or node.lineno) - node.lineno + 1) > 60
    ]
    assert not long, long


def test_the_ir_imports_no_stage_and_types_its_closed_sets() -> None:
    from typing import Literal, get_args, get_origin, get_type_hints

    from vf.ir.admission import Finding
    from vf.ir.graph import Graph, NodeIR
    from vf.ir.plan import Plan, Workload

    for path in sorted((COMPILER / "ir").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("vf."):
                assert node.module.startswith("vf.ir."), f"{path.name} imports {node.module}"
    closed = {
        (NodeIR, "kind"): {"producer", "processor", "consumer"},
        (NodeIR, "device_type"): {"cpu", "gpu"},
        (Graph, "flow_type"): {"batch", "realtime"},
        (Plan, "flow_type"): {"batch", "realtime"},
        (Workload, "kind"): {"Deployment", "StatefulSet", "Job"},
        (Workload, "node_kind"): {"producer", "processor", "consumer"},
        (Finding, "status"): {"admitted", "warning", "rejected"},
        (Workload, "rollout"): {"drain", "surge", "no-surge", None},
    }
    for (record, field), values in closed.items():
        hint = get_type_hints(record)[field]
        options = [hint] if get_origin(hint) is Literal else list(get_args(hint))
        assert all(get_origin(o) is Literal or o is type(None) for o in options), hint
        found = {a for o in options for a in (get_args(o) if o is not type(None) else (None,))}
        assert found == values, f"{record.__name__}.{field} is {hint}"


def test_the_plan_json_form_is_declared_on_the_fields_not_guessed_from_names() -> None:
    from dataclasses import dataclass, field

    from vf.ir.plan import record_to_json
    from vf.ir.records import AS_OBJECT, OMIT_IF_NONE, Pairs

    @dataclass(frozen=True, kw_only=True)
    class Note:
        labels: str  # called like a pairs field, but a plain string
        tags: Pairs = field(default=(("a", "b"),), metadata=AS_OBJECT)
        pods: str | None = None  # called like an optional field, but written as null
        extra: str | None = field(default=None, metadata=OMIT_IF_NONE)

    assert record_to_json(Note(labels="x")) == {"labels": "x", "tags": {"a": "b"}, "pods": None}
