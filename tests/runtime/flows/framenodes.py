"""Nodes that move 1080p bgr8 frames as numpy arrays."""

import hashlib
import json
from typing import Any

import numpy

from vf import Consumer, Processor, Producer

SHAPE = (1080, 1920, 3)


def frame(i: int) -> Any:
    """Frame ``i``: every byte depends on its place and on ``i``."""
    pattern = numpy.arange(SHAPE[0] * SHAPE[1] * SHAPE[2], dtype=numpy.uint32) * 7 + i
    return (pattern % 251).astype(numpy.uint8).reshape(SHAPE)


class Frames(Producer):
    def __init__(self, count: int = 3, **kw: Any) -> None:
        super().__init__(**kw)
        self.count, self.n = count, 0

    def next(self) -> Any:
        if self.n >= self.count:
            raise StopIteration
        self.n += 1
        return frame(self.n)


class Invert(Processor):
    def process(self, item: Any) -> Any:
        return 255 - item


class Digest(Consumer):
    def __init__(self, path: str, **kw: Any) -> None:
        super().__init__(**kw)
        self.path = path

    def consume(self, item: Any) -> None:
        record = {
            "array": isinstance(item, numpy.ndarray),
            "shape": list(item.shape),
            "dtype": str(item.dtype),
            "sha256": hashlib.sha256(item.tobytes()).hexdigest(),
        }
        with open(self.path, "a", encoding="utf-8") as out:
            out.write(json.dumps(record) + "\n")
