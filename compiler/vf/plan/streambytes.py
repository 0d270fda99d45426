"""Each BATCH stream's byte limit: a share of the shipped durable broker's store (ADR 0232).

nats-server reserves a stream's ``max_bytes`` against the server's ``max_file_store`` when
the stream is made and refuses one that does not fit (10047), while a publish is refused
server-wide (10023, every stream stalls) only when what the streams hold passes
``max_file_store``. Shares whose sum stays inside the store therefore make a full stream
refuse its own writers (10077, back-pressure) and leave the others their room.

The share counts, per BATCH stream, two reservations: this generation's stream, and the
superseded generation's, which ``vf-provision`` caps at what it holds before it makes the
new streams and deletes afterwards (PROV-6). One more share is the dead-letter stream's,
whose byte limit the runtime sets to the same ``VF_STREAM_MAX_BYTES`` (ADR 0239).
"""

from __future__ import annotations

from vf.config.targets import Environment
from vf.errors import VfError
from vf.ir.capabilities import INLINE_PAYLOAD_BYTES
from vf.ir.graph import Graph
from vf.ir.plan import StreamBytes
from vf.textio.quantity import quantity_bytes
from vf_runtime.constants import BATCH

# JetStream's file store may fill this share of the broker's volume (ADR 0208): past its
# max_file_store, nats-server refuses publishes (10023) and takes them again once acks free
# room; a volume that fills first makes it shut JetStream down until it restarts.
FILE_STORE_SHARE = 0.9
MIB = 1024 * 1024
# Generations whose streams a provision Job finds reserved beside its own (ADR 0232)
COEXISTING_GENERATIONS = 2
# A stream must hold one replica's in-flight window: 64 fetched messages at the inline limit
IN_FLIGHT_MESSAGES = 64
MIN_STREAM_BYTES = IN_FLIGHT_MESSAGES * INLINE_PAYLOAD_BYTES  # 32 MiB


def file_store_bytes(storage_size: str) -> int | None:
    """``max_file_store`` for a volume of ``storage_size``: 90 % of it in whole MiB (the
    configuration's ``MB`` is 1024² bytes); None when the size is not a quantity."""
    size = quantity_bytes(storage_size)
    if size is None:
        return None
    return max(1, int(size * FILE_STORE_SHARE // MIB)) * MIB


def stream_shares(streams: int) -> int:
    """How many equal shares the store is split into for ``streams`` BATCH streams."""
    return COEXISTING_GENERATIONS * streams + 1


def plan_stream_bytes(graph: Graph, env: Environment) -> StreamBytes | None:
    """The byte limit of each of the flow's BATCH streams in ``env``, or None for none.

    vf.yaml's ``broker.stream_max_bytes`` wins; otherwise only the shipped durable broker,
    whose volume vf sizes, gets a share. A REALTIME flow's streams keep one message per
    subject and get none. Raises ``VF_STREAM_SHARE_TOO_SMALL`` for a limit below one
    replica's in-flight window.
    """
    streams = sum(1 for node in graph.nodes if node.children)
    if graph.flow_type != BATCH or not streams:
        return None
    broker = env.broker
    if broker.stream_max_bytes is not None:
        chosen = StreamBytes(max_bytes=broker.stream_max_bytes, source="vf.yaml", streams=streams)
    elif broker.profile == "durable":
        store = file_store_bytes(broker.storage_size)
        if store is None:
            return None
        shares = stream_shares(streams)
        chosen = StreamBytes(
            max_bytes=store // shares // MIB * MIB,
            source="volume",
            streams=streams,
            max_file_store=store,
            shares=shares,
        )
    else:
        return None
    if chosen.max_bytes < MIN_STREAM_BYTES:
        raise _too_small(chosen, env)
    return chosen


def _too_small(chosen: StreamBytes, env: Environment) -> VfError:
    floor = f"{MIN_STREAM_BYTES // MIB} MiB ({IN_FLIGHT_MESSAGES} in-flight messages at the "
    floor += f"{INLINE_PAYLOAD_BYTES // 1024} KiB inline limit)"
    if chosen.source == "vf.yaml":
        what = f"broker.stream_max_bytes of {chosen.max_bytes:,} bytes is below {floor}"
        fix = f"set broker.stream_max_bytes to at least {MIN_STREAM_BYTES // MIB}Mi"
    else:
        store, shares = chosen.max_file_store or 0, chosen.shares or 0
        need = -(-(MIN_STREAM_BYTES // MIB) * shares * 10 // 9)  # the volume's MiB, rounded up
        what = (
            f"each of the flow's {chosen.streams} BATCH streams would get "
            f"{chosen.max_bytes // MIB} MiB, below {floor}: the broker's max_file_store of "
            f"{store // MIB} MiB (90 % of broker.storage_size {env.broker.storage_size}) is "
            f"split into {shares} shares (two per stream: this generation's and the "
            "superseded one's, and one for the dead-letter stream)"
        )
        fix = (
            f"grow broker.storage_size to at least {need}Mi, or give the flow fewer "
            "BATCH streams (fewer nodes with children)"
        )
    return VfError(
        "VF_STREAM_SHARE_TOO_SMALL",
        f"environment '{env.name}': {what}",
        fix,
        env.place_of("broker"),
    )
