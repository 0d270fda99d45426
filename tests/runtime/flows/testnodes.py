"""Nodes of the runtime integration flows: numbered items, scaling, pairing, recording."""

from __future__ import annotations

import gc
import json
import os
import signal
import threading
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


class ReplayedNumbers(Numbers):
    """:class:`Numbers` that re-emits the same ids after a restart (MSGID-4)."""

    replayable = True


def _crash_once(item: dict[str, Any], *, at: int, marker: str) -> None:
    """SIGKILL this very process when ``item`` is number ``at``, the first time only."""
    if at and item["i"] == at and not Path(marker).exists():
        Path(marker).write_text(str(os.getpid()))
        os.kill(os.getpid(), signal.SIGKILL)


def _note_progress(directory: str, name: str, done: int) -> None:
    """Leave ``{directory}/{name}-{pid}`` holding how many items this worker processed,
    so a test can tell how far it got and kill it mid-run."""
    if directory:
        (Path(directory) / f"{name}-{os.getpid()}").write_text(str(done))


class Scale(Processor):
    """Multiplies ``i``; can kill its own process once, refuse one item, be slow, or never
    return from the call of item ``hang_on`` once (the replica that removes the file
    ``hang_marker`` is the one that hangs)."""

    def __init__(
        self,
        factor: int = 2,
        crash_at: int = 0,
        crash_marker: str = "",
        fail_on: int = 0,
        delay: float = 0.0,
        pid_dir: str = "",
        open_delay: float = 0.0,
        fail_from: int = 0,
        fail_text: str = "refusing item",
        hang_on: int = 0,
        hang_marker: str = "",
        **kw: Any,
    ) -> None:
        super().__init__(**kw)
        self.hang_on = hang_on
        self.hang_marker = hang_marker
        self.fail_text = fail_text  # what the failure on ``fail_on`` says
        self.open_delay = open_delay  # starts reading this much later
        self.fail_from = fail_from  # refuses every item from this one on (0: none)
        self.factor = factor
        self.crash_at = crash_at
        self.crash_marker = crash_marker
        self.fail_on = fail_on
        self.delay = delay
        self.pid_dir = pid_dir
        self._done = 0

    def open(self) -> None:
        _note_progress(self.pid_dir, str(self.name), 0)
        time.sleep(self.open_delay)

    def process(self, item: dict[str, Any]) -> dict[str, Any]:
        _crash_once(item, at=self.crash_at, marker=self.crash_marker)
        if self.hang_on and item["i"] == self.hang_on and self.hang_marker:
            try:
                os.remove(self.hang_marker)
            except FileNotFoundError:
                pass  # another life or replica hung on it already
            else:
                threading.Event().wait()  # never returns
        self._done += 1
        if self._done % 250 == 0:
            _note_progress(self.pid_dir, str(self.name), self._done)
        if self.fail_on and item["i"] == self.fail_on:
            raise ValueError(f"{self.fail_text} {item['i']}")
        if self.fail_from and item["i"] >= self.fail_from:
            raise RuntimeError(f"the model is broken (item {item['i']})")
        if self.delay:
            time.sleep(self.delay)
        out: dict[str, Any] = {"i": item["i"], "v": item["i"] * self.factor}
        if "blob" in item:
            out["blob"] = item["blob"]  # a padded item stays padded (and offloaded)
        return out


class Pair(Processor):
    """Joins the two scaled halves of one item."""

    def process(self, left: dict[str, Any], right: dict[str, Any]) -> dict[str, Any]:
        assert left["i"] == right["i"], (left, right)
        return {"i": left["i"], "sum": left["v"] + right["v"]}


class Record(Consumer):
    """Appends one JSON line per item to ``path`` (payload bytes recorded by length).

    Each line is one application of an item, so a test counts applications per item.
    """

    def __init__(self, path: str, crash_at: int = 0, crash_marker: str = "", **kw: Any) -> None:
        super().__init__(**kw)
        self.path = path
        self.crash_at = crash_at
        self.crash_marker = crash_marker

    def consume(self, item: dict[str, Any]) -> None:
        _crash_once(item, at=self.crash_at, marker=self.crash_marker)
        line = {k: (len(v) if isinstance(v, bytes) else v) for k, v in item.items()}
        if isinstance(item.get("blob"), bytes):
            line["blob_ok"] = item["blob"] == bytes([item["i"] % 256]) * len(item["blob"])
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(line) + "\n")


class CrashingNumbers(Numbers):
    """:class:`Numbers` whose process kills itself once, as it reaches item ``crash_at``."""

    def __init__(self, crash_at: int = 0, crash_marker: str = "", **kw: Any) -> None:
        super().__init__(**kw)
        self.crash_at = crash_at
        self.crash_marker = crash_marker

    def next(self) -> dict[str, Any]:
        item = super().next()
        _crash_once(item, at=self.crash_at, marker=self.crash_marker)
        return item


class ReplayedCrashingNumbers(CrashingNumbers):
    """:class:`CrashingNumbers` declared replayable (MSGID-4)."""

    replayable = True


class HeapNumbers(Numbers):
    """:class:`Numbers` whose items carry the collector's frozen count as ``next()`` sees it."""

    def next(self) -> dict[str, Any]:
        item = super().next()
        item["producer_frozen"] = gc.get_freeze_count()
        return item


class HeapRecord(Record):
    """:class:`Record` that adds the collector's frozen count as ``consume()`` sees it."""

    def consume(self, item: dict[str, Any]) -> None:
        super().consume({**item, "consumer_frozen": gc.get_freeze_count()})
