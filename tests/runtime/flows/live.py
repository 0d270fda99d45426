"""REALTIME: an endless camera; only a stop ends it."""

import os

from testnodes import Numbers, Record

from vf import REALTIME, Flow


def build_flow() -> Flow:
    camera = Numbers(count=0, interval=0.02, is_finite=False, name="camera")
    sink = Record(path=os.environ["VF_TEST_OUT"], name="sink")(camera)
    return Flow([sink], flow_type=REALTIME, flow_id="live")
