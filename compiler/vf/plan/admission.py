"""The admission planner: can this environment keep every channel's promise?

Pure functions over the graph, the environment's requirements and the capability records.
Every verdict is collected in one pass; a definite incompatibility rejects, an Unknown
warns unless the operator asked for that profile explicitly. Nothing is ever downgraded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from vf.config.infra import PROFILES
from vf.config.targets import Environment
from vf.errors import Problem, VfError
from vf.ir.admission import (
    ADMITTED,
    REJECTED,
    WARNING,
    Admission,
    ChannelRequest,
    Finding,
    Verdict,
)
from vf.ir.capabilities import (
    INLINE_PAYLOAD_BYTES,
    REDIS_PROFILES,
    Known,
    MessagingCapabilities,
    PayloadCapabilities,
    RuntimeCapabilities,
    Unknown,
    nats_capabilities,
    redis_capabilities,
    runtime_capabilities,
)
from vf.ir.graph import Graph
from vf.plan.infra import store_max_memory
from vf_runtime.constants import BATCH, BATCH_MAX_MSGS, REALTIME


def parse_profile_flags(flags: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """``CHANNEL=PROFILE`` entries of ``--require-profile``; malformed or repeated ones fail."""
    problems: list[Problem] = []
    seen: dict[str, str] = {}
    for flag in flags:
        channel, sep, profile = flag.partition("=")
        if not sep or not channel or not profile:
            problems.append(
                _request_problem(
                    f"--require-profile {flag!r} is malformed", "write CHANNEL=PROFILE"
                )
            )
        elif channel in seen:
            problems.append(
                _request_problem(f"channel {channel!r} is named twice", "name each channel once")
            )
        else:
            seen[channel] = profile
    if problems:
        raise VfError.collect(problems)
    return tuple(sorted(seen.items()))


def _request_problem(what: str, remedy: str, where: str = "--require-profile") -> Problem:
    return Problem(code="VF_CONFIG_PROFILE_REQUEST", what=what, remedy=remedy, where=where)


def capabilities_of(
    env: Environment,
) -> tuple[MessagingCapabilities, PayloadCapabilities, RuntimeCapabilities]:
    broker = env.broker
    store = env.payload_store
    messaging = nats_capabilities(
        profile=broker.profile, replicas=broker.replicas, declared=dict(broker.capabilities)
    )
    payload = redis_capabilities(profile=store.profile, declared=dict(store.capabilities))
    return messaging, payload, runtime_capabilities(payload)


def channel_requests(
    graph: Graph, env: Environment, flags: tuple[tuple[str, str], ...]
) -> tuple[ChannelRequest, ...]:
    """The profile each channel carries: flow default, consumers' delivery, vf.yaml, flags."""
    channels = {n.name: n for n in graph.nodes if n.children}
    nodes = {n.name: n for n in graph.nodes}
    default = "reliable_work" if graph.flow_type == BATCH else "live_latest"
    problems: list[Problem] = []
    requests: dict[str, ChannelRequest] = {}
    for name, node in channels.items():
        declared = {
            "reliable_work" if nodes[c].delivery.delivery == "at-least-once" else "live_latest"
            for c in node.children
            if nodes[c].delivery_declared
        }
        if len(declared) > 1:
            problems.append(
                Problem(
                    code="VF_ADMISSION_MIXED",
                    what=f"channel '{name}': its consumers declare both at-least-once and "
                    "best-effort delivery, and one stream cannot be both",
                    remedy="give every child of the node the same DeliveryPolicy.delivery",
                    where=node.site,
                )
            )
        source = "delivery policy" if len(declared) == 1 else "flow default"
        profile = declared.pop() if len(declared) == 1 else default
        requests[name] = ChannelRequest(
            channel=name, profile=profile, source=source, explicit=False
        )
    sources = (
        ("vf.yaml requirements.profiles", env.requirements.profiles),
        ("--require-profile", flags),
    )
    named: dict[str, str] = {}
    for source, entries in sources:
        for channel, profile in entries:
            problem = _check_request(
                channel, profile=profile, source=source, channels=channels, nodes=nodes, named=named
            )
            if problem is not None:
                problems.append(problem)
                continue
            named[channel] = source
            requests[channel] = ChannelRequest(
                channel=channel, profile=profile, source=source, explicit=True
            )
    if problems:
        raise VfError.collect(problems)
    return tuple(requests[k] for k in sorted(requests))


def _check_request(
    channel: str,
    *,
    profile: str,
    source: str,
    channels: dict[str, Any],
    nodes: dict[str, Any],
    named: dict[str, str],
) -> Problem | None:
    if profile not in PROFILES:
        return _request_problem(
            f"unknown profile {profile!r} for channel {channel!r}",
            f"use one of {', '.join(PROFILES)}",
            source,
        )
    if channel not in channels:
        what = (
            "is a consumer; it publishes nothing"
            if channel in nodes
            else "is not a node of the flow"
        )
        return _request_problem(
            f"channel {channel!r} {what}",
            f"name a node whose output is consumed: {', '.join(sorted(channels)[:10])}",
            source,
        )
    if channel in named:
        return _request_problem(
            f"channel {channel!r} is named twice ({named[channel]} and {source})",
            "name each channel once",
            source,
        )
    return None


