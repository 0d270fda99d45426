"""Python nodes of the thumbnails example: a live synthetic frame source and a store."""

from __future__ import annotations

import itertools
import json
import os
from typing import Any

from vf import Consumer, Producer


class FrameSource(Producer):
    """Emits frame descriptions forever (a live camera), or ``limit`` of them."""

    def __init__(self, width: int, height: int, limit: int = 0, **kw: Any) -> None:
        super().__init__(is_finite=False, **kw)
        self.width = width
        self.height = height
        self.limit = limit
        self._count = itertools.count(1)

    def next(self) -> dict[str, Any]:
        index = next(self._count)
        if self.limit and index > self.limit:
            raise StopIteration
        return {"frame": index, "width": self.width, "height": self.height}


class ThumbnailStore(Consumer):
    """Appends one JSON line per thumbnail under ``directory`` (created in open())."""

    def __init__(self, directory: str, **kw: Any) -> None:
        super().__init__(**kw)
        self.directory = directory

    def open(self) -> None:
        os.makedirs(self.directory, exist_ok=True)

    def consume(self, thumb: dict[str, Any]) -> None:
        with open(os.path.join(self.directory, "index.jsonl"), "a", encoding="utf-8") as out:
            out.write(json.dumps(thumb, sort_keys=True) + "\n")
