"""The broker, payload store and requirements sections of an environment in vf.yaml."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from vf.config.network import (
    NATS_CLIENT_PORT,
    REDIS_PORT,
    Egress,
    parse_egress,
    parse_peers,
    peer_problems,
)
from vf.config.servers import NATS_IMAGE
from vf.config.servers import STORE_IMAGE as REDIS_IMAGE
from vf.config.url_secrets import url_credentials
from vf.errors import Problem
from vf.ir.plan import AuthKind
from vf.ir.records import Peer, SecretRef
from vf.textio.quantity import quantity_bytes

BROKER_PROFILES = ("dev", "durable", "external")
STORE_PROFILES = ("none", "dev", "durable", "cache", "external")
PROFILES = ("reliable_work", "live_latest", "durable_control", "replay_archive")
DEFAULT_STORAGE_SIZE = "10Gi"
MAX_STREAM_REPLICAS = 5
# A service address: printable, and nothing UTF-8 cannot encode (no unpaired surrogates).
_PRINTABLE_URL = re.compile("^[^\\x00-\\x20\\x7f\\ud800-\\udfff]+\\Z")


@dataclass(frozen=True, kw_only=True)
class AuthChoice:
    """vf.yaml's ``auth:`` of a broker or store: ``none``, or the Secrets to read (ADR 0212).
    Absent from vf.yaml, the section's ``auth`` is None and the plan picks vf's default."""

    off: bool = False  # ``auth: none``
    secret: str | None = None
    routes_secret: str | None = None
    kind: AuthKind = "password"


@dataclass(frozen=True, kw_only=True)
class BrokerTarget:
    """Where the NATS JetStream broker comes from and what shape it has."""

    profile: str = "dev"
    replicas: int = 1
    stream_replicas: int = 1
    storage_class: str | None = None
    storage_size: str = DEFAULT_STORAGE_SIZE
    url: str | None = None
    url_secret: SecretRef | None = None
    capabilities: tuple[tuple[str, Any], ...] = ()
    image: str = NATS_IMAGE
    monitoring_from: tuple[Peer, ...] | None = None
    egress: Egress | None = None
    reclaim_superseded: bool = False  # the provision Job deletes the flow's other runs
    auth: AuthChoice | None = None
    tls_secret: str | None = None  # ``tls: {secret}`` (ADR 0222); None: plaintext
    stream_max_bytes: int | None = None  # each BATCH stream's max_bytes, when vf.yaml sets it


@dataclass(frozen=True, kw_only=True)
class StoreTarget:
    """Where large payloads go (a Redis), if anywhere."""

    profile: str = "none"
    storage_class: str | None = None
    storage_size: str = DEFAULT_STORAGE_SIZE
    url: str | None = None
    url_secret: SecretRef | None = None
    capabilities: tuple[tuple[str, Any], ...] = ()
    image: str = REDIS_IMAGE
    egress: Egress | None = None
    auth: AuthChoice | None = None
    tls_secret: str | None = None


@dataclass(frozen=True, kw_only=True)
class Requirements:
    """Guarantees the operator asks of an environment."""

    profiles: tuple[tuple[str, str], ...] = ()
    tolerated_failures: int = 0
    restart_safe: bool = False
    exactly_once_effects: bool = False


@dataclass
class _Checker:
    env: str
    source: str
    problems: list[Problem] = field(default_factory=list)

    def fail(self, key: str, what: str, remedy: str, *, code: str = "VF_CONFIG_PROFILE") -> None:
        self.problems.append(
            Problem(
                code=code,
                what=f"environments.{self.env}.{key}: {what}",
                remedy=remedy,
                where=f"{self.source} (environment '{self.env}')",
            )
        )


def _secret(raw: dict[str, Any] | None) -> SecretRef | None:
    return None if raw is None else SecretRef(name=raw["name"], key=raw["key"])


def parse_broker(
    raw: dict[str, Any] | None, *, env: str, source: str
) -> tuple[BrokerTarget, list[Problem]]:
    """The broker of one environment, and every inconsistency in its declaration."""
    data = raw or {}
    check = _Checker(env=env, source=source)
    profile = data.get("profile", "dev")
    replicas = data.get("replicas", 3 if profile == "durable" else 1)
    durable_only = {"replicas", "stream_replicas", "storage_class", "storage_size"}
    _only_for(
        check, section="broker", data=data, profile=profile, keys=durable_only, wanted="durable"
    )
    stream_replicas = data.get("stream_replicas", min(replicas, 3)) if profile == "durable" else 1
    if stream_replicas > min(replicas, MAX_STREAM_REPLICAS):
        check.fail(
            "broker.stream_replicas",
            f"{stream_replicas} stream replicas on {replicas} servers",
            f"use at most min(servers, {MAX_STREAM_REPLICAS}) stream replicas",
        )
    _only_for(
        check,
        section="broker",
        data=data,
        profile=profile,
        keys={"url", "url_secret", "capabilities", "egress"},
        wanted="external",
    )
    if profile == "durable" and replicas % 2 == 0:
        check.fail(
            "broker.replicas",
            f"{replicas} JetStream servers cannot elect a leader after a split",
            "use an odd number of servers: 1, 3 or 5",
        )
    if profile == "durable" and replicas > MAX_STREAM_REPLICAS and "replicas" in data:
        check.fail(
            "broker.replicas",
            f"{replicas} servers: streams replicate at most {MAX_STREAM_REPLICAS} ways",
            "use 3 or 5 servers",
        )
    _external_url(check, "broker", data, profile)
    target = BrokerTarget(
        profile=profile,
        replicas=replicas,
        stream_replicas=stream_replicas,
        **_service_fields(data),
        image=data.get("image", NATS_IMAGE),
        monitoring_from=_monitoring_from(check, data=data, profile=profile),
        egress=_egress(check, section="broker", data=data, profile=profile, port=NATS_CLIENT_PORT),
        reclaim_superseded=data.get("reclaim_superseded", False) is True,
        auth=_auth(check, section="broker", data=data, profile=profile),
        tls_secret=_tls(check, section="broker", data=data, profile=profile),
        stream_max_bytes=_stream_max_bytes(data.get("stream_max_bytes")),
    )
    return target, check.problems


def _stream_max_bytes(raw: Any) -> int | None:
    """vf.yaml's ``broker.stream_max_bytes`` (a quantity, the schema checks it) in bytes."""
    size = None if raw is None else quantity_bytes(raw)
    return None if size is None else int(size)


