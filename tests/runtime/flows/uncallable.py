"""BATCH: a join whose ``process`` is a C callable vf cannot read a signature from
(``dict``, on every Python vf supports), so only calling it shows that it takes one
input, not two. ``operator.itemgetter`` was one until Python 3.13 gave it a signature."""

import os

from testnodes import Numbers, Record, Scale

from vf import BATCH, DeliveryPolicy, Flow, Processor


class Pick(Processor):
    process = dict  # copies its one argument; a join passes two


def build_flow() -> Flow:
    numbers = Numbers(count=6, name="numbers")
    left = Scale(factor=2, name="left")(numbers)
    right = Scale(factor=3, name="right")(numbers)
    pick = Pick(delivery=DeliveryPolicy(max_retries=3), name="pick")(left, right)
    sink = Record(path=os.environ["VF_TEST_OUT"], name="sink")(pick)
    return Flow([sink], flow_type=BATCH, flow_id="uncallable")
