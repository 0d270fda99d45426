"""Join and delivery policies: how a node groups its inputs and how hard delivery tries."""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vf_runtime.constants import BATCH, FLOW_TYPES, REALTIME, FlowType
from vf_runtime.errors import AuthoringError

JOIN_MISSING = ("drop", "wait", "error")
JOIN_MODES = ("trace", "time")
DELIVERY_MODES = ("at-least-once", "best-effort")
DLQ_MODES = ("full", "sampled", "off")
ON_ERROR = ("poison", "transient", "worker_fatal")
# the longest one node call (process, consume, next) may take before its replica is hung
# (DELIV-12); 0 means no bound
DEFAULT_CALL_TIMEOUT = 300.0


def _policy_error(code: str, message: str, remedy: str) -> AuthoringError:
    return AuthoringError(code, message, remedy)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True, kw_only=True)
class JoinPolicy:
    """How a multi-parent node assembles one group from its parents' messages."""

    timeout_seconds: float | None = None
    missing: str = "drop"
    max_pending: int = 256
    mode: str = "trace"
    tolerance_ms: float | None = None
    quorum: int | None = None
    collect: Mapping[str, float] | tuple[tuple[str, float], ...] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.collect, Mapping):
            object.__setattr__(self, "collect", tuple(sorted(self.collect.items())))
        _check_join(self)
        if self.missing == "wait" and self.timeout_seconds is not None:
            object.__setattr__(self, "timeout_seconds", None)

    @classmethod
    @functools.cache  # frozen: every node that declares none shares one
    def default_for(cls, flow_type: str) -> JoinPolicy:
        """The join policy a node gets when it declares none."""
        if flow_type == BATCH:
            return cls(timeout_seconds=None, missing="wait")
        return cls(timeout_seconds=10.0, missing="drop")

    def to_dict(self) -> dict[str, Any]:
        collect = None if self.collect is None else dict(self._collect_items())
        return {
            "timeout_seconds": self.timeout_seconds,
            "missing": self.missing,
            "max_pending": self.max_pending,
            "mode": self.mode,
            "tolerance_ms": self.tolerance_ms,
            "quorum": self.quorum,
            "collect": collect,
        }

    def _collect_items(self) -> tuple[tuple[str, float], ...]:
        if self.collect is None or isinstance(self.collect, Mapping):
            return tuple(sorted((self.collect or {}).items()))
        return self.collect


def _check_join(policy: JoinPolicy) -> None:
    where = "JoinPolicy"
    if policy.missing not in JOIN_MISSING:
        raise _policy_error(
            "VF_POLICY_JOIN",
            f"{where}: missing={policy.missing!r} is not one of {', '.join(JOIN_MISSING)}",
            "use missing='drop', 'wait' or 'error'",
        )
    if policy.mode not in JOIN_MODES:
        raise _policy_error(
            "VF_POLICY_JOIN",
            f"{where}: mode={policy.mode!r} is not one of {', '.join(JOIN_MODES)}",
            "use mode='trace' (group by trace id) or mode='time' (group by event time)",
        )
    if policy.timeout_seconds is not None and not (
        _is_number(policy.timeout_seconds) and policy.timeout_seconds > 0
    ):
        raise _policy_error(
            "VF_POLICY_JOIN",
            f"{where}: timeout_seconds={policy.timeout_seconds!r} must be a positive number",
            "pass a positive number of seconds, or None to wait forever",
        )
    if not (_is_int(policy.max_pending) and policy.max_pending >= 1):
        raise _policy_error(
            "VF_POLICY_JOIN",
            f"{where}: max_pending={policy.max_pending!r} must be a positive integer",
            "pass max_pending >= 1 (videoflow's default is 256)",
        )
    _check_time_mode(policy)


