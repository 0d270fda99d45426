"""BATCH: 1080p frames (numpy arrays) travel through the payload store and a processor."""

import os

from framenodes import Digest, Frames, Invert

from vf import BATCH, Flow


def build_flow() -> Flow:
    frames = Frames(count=3, name="frames")
    inverted = Invert(name="invert")(frames)
    sink = Digest(path=os.environ["VF_TEST_OUT"], name="sink")(inverted)
    return Flow([sink], flow_type=BATCH, flow_id="frames")
