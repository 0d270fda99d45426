"""The admission verdicts a Plan records: each channel's request, and what was found.

`vf.plan.admission` judges them; `verify` and `vf explain` read them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Final, Literal

from vf.ir.capabilities import MessagingCapabilities, PayloadCapabilities, RuntimeCapabilities

Verdict = Literal["admitted", "warning", "rejected"]
ADMITTED: Final[Verdict] = "admitted"
WARNING: Final[Verdict] = "warning"
REJECTED: Final[Verdict] = "rejected"


@dataclass(frozen=True, kw_only=True)
class Finding:
    """One verdict: about a channel (named by its node) or about the environment."""

    subject: str
    status: Verdict
    reason: str


@dataclass(frozen=True, kw_only=True)
class ChannelRequest:
    channel: str
    profile: str
    source: str
    explicit: bool


@dataclass(frozen=True, kw_only=True)
class Admission:
    """Every request and verdict of one environment, with the records they were judged by."""

    requests: tuple[ChannelRequest, ...]
    findings: tuple[Finding, ...]
    broker: MessagingCapabilities
    payload: PayloadCapabilities
    runtime: RuntimeCapabilities

    def profile_of(self, channel: str) -> str:
        return self._profiles[channel]

    @cached_property
    def _profiles(self) -> dict[str, str]:
        """Each channel's profile, looked up once per channel instead of scanned for."""
        profiles: dict[str, str] = {}
        for request in self.requests:
            profiles.setdefault(request.channel, request.profile)
        return profiles

    @property
    def rejections(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.status == REJECTED)

    @property
    def warnings(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.status == WARNING)
