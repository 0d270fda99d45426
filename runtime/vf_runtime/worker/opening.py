"""A replica's stores as its configuration names them, and the exit code of an error that
ended its run (the README's exit-code table)."""

from __future__ import annotations

import logging
import sys

import nats.errors

from vf_runtime.broker.client import AUTH_CODES, BrokerError
from vf_runtime.clientauth import StoreAuth
from vf_runtime.credentials import store_key_prefix
from vf_runtime.store.blobstore import AppliedLog, BlobStore, StoreFull, StoreRefused
from vf_runtime.worker.config import WorkerConfig
from vf_runtime.worker.eos import EosMismatch
from vf_runtime.worker.exits import EXIT_BROKER, EXIT_CONFIG, EXIT_FAILED, EXIT_STOPPED
from vf_runtime.worker.lifecycle import GenerationFinished, report_full
from vf_runtime.worker.tally import GenerationSuperseded

log = logging.getLogger("vf.worker")


def open_stores(
    config: WorkerConfig, auth: StoreAuth | None
) -> tuple[BlobStore | None, AppliedLog | None]:
    """The payload store and, for an idempotent consumer, its applied log; none without a
    store URL."""
    url = config.blob_redis_url
    if url is None:
        if config.idempotent:
            log.warning("VF_IDEMPOTENT=1 but VF_BLOB_REDIS_URL is unset: no sink de-duplication")
        return None, None
    blobs = BlobStore.from_url(
        url,
        ttl_seconds=config.blob_ttl_seconds,
        prefix=store_key_prefix(config.flow_id),
        auth=auth,
    )
    if not config.idempotent:
        return blobs, None
    applied = AppliedLog(
        blobs.client, flow_id=config.flow_id, node=config.node_name, generation=config.generation
    )
    return blobs, applied


def ended_by(exc: Exception, config: WorkerConfig) -> int:
    """Report what ended the run and return the process exit code."""
    if isinstance(exc, BrokerError | StoreRefused):  # a refused replica handed its inputs back
        print(exc.render(), file=sys.stderr)
        refused = isinstance(exc, StoreRefused) or exc.code in AUTH_CODES
        return EXIT_CONFIG if refused else EXIT_BROKER
    lost = _broker_lost(exc)
    if lost is not None:  # a call no retry covers: the controller starts the replica again
        print(lost.render(), file=sys.stderr)
        return EXIT_BROKER
    if isinstance(exc, GenerationSuperseded):  # stopped: its run is not the current one
        print(exc.render(), file=sys.stderr)
        return EXIT_STOPPED
    if isinstance(exc, StoreFull):  # a producer's offload: it holds no inputs to hand back
        report_full(config, exc)
    elif isinstance(exc, EosMismatch):
        print(f"error[{exc.code}] {exc}", file=sys.stderr)
    elif isinstance(exc, GenerationFinished):
        print(exc.render(), file=sys.stderr)
    else:
        log.exception("worker failed", exc_info=exc)
    return EXIT_FAILED


# a connection to the broker that is gone, in the call that ended the run
_GONE = (
    nats.errors.ConnectionClosedError,
    nats.errors.NoServersError,
    nats.errors.NoRespondersError,
    nats.errors.StaleConnectionError,
    nats.errors.UnexpectedEOF,
)


def _broker_lost(exc: Exception) -> BrokerError | None:
    """The named error of a broker that stopped answering, or whose connection is gone, in
    a call that ended the run; None for any other error."""
    if isinstance(exc, nats.errors.TimeoutError):
        return BrokerError(
            "VF_BROKER_TIMEOUT",
            f"the broker did not answer a request in time ({exc!r}); the replica exits 3 "
            "and its controller starts it again",
            "check that the broker is up and not overloaded (its pods, its logs)",
        )
    if isinstance(exc, _GONE):
        return BrokerError(
            "VF_BROKER_UNAVAILABLE",
            f"the connection to the broker was lost ({exc!r}); the replica exits 3 and its "
            "controller starts it again",
            "check that the broker is up (its pods, its logs) and reachable from the worker",
        )
    return None