@dataclass(frozen=True, kw_only=True)
class _Context:
    flow_type: str
    broker: MessagingCapabilities
    payload: PayloadCapabilities
    runtime: RuntimeCapabilities


def _need(value: Any, want: Any, what: str) -> tuple[Verdict, str] | None:
    """None when ``value`` is Known and satisfies ``want``; else a (status, reason)."""
    if isinstance(value, Unknown):
        return WARNING, f"{what} is unknown ({value.reason})"
    assert isinstance(value, Known)
    ok = want(value.value) if callable(want) else value.value == want
    return None if ok else (REJECTED, f"{what} is {_shown(value.value)}")


def _shown(value: Any) -> str:
    """A value as vf.yaml writes it: ``true``, ``false``, ``null``, numbers, text."""
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "null"}[value]
    return str(value)


def _profile_checks(profile: str, ctx: _Context) -> list[tuple[Verdict, str] | None]:
    broker, payload, runtime = ctx.broker, ctx.payload, ctx.runtime
    if profile == "reliable_work":
        checks = [
            _need(broker.retained_backlog, True, "the broker's retained backlog"),
            _need(broker.recoverable_delivery, True, "the broker's recoverable delivery"),
        ]
        if payload.present:
            checks.append(_need(payload.durable, True, "the payload store's durability"))
            checks.append(
                _need(
                    payload.evictable,
                    False,
                    "the payload store's eviction (an accepted envelope could outlive its bytes)",
                )
            )
        return checks
    if profile == "live_latest":
        return [_need(broker.bounded_streams, True, "the broker's bounded, freshest-wins streams")]
    if profile == "durable_control":
        return [_need(runtime.durable, True, "the runtime store's durability")]
    return [_need(broker.archive, True, "the broker's archive")]


def _shape_check(profile: str, flow_type: str) -> tuple[Verdict, str] | None:
    if profile == "reliable_work" and flow_type == REALTIME:
        return (
            REJECTED,
            "a REALTIME flow's streams are bounded and drop old messages, "
            "so they cannot carry reliable_work",
        )
    if profile == "live_latest" and flow_type == BATCH:
        return (
            REJECTED,
            "a BATCH flow's streams keep every message until consumed, "
            "so they cannot carry live_latest",
        )
    return None


def _judge_channel(request: ChannelRequest, ctx: _Context) -> list[Finding]:
    outcomes = [
        _shape_check(request.profile, ctx.flow_type),
        *_profile_checks(request.profile, ctx),
    ]
    findings = []
    for outcome in outcomes:
        if outcome is None:
            continue
        status, reason = outcome
        if status == WARNING and request.explicit:
            status, reason = (
                REJECTED,
                reason + f"; {request.profile} was required explicitly ({request.source})",
            )
        findings.append(
            Finding(
                subject=f"channel {request.channel}",
                status=status,
                reason=f"{request.profile}: {reason}",
            )
        )
    if not findings:
        findings.append(
            Finding(
                subject=f"channel {request.channel}",
                status=ADMITTED,
                reason=f"{request.profile} ({request.source})",
            )
        )
    return findings


EXACTLY_ONCE = (
    "no broker or store can give exactly-once effects; only an idempotent sink that writes "
    "with its external system's idempotency key can (Consumer(idempotent=True))"
)


def _requirement_checks(
    env: Environment, ctx: _Context
) -> list[tuple[str, tuple[Verdict, str] | None]]:
    """(subject, outcome) for every explicit requirement; each one is binding."""
    req = env.requirements
    checks: list[tuple[str, tuple[Verdict, str] | None]] = []
    if req.exactly_once_effects:
        checks.append(("requirements.exactly_once_effects", (REJECTED, EXACTLY_ONCE)))
    if req.tolerated_failures > 0:
        f = req.tolerated_failures
        subject = f"requirements.tolerated_failures={f}"
        replicas = f"stream replication (needs >= {2 * f + 1})"
        checks.append(
            (subject, _need(ctx.broker.persistent_storage, True, "the broker's persistent storage"))
        )
        checks.append(
            (subject, _need(ctx.broker.replication_factor, lambda r: r >= 2 * f + 1, replicas))
        )
        if ctx.payload.present:
            checks.append(
                (subject, _need(ctx.payload.durable, True, "the payload store's durability"))
            )
            checks.append(
                (
                    subject,
                    _need(
                        ctx.payload.persistent_storage,
                        True,
                        "the payload store's persistent storage",
                    ),
                )
            )
    if req.restart_safe:
        subject = "requirements.restart_safe"
        checks.append((subject, _need(ctx.runtime.durable, True, "the runtime store's durability")))
        checks.append(
            (
                subject,
                _need(
                    ctx.runtime.shared_across_processes,
                    True,
                    "the runtime store's sharing across processes",
                ),
            )
        )
    return checks


