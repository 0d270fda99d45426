"""BATCH: a paced producer into a consumer that refuses one item until it is fixed, so
the generation is still reading when its dead letter is replayed."""

import os

from opsnodes import Fussy
from testnodes import Numbers

from vf import BATCH, DeliveryPolicy, Flow


def build_flow() -> Flow:
    numbers = Numbers(
        count=int(os.environ.get("VF_TEST_COUNT", "40")), interval=0.15, name="numbers"
    )
    sink = Fussy(
        path=os.environ["VF_TEST_OUT"],
        bug=os.environ["VF_TEST_BUG"],
        delivery=DeliveryPolicy(max_retries=0),
        name="sink",
    )(numbers)
    return Flow([sink], flow_type=BATCH, flow_id="slowfix")
