"""The catalogue of vf's error codes: each code's meaning and fix, and ``docs/errors.md``.

The table is ``codes.txt`` beside this module, one ``CODE | meaning | fix`` line per
code, compiler and runtime alike. A family of codes a worker makes at run time is one
line whose variable part is in angle brackets: ``VF_NODE_<EXCEPTION>``.
``tests/test_errors_doc.py`` checks that every code vf raises is in it (and nothing else),
and that ``docs/errors.md`` is what ``python -m vf.codes`` writes.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

TABLE = Path(__file__).with_name("codes.txt")
FAMILIES = (
    ("VF_GRAPH", "The graph module", "how the flow is written: nodes, wiring, policies"),
    ("VF_POLICY", "The graph module", ""),
    ("VF_LOAD", "Loading the graph module", "running the user's module and its factory"),
    ("VF_COMPONENT", "Native components", "component descriptors and their params"),
    ("VF_CONFIG", "vf.yaml", "the deployment targets"),
    ("VF_ADMISSION", "Admission", "whether an environment can keep each channel's promise"),
    ("VF_GPU", "GPUs", "packing the flow's GPU workers onto the declared inventory"),
    ("VF_IDENTITY", "Names", "logical names that would share a physical one"),
    ("VF_FLOW", "Names", ""),
    ("VF_K8S", "Verification", "what the API server would refuse"),
    ("VF_PLAN", "Verification", ""),
    ("VF_OUTPUT", "The output tree", "writing the tree into a directory vf owns"),
    (
        "VF_DIFF",
        "Commands",
        "the command line; vf diff, init, inventory, explain, run-local, run-tree",
    ),
    ("VF_INIT", "Commands", ""),
    ("VF_INVENTORY", "Commands", ""),
    ("VF_TOOL", "Commands", ""),
    ("VF_LOCAL", "Commands", ""),
    ("VF_RUN_TREE", "Commands", ""),
    ("VF_WORKER_ENV", "Commands", ""),
    ("VF_USAGE", "Commands", ""),
    ("VF_FOLDER", "Commands", ""),
    ("VF_PODMAN", "Images and containers", "building vf's images and running them with podman"),
    ("VF_IMAGE", "Images and containers", ""),
    ("VF_PIPELINE_IMAGE", "Images and containers", ""),
    ("VF_DLQ", "Operator commands", "vf dlq, runs, teardown, debug decode"),
    ("VF_DECODE", "Operator commands", ""),
    ("VF_CONFIRM", "Operator commands", ""),
    ("VF_RUN_LIVE", "Operator commands", ""),
    ("VF_TEARDOWN", "Operator commands", ""),
    ("VF_SELECTOR", "Operator commands", ""),
    ("VF_BROKER", "Broker and store", "reaching NATS JetStream and Redis"),
    ("VF_STORE", "Broker and store", ""),
    ("VF_TOPOLOGY", "Broker and store", ""),
    ("VF_WIRE", "The wire", "decoding and encoding the v4 envelope"),
    ("VF_INTERNAL", "vf itself", "a bug in vf"),
    ("VF_", "Workers and runs", "what a worker reports, dead-letters or stops on"),
)


@dataclass(frozen=True, kw_only=True)
class Code:
    """One error code: what it means and how to fix it."""

    name: str
    meaning: str
    fix: str

    @property
    def family(self) -> str:
        return next(title for prefix, title, _ in FAMILIES if self.name.startswith(prefix))


@cache
def catalogue() -> dict[str, Code]:
    """Every code, read once from the table, keyed by name."""
    codes: dict[str, Code] = {}
    for line in TABLE.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, meaning, fix = (part.strip() for part in line.split(" | "))
        codes[name] = Code(name=name, meaning=meaning, fix=fix)
    return codes


def errors_markdown() -> str:
    """``docs/errors.md``: every code by family, with its meaning and fix."""
    lines = [
        "# Error codes",
        "",
        "<!-- Generated from compiler/vf/codes.txt by `python -m vf.codes`: do not edit. -->",
        "",
        "vf reports every problem as `error[CODE] what`, the fix, and where. Exit codes: 2 for",
        "the graph, vf.yaml or the request, 3 for the environment, 70 for a bug in vf",
        "(docs/reliability.md). Workers put the code of a dead letter in its `VF-Code` header.",
    ]
    about = {title: text for _, title, text in FAMILIES if text}
    for family in dict.fromkeys(title for _, title, _ in FAMILIES):
        codes = sorted((c for c in catalogue().values() if c.family == family), key=_name)
        if not codes:
            continue
        lines += ["", f"## {family}", "", f"{about[family][0].upper()}{about[family][1:]}.", ""]
        lines += ["| code | meaning | fix |", "|---|---|---|"]
        lines += [f"| `{c.name}` | {c.meaning} | {c.fix} |" for c in codes]
    return "\n".join(lines) + "\n"


def _name(code: Code) -> str:
    return code.name


if __name__ == "__main__":
    sys.stdout.write(errors_markdown())