def _service_fields(data: dict[str, Any]) -> dict[str, Any]:
    """The fields a broker and a payload store declare alike: storage and the external URL."""
    return {
        # none set: the claim names no class, and the cluster's default StorageClass serves
        # it (a class named here must exist there; a claim's class never changes later)
        "storage_class": data.get("storage_class"),
        "storage_size": str(data.get("storage_size", DEFAULT_STORAGE_SIZE)),
        "url": data.get("url"),
        "url_secret": _secret(data.get("url_secret")),
        "capabilities": tuple(sorted((data.get("capabilities") or {}).items())),
    }


def parse_store(
    raw: dict[str, Any] | None, *, env: str, source: str
) -> tuple[StoreTarget, list[Problem]]:
    """The payload store of one environment, and every inconsistency in its declaration."""
    data = raw or {}
    check = _Checker(env=env, source=source)
    profile = data.get("profile", "none")
    _only_for(
        check,
        section="payload_store",
        data=data,
        profile=profile,
        keys={"storage_class", "storage_size"},
        wanted="durable",
    )
    _only_for(
        check,
        section="payload_store",
        data=data,
        profile=profile,
        keys={"url", "url_secret", "capabilities", "egress"},
        wanted="external",
    )
    if profile == "none" and "image" in data:
        check.fail(
            "payload_store.image", "no store runs with profile none", "drop image or pick a profile"
        )
    _external_url(check, "payload_store", data, profile)
    target = StoreTarget(
        profile=profile,
        **_service_fields(data),
        image=data.get("image", REDIS_IMAGE),
        egress=_egress(check, section="payload_store", data=data, profile=profile, port=REDIS_PORT),
        auth=_auth(check, section="payload_store", data=data, profile=profile),
        tls_secret=_tls(check, section="payload_store", data=data, profile=profile),
    )
    return target, check.problems


def parse_requirements(raw: dict[str, Any] | None) -> Requirements:
    data = raw or {}
    return Requirements(
        profiles=tuple(sorted((data.get("profiles") or {}).items())),
        tolerated_failures=int(data.get("tolerated_failures", 0)),
        restart_safe=bool(data.get("restart_safe", False)),
        exactly_once_effects=bool(data.get("exactly_once_effects", False)),
    )


def _only_for(
    check: _Checker,
    *,
    section: str,
    data: dict[str, Any],
    profile: str,
    keys: set[str],
    wanted: str,
) -> None:
    for key in sorted(keys & set(data)):
        if profile != wanted:
            check.fail(
                f"{section}.{key}",
                f"'{key}' applies only to profile {wanted}, not {profile}",
                f"remove {key}, or set {section}.profile: {wanted}",
            )


