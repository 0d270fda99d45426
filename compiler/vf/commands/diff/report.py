"""``vf diff`` reports: text for a terminal, Markdown for a CI comment, JSON for tools."""

from __future__ import annotations

import json
from collections.abc import Sequence

from vf.commands.diff.command import EnvDiff, ResourceChange, TreeDiff, diff_json
from vf.commands.diff.flow import FlowChange
from vf.commands.diff.gitops import GitOpsChange, counts, subject
from vf.commands.diff.plan import BREAKING, WARNING, Finding
from vf.emit.readme import markdown_mermaid
from vf.render.diagram_syntax import printable

_MARK = {BREAKING: "!!", WARNING: "! ", "info": "  "}
NAMED_NODES = 20  # nodes named per line under the diagram; the diagram marks every one
_ACTION = {"added": "+", "removed": "-", "changed": "~", "replaced": "~>"}


def _ordered(findings: Sequence[Finding]) -> list[Finding]:
    rank = {BREAKING: 0, WARNING: 1}
    return sorted(findings, key=lambda f: rank.get(f.severity, 2))


def _summary(report: TreeDiff) -> str:
    changed = [e for e in report.environments if e.status != "unchanged"]
    if not report.changed:
        return f"no change: {report.out} is what vf compiles now"
    return f"{report.out} would change: {len(changed)} of {len(report.environments)} environment(s)"


def _counts(resources: Sequence[ResourceChange]) -> str:
    parts = [
        f"{sum(r.action == action for r in resources)} {action}"
        for action in ("added", "removed", "changed", "replaced")
    ]
    return ", ".join(parts)


def _detail(res: ResourceChange) -> str:
    parts = []
    if res.previous:
        parts.append(f"replaces {res.previous}")
    if res.fields:
        parts.append(", ".join(res.fields))
    return f" ({'; '.join(parts)})" if parts else ""


def _other_folders(report: TreeDiff) -> str:
    """Changed files outside the plans and the Kustomize tree, counted per folder (and
    outside gitops/ when its objects are reported)."""
    said = ("plan/", "base/", "overlays/", *(("gitops/",) if report.gitops else ()))
    found: dict[str, int] = {}
    for path in report.files:
        if not path.startswith(said):
            folder = path.split("/", 1)[0] + "/" if "/" in path else path
            found[folder] = found.get(folder, 0) + 1
    return ", ".join(
        f"{folder} ({n} files)" if folder.endswith("/") else folder
        for folder, n in sorted(found.items())
    )


_STRAYS = "files vf did not write where Helm or Argo CD reads every file (delete them)"
_VALUES_INDENT = " " * 9


def _gitops_notes(change: GitOpsChange) -> list[tuple[str, str, tuple[str, ...]]]:
    """(severity, message, values diff) per note; one without a message when it has none."""
    if not change.notes:
        return [("info", "", ())]
    return [(n.severity, n.message, n.lines) for n in change.notes]


def _gitops_text(changes: Sequence[GitOpsChange]) -> list[str]:
    if not changes:
        return []
    lines = ["", f"gitops objects: {counts(changes)}"]
    for change in changes:
        head = {"added": "new: ", "removed": "removed: "}.get(change.action, "") + subject(change)
        for severity, message, diff in _gitops_notes(change):
            said = f": {message}" if message else ""
            lines.append(f"  {_MARK.get(severity, '  ')} {head}{said}")
            lines += [f"{_VALUES_INDENT}{d}" for d in diff]
    return lines


def render_text(report: TreeDiff) -> str:
    lines = [_summary(report)]
    for env in report.environments:
        lines.append("")
        lines.append(f"environment {env.environment}: {env.status}")
        for finding in _ordered(env.findings):
            mark = _MARK.get(finding.severity, "  ")
            lines.append(f"  {mark} {finding.category:<11} {finding.subject}: {finding.message}")
        if env.resources:
            lines.append(f"  resources: {_counts(env.resources)}")
            for res in env.resources:
                lines.append(f"    {_ACTION[res.action]} {res.kind}/{res.name}{_detail(res)}")
    lines += _gitops_text(report.gitops)
    folders = _other_folders(report)
    if folders:
        lines.append("")
        lines.append(f"other generated files that change: {folders}")
    if report.strays:
        lines.append("")
        lines.append(f"{_STRAYS}: {', '.join(report.strays)}")
    if report.raw:
        lines.append("")
        lines.append(report.raw.rstrip("\n"))
    return "\n".join(lines) + "\n"


