"""A local stand-in for the thumbnailer image: the same protocol, written with vf_runtime."""

from __future__ import annotations

from typing import Any

from vf_runtime.components import serve
from vf_runtime.nodes import Processor


class Thumbnailer(Processor):
    """Describes the thumbnail a frame would get (the image does the pixel work on a GPU)."""

    def __init__(self, width: int, format: str = "jpeg", **kw: Any) -> None:
        super().__init__(**kw)
        self.width = width
        self.format = format

    def process(self, frame: dict[str, Any]) -> dict[str, Any]:
        height = max(1, frame["height"] * self.width // frame["width"])
        return {"frame": frame["frame"], "size": [self.width, height], "format": self.format}


if __name__ == "__main__":
    serve(Thumbnailer)
