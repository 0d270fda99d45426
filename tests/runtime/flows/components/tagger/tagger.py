"""The tagger component's program: one replica of a native processor, written in Python."""

from __future__ import annotations

from typing import Any

from vf_runtime.components import serve
from vf_runtime.nodes import Processor


class Tagger(Processor):
    """Adds ``tag`` (a component param) to every item."""

    def __init__(self, tag: str, **kw: Any) -> None:
        super().__init__(**kw)
        self.tag = tag

    def process(self, item: dict[str, Any]) -> dict[str, Any]:
        return {**item, "tag": self.tag}


if __name__ == "__main__":
    serve(Tagger)
