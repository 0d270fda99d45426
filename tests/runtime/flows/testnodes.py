"""Nodes of the runtime integration flows: numbered items, scaling, pairing, recording."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from vf import Consumer, Processor, Producer


class Numbers(Producer):
    """Emits ``{"i": n}`` for n = 1..count (forever when count is 0), optionally padded."""

    def __init__(self, count: int = 10, size: int = 0, interval: float = 0.0, **kw: Any) -> None:
        super().__init__(**kw)
        self.count = count
        self.size = size
        self.interval = interval
        self._n = 0

    def next(self) -> dict[str, Any]:
        if self.count and self._n >= self.count:
            raise StopIteration
        if self.interval:
            time.sleep(self.interval)
        self._n += 1
        item: dict[str, Any] = {"i": self._n}
        if self.size:
            item["blob"] = bytes([self._n % 256]) * self.size
        return item


class Scale(Processor):
    """Multiplies ``i``; can kill its own process once, refuse one item, or be slow."""

    def __init__(
        self,
        factor: int = 2,
        crash_at: int = 0,
        crash_marker: str = "",
        fail_on: int = 0,
        delay: float = 0.0,
        **kw: Any,
    ) -> None:
        super().__init__(**kw)
        self.factor = factor
        self.crash_at = crash_at
        self.crash_marker = crash_marker
        self.fail_on = fail_on
        self.delay = delay

    def process(self, item: dict[str, Any]) -> dict[str, Any]:
        if self.crash_at and item["i"] == self.crash_at and not Path(self.crash_marker).exists():
            Path(self.crash_marker).write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
        if self.fail_on and item["i"] == self.fail_on:
            raise ValueError(f"refusing item {item['i']}")
        if self.delay:
            time.sleep(self.delay)
        return {"i": item["i"], "v": item["i"] * self.factor}


class Pair(Processor):
    """Joins the two scaled halves of one item."""

    def process(self, left: dict[str, Any], right: dict[str, Any]) -> dict[str, Any]:
        assert left["i"] == right["i"], (left, right)
        return {"i": left["i"], "sum": left["v"] + right["v"]}


class Record(Consumer):
    """Appends one JSON line per item to ``path`` (payload bytes recorded by length)."""

    def __init__(self, path: str, **kw: Any) -> None:
        super().__init__(**kw)
        self.path = path

    def consume(self, item: dict[str, Any]) -> None:
        line = {k: (len(v) if isinstance(v, bytes) else v) for k, v in item.items()}
        if isinstance(item.get("blob"), bytes):
            line["blob_ok"] = item["blob"] == bytes([item["i"] % 256]) * len(item["blob"])
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(line) + "\n")
