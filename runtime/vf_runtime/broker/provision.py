"""``vf-provision``: create a run's streams, dead-letter queue and durables, then verify them.

Idempotent: what exists with matching settings is kept, what is missing is
created, and everything is read back and compared; any difference fails the
command with the list. The data streams of this run's other generations are then
deleted (a BATCH generation re-executes the whole batch, so what an earlier one
left is superseded, never drained into this one); ``--prune-superseded`` (or
``VF_PRUNE_SUPERSEDED=1``) also deletes those of the flow's other runs that no replica
still reads. Both are chosen by the ownership recorded in stream metadata (never by a
name prefix); the flow's dead-letter stream is kept. With a byte limit, the superseded
streams are first capped at what they hold (PROV-6), so this run's streams fit beside them.

Environment: VF_NATS_URL, VF_FLOW_ID, VF_FLOW_TYPE, VF_RUN_ID, VF_TOPOLOGY_DIR,
optional VF_GENERATION, VF_ACK_WAIT_SECONDS (60), VF_STREAM_REPLICAS (1),
VF_STREAM_MAX_BYTES (0) and VF_PRUNE_SUPERSEDED (0); the broker credentials of every vf
client (VF_NATS_USER and VF_NATS_PASSWORD, VF_NATS_TOKEN or VF_NATS_CREDS). Exit 2: a wrong
environment, credentials the broker refuses included; 3: the broker unreachable, its
topology contradicting, or its store without room for a stream's byte limit.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import sys
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig, StreamConfig, StreamInfo
from nats.js.errors import APIError

from vf_runtime.broker.client import (
    AUTH_CODES,
    BrokerError,
    connect,
    consumer_differences,
    ensure_consumer,
    stream_differences,
)
from vf_runtime.broker.inventory import all_streams, live_readers, owned_run
from vf_runtime.broker.naming import RunNames, valid_generation
from vf_runtime.broker.streams import ensure_stream
from vf_runtime.broker.topology import (
    META_FLOW,
    META_GENERATION,
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
from vf_runtime.clientauth import NatsAuth
from vf_runtime.constants import BATCH, DEFAULT_ACK_WAIT, FLOW_TYPES
from vf_runtime.labels import CAPPED_KEY

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
    generation: str = ""
    stream_max_bytes: int = 0  # each BATCH stream's byte limit, 0 for none (STREAM-6)

    @property
    def names(self) -> RunNames:
        return RunNames(self.flow_id, self.run_id, self.generation)


def _wanted(run: RunTopology) -> tuple[list[StreamConfig], list[tuple[str, ConsumerConfig]]]:
    names = run.names
    streams: list[StreamConfig] = [dlq_config(names, share=run.stream_max_bytes)]
    consumers: list[tuple[str, ConsumerConfig]] = []
    for node in run.nodes:
        if not node.has_children:
            continue
        streams.append(
            stream_config(
                names,
                node.name,
                flow_type=run.flow_type,
                replicas=run.stream_replicas,
                max_bytes=run.stream_max_bytes,
            )
        )
        if run.flow_type == BATCH:
            consumers.append((names.stream(node.name), eos_anchor_config(names, node.name)))
    for spec in readers_of(run.nodes, ack_wait=run.ack_wait):
        consumers.append((names.stream(spec.parent), data_consumer_config(names, spec)))
    return streams, consumers


async def provision(js: JetStreamContext, run: RunTopology) -> int:
    """Ensure every stream and durable; read all back. Returns how many objects were checked.

    The streams are made together, then the durables on them together: one round trip's
    wait for each kind instead of one per object.
    """
    streams, consumers = _wanted(run)
    refused = await _each([ensure_stream(js, config, lift=True) for config in streams])
    _raise_no_room(refused)
    refused += await _each([ensure_consumer(js, s, c) for s, c in consumers])
    problems = [str(error) for error in refused]
    if not problems:
        problems = await _read_back(js, streams=streams, consumers=consumers)
    if problems:
        raise BrokerError("VF_TOPOLOGY_MISMATCH", "\n".join(problems))
    return len(streams) + len(consumers)


async def _each(calls: list[Coroutine[Any, Any, object]]) -> list[BrokerError]:
    """Run ``calls`` together; the broker's refusals, in the order of ``calls``."""
    results = await asyncio.gather(*calls, return_exceptions=True)
    for result in results:  # anything but a refusal is raised, as it was one by one
        if isinstance(result, BaseException) and not isinstance(result, BrokerError):
            raise result
    return [result for result in results if isinstance(result, BrokerError)]