def _judge_requirements(env: Environment, ctx: _Context) -> list[Finding]:
    findings = [
        Finding(subject=subject, status=REJECTED, reason=outcome[1])
        for subject, outcome in _requirement_checks(env, ctx)
        if outcome is not None
    ]
    payload_limit = _need(
        ctx.broker.max_payload_bytes, lambda n: n > INLINE_PAYLOAD_BYTES, "the broker's max payload"
    )
    if payload_limit is not None:
        findings.append(
            Finding(
                subject="broker.max_payload",
                status=payload_limit[0],
                reason=payload_limit[1] + f"; inline payloads reach {INLINE_PAYLOAD_BYTES} bytes",
            )
        )
    return findings


def admit(graph: Graph, env: Environment, *, flags: tuple[tuple[str, str], ...] = ()) -> Admission:
    """Judge every channel and requirement of ``env``; rejections are recorded, not raised."""
    broker, payload, runtime = capabilities_of(env)
    ctx = _Context(flow_type=graph.flow_type, broker=broker, payload=payload, runtime=runtime)
    requests = channel_requests(graph, env, flags)
    findings = [f for r in requests for f in _judge_channel(r, ctx)]
    findings.extend(_judge_requirements(env, ctx))
    findings.extend(_store_size(graph, env))
    return Admission(
        requests=requests, findings=tuple(findings), broker=broker, payload=payload, runtime=runtime
    )


def _store_size(graph: Graph, env: Environment) -> list[Finding]:
    """A warning when the streams can hold more offloaded payload than the shipped store's
    ``maxmemory``: a backlog then fills the store before any stream pushes back (BLOB-8).

    Every message a stream keeps may point at a payload above the inline limit, so the
    streams can hold at least their kept messages times the inline limit of offloaded
    bytes (one blob per message, whatever the number of readers). An external store's
    size is unknown.
    """
    limit = store_max_memory(env.payload_store.profile)
    channels = sum(1 for node in graph.nodes if node.children)
    if limit is None or not channels:
        return []
    kept = BATCH_MAX_MSGS if graph.flow_type == BATCH else 1  # REALTIME: the freshest one
    held = channels * kept * INLINE_PAYLOAD_BYTES
    if held <= limit:
        return []
    gib = 1024**3
    return [
        Finding(
            subject="payload_store",
            status=WARNING,
            reason=(
                f"warning[VF_ADMISSION_STORE_SIZE] {_count(channels, 'stream')} can keep "
                f"{kept:,} messages each, and each may offload a payload above the "
                f"{INLINE_PAYLOAD_BYTES // 1024} KiB inline limit: at least "
                f"{held / gib:.1f} GiB, more than the store's maxmemory of "
                f"{limit / gib:.1f} GiB. A backlog of large items fills the store first; "
                "writers then wait for room (VF_BLOB_STORE_FULL after "
                "VF_STORE_FULL_SECONDS)"
            ),
        )
    ]


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def admission_problems(admission: Admission, *, environment: str) -> list[Problem]:
    """One problem per rejected channel of ``environment``, with all its reasons."""
    grouped: dict[str, list[Finding]] = {}
    for finding in admission.rejections:
        grouped.setdefault(finding.subject, []).append(finding)
    return [
        Problem(
            code="VF_ADMISSION_REJECTED",
            what=f"{subject}: {_reasons([f.reason for f in findings])}",
            remedy=_remedy(findings),
            where=f"environment '{environment}'",
        )
        for subject, findings in grouped.items()
    ]


def _reasons(reasons: list[str]) -> str:
    """``profile: a; b`` for reasons that all start with the same ``profile: ``."""
    heads = {reason.partition(": ")[0] for reason in reasons}
    if len(reasons) > 1 and len(heads) == 1 and all(": " in r for r in reasons):
        return f"{heads.pop()}: " + "; ".join(r.partition(": ")[2] for r in reasons)
    return "; ".join(dict.fromkeys(reasons))


def _keeping_stores() -> str:
    """The payload-store profiles that keep every payload (durable, never evicting)."""
    kept = [p for p, t in REDIS_PROFILES.items() if t["durable"] and not t["evictable"]]
    return " or ".join(kept)


def _remedy(findings: list[Finding]) -> str:
    fixes: list[str] = []
    for finding in findings:
        reason = finding.reason
        if "exactly_once" in finding.subject:
            fix = "drop exactly_once_effects and make the sink idempotent"
        elif "REALTIME" in reason or "BATCH" in reason:
            fix = "change the flow type, or require a profile that matches it"
        elif "payload store" in reason or "runtime store" in reason:
            fix = (
                f"set payload_store.profile to {_keeping_stores()} (durable, never evicting), "
                "or declare an external store's capabilities"
            )
        elif "archive" in reason:
            fix = "set broker.profile to durable (the broker profile that archives)"
        else:
            fix = (
                "choose a broker profile that offers it, or declare the external broker's "
                "capabilities"
            )
        fixes.append(fix)
    return "; ".join(dict.fromkeys(fixes))
