"""BATCH bulk for the fault tests: numbers → scale (2 competing replicas) → idempotent sink.

Sized and wired by the environment: ``VF_TEST_COUNT`` items of ``VF_TEST_SIZE`` padding
bytes, scale replicas that note their pids in ``VF_TEST_PIDS``, and a sink that kills
itself once at item ``VF_TEST_SINK_CRASH_AT``.
"""

import os

from testnodes import Numbers, Record, Scale

from vf import BATCH, Flow


def build_flow() -> Flow:
    env = os.environ.get
    numbers = Numbers(
        count=int(env("VF_TEST_COUNT", "10000")), size=int(env("VF_TEST_SIZE", "0")), name="numbers"
    )
    scale = Scale(factor=2, pid_dir=env("VF_TEST_PIDS", ""), nb_tasks=2, name="scale")(numbers)
    sink = Record(
        path=os.environ["VF_TEST_OUT"],
        crash_at=int(env("VF_TEST_SINK_CRASH_AT", "0")),
        crash_marker=env("VF_TEST_MARKER", ""),
        idempotent=True,
        name="sink",
    )(scale)
    return Flow([sink], flow_type=BATCH, flow_id=os.environ["VF_TEST_FLOW"])
