"""Nodes of the realtime example: live cameras, detection, per-camera tracking, alerts."""

from __future__ import annotations

import time
from typing import Any

from vf import Consumer, Processor, Producer


class CameraFeed(Producer):
    """A live source: one frame descriptor every ``interval_ms``, forever."""

    def __init__(self, camera: str, interval_ms: int = 40, **kw: Any) -> None:
        super().__init__(is_finite=False, **kw)
        self.camera = camera
        self.interval_ms = interval_ms
        self._frame = 0

    def next(self) -> dict[str, Any]:
        time.sleep(self.interval_ms / 1000)
        self._frame += 1
        return {"camera": self.camera, "frame": self._frame}


class Detector(Processor):
    """Finds objects in a frame (a stand-in score here)."""

    def __init__(self, threshold: float = 0.5, **kw: Any) -> None:
        super().__init__(**kw)
        self.threshold = threshold

    def process(self, frame: dict[str, Any]) -> dict[str, Any]:
        score = (frame["frame"] % 10) / 10
        return {**frame, "detected": score >= self.threshold}


class Tracker(Processor):
    """Keeps per-track state, so replicas partition by trace id and each owns its tracks."""

    def process(self, detection: dict[str, Any]) -> dict[str, Any]:
        return {**detection, "track": f"{detection['camera']}-{detection['frame']}"}


class AlertSink(Consumer):
    """Prints alerts for frames with detections."""

    def consume(self, track: dict[str, Any]) -> None:
        if track["detected"]:
            print(f"alert {track['track']}")


class Archiver(Consumer):
    """Keeps a running count of archived frames (a real one would write to object storage)."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self._archived = 0

    def consume(self, frame: dict[str, Any]) -> None:
        self._archived += 1
        if self._archived % 100 == 0:
            print(f"archived {self._archived} frames from {frame['camera']}")