def _raise_no_room(refused: list[BrokerError]) -> None:
    """PROV-7: streams the broker's store has no room for are ``VF_BROKER_NO_ROOM``, all of
    them named, not a topology mismatch; so are streams it refuses to make for another
    reason, ``VF_BROKER_REFUSED`` (ADR 0244)."""
    for code in ("VF_BROKER_NO_ROOM", "VF_BROKER_REFUSED"):
        named = [error for error in refused if error.code == code]
        if named:
            message = "\n".join(str(error) for error in named)
            raise BrokerError(code, message, named[0].fix)


async def _read_back(
    js: JetStreamContext,
    *,
    streams: list[StreamConfig],
    consumers: list[tuple[str, ConsumerConfig]],
) -> list[str]:
    stream_infos = await asyncio.gather(*(js.stream_info(c.name or "") for c in streams))
    consumer_infos = await asyncio.gather(
        *(js.consumer_info(s, c.durable_name or "") for s, c in consumers)
    )
    problems: list[str] = []
    for config, info in zip(streams, stream_infos, strict=True):
        diffs = stream_differences(config, info.config)
        problems += [f"stream {config.name or ''}: {d}" for d in diffs]
    for (stream, consumer), found in zip(consumers, consumer_infos, strict=True):
        durable = consumer.durable_name or ""
        diffs = consumer_differences(consumer, found.config)
        problems += [f"durable {durable} on {stream}: {d}" for d in diffs]
    return problems


def _superseded(meta: dict[str, str], run: RunTopology, *, other_runs: bool) -> bool:
    """A data stream vf made for this flow that belongs to another generation of this run
    (always reclaimed) or, with ``other_runs``, to another run (pruned on request)."""
    owned = meta.get(META_OWNER) == OWNER and meta.get(META_FLOW) == run.flow_id
    if not owned or meta.get(META_ROLE) != "data" or meta.get(META_RUN) is None:
        return False
    if meta.get(META_RUN) != run.run_id:
        return other_runs
    return meta.get(META_GENERATION, "") != run.generation


@dataclass(frozen=True, kw_only=True)
class Pruned:
    """Streams reclaimed, other runs' streams kept because a replica still reads them, and
    superseded streams capped at what they held before this run's streams were made."""

    deleted: list[str]
    kept_live: list[str]
    capped: list[str] = field(default_factory=list)


async def _superseded_streams(
    js: JetStreamContext, run: RunTopology, *, other_runs: bool
) -> dict[tuple[str, str], list[StreamInfo]]:
    """The superseded data streams of ``run``'s flow (:func:`_superseded`), by run and
    generation."""
    chosen: dict[tuple[str, str], list[StreamInfo]] = {}
    for info in await all_streams(js):
        if _superseded(info.config.metadata or {}, run, other_runs=other_runs):
            chosen.setdefault(owned_run(info, run.flow_id) or ("", ""), []).append(info)
    return chosen


async def _idle(js: JetStreamContext, run: RunTopology, key: str, streams: list[str]) -> bool:
    """Whether superseded streams of run ``key`` may be touched: the run's own other
    generations always (GEN-6), another run's while no replica reads them (OPS-2)."""
    return key == run.run_id or not await live_readers(js, streams)


async def prune_superseded(
    js: JetStreamContext, run: RunTopology, *, other_runs: bool = True
) -> list[str]:
    """Delete the data streams vf created for superseded generations of ``run`` and, with
    ``other_runs``, for the flow's other runs; return their names. Never the DLQ."""
    return (await reclaim(js, run, other_runs=other_runs)).deleted


async def reclaim(js: JetStreamContext, run: RunTopology, *, other_runs: bool) -> Pruned:
    """:func:`prune_superseded`, keeping another run while a replica still reads it (a
    REALTIME rollout drains the old run while the new one starts); its own superseded
    generations are always reclaimed (GEN-6)."""
    deleted, kept = [], []
    for (run_id, _), infos in sorted(
        (await _superseded_streams(js, run, other_runs=other_runs)).items()
    ):
        streams = [info.config.name or "" for info in infos]
        if not await _idle(js, run, run_id, streams):
            kept.extend(streams)
            continue
        for name in streams:
            await js.delete_stream(name)
            deleted.append(name)
    return Pruned(deleted=sorted(deleted), kept_live=sorted(kept))


