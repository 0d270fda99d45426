"""``vf-provision``: create a run's streams, dead-letter queue and durables, then verify them.

Idempotent: what exists with matching settings is kept, what is missing is
created, and everything is read back and compared; any difference fails the
command with the list. ``--prune-superseded`` deletes the data streams of other
runs of the same flow, chosen by the ownership recorded in their metadata (never
by a name prefix); the flow's dead-letter stream is never pruned.

Environment: VF_NATS_URL, VF_FLOW_ID, VF_FLOW_TYPE, VF_RUN_ID, VF_TOPOLOGY_DIR,
optional VF_ACK_WAIT_SECONDS (60) and VF_STREAM_REPLICAS (1).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig, StreamConfig

from vf_runtime.broker import (
    BrokerError,
    connect,
    consumer_differences,
    ensure_consumer,
    ensure_stream,
    stream_differences,
)
from vf_runtime.config import DEFAULT_ACK_WAIT
from vf_runtime.constants import BATCH, FLOW_TYPES
from vf_runtime.naming import RunNames
from vf_runtime.topology import (
    META_FLOW,
    META_OWNER,
    META_ROLE,
    META_RUN,
    OWNER,
    NodeTopology,
    data_consumer_config,
    dlq_config,
    eos_anchor_config,
    read_topology,
    readers_of,
    stream_config,
)

EXIT_OK, EXIT_CONFIG, EXIT_BROKER = 0, 2, 3


@dataclass(frozen=True, kw_only=True)
class RunTopology:
    """What to provision: the run's identity, its flow type and its nodes."""

    flow_id: str
    run_id: str
    flow_type: str
    nodes: tuple[NodeTopology, ...]
    ack_wait: float = DEFAULT_ACK_WAIT
    stream_replicas: int = 1


def _wanted(run: RunTopology) -> tuple[list[StreamConfig], list[tuple[str, ConsumerConfig]]]:
    names = RunNames(run.flow_id, run.run_id)
    streams: list[StreamConfig] = [dlq_config(names)]
    consumers: list[tuple[str, ConsumerConfig]] = []
    for node in run.nodes:
        if not node.has_children:
            continue
        streams.append(
            stream_config(names, node.name, flow_type=run.flow_type, replicas=run.stream_replicas)
        )
        if run.flow_type == BATCH:
            consumers.append((names.stream(node.name), eos_anchor_config(names, node.name)))
    for spec in readers_of(run.nodes, ack_wait=run.ack_wait):
        consumers.append((names.stream(spec.parent), data_consumer_config(names, spec)))
    return streams, consumers


async def provision(js: JetStreamContext, run: RunTopology) -> int:
    """Ensure every stream and durable; read all back. Returns how many objects were checked."""
    streams, consumers = _wanted(run)
    problems: list[str] = []
    for config in streams:
        try:
            await ensure_stream(js, config)
        except BrokerError as exc:
            problems.append(str(exc))
    for stream, consumer in consumers:
        try:
            await ensure_consumer(js, stream, consumer)
        except BrokerError as exc:
            problems.append(str(exc))
    if not problems:
        problems = await _read_back(js, streams=streams, consumers=consumers)
    if problems:
        raise BrokerError("VF_TOPOLOGY_MISMATCH", "\n".join(problems))
    return len(streams) + len(consumers)


async def _read_back(
    js: JetStreamContext,
    *,
    streams: list[StreamConfig],
    consumers: list[tuple[str, ConsumerConfig]],
) -> list[str]:
    problems: list[str] = []
    for config in streams:
        name = config.name or ""
        info = await js.stream_info(name)
        diffs = stream_differences(config, info.config)
        problems += [f"stream {name}: {d}" for d in diffs]
    for stream, consumer in consumers:
        durable = consumer.durable_name or ""
        found = await js.consumer_info(stream, durable)
        diffs = consumer_differences(consumer, found.config)
        problems += [f"durable {durable} on {stream}: {d}" for d in diffs]
    return problems


