"""Node classes of the run-tree lifecycle flows, written as vf's docs tell users to."""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

from vf import Consumer, Processor, Producer


class Numbers(Producer):
    """Emits ``{"i": n, "tag": tag}`` for n = 1..count (forever when count is 0)."""

    def __init__(self, count: int = 10, interval: float = 0.0, tag: str = "", **kw: Any) -> None:
        super().__init__(**kw)
        self.count = count
        self.interval = interval
        self.tag = tag
        self._n = 0

    def next(self) -> dict[str, Any]:
        if self.count and self._n >= self.count:
            raise StopIteration
        if self.interval:
            time.sleep(self.interval)
        self._n += 1
        return {"i": self._n, "tag": self.tag}


class Double(Processor):
    """Doubles ``i``."""

    def process(self, item: dict[str, Any]) -> dict[str, Any]:
        return {**item, "double": item["i"] * 2}


class CrashingDouble(Double):
    """Doubles ``i``, but its process dies ``after`` seconds from ``open()``: a pod that
    becomes ready, then crash-loops."""

    def __init__(self, after: float = 1.0, **kw: Any) -> None:
        super().__init__(**kw)
        self.after = after

    def open(self) -> None:
        timer = threading.Timer(self.after, os._exit, args=(1,))
        timer.daemon = True
        timer.start()


class Refused(Exception):
    """An item the sink will never take: dead-lettered at once, not retried."""

    disposition = "poison"


class Record(Consumer):
    """Appends one JSON line per applied item to ``path``, with the pod that applied it;
    refuses item ``refuse`` (none when 0); ``open_delay`` seconds pass before it reads."""

    def __init__(self, path: str, refuse: int = 0, open_delay: float = 0.0, **kw: Any) -> None:
        super().__init__(**kw)
        self.path = path
        self.refuse = refuse
        self.open_delay = open_delay

    def open(self) -> None:
        time.sleep(self.open_delay)

    def consume(self, item: dict[str, Any]) -> None:
        if self.refuse and item["i"] == self.refuse:
            raise Refused(f"refusing item {item['i']}")
        line = {**item, "pod": os.environ.get("HOSTNAME", "")}
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(line) + "\n")


def _refused(item: dict[str, Any], every: int, rest: int) -> None:
    if every and item["i"] % every == rest:
        raise Refused(f"refusing item {item['i']}")


class Picky(Double):
    """Doubles ``i``, but refuses each item whose ``i % every`` is ``rest`` (none when
    ``every`` is 0): dead letters for as long as it runs."""

    def __init__(self, every: int = 0, rest: int = 0, **kw: Any) -> None:
        super().__init__(**kw)
        self.every, self.rest = every, rest

    def process(self, item: dict[str, Any]) -> dict[str, Any]:
        _refused(item, self.every, self.rest)
        return super().process(item)


class PickyRecord(Record):
    """A :class:`Record` that refuses each item whose ``i % every`` is ``rest``."""

    def __init__(self, every: int = 0, rest: int = 0, **kw: Any) -> None:
        super().__init__(**kw)
        self.every, self.rest = every, rest

    def consume(self, item: dict[str, Any]) -> None:
        _refused(item, self.every, self.rest)
        super().consume(item)
