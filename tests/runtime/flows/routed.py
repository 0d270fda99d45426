"""BATCH: numbers → parity (sets the partition key through ``ctx``) → where, partitioned
by ``_partition_key`` over 2 replicas that each see one parity → sink."""

import os

from ctxnodes import Parity, Where
from testnodes import Numbers, Record

from vf import BATCH, Flow


def build_flow() -> Flow:
    numbers = Numbers(count=20, name="numbers")
    parity = Parity(name="parity")(numbers)
    where = Where(nb_tasks=2, partition_by="_partition_key", name="where")(parity)
    sink = Record(path=os.environ["VF_TEST_OUT"], name="sink")(where)
    return Flow([sink], flow_type=BATCH, flow_id="routed")
