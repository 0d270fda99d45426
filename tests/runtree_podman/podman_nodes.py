"""Nodes that behave differently in a container than in a local process."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from vf import Consumer, Producer


class Count(Producer):
    """Emits ``{"i": n}`` for n = 1..count."""

    def __init__(self, count: int = 3, **kw: Any) -> None:
        super().__init__(**kw)
        self.count = count
        self._n = 0

    def next(self) -> dict[str, Any]:
        if self._n >= self.count:
            raise StopIteration
        self._n += 1
        return {"i": self._n}


class WriteBeside(Consumer):
    """Writes each item next to its own module: fine on a laptop, refused by a read-only root."""

    def consume(self, item: dict[str, Any]) -> None:
        target = Path(__file__).resolve().parent / f"item-{item['i']}.txt"
        target.write_text(str(item), encoding="utf-8")


class Hog(Consumer):
    """Holds 512 MiB while it consumes an item: more than its pod's memory limit."""

    def consume(self, item: dict[str, Any]) -> None:
        held = bytearray(512 << 20)
        os.environ["VF_TEST_HELD"] = str(len(held))