def _md_env(env: EnvDiff) -> list[str]:
    lines = ["", f"### `{env.environment}`: {env.status}"]
    if env.findings:
        lines += ["", "| severity | what | subject | change |", "| --- | --- | --- | --- |"]
        for f in _ordered(env.findings):
            severity = f"**{f.severity}**" if f.severity == BREAKING else f.severity
            lines.append(f"| {severity} | {f.category} | `{f.subject}` | {_cell(f.message)} |")
    if env.resources:
        lines += ["", f"<details><summary>Resources: {_counts(env.resources)}</summary>", ""]
        for res in env.resources:
            previous = f" (replaces `{res.previous}`)" if res.previous else ""
            fields = f": {', '.join(f'`{x}`' for x in res.fields)}" if res.fields else ""
            lines.append(f"- {res.action} `{res.kind}/{res.name}`{previous}{fields}")
        lines += ["", "</details>"]
    return lines


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(report: TreeDiff) -> str:
    lines = [f"## vf diff: `{report.out}`", "", _summary(report)]
    if report.flow is not None and report.changed:
        lines += flow_section(report.flow)
    for env in report.environments:
        lines.extend(_md_env(env))
    lines += _gitops_markdown(report.gitops)
    folders = _other_folders(report)
    if folders:
        lines += ["", f"Other generated files that change: {folders}."]
    if report.strays:
        lines += ["", f"**{_STRAYS.capitalize()}**: {', '.join(_code(p) for p in report.strays)}."]
    if report.raw:
        lines += ["", "<details><summary>YAML diff</summary>", "", "```diff"]
        lines += [report.raw.rstrip("\n"), "```", "", "</details>"]
    return "\n".join(lines) + "\n"


def _gitops_markdown(changes: Sequence[GitOpsChange]) -> list[str]:
    """A list item per note; a release's values diff folded under it."""
    if not changes:
        return []
    lines = ["", f"### GitOps objects: {counts(changes)}", ""]
    for change in changes:
        head = {"added": "new ", "removed": "removed "}.get(change.action, "")
        head += _code(subject(change))
        for severity, message, diff in _gitops_notes(change):
            mark = f"**{severity}** " if severity != "info" else ""
            said = f": {printable(message)}" if message else ""
            lines.append(f"- {mark}{head}{said}")
            if diff:
                fence = _fence("\n".join(diff))
                lines += ["", "  <details><summary>values diff</summary>", ""]
                lines += [f"  {fence}diff", *(f"  {printable(d)}" for d in diff), f"  {fence}", ""]
                lines += ["  </details>", ""]
    while lines[-1] == "":
        lines.pop()
    return lines


def _fence(text: str) -> str:
    """A code fence longer than any run of backticks in ``text``."""
    return "`" * max(3, _longest_run(text) + 1)


def _longest_run(text: str) -> int:
    longest = run = 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    return longest


def _code(text: str) -> str:
    """``text`` as a Markdown code span, whatever backticks it holds."""
    fence = "`" * (_longest_run(text) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{printable(text)}{pad}{fence}"


def _names(nodes: Sequence[str]) -> str:
    more = f" and {len(nodes) - NAMED_NODES} more" if len(nodes) > NAMED_NODES else ""
    return ", ".join(_code(n) for n in nodes[:NAMED_NODES]) + more


def flow_section(flow: FlowChange) -> list[str]:
    """The flow after the change, added and changed parts marked, removed ones listed."""
    lines = ["", "### The flow after this change", ""]
    text, too_large = markdown_mermaid(flow.diagram, highlight=flow.highlight)
    if text:
        lines += ["```mermaid", text.rstrip("\n"), "```", ""]
    else:
        lines += [
            f"Too large to draw in Markdown ({too_large}): run `vf explain GRAPH "
            "--format svg` to see it.",
            "",
        ]
    marks = flow.highlight
    added = [b.node for b in flow.diagram.boxes if b.node in marks.added]
    changed = [b.node for b in flow.diagram.boxes if b.node in marks.changed]
    parts = [f"nodes added (green): {_names(added)}"] if added else []
    parts += [f"nodes changed (amber): {_names(changed)}"] if changed else []
    if marks.arrows:
        parts.append(f"{len(marks.arrows)} channel arrow(s) new or changed (thick)")
    lines.append("Marked: " + "; ".join(parts) + "." if parts else "No node or channel changed.")
    if flow.removed_nodes:
        lines += ["", f"Removed nodes: {_names(flow.removed_nodes)}."]
    if flow.removed_arrows:
        arrows = ", ".join(f"{_code(a)} → {_code(b)}" for a, b in flow.removed_arrows)
        lines += ["", f"Removed channel arrows: {arrows}."]
    return lines


def render_json(report: TreeDiff) -> str:
    return json.dumps(diff_json(report), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


RENDERERS = {"text": render_text, "markdown": render_markdown, "json": render_json}
