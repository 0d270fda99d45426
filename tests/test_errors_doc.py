"""One catalogue of error codes: every code vf raises has a meaning and a fix, and
docs/errors.md is generated from it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from vf.codes import catalogue, errors_markdown

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [ROOT / "compiler" / "vf", ROOT / "runtime" / "vf_runtime"]
CODE = re.compile(r"VF_[A-Z0-9_]+")
# Calls that read or name an environment variable (VF_NATS_URL, …), not an error code.
ENV_READERS = {
    "get",
    "getenv",
    "text",
    "choice",
    "integer",
    "number",
    "flag",
    "pop",
    "json_object",
    "append",
}


def _constant(node: ast.AST | None) -> str | None:
    text = _constant_text(node)
    return text if text is not None and CODE.fullmatch(text) else None


def _call_codes(node: ast.Call) -> set[str]:
    """A raised error's first argument or ``code=``, and ``getattr(exc, "code", CODE)``."""
    name = ast.unparse(node.func).rsplit(".", 1)[-1]
    found = {_constant(k.value) or "" for k in node.keywords if k.arg == "code"}
    if node.args and name not in ENV_READERS:
        found.add(_constant(node.args[0]) or "")
    if name == "getattr" and len(node.args) == 3 and _constant_text(node.args[1]) == "code":
        found.add(_constant(node.args[2]) or "")
    return found


def _codes_in(tree: ast.AST) -> set[str]:
    """Codes in code positions: calls (above), a ``code`` attribute or default, and a dead
    letter's ``VF-Code`` header."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            found |= _call_codes(node)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(ast.unparse(t).endswith("code") for t in targets):
                found.add(_constant(node.value) or "")
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if _constant_text(key) == "VF-Code":
                    found.add(_constant(value) or "")
        elif isinstance(node, ast.JoinedStr) and _family(node):
            found.add(_family(node) + "<")  # f"VF_NODE_{...}": a family made at run time
        elif isinstance(node, ast.FunctionDef):
            names = [a.arg for a in node.args.kwonlyargs + node.args.args]
            defaults = [d for d in node.args.kw_defaults + node.args.defaults if d is not None]
            if "code" in names:
                found |= {_constant(d) or "" for d in defaults}
    return found - {""}


def _family(node: ast.JoinedStr) -> str:
    """The fixed head of an f-string code, ``VF_NODE_`` of ``f"VF_NODE_{name}"``; else ""."""
    head = _constant_text(node.values[0]) if len(node.values) > 1 else None
    return head if head is not None and re.fullmatch(r"VF_[A-Z0-9_]+_", head) else ""


def _listed(name: str) -> str:
    """A catalogue name as ``used_codes`` finds it: a family by its head and ``<``."""
    return name.split("<", 1)[0] + "<" if "<" in name else name


def _constant_text(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def used_codes() -> set[str]:
    found: set[str] = set()
    for root in SOURCES:
        for path in sorted(root.rglob("*.py")):
            text = path.read_text()
            found |= _codes_in(ast.parse(text))
            found |= set(re.findall(r"(?:error|warning)\[(VF_[A-Z0-9_]+)\]", text))
    return found


def test_every_code_vf_raises_is_in_the_catalogue_and_nothing_else() -> None:
    used, listed = used_codes(), {_listed(name) for name in catalogue()}
    assert not used - listed, f"add these to compiler/vf/codes.txt: {sorted(used - listed)}"
    assert "VF_NODE_<" in listed  # the codes of a node's own exceptions, as one family
    assert not listed - used, f"no code raises these any more: {sorted(listed - used)}"


def test_every_code_has_a_meaning_and_a_fix() -> None:
    for code in catalogue().values():
        assert code.meaning.endswith(".") and code.fix.endswith("."), code.name
        assert "|" not in code.meaning + code.fix, code.name


def test_the_errors_doc_is_generated_from_the_catalogue() -> None:
    doc = (ROOT / "docs" / "errors.md").read_text(encoding="utf-8")
    assert doc == errors_markdown(), (
        "docs/errors.md is stale: regenerate it with .venv/bin/python -m vf.codes > docs/errors.md"
    )