def _check_time_mode(policy: JoinPolicy) -> None:
    time_only = {
        "tolerance_ms": policy.tolerance_ms,
        "quorum": policy.quorum,
        "collect": policy.collect,
    }
    if policy.mode != "time":
        used = sorted(k for k, v in time_only.items() if v is not None)
        if used:
            raise _policy_error(
                "VF_POLICY_JOIN",
                f"JoinPolicy: {', '.join(used)} only apply to mode='time'",
                "set mode='time' or drop those fields",
            )
        return
    tolerance = policy.tolerance_ms
    if tolerance is None or not _is_number(tolerance) or tolerance <= 0:
        raise _policy_error(
            "VF_POLICY_JOIN",
            f"JoinPolicy: mode='time' needs tolerance_ms > 0, got {tolerance!r}",
            "pass tolerance_ms, the largest event-time gap that still joins",
        )
    if policy.quorum is not None:
        if not (_is_int(policy.quorum) and policy.quorum >= 1):
            raise _policy_error(
                "VF_POLICY_JOIN",
                f"JoinPolicy: quorum={policy.quorum!r} must be an integer >= 1",
                "pass quorum >= 1",
            )
        if policy.timeout_seconds is None:
            raise _policy_error(
                "VF_POLICY_JOIN",
                "JoinPolicy: a quorum needs timeout_seconds",
                "pass timeout_seconds so the quorum can be emitted when members are missing",
            )
    for parent, window in policy._collect_items():
        if not _is_number(window) or window <= 0:
            raise _policy_error(
                "VF_POLICY_JOIN",
                f"JoinPolicy: collect window for {parent!r} must be > 0 ms, got {window!r}",
                "pass a positive window in milliseconds for every collected parent",
            )


@dataclass(frozen=True, kw_only=True)
class DeliveryPolicy:
    """How hard the broker tries to deliver a node's inputs, and where failures go."""

    delivery: str = "at-least-once"
    max_retries: int = 3
    dlq: str = "full"
    on_error: str | None = None
    sample_per_minute: int = 5
    call_timeout_seconds: float = DEFAULT_CALL_TIMEOUT

    def __post_init__(self) -> None:
        checks = (
            ("delivery", self.delivery in DELIVERY_MODES, ", ".join(DELIVERY_MODES)),
            ("dlq", self.dlq in DLQ_MODES, ", ".join(DLQ_MODES)),
            ("on_error", self.on_error is None or self.on_error in ON_ERROR, ", ".join(ON_ERROR)),
            (
                "max_retries",
                _is_int(self.max_retries) and 0 <= self.max_retries <= 100,
                "an integer 0..100",
            ),
            (
                "sample_per_minute",
                _is_int(self.sample_per_minute) and self.sample_per_minute >= 1,
                "an integer >= 1",
            ),
            (
                "call_timeout_seconds",
                _is_number(self.call_timeout_seconds) and self.call_timeout_seconds >= 0,
                "a number of seconds >= 0 (0: no bound)",
            ),
        )
        for field, ok, allowed in checks:
            if not ok:
                raise _policy_error(
                    "VF_POLICY_DELIVERY",
                    f"DeliveryPolicy: {field}={getattr(self, field)!r} is invalid",
                    f"{field} must be {allowed}",
                )

    @classmethod
    @functools.cache  # frozen: every node that declares none shares one
    def default_for(cls, flow_type: str) -> DeliveryPolicy:
        """The delivery policy a node gets when it declares none."""
        if flow_type == BATCH:
            return cls(delivery="at-least-once", dlq="full")
        return cls(delivery="best-effort", dlq="sampled")

    @property
    def max_deliver(self) -> int:
        """JetStream max_deliver: one try for best-effort, retries + 1 otherwise."""
        return 1 if self.delivery == "best-effort" else self.max_retries + 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "delivery": self.delivery,
            "max_retries": self.max_retries,
            "dlq": self.dlq,
            "on_error": self.on_error,
            "sample_per_minute": self.sample_per_minute,
            "call_timeout_seconds": self.call_timeout_seconds,
        }


def check_flow_type(flow_type: object) -> FlowType:
    """Return ``flow_type`` when it is a known flow type, else raise an AuthoringError."""
    if flow_type not in FLOW_TYPES:
        raise AuthoringError(
            "VF_GRAPH_FLOW_TYPE",
            f"flow_type={flow_type!r} is not one of {', '.join(FLOW_TYPES)}",
            "pass flow_type=BATCH or flow_type=REALTIME",
        )
    return BATCH if flow_type == BATCH else REALTIME
