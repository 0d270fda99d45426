"""Nodes of the GPU example: decode clips, embed and detect on shared GPUs, re-rank on whole cards."""

from __future__ import annotations

from typing import Any

from vf import Consumer, Processor, Producer


class ClipReader(Producer):
    """Emits ``count`` clip descriptors, then stops."""

    def __init__(self, count: int = 50, **kw: Any) -> None:
        super().__init__(**kw)
        self.count = count
        self._sent = 0

    def next(self) -> dict[str, int]:
        if self._sent >= self.count:
            raise StopIteration
        self._sent += 1
        return {"clip": self._sent}


class Embedder(Processor):
    """Computes an embedding per clip (a stand-in vector here)."""

    def __init__(self, dims: int = 8, **kw: Any) -> None:
        super().__init__(**kw)
        self.dims = dims

    def process(self, clip: dict[str, int]) -> dict[str, Any]:
        return {**clip, "embedding": [float(clip["clip"] % 7)] * self.dims}


class Detector(Processor):
    """Flags clips with objects of interest (a stand-in rule here)."""

    def process(self, clip: dict[str, int]) -> dict[str, Any]:
        return {**clip, "objects": clip["clip"] % 3}


class Reranker(Processor):
    """Joins embeddings and detections per clip into a score."""

    def process(self, embedded: dict[str, Any], detected: dict[str, Any]) -> dict[str, Any]:
        return {"clip": embedded["clip"], "score": sum(embedded["embedding"]) + detected["objects"]}


class IndexWriter(Consumer):
    """Collects scores (an idempotent sink would write them to a search index)."""

    def consume(self, scored: dict[str, Any]) -> None:
        print(f"clip {scored['clip']} score {scored['score']}")
