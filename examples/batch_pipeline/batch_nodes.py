"""Nodes of the batch example: read records, enrich them twice, join the halves, store."""

from __future__ import annotations

from typing import Any

from vf import Consumer, Processor, Producer


class RecordReader(Producer):
    """Emits ``count`` numbered records, then stops."""

    replayable = True  # a restart yields the same records: they keep their ids (MSGID-4)

    def __init__(self, count: int = 100, **kw: Any) -> None:
        super().__init__(**kw)
        self.count = count
        self._next = 0

    def next(self) -> dict[str, int]:
        if self._next >= self.count:
            raise StopIteration
        self._next += 1
        return {"id": self._next}


class Scale(Processor):
    """Multiplies a record's id by ``factor``."""

    def __init__(self, factor: int, **kw: Any) -> None:
        super().__init__(**kw)
        self.factor = factor

    def process(self, record: dict[str, int]) -> dict[str, int]:
        return {"id": record["id"], "value": record["id"] * self.factor}


class Merge(Processor):
    """Joins the two scaled halves of one record."""

    def process(self, left: dict[str, int], right: dict[str, int]) -> dict[str, int]:
        return {"id": left["id"], "sum": left["value"] + right["value"]}


class ResultStore(Consumer):
    """Appends each merged record to ``path`` (opened in open(), never in __init__)."""

    def __init__(self, path: str = "/tmp/results.jsonl", **kw: Any) -> None:
        super().__init__(**kw)
        self.path = path

    def consume(self, merged: dict[str, int]) -> None:
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(f"{merged}\n")