async def cap_superseded(js: JetStreamContext, run: RunTopology) -> list[str]:
    """PROV-6 (ADR 0232): before a run whose streams have a byte limit makes them, lower the
    ``max_bytes`` of every superseded data stream of the flow that no replica reads to what
    it holds (at least 1 byte). nats-server reserves a stream's ``max_bytes`` against its
    ``max_file_store``; a capped stream reserves no more than it stores, so the new
    streams' shares fit beside it, and nothing is lost: under discard new a lower limit
    refuses publishes and never deletes. Returns the streams capped."""
    if run.stream_max_bytes <= 0:
        return []
    capped: list[str] = []
    for (run_id, _), infos in sorted((await _superseded_streams(js, run, other_runs=True)).items()):
        if not await _idle(js, run, run_id, [info.config.name or "" for info in infos]):
            continue
        for info in infos:
            if await _cap(js, info):
                capped.append(info.config.name or "")
    return sorted(capped)


async def _cap(js: JetStreamContext, info: StreamInfo) -> bool:
    """Lower ``info``'s stream's limit to what it holds and mark it capped (a worker of its
    generation then never raises it, ADR 0239); False when it was capped already."""
    held, limit = max(int(info.state.bytes), 1), info.config.max_bytes or -1
    meta = info.config.metadata or {}
    if 0 < limit <= held and CAPPED_KEY in meta:
        return False
    config = dataclasses.replace(
        info.config,
        max_bytes=limit if 0 < limit <= held else held,
        metadata={**meta, CAPPED_KEY: "PROV-6"},
    )
    try:
        await js.update_stream(config)
    except APIError:  # left as it is: making the new streams names what does not fit
        return False
    return True


async def provision_run(
    url: str, run: RunTopology, *, prune: bool, timeout: float, auth: NatsAuth | None = None
) -> list[str]:
    """Connect, provision ``run``, reclaim its superseded generations and, with ``prune``,
    the flow's superseded runs; return the deleted streams."""
    pruned = await provision_and_reclaim(url, run, prune=prune, timeout=timeout, auth=auth)
    return pruned.deleted


async def provision_and_reclaim(
    url: str, run: RunTopology, *, prune: bool, timeout: float, auth: NatsAuth | None = None
) -> Pruned:
    """:func:`provision_run`, also saying which other runs were kept because still live;
    ``auth`` as :func:`vf_runtime.broker.client.connect`'s (the environment's by default)."""
    name = f"vf-provision-{run.flow_id}"
    client = await connect(url, timeout=timeout, name=name, auth=auth)
    try:
        js = client.jetstream(timeout=10)
        capped = await cap_superseded(js, run)
        await provision(js, run)
        pruned = await reclaim(js, run, other_runs=prune)
        return dataclasses.replace(pruned, capped=capped)
    finally:
        await client.close()


def prune_requested(flag: bool, env: Mapping[str, str]) -> bool:
    """``--prune-superseded``, or the environment's opt-in ``VF_PRUNE_SUPERSEDED=1``."""
    return flag or env.get("VF_PRUNE_SUPERSEDED", "") in ("1", "true")


def _run_from_env(env: Mapping[str, str], topology_dir: str | None) -> RunTopology:
    missing = [k for k in ("VF_FLOW_ID", "VF_RUN_ID", "VF_FLOW_TYPE") if not env.get(k)]
    directory = topology_dir or env.get("VF_TOPOLOGY_DIR")
    if directory is None:
        missing.append("VF_TOPOLOGY_DIR")
    if missing:
        raise ValueError(f"missing {', '.join(missing)}")
    if env["VF_FLOW_TYPE"] not in FLOW_TYPES:
        raise ValueError(f"VF_FLOW_TYPE={env['VF_FLOW_TYPE']!r} is not one of batch, realtime")
    generation = env.get("VF_GENERATION", "")
    if generation and not valid_generation(generation):
        raise ValueError(
            f"VF_GENERATION={generation!r} must be 1-16 letters, digits or underscores"
        )
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
        stream_max_bytes=int(env.get("VF_STREAM_MAX_BYTES", "0")),
        generation=generation,
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
    prune = prune_requested(args.prune_superseded, os.environ)
    try:
        pruned = asyncio.run(provision_and_reclaim(url, run, prune=prune, timeout=args.timeout))
    except BrokerError as exc:
        print(exc.render(), file=sys.stderr)
        sys.exit(EXIT_CONFIG if exc.code in AUTH_CODES else EXIT_BROKER)
    generation = f" generation {run.generation}" if run.generation else ""
    print(
        f"provisioned run {run.run_id}{generation} of flow {run.flow_id} ({len(run.nodes)} nodes)"
    )
    for name in pruned.deleted:
        print(f"pruned superseded stream {name}")
    for name in pruned.capped:
        print(f"capped superseded stream {name} at what it holds (PROV-6)")
    for name in pruned.kept_live:
        print(f"kept superseded stream {name}: a replica still reads it (reclaimed next time)")
    sys.exit(EXIT_OK)


if __name__ == "__main__":
    main()
