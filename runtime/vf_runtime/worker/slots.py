"""Replica ordinals for pods that have none of their own: a Deployment's (ENV-6).

Every replica needs an ordinal in ``0 … VF_NB_TASKS - 1``: its end-of-stream subject
carries it (EOS-1) and its readers expect one marker per ordinal (EOS-2). An Indexed
Job's pod gets its completion index (``VF_REPLICA_ID``) and a StatefulSet's pod its
ordinal (``POD_NAME``); a Deployment's pods have random names. Such a replica leases the
lowest free ordinal from the run's slot bucket (a JetStream key-value bucket whose
entries expire ``SLOT_TTL`` seconds after their last renewal): it creates the key
``<node>.r<i>`` (creation fails while another replica holds it), renews it every
``SLOT_TTL / 3`` seconds, and deletes it when it exits. A replica that finds every slot
held waits for one to be freed, and reports itself ready meanwhile: in a rolling update
the old pod that holds the ordinal is stopped only once its replacement is ready, so a
replacement that waited unready would wait forever. One whose renewal finds the slot
taken by another has lost it (it was away longer than the TTL) and stops, so two
replicas never publish under one ordinal.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Callable

from nats.js import JetStreamContext
from nats.js.errors import BucketNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KeyValue

from vf_runtime.broker.client import patiently
from vf_runtime.broker.naming import RunNames, token

log = logging.getLogger("vf.worker")
SLOT_TTL = 30.0
WAIT = 1.0


class SlotLost(Exception):
    """Another replica holds the ordinal this one leased (its renewals stopped too long)."""

    code = "VF_REPLICA_SLOT_LOST"


def holder() -> str:
    """Who holds a slot, for operators reading the bucket: host name and process id."""
    return f"{socket.gethostname()}:{os.getpid()}"


class SlotLease:
    """One replica's leased ordinal among ``replicas`` of ``node``."""

    def __init__(self, js: JetStreamContext, *, names: RunNames, node: str, replicas: int) -> None:
        self.js = js
        self.bucket_name = names.slot_bucket()
        self.node = token(node)
        self.replicas = replicas
        self.me = holder().encode()
        self.kv: KeyValue | None = None
        self.slot: int | None = None
        self.revision = 0

    def _key(self, slot: int) -> str:
        return f"{self.node}.r{slot}"

    async def _bucket(self) -> KeyValue:
        what = f"bucket {self.bucket_name}"
        try:
            return await patiently(lambda: self.js.key_value(self.bucket_name), what=what)
        except BucketNotFoundError:
            return await patiently(
                lambda: self.js.create_key_value(bucket=self.bucket_name, ttl=SLOT_TTL), what=what
            )

    async def acquire(
        self, stopping: Callable[[], bool], *, waiting: Callable[[], None] = lambda: None
    ) -> int | None:
        """The lowest free ordinal, once one is free; None when a stop came first.
        ``waiting`` is called while every ordinal is held."""
        self.kv = kv = await self._bucket()
        waited = False
        while not stopping():
            for slot in range(self.replicas):
                with contextlib.suppress(KeyWrongLastSequenceError):
                    self.revision = await kv.create(self._key(slot), self.me)
                    self.slot = slot
                    log.info("leased replica ordinal %d of %d", slot, self.replicas)
                    return slot
            if not waited:
                log.warning("all %d replica ordinals are held; waiting for one", self.replicas)
                waited = True
            waiting()
            await asyncio.sleep(WAIT)
        return None

    async def keep(self) -> None:
        """Renew the lease until cancelled; raise :class:`SlotLost` when it was taken."""
        assert self.kv is not None and self.slot is not None
        while True:
            await asyncio.sleep(SLOT_TTL / 3)
            try:
                self.revision = await self.kv.update(
                    self._key(self.slot), self.me, last=self.revision
                )
            except KeyWrongLastSequenceError as exc:
                raise SlotLost(
                    f"replica ordinal {self.slot} of '{self.node}' was taken by another "
                    "replica while this one could not renew it"
                ) from exc
            except Exception as exc:  # the broker is away: the next beat tries again
                log.warning("could not renew replica ordinal %s: %s", self.slot, exc)

    async def release(self) -> None:
        """Free the ordinal for the next replica (it expires by itself otherwise)."""
        if self.kv is None or self.slot is None:
            return
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.kv.delete(self._key(self.slot)), timeout=2.0)