async def prune_superseded(js: JetStreamContext, *, flow_id: str, run_id: str) -> list[str]:
    """Delete data streams vf created for other runs of ``flow_id``; return their names."""
    deleted = []
    infos = await js.streams_info()
    for info in infos:
        meta = info.config.metadata or {}
        owned = meta.get(META_OWNER) == OWNER and meta.get(META_FLOW) == flow_id
        if owned and meta.get(META_ROLE) == "data" and meta.get(META_RUN) not in (None, run_id):
            name = info.config.name or ""
            await js.delete_stream(name)
            deleted.append(name)
    return sorted(deleted)


async def provision_run(url: str, run: RunTopology, *, prune: bool, timeout: float) -> list[str]:
    """Connect, provision ``run``, optionally prune superseded runs; return pruned streams."""
    client = await connect(url, timeout=timeout, name=f"vf-provision-{run.flow_id}")
    try:
        js = client.jetstream(timeout=10)
        await provision(js, run)
        return await prune_superseded(js, flow_id=run.flow_id, run_id=run.run_id) if prune else []
    finally:
        await client.close()


def _run_from_env(env: Mapping[str, str], topology_dir: str | None) -> RunTopology:
    missing = [k for k in ("VF_FLOW_ID", "VF_RUN_ID", "VF_FLOW_TYPE") if not env.get(k)]
    directory = topology_dir or env.get("VF_TOPOLOGY_DIR")
    if directory is None:
        missing.append("VF_TOPOLOGY_DIR")
    if missing:
        raise ValueError(f"missing {', '.join(missing)}")
    if env["VF_FLOW_TYPE"] not in FLOW_TYPES:
        raise ValueError(f"VF_FLOW_TYPE={env['VF_FLOW_TYPE']!r} is not one of batch, realtime")
    nodes = read_topology(Path(str(directory)))
    if not nodes:
        raise ValueError(f"no nodes-*.jsonl topology in {directory}")
    return RunTopology(
        flow_id=env["VF_FLOW_ID"],
        run_id=env["VF_RUN_ID"],
        flow_type=env["VF_FLOW_TYPE"],
        nodes=nodes,
        ack_wait=float(env.get("VF_ACK_WAIT_SECONDS", DEFAULT_ACK_WAIT)),
        stream_replicas=int(env.get("VF_STREAM_REPLICAS", "1")),
    )


def main(argv: list[str] | None = None) -> None:
    """Console entry point of ``vf-provision``."""
    parser = argparse.ArgumentParser(prog="vf-provision", description=__doc__.split("\n")[0])
    parser.add_argument("--prune-superseded", action="store_true")
    parser.add_argument("--topology", help="directory of nodes-*.jsonl (default VF_TOPOLOGY_DIR)")
    parser.add_argument("--nats", help="NATS URL (default VF_NATS_URL)")
    parser.add_argument("--timeout", type=float, default=30.0)
    args = parser.parse_args(argv)
    try:
        run = _run_from_env(os.environ, args.topology)
        url = args.nats or os.environ["VF_NATS_URL"]
    except (ValueError, KeyError, OSError) as exc:
        print(f"error[VF_ENV] provisioning environment is not usable: {exc}", file=sys.stderr)
        sys.exit(EXIT_CONFIG)
    try:
        pruned = asyncio.run(
            provision_run(url, run, prune=args.prune_superseded, timeout=args.timeout)
        )
    except BrokerError as exc:
        print(f"error[{exc.code}] {exc}", file=sys.stderr)
        sys.exit(EXIT_BROKER)
    print(f"provisioned run {run.run_id} of flow {run.flow_id} ({len(run.nodes)} nodes)")
    for name in pruned:
        print(f"pruned superseded stream {name}")
    sys.exit(EXIT_OK)


if __name__ == "__main__":
    main()
