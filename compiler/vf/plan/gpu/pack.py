"""Pack GPU pods onto declared nodes: whole cards per host, and MIG slices per card.

Deterministic: the same inventory and demand always give the same layout. Whole-card
packing is first-fit-decreasing, then an exhaustive search on small instances so that
"infeasible" there is a proof.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vf.plan.gpu.mig import Family, Profile, fits

EXHAUSTIVE_MAX_PODS = 12
EXHAUSTIVE_MAX_NODES = 8


@dataclass(frozen=True, kw_only=True)
class Pod:
    """One replica's demand: whole cards (``cards``) or one slice of ``memory_gib``."""

    workload: str
    replica: int
    cards: int = 0
    memory_gib: float | None = None


@dataclass(frozen=True, kw_only=True)
class Bin:
    host: str
    cards: int
    whole_only: bool = False


@dataclass(frozen=True, kw_only=True)
class Packing:
    """Where each pod goes; ``proven`` tells whether a failure is a proof. On a failure,
    ``stuck`` is the first pod first-fit-decreasing could not place, after ``placed`` others."""

    hosts: dict[tuple[str, int], str] | None
    proven: bool
    stuck: Pod | None = None
    placed: int = 0


def _order(pods: list[Pod]) -> list[Pod]:
    return sorted(pods, key=lambda p: (-p.cards, p.workload, p.replica))


def pack_whole(pods: list[Pod], bins: list[Bin]) -> Packing:
    """Whole-card pods onto hosts; each pod's cards on one host."""
    order = _order(pods)
    free = {b.host: b.cards for b in bins}
    placed: dict[tuple[str, int], str] = {}
    stuck = None
    for pod in order:
        host = next((b.host for b in bins if free[b.host] >= pod.cards and _allowed(pod, b)), None)
        if host is None:
            stuck = pod
            break
        free[host] -= pod.cards
        placed[(pod.workload, pod.replica)] = host
    else:
        return Packing(hosts=placed, proven=True)
    if len(order) <= EXHAUSTIVE_MAX_PODS and len(bins) <= EXHAUSTIVE_MAX_NODES:
        found = _exhaustive(order, bins)
        return Packing(hosts=found, proven=True, stuck=stuck, placed=len(placed))
    return Packing(hosts=None, proven=False, stuck=stuck, placed=len(placed))


def _allowed(pod: Pod, target: Bin) -> bool:
    return pod.cards <= 1 or not target.whole_only


def _exhaustive(order: list[Pod], bins: list[Bin]) -> dict[tuple[str, int], str] | None:
    """Backtracking over every assignment; depth is bounded by EXHAUSTIVE_MAX_PODS."""
    free = [b.cards for b in bins]
    chosen: list[int] = []

    def assign(depth: int) -> bool:
        if depth == len(order):
            return True
        pod = order[depth]
        tried: set[tuple[int, bool]] = set()
        for index, target in enumerate(bins):
            state = (free[index], target.whole_only)
            if free[index] < pod.cards or not _allowed(pod, target) or state in tried:
                continue
            tried.add(state)
            free[index] -= pod.cards
            chosen.append(index)
            if assign(depth + 1):
                return True
            chosen.pop()
            free[index] += pod.cards
        return False

    if not assign(0):
        return None
    return {(p.workload, p.replica): bins[i].host for p, i in zip(order, chosen, strict=True)}


@dataclass
class Card:
    host: str
    index: int
    family: Family
    use: str = "unused"  # unused | whole | mig
    profiles: list[str] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class MixResult:
    cards: list[Card]
    hosts: dict[tuple[str, int], str]
    profiles: dict[str, str]  # workload -> MIG profile of all its replicas
    failed: Pod | None


def solve_mix(
    spanners: list[Pod], sharers: list[Pod], nodes: list[tuple[str, int, Family | None]]
) -> MixResult:
    """Spanners take whole cards (largest first); sharers pack first-fit onto MIG cards."""
    cards = [
        Card(host=host, index=i, family=family)  # type: ignore[arg-type]
        for host, count, family in nodes
        for i in range(count)
    ]
    hosts: dict[tuple[str, int], str] = {}
    for pod in _order(spanners):
        host = _place_spanner(pod, cards, nodes)
        if host is None:
            return MixResult(cards=cards, hosts=hosts, profiles={}, failed=pod)
        hosts[(pod.workload, pod.replica)] = host
    profiles: dict[str, str] = {}
    ordered = sorted(sharers, key=lambda p: (-(p.memory_gib or 0), p.workload, p.replica))
    for pod in ordered:
        card = _place_sharer(pod, cards, profiles.get(pod.workload))
        if card is None:
            return MixResult(cards=cards, hosts=hosts, profiles=profiles, failed=pod)
        hosts[(pod.workload, pod.replica)] = card.host
        profiles.setdefault(pod.workload, card.profiles[-1])
    return MixResult(cards=cards, hosts=hosts, profiles=profiles, failed=None)


def _place_spanner(
    pod: Pod, cards: list[Card], nodes: list[tuple[str, int, Family | None]]
) -> str | None:
    for host, _, _ in nodes:
        free = [c for c in cards if c.host == host and c.use == "unused"]
        if len(free) >= pod.cards:
            for card in free[: pod.cards]:
                card.use = "whole"
            return host
    return None


def _profile_for(pod: Pod, family: Family | None) -> Profile | None:
    if family is None or pod.memory_gib is None:
        return None
    return family.smallest_fitting(pod.memory_gib)


def _place_sharer(pod: Pod, cards: list[Card], required: str | None) -> Card | None:
    """First opened MIG card with room, else the first free card; one profile per workload
    so that every replica requests the same MIG resource."""
    opened = [c for c in cards if c.use == "mig"]
    for card in [*opened, *(c for c in cards if c.use == "unused")]:
        profile = _profile_for(pod, card.family)
        if profile is None or (required is not None and profile.name != required):
            continue
        if fits(card.family, [*card.profiles, profile.name]):
            card.use = "mig"
            card.profiles.append(profile.name)
            return card
    return None