def _monitoring_from(
    check: _Checker, *, data: dict[str, Any], profile: str
) -> tuple[Peer, ...] | None:
    """Who may read a provisioned broker's monitoring port; None when vf.yaml does not say."""
    if "monitoring_from" not in data:
        return None
    if profile == "external":
        check.fail(
            "broker.monitoring_from",
            "vf does not run an external broker, so it cannot guard its monitoring endpoint",
            "remove monitoring_from; allow the readers in the external broker's own policy",
        )
    peers = parse_peers(data["monitoring_from"])
    for what in peer_problems(peers):
        check.fail("broker.monitoring_from", what, "write cidr: a.b.c.d/n on its own")
    return peers


def _auth(
    check: _Checker, *, section: str, data: dict[str, Any], profile: str
) -> AuthChoice | None:
    """The section's ``auth:`` (its shape already checked by the schema), and what does not
    fit the profile: a route Secret is the durable broker's, a kind an external broker's,
    and an external service's credentials need a Secret to come from."""
    raw = data.get("auth")
    if raw is None:
        return None
    fail = partial(check.fail, code="VF_CONFIG_AUTH")
    if profile == "none":
        fail(f"{section}.auth", "no store runs with profile none", "drop auth or pick a profile")
    if raw == "none":
        return AuthChoice(off=True)
    choice = AuthChoice(
        secret=raw.get("secret"),
        routes_secret=raw.get("routes_secret"),
        kind=raw.get("kind", "password"),
    )
    if "routes_secret" in raw and not (section == "broker" and profile == "durable"):
        fail(
            f"{section}.auth.routes_secret",
            f"only the durable broker's servers route to each other, not a {profile} "
            f"{section.replace('_', ' ')}",
            "remove routes_secret, or set broker.profile: durable",
        )
    if "kind" in raw and not (section == "broker" and profile == "external"):
        fail(
            f"{section}.auth.kind",
            "vf's own servers and an external store take a user and a password; a kind "
            "chooses an external broker's credentials",
            "remove kind (the Secret holds keys user and password)",
        )
    if profile == "external" and choice.secret is None:
        fail(
            f"{section}.auth.secret",
            "vf cannot make up a name for an external service's credentials",
            "name the Secret that holds them: auth: {secret: NAME}, or write auth: none",
        )
    return choice


def _tls(check: _Checker, *, section: str, data: dict[str, Any], profile: str) -> str | None:
    """The section's ``tls:`` Secret (its shape already checked by the schema), and what
    does not fit: a store of profile none, and an external store whose URL is not
    ``rediss://`` (redis-py speaks TLS only for that scheme)."""
    raw = data.get("tls")
    if raw is None:
        return None
    fail = partial(check.fail, code="VF_CONFIG_TLS")
    if profile == "none":
        fail(f"{section}.tls", "no store runs with profile none", "drop tls or pick a profile")
    url = data.get("url")
    if section == "payload_store" and isinstance(url, str) and not url.startswith("rediss://"):
        fail(
            f"{section}.url",
            "tls is set but the url's scheme is not rediss://, so the clients would not speak TLS",
            "write the address as rediss://HOST:PORT/DB",
        )
    return str(raw["secret"])


def _egress(
    check: _Checker, *, section: str, data: dict[str, Any], profile: str, port: int
) -> Egress | None:
    """Where workers reach an external service (its URL's ports unless declared)."""
    if profile != "external":
        return None
    egress = parse_egress(data.get("egress"), url=data.get("url"), default_port=port)
    for what in peer_problems(egress.to):
        check.fail(f"{section}.egress.to", what, "write cidr: a.b.c.d/n on its own")
    return egress


def _external_url(check: _Checker, section: str, data: dict[str, Any], profile: str) -> None:
    url = data.get("url")
    if isinstance(url, str) and not _PRINTABLE_URL.match(url):
        check.fail(
            f"{section}.url",
            "the url holds a control character or an escaped unpaired surrogate",
            "write the address in plain printable characters",
        )
    if profile != "external":
        return
    if isinstance(url, str) and url_credentials(url):
        check.fail(
            f"{section}.url",
            "the url carries credentials, which would land in a ConfigMap and the plan",
            "put the URL in a Secret and reference it with url_secret: {name, key}",
        )
    given = [k for k in ("url", "url_secret") if k in data]
    if len(given) != 1:
        check.fail(
            f"{section}.url",
            "an external service needs exactly one of url or url_secret",
            "set url: for a plain address, or url_secret: {name, key} when it carries credentials",
        )
