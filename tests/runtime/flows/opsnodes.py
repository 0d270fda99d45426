"""Nodes of the operator-command flows: a consumer with a bug that can be fixed live."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from vf import Consumer


class Fussy(Consumer):
    """Records items like ``Record``, but refuses the first item it gets while the file
    ``bug`` exists (and that item again, as long as ``bug`` exists); it notes the refused
    item's number in ``bug + ".item"``. Deleting ``bug`` is the fix."""

    def __init__(self, path: str, bug: str, **kw: Any) -> None:
        super().__init__(**kw)
        self.path = path
        self.bug = bug
        self.refused: int | None = None

    def consume(self, item: dict[str, Any]) -> None:
        if self.refused is None and Path(self.bug).exists():
            self.refused = item["i"]
            Path(self.bug + ".item").write_text(str(item["i"]), encoding="utf-8")
        if item["i"] == self.refused and Path(self.bug).exists():
            raise ValueError(f"refusing item {item['i']} (the bug is still there)")
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(item) + "\n")
