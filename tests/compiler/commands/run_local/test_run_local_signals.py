"""A stop signal while ``vf run-local`` provisions its streams cancels the provisioning at an
``await``, never inside the code between two: a KeyboardInterrupt raised there once left a
NATS client's tasks running, and the run waited on them for over a minute before it
stopped (tests/runtime/local/test_orphans.py, interrupted just after the broker started)."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from typing import Any

import pytest

from vf.commands.run_local import command, signals


def test_a_signal_during_provisioning_cancels_it_at_an_await(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: dict[str, Any] = {}

    async def provisioning(
        url: str, topology: object, *, prune: bool, timeout: float, auth: object = None
    ) -> None:
        threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT)).start()
        started, steps = time.monotonic(), 0
        while time.monotonic() - started < 0.5:  # code between two awaits, as a client runs
            steps += 1
        seen["stretch"] = "whole"
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            await asyncio.sleep(0)  # an interrupted client still closes itself
            seen["closed"] = True
            raise

    monkeypatch.setattr(command, "provision_run", provisioning)
    before = signal.getsignal(signal.SIGTERM)
    with signals.stopped_by_signals():
        handlers = {sig: signal.getsignal(sig) for sig in signals.STOP_SIGNALS}
        with pytest.raises(KeyboardInterrupt):
            command._provision("nats://127.0.0.1:1", topology=None)  # type: ignore[arg-type]
        assert signals.stop_asked()
        assert {sig: signal.getsignal(sig) for sig in signals.STOP_SIGNALS} == handlers
    assert seen == {"stretch": "whole", "closed": True}
    assert signal.getsignal(signal.SIGTERM) == before
