"""What one generation of a run dead-lettered: read back from the flow's DLQ after a run.

``vf run-local`` uses it to report, per node, how many items were dead-lettered and
why, and to keep a copy of them that outlives an embedded broker.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from pathlib import Path

from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

from vf_runtime.broker.client import connect
from vf_runtime.broker.headers import stored_headers
from vf_runtime.broker.naming import RunNames
from vf_runtime.clientauth import NatsAuth

FIRST_REASONS = 3


@dataclass(frozen=True, kw_only=True)
class NodeDeadLetters:
    """One node's dead letters in this generation: how many, and the first reasons."""

    node: str
    count: int
    reasons: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class DeadLetterReport:
    """Every node's dead letters, and the raw records (headers and bytes) read back."""

    nodes: tuple[NodeDeadLetters, ...]
    records: tuple[dict[str, object], ...] = field(default=())

    @property
    def total(self) -> int:
        return sum(n.count for n in self.nodes)


async def _node_letters(
    js: JetStreamContext, names: RunNames, node: str
) -> tuple[NodeDeadLetters, list[dict[str, object]]]:
    stream, subject = names.dlq_stream(), names.dlq_subject(node)
    reasons: list[str] = []
    records: list[dict[str, object]] = []
    seq = 0
    while True:
        try:
            msg = await js.get_msg(stream, seq=seq + 1, subject=subject, next=True)
        except NotFoundError:
            break
        seq = int(msg.seq or 0)
        headers = stored_headers(msg)  # text, whatever language a reason is in
        reason = f"{headers.get('VF-Code', '?')}: {headers.get('VF-Error', '')}"
        if reason not in reasons and len(reasons) < FIRST_REASONS:
            reasons.append(reason)
        data = base64.b64encode(msg.data or b"").decode()
        records.append({"node": node, "stream_seq": seq, "headers": headers, "data_b64": data})
    return NodeDeadLetters(node=node, count=len(records), reasons=tuple(reasons)), records


async def read_dead_letters(
    url: str, names: RunNames, nodes: tuple[str, ...], *, auth: NatsAuth | None = None
) -> DeadLetterReport:
    """The dead letters ``nodes`` left in ``names``' generation (none when no DLQ exists)."""
    client = await connect(url, timeout=10, name="vf-dead-letters", auth=auth)
    try:
        js = client.jetstream(timeout=10)
        try:
            await js.stream_info(names.dlq_stream())
        except NotFoundError:
            return DeadLetterReport(nodes=())
        found: list[NodeDeadLetters] = []
        records: list[dict[str, object]] = []
        for node in nodes:
            letters, raw = await _node_letters(js, names, node)
            if letters.count:
                found.append(letters)
                records.extend(raw)
        return DeadLetterReport(nodes=tuple(found), records=tuple(records))
    finally:
        await client.close()


def write_dead_letters(report: DeadLetterReport, path: Path) -> None:
    """Keep the records as JSON lines (headers, and the original bytes in base64)."""
    lines = [json.dumps(record, sort_keys=True) for record in report.records]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
