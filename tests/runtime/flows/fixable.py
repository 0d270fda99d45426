"""REALTIME: an endless camera into a consumer that refuses one item until it is fixed."""

import os

from opsnodes import Fussy
from testnodes import Numbers

from vf import REALTIME, Flow


def build_flow() -> Flow:
    camera = Numbers(count=0, interval=0.02, is_finite=False, name="camera")
    sink = Fussy(
        path=os.environ["VF_TEST_OUT"],
        bug=os.environ["VF_TEST_BUG"],
        name="sink",
    )(camera)
    return Flow([sink], flow_type=REALTIME, flow_id="fixable")
