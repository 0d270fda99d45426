"""What the machine charges a process that wakes from sleep: the same step, hot and after a nap.

A paced flow (50 items/s) leaves every worker asleep for about 20 ms between items, so
each item runs through code whose caches and clock the machine has let go of. This
times one item's codec step (decode an envelope, encode a payload and an envelope:
about 10 µs when run back to back) right after sleeping 0, 2 and 20 ms, so the
benchmark's latency figures can be read against the state the machine was in.
"""

from __future__ import annotations

import statistics
import time

from vf_runtime.wire import decode_envelope, encode_envelope, encode_payload
from vf_runtime.wire.codec import data_envelope

NAPS_MS = (0, 2, 20)


def wake_penalty(*, rounds: int = 200) -> dict[str, float]:
    """Median µs of the step after each nap in ``NAPS_MS``, keyed by the nap in ms."""
    item = {"i": 5, "t0": time.time(), "pad": b"x" * 1024}
    payload_type, payload = encode_payload(item)
    envelope = data_envelope(
        producer="source",
        flow_id="bench",
        run_id="r1",
        trace_id="source:5",
        seq=5,
        event_ts=time.time(),
        replica_id=0,
        metadata={"proctime": 0.001},
        payload_type=payload_type,
        payload=payload,
    )
    raw = encode_envelope(envelope)
    found: dict[str, float] = {}
    for nap in NAPS_MS:
        times: list[float] = []
        for _ in range(rounds):
            if nap:
                time.sleep(nap / 1000)
            began = time.perf_counter()
            decode_envelope(raw)
            encode_payload(item)
            encode_envelope(envelope)
            times.append(time.perf_counter() - began)
        found[str(nap)] = statistics.median(times) * 1e6
    return found
