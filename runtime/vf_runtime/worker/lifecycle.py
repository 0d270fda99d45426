"""What a replica checks and records around its run, apart from the work itself: a BATCH
generation runs once (GEN-7), and a control message that is not this run's exact stop is
kept in the dead-letter stream (STOP-5), an abort ends a replica by name (EOS-5), and what
start-up made is kept out of the garbage collector's way once ``open()`` returned."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hashlib
import logging
import os
import sys
from collections.abc import Callable, Mapping

from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

from vf_runtime.broker.client import patiently
from vf_runtime.broker.naming import RunNames
from vf_runtime.constants import BATCH
from vf_runtime.store.blobstore import StoreFull
from vf_runtime.worker.config import WorkerConfig
from vf_runtime.worker.eos import Abort, EndOfStream, record_abort
from vf_runtime.worker.exits import EXIT_ABORTED, EXIT_BROKER
from vf_runtime.worker.inputs import Inputs


def freeze_start_up() -> None:
    """Once ``open()`` has returned: collect what start-up left, then move every object
    alive (the imports, the connections, the node's own state, the OpenTelemetry SDK when
    tracing) into the collector's permanent generation, so that a full collection during
    the run walks only the objects the run made (ADR 0242)."""
    gc.collect()
    gc.freeze()


class GenerationFinished(Exception):
    """This generation's work was done by an earlier life of this replica (GEN-7)."""

    code = "VF_GENERATION_FINISHED"

    def render(self) -> str:
        return (
            f"error[{self.code}] {self}\n  = fix: change the flow (a new generation) or delete "
            "the run's streams to run it again; vf run-local always starts a new generation"
        )


async def check_not_finished(
    js: JetStreamContext, inputs: Inputs, *, config: WorkerConfig, names: RunNames
) -> None:
    """A BATCH generation runs once: refuse to finish silently with nothing done (GEN-7)."""
    if config.flow_type != BATCH:
        return
    where = f"generation {config.generation or '(none)'} of run {config.run_id}"
    if config.has_children:
        subject = names.eos_subject(config.node_name, replica=config.replica_id)
        with contextlib.suppress(NotFoundError):
            stream = names.stream(config.node_name)
            await patiently(lambda: js.get_last_msg(stream, subject), what=f"{subject} on {stream}")
            raise GenerationFinished(
                f"replica {config.replica_id} of '{config.node_name}' already ended {where} "
                "(its end-of-stream marker is stored): the Jobs were re-created unchanged"
            )
    sole_reader = config.nb_tasks == 1 or config.partitioned
    if not config.parents or not sole_reader:
        return
    eos = EndOfStream(js, config=config)
    await eos.poll()
    if eos.done and await inputs.consumed_before():
        raise GenerationFinished(
            f"replica {config.replica_id} of '{config.node_name}' already consumed every "
            f"input of {where}: the Jobs were re-created unchanged, or an earlier life of "
            "this replica failed (a VF_EOS_MISMATCH among its dead letters says items "
            "were lost)"
        )


async def record_refused_stop(
    js: JetStreamContext, msg: Msg, *, config: WorkerConfig, names: RunNames
) -> None:
    """One dead-letter record of a refused control message (every replica sees it)."""
    digest = hashlib.sha256(msg.data).hexdigest()[:32]
    headers = {
        "Nats-Msg-Id": f"dlq:control:{digest}",
        "VF-Origin-Node": config.node_name,
        "VF-Run-Id": config.run_id,
        "VF-Generation": config.generation,
        "VF-Code": "VF_CONTROL_REFUSED",
        "VF-Error": "not the exact stop of this run and generation (STOP-5)",
    }
    with contextlib.suppress(Exception):
        await js.publish(names.dlq_control_subject(), msg.data, timeout=5.0, headers=headers)


async def end_on_abort(js: JetStreamContext | None, abort: Abort, *, config: WorkerConfig) -> int:
    """End on an abort (EOS-5): never a success, and the reason kept in the dead-letter
    stream, so a run reports which node ended on which upstream error."""
    message = f"'{config.node_name}' replica {config.replica_id} ended on an {abort.reason()}"
    if js is not None:
        await record_abort(js, config, abort, message)
    print(
        f"error[VF_UPSTREAM_ABORTED] {message}\n  = fix: read the aborting node's logs and "
        "dead letters; a run that aborted is rerun as a new generation",
        file=sys.stderr,
        flush=True,
    )
    return EXIT_ABORTED


def report_full(config: WorkerConfig, exc: StoreFull) -> None:
    """BLOB-8: the payload store stayed full past ``VF_STORE_FULL_SECONDS``; nothing was
    judged a failure of the node, and what the replica held went back to the broker."""
    print(
        f"error[{exc.code}] '{config.node_name}' replica {config.replica_id}: {exc}; its "
        "unpublished items were handed back, not failed or dead-lettered\n"
        "  = fix: give the payload store room (raise its maxmemory, or free its volume), or "
        "let the readers catch up so that their releases free it; VF_STORE_FULL_SECONDS sets "
        f"how long a write waits ({config.store_full_seconds:g}s)",
        file=sys.stderr,
        flush=True,
    )


def report_dlq_full(config: WorkerConfig, refused: str) -> int:
    """DELIV-13: the dead-letter stream had no room for a dead letter. The message was
    handed back, never dropped; the replica ends by that name with exit 3."""
    print(
        f"error[VF_DLQ_FULL] '{config.node_name}' replica {config.replica_id}: the "
        f"dead-letter stream {config.names.dlq_stream()} is full and refused the dead "
        f"letters of {refused}; each was handed back to its stream, not dropped\n"
        "  = fix: read and clear the dead letters (vf dlq ls, then vf dlq replay or vf dlq "
        "purge --flow F --nats URL), or give the broker a larger volume "
        "(broker.storage_size, or broker.stream_max_bytes), then restart the replica",
        file=sys.stderr,
        flush=True,
    )
    return EXIT_BROKER


def report_breaker(config: WorkerConfig, opened: str) -> None:
    """DELIV-11: the node failed too many items in a row; its items went back to the broker."""
    print(
        f"error[VF_BREAKER_OPEN] '{config.node_name}' replica {config.replica_id}: "
        f"{opened}; its items were handed back, not dead-lettered\n"
        "  = fix: repair the node and roll it out (VF_BREAKER_THRESHOLD sets how "
        "many failures in a row stop a replica; 0 never does)",
        file=sys.stderr,
        flush=True,
    )


STOP_GRACE = 20.0  # below Kubernetes' default terminationGracePeriodSeconds (30)
log = logging.getLogger("vf.worker")


def grace_of(env: Mapping[str, str]) -> float:
    """``VF_STOP_GRACE_SECONDS``, or the default when unset or not a number."""
    try:
        return float(env.get("VF_STOP_GRACE_SECONDS", STOP_GRACE))
    except ValueError:
        return STOP_GRACE


def stop_within(
    stop: asyncio.Event,
    stopped_code: Callable[[], int],
    loop: asyncio.AbstractEventLoop,
    grace: float,
    signal_name: str,
) -> None:
    """Stop cleanly, but exit within the stop grace even if the broker or store is gone and
    in-flight work cannot settle: it was not acked, so it is delivered again (STOP-6)."""
    if stop.is_set():
        return
    stop.set()
    log.info("%s received; stopping, at most %gs from now", signal_name, grace)

    def give_up() -> None:
        log.warning("stop grace of %gs exceeded; exiting with unsettled work unacked", grace)
        logging.shutdown()
        os._exit(stopped_code())

    loop.call_later(grace, give_up)
