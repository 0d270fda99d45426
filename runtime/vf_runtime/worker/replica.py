"""``vf-worker``: run one replica of one node, configured only by its ``VF_*`` environment.

Lifecycle: parse the environment, rebuild the node, connect (bounded), ensure this node's
streams and durables, wait for readers (BATCH), ``open()``, loop, ``close()`` always.
Exit codes (LIFE-5): 0 done (or a REALTIME replica stopped), 1 the node failed, 2 a wrong
environment or node class (credentials the broker or the store refuses included:
``VF_BROKER_AUTH``, ``VF_STORE_AUTH``), 3 the broker unreachable or its topology contradicting, 4 a
BATCH replica stopped before its work was done (or its run superseded, VF_GENERATION_SUPERSEDED),
5 ended on a parent's abort, 6 hung (DELIV-12).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import os
import re
import signal
import sys
import time
from collections.abc import Callable, Mapping
from typing import cast

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from vf_runtime.broker.client import (
    connect,
    ensure_consumer,
    patiently,
)
from vf_runtime.broker.naming import token
from vf_runtime.broker.streams import ensure_stream
from vf_runtime.broker.topology import dlq_config, eos_anchor_config, stream_config
from vf_runtime.clientauth import CredentialsError, NatsAuth, StoreAuth, nats_auth, store_auth
from vf_runtime.constants import BATCH
from vf_runtime.context import RuntimeContext, context_parameter, with_context
from vf_runtime.nodes import Consumer, Node, Processor, Producer
from vf_runtime.store.blobstore import AppliedLog, BlobStore
from vf_runtime.worker.build import build_node
from vf_runtime.worker.config import ConfigError, WorkerConfig, load_worker_config
from vf_runtime.worker.eos import (
    Abort,
    EndOfStream,
    EosMismatch,
    record_loss,
)
from vf_runtime.worker.exits import (
    EXIT_CONFIG,
    EXIT_FAILED,
    EXIT_HUNG,
    EXIT_OK,
    EXIT_STOPPED,
)
from vf_runtime.worker.health import HealthServer, Metrics
from vf_runtime.worker.inputs import Inputs
from vf_runtime.worker.lifecycle import (
    check_not_finished,
    end_on_abort,
    freeze_start_up,
    grace_of,
    record_refused_stop,
    report_breaker,
    report_dlq_full,
    report_full,
    stop_within,
)
from vf_runtime.worker.nodethread import NodeThread
from vf_runtime.worker.opening import ended_by, open_stores
from vf_runtime.worker.outputs import DeadLetters, Publisher
from vf_runtime.worker.processor import ProcessorLoop, Wiring
from vf_runtime.worker.producer import READ_AHEAD, ProducerLoop
from vf_runtime.worker.settle import Settler
from vf_runtime.worker.slots import SlotLease
from vf_runtime.worker.tracing import CLOSE_SECONDS, Tracer, tracer_from
from vf_runtime.worker.watchdog import NodeHung, watch

log = logging.getLogger("vf.worker")


class Worker:
    """One replica: its connections, its loop and its clean-up."""

    def __init__(
        self,
        config: WorkerConfig,
        node: Node,
        *,
        nats: NatsAuth | None = None,
        store: StoreAuth | None = None,
    ) -> None:
        self.config = config
        self.node = node
        self.nats_auth = nats or NatsAuth()
        self.store_auth = store or StoreAuth()
        self.names = config.names
        self.metrics = Metrics(
            node=config.node_name, flow=config.flow_id, replica=config.replica_id
        )
        self.stop = asyncio.Event()
        self.blobs: BlobStore | None = None
        self.applied: AppliedLog | None = None
        self._watch: asyncio.Task[None] | None = None
        self.refused_stops = 0
        self.control_js: JetStreamContext | None = None
        self.reconnect_listeners: list[Callable[[], None]] = []
        self.lost_slot = False  # another replica took this one's leased ordinal (ENV-6)
        self.hung: str | None = None  # a node call ran past its bound (DELIV-12)
        self.keepalive: asyncio.Task[None] | None = None
        self.tracer: Tracer | None = None  # an OTLP endpoint is set (tracing.py)

    async def run(self) -> int:
        health = HealthServer(self.metrics, port=self.config.health_port)
        client: Client | None = None
        try:
            client = await connect(
                self.config.nats_url,
                timeout=self.config.connect_timeout,
                name=self._label(),
                on_reconnect=self._reconnected,
                auth=self.nats_auth,
            )
            if self.config.replica_leased:
                return await self._run_leased(client)
            return await self._run_connected(client)
        finally:
            if client is not None:
                # flush (acks are fire-and-forget publishes), then close; draining would
                # wait on fetch inboxes that nobody reads any more. Without a connection
                # there is nothing to flush to: a broker gone for good would cost the wait.
                if client.is_connected:
                    with contextlib.suppress(Exception):
                        await client.flush(timeout=2)
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(client.close(), timeout=5)
            if self.blobs is not None:
                with contextlib.suppress(Exception):
                    await self.blobs.close()
            health.close()

    async def _run_leased(self, client: Client) -> int:
        """Lease an ordinal (ENV-6), run with it, keep it renewed, and free it at the end."""
        config = self.config
        lease = SlotLease(
            client.jetstream(timeout=10),
            names=self.names,
            node=config.node_name,
            replicas=config.nb_tasks,
        )
        slot = await lease.acquire(self.stop.is_set, waiting=self._waiting_for_slot)
        if slot is None:
            return EXIT_OK  # stopped before an ordinal was free: nothing was taken
        self.config = dataclasses.replace(config, replica_id=slot)
        self.metrics.replica = slot
        keeper = asyncio.create_task(lease.keep())
        keeper.add_done_callback(self._slot_lost)
        try:
            code = await self._run_connected(client)
        finally:
            keeper.cancel()
            await lease.release()
        return EXIT_FAILED if self.lost_slot else code

    def _hung(self, thread: NodeThread, elapsed: float) -> None:
        """A node call ran past its bound (DELIV-12): liveness fails, no lease is renewed
        any more, the call is given up (its inputs fail as a failed call's do) and every
        input the node never started is handed back at once, for a sibling to take."""
        config = self.config
        self.hung = (
            f"'{config.node_name}' replica {config.replica_id}: a call of the node has not "
            f"returned after {elapsed:.0f}s (bound: {config.call_timeout_seconds:g}s)"
        )
        self.metrics.hang(self.hung)
        if self.keepalive is not None:
            self.keepalive.cancel()
        print(NodeHung(self.hung).render(), file=sys.stderr, flush=True)
        thread.abandon(NodeHung(self.hung))

    def _waiting_for_slot(self) -> None:
        """Ready while every ordinal is held: a rolling update stops the old pod holding
        one only once this pod is ready (ENV-6)."""
        self.metrics.mark_ready()
        self.metrics.beat()

    def _slot_lost(self, task: asyncio.Task[None]) -> None:
        if task.cancelled() or task.exception() is None:
            return
        self.lost_slot = True
        print(f"error[VF_REPLICA_SLOT_LOST] {task.exception()}; stopping", file=sys.stderr)
        self.stop.set()

    def _reconnected(self) -> None:
        for listener in self.reconnect_listeners:
            listener()

    def _label(self) -> str:
        return f"vf-{self.config.flow_id}-{self.config.node_name}-r{self.config.replica_id}"

    async def _run_connected(self, client: Client) -> int:
        js = client.jetstream(timeout=10)
        self.control_js = js
        self.tracer = tracer_from(self.config)
        await client.subscribe(self.names.control(), cb=self._on_stop)
        if os.environ.get("VF_EXIT_WITH_PARENT") == "1":
            self._watch = asyncio.create_task(self._orphan_watch())
        await ensure_stream(js, dlq_config(self.names, share=self.config.stream_max_bytes))
        self._stores()
        publisher = await self._outputs(client) if self.config.has_children else None
        inputs = Inputs(client, config=self.config, metrics=self.metrics)
        self.metrics.in_flight = inputs.holding
        self.reconnect_listeners.append(inputs.reconnected)
        if publisher is not None:
            self.reconnect_listeners.append(publisher.reconnected)
        await self._check_not_finished(js, inputs)
        thread = NodeThread(f"vf-node-{self.config.node_name}")
        watcher = asyncio.create_task(
            watch(
                thread,
                bound=self.config.call_timeout_seconds,
                metrics=self.metrics,
                hung=functools.partial(self._hung, thread),
            )
        )
        try:
            await thread.call(self.node.open)
            try:
                freeze_start_up()
                self.metrics.mark_ready()
                if isinstance(self.node, Producer):
                    return await self._produce(publisher, thread)
                await inputs.start()
                self.keepalive = asyncio.create_task(self._keepalive(inputs))
                loop = self._processor_loop(inputs, publisher=publisher, thread=thread)
                eos = EndOfStream(js, config=self.config, inputs=inputs)
                return await self._consume(loop, eos, publisher)
            finally:
                if self.keepalive is not None:
                    self.keepalive.cancel()
                await inputs.stop()  # hands back all it holds, what the node never started
                if thread.abandoned:  # close() would queue behind the call that never returned
                    log.warning("close() not called: the node thread is stuck in a call")
                else:
                    await thread.call(self.node.close)
        finally:
            watcher.cancel()
            thread.close()
            if publisher is not None:
                await publisher.close()
            if self.tracer is not None:
                await asyncio.to_thread(self.tracer.close, CLOSE_SECONDS)
            log.info("summary: %s", self.metrics.summary())

    def _processor_loop(
        self, inputs: Inputs, *, publisher: Publisher | None, thread: NodeThread
    ) -> ProcessorLoop:
        js = inputs.js
        node = self.node
        method = node.process if isinstance(node, Processor) else cast(Consumer, node).consume
        name = context_parameter(method)
        call = method if name is None else with_context(method, self._context(), name)
        settler = Settler(
            self.config,
            inputs=inputs,
            dlq=DeadLetters(js, config=self.config, metrics=self.metrics),
            blobs=self.blobs,
            metrics=self.metrics,
        )
        settler.tracer = self.tracer
        wiring = Wiring(
            inputs=inputs,
            settler=settler,
            publisher=publisher,
            blobs=self.blobs,
            applied=self.applied,
        )
        return ProcessorLoop(
            call,
            keyed=name is not None,
            config=self.config,
            wiring=wiring,
            thread=thread,
            metrics=self.metrics,
        )

    def _context(self) -> RuntimeContext:
        config = self.config
        return RuntimeContext(
            flow_id=config.flow_id,
            run_id=config.run_id,
            generation=config.generation,
            node_name=config.node_name,
            replica_id=config.replica_id,
            logger=logging.getLogger(f"vf.node.{config.node_name}"),
        )

    async def _check_not_finished(self, js: JetStreamContext, inputs: Inputs) -> None:
        await check_not_finished(js, inputs, config=self.config, names=self.names)

    async def _outputs(self, client: Client) -> Publisher:
        js = client.jetstream(timeout=10)
        node = self.config.node_name
        config = stream_config(
            self.names,
            node,
            flow_type=self.config.flow_type,
            replicas=self.config.stream_replicas,
            max_bytes=self.config.stream_max_bytes,
        )
        await ensure_stream(js, config)
        if self.config.flow_type == BATCH:
            await ensure_consumer(js, self.names.stream(node), eos_anchor_config(self.names, node))
        publisher = Publisher(
            client,
            config=self.config,
            metrics=self.metrics,
            blobs=self.blobs,
            stopping=self.stop.is_set,
        )
        publisher.readers = await self._readers(client)
        await publisher.start()
        return publisher

    async def _readers(self, client: Client) -> tuple[str, ...]:
        """The durables reading this node; under BATCH, wait until all of them exist."""
        js = client.jetstream(timeout=10)
        stream = self.names.stream(self.config.node_name)
        reader = re.compile(f"--from--{re.escape(token(self.config.node_name))}(--p[0-9]+)?$")
        expected = self.config.blob_readers
        waited = time.monotonic()
        while True:
            infos = await patiently(lambda: js.consumers_info(stream), what=f"readers of {stream}")
            found = tuple(sorted(i.name for i in infos if reader.search(i.name)))
            if len(found) >= expected or self.config.flow_type != BATCH or self.stop.is_set():
                return found
            self.metrics.beat()  # waiting for readers that have not started: alive
            if time.monotonic() - waited > 10:
                log.info("waiting for %d reader(s) of %s, %d present", expected, stream, len(found))
                waited = time.monotonic()
            await asyncio.sleep(0.2)

    def _stores(self) -> None:
        self.blobs, self.applied = open_stores(self.config, self.store_auth)

    async def _produce(self, publisher: Publisher | None, thread: NodeThread) -> int:
        assert isinstance(self.node, Producer)
        loop = ProducerLoop(
            self.node,
            name=self.config.node_name,
            publisher=publisher,
            metrics=self.metrics,
            thread=thread,
            tracer=self.tracer,
        )
        ahead = READ_AHEAD if self.config.flow_type == BATCH else 1
        try:
            await loop.run(self.stop, beat=self.metrics.beat, ahead=ahead)
        except NodeHung:
            return EXIT_HUNG  # no end-of-stream marker: the source did not end
        if publisher is not None:
            publisher.report_withheld()
            await publisher.terminator()
        return self.stopped_code() if self.stop.is_set() and not loop.ended else EXIT_OK

    def stopped_code(self) -> int:
        """A BATCH replica stopped before its work was done did not succeed (STOP-1)."""
        if self.config.flow_type == BATCH:
            log.warning("stopped before the work was done (exit %d)", EXIT_STOPPED)
            return EXIT_STOPPED
        return EXIT_OK

    async def _consume(
        self, loop: ProcessorLoop, eos: EndOfStream, publisher: Publisher | None
    ) -> int:
        try:
            drained = await loop.run(self.stop, eos)
        except EosMismatch as exc:
            if self.control_js is not None:
                await record_loss(self.control_js, self.config, exc)
            raise
        if self.hung is not None:
            return EXIT_HUNG
        if loop.settler.dlq.full is not None:
            return report_dlq_full(self.config, loop.settler.dlq.full)
        if loop.fatal:
            if loop.runner.refused is not None:
                raise loop.runner.refused  # exit 2, by its name (run_worker)
            if loop.runner.full is not None:
                report_full(self.config, loop.runner.full)
            elif loop.runner.opened is not None:
                report_breaker(self.config, loop.runner.opened)
            return EXIT_FAILED
        abort = eos.aborted
        if drained and publisher is not None:
            await publisher.terminator(error=None if abort is None else abort.error())
        if drained and abort is not None:
            return await self._aborted(abort)
        if drained:
            log.info("all inputs drained; done")
            return EXIT_OK
        return self.stopped_code()

    async def _aborted(self, abort: Abort) -> int:
        return await end_on_abort(self.control_js, abort, config=self.config)

    async def _keepalive(self, inputs: Inputs) -> None:
        period = max(1.0, self.config.ack_wait_seconds / 3)
        while True:
            await asyncio.sleep(period)
            await inputs.keepalive()

    async def _orphan_watch(self) -> None:
        """Under ``vf run-local`` a worker ends with its supervisor (VF_EXIT_WITH_PARENT=1)."""
        parent = os.getppid()
        while not self.stop.is_set():
            await asyncio.sleep(1.0)
            if os.getppid() != parent:
                log.warning("supervisor is gone; stopping")
                self.stop.set()

    async def _on_stop(self, msg: Msg) -> None:
        """Obey only this run's and generation's exact stop (STOP-5); keep a record of the
        rest in the dead-letter stream instead."""
        if msg.data == self.names.stop_payload():
            if not self.stop.is_set():
                log.info("stop received on %s", msg.subject)
            self.stop.set()
            return
        self.refused_stops += 1
        if self.refused_stops <= 5:
            log.error("refused a control message on %s: not this run's stop", msg.subject)
        if self.control_js is not None:
            await record_refused_stop(self.control_js, msg, config=self.config, names=self.names)


async def run_worker(
    env: Mapping[str, str], *, build: Callable[[WorkerConfig], Node] = build_node
) -> int:
    """Run one replica from ``env``; returns the process exit code.

    ``build`` makes the node from the configuration: by default the class named by
    ``VF_NODE_CLASS``; a native component written in Python passes its own class.
    """
    try:
        config = load_worker_config(env)
        if config.join_policy.mode == "time" and len(config.parents) > 1:
            raise ConfigError(["time-aligned joins (JoinPolicy mode='time') are not supported yet"])
        auths = nats_auth(env), store_auth(env)
        node = build(config)
    except (ConfigError, CredentialsError) as exc:
        print(exc.render(), file=sys.stderr)
        return EXIT_CONFIG
    worker = Worker(config, node, nats=auths[0], store=auths[1])
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, functools.partial(_stop, worker, loop, env, sig))
    try:
        return await worker.run()
    except Exception as exc:
        return ended_by(exc, config)


def _stop(
    worker: Worker, loop: asyncio.AbstractEventLoop, env: Mapping[str, str], sig: signal.Signals
) -> None:
    stop_within(worker.stop, worker.stopped_code, loop, grace_of(env), sig.name)


def main() -> None:
    """Console entry point of ``vf-worker``."""
    logging.basicConfig(
        level=os.environ.get("VF_LOG_LEVEL", "INFO").upper(),
        format="%(asctime)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    profile_dir = os.environ.get("VF_PROFILE_DIR")
    if not profile_dir:
        code = asyncio.run(run_worker(os.environ))
        if code == EXIT_HUNG:  # a thread stuck in the node would hold the exit back
            logging.shutdown()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        sys.exit(code)
    from vf_runtime.worker.profiling import profiled

    sys.exit(profiled(profile_dir, lambda: asyncio.run(run_worker(os.environ))))


if __name__ == "__main__":
    main()
