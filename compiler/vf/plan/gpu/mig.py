"""NVIDIA MIG geometry: profiles per GPU family and an exact placement check per card.

Placements follow NVIDIA's MIG user guide (``nvidia-smi mig -lgipp``): a profile occupies
a fixed number of memory slices and may start only at listed positions. A multiset of
profiles fits a card when some assignment of starts leaves every slice used at most once
and the compute slices and instance caps hold. mig-parted configures counts, not
positions, so a layout is only valid if such an assignment exists.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache


@dataclass(frozen=True, kw_only=True)
class Profile:
    name: str
    compute: int
    width: int
    starts: tuple[int, ...]
    max_count: int
    memory_gib: float

    @property
    def resource(self) -> str:
        """The device plugin's mixed-strategy resource name."""
        return "nvidia.com/mig-" + self.name.replace("+", ".")


@dataclass(frozen=True, kw_only=True)
class Family:
    """One MIG-capable GPU model: its grid, compute slices and profiles (smallest first)."""

    name: str
    products: tuple[str, ...]
    memory_gib: int
    slots: int
    compute: int
    max_instances: int
    profiles: tuple[Profile, ...]

    def profile(self, name: str) -> Profile:
        return next(p for p in self.profiles if p.name == name)

    def smallest_fitting(self, memory_gib: float) -> Profile | None:
        """The profile with the least memory that still holds ``memory_gib``."""
        fitting = [p for p in self.profiles if p.memory_gib >= memory_gib]
        return min(fitting, key=lambda p: (p.memory_gib, p.width, p.compute), default=None)


def _eight_slot(
    sizes: tuple[int, int, int, int, int], *, gib: tuple[float, ...]
) -> tuple[Profile, ...]:
    """The 8-slot, 7-compute grid shared by A100, H100 and H200 (names differ by memory)."""
    one, one_wide, two, three_four, seven = sizes
    g1, g1w, g2, g3, g7 = gib
    return (
        Profile(
            name=f"1g.{one}gb",
            compute=1,
            width=1,
            starts=(0, 1, 2, 3, 4, 5, 6),
            max_count=7,
            memory_gib=g1,
        ),
        Profile(
            name=f"1g.{one_wide}gb",
            compute=1,
            width=2,
            starts=(0, 2, 4, 6),
            max_count=4,
            memory_gib=g1w,
        ),
        Profile(
            name=f"2g.{two}gb", compute=2, width=2, starts=(0, 2, 4), max_count=3, memory_gib=g2
        ),
        Profile(
            name=f"3g.{three_four}gb", compute=3, width=4, starts=(0, 4), max_count=2, memory_gib=g3
        ),
        Profile(
            name=f"4g.{three_four}gb", compute=4, width=4, starts=(0,), max_count=1, memory_gib=g3
        ),
        Profile(name=f"7g.{seven}gb", compute=7, width=8, starts=(0,), max_count=1, memory_gib=g7),
    )


FAMILIES: tuple[Family, ...] = (
    Family(
        name="A30-24GB",
        products=("A30",),
        memory_gib=24,
        slots=4,
        compute=4,
        max_instances=4,
        profiles=(
            Profile(
                name="1g.6gb", compute=1, width=1, starts=(0, 1, 2, 3), max_count=4, memory_gib=5.81
            ),
            Profile(
                name="2g.12gb", compute=2, width=2, starts=(0, 2), max_count=2, memory_gib=11.69
            ),
            Profile(name="4g.24gb", compute=4, width=4, starts=(0,), max_count=1, memory_gib=23.44),
        ),
    ),
    Family(
        name="A100-40GB",
        products=("A100-SXM4-40GB", "A100-PCIE-40GB"),
        memory_gib=40,
        slots=8,
        compute=7,
        max_instances=7,
        profiles=_eight_slot((5, 10, 10, 20, 40), gib=(4.75, 9.62, 9.62, 19.5, 39.25)),
    ),
    Family(
        name="A100-80GB",
        products=("A100-SXM4-80GB", "A100-80GB-PCIe"),
        memory_gib=80,
        slots=8,
        compute=7,
        max_instances=7,
        profiles=_eight_slot((10, 20, 20, 40, 80), gib=(9.5, 19.5, 19.5, 39.25, 79.0)),
    ),
    Family(
        name="H100-80GB",
        products=("H100-80GB-HBM3", "H100-PCIe"),
        memory_gib=80,
        slots=8,
        compute=7,
        max_instances=7,
        profiles=_eight_slot((10, 20, 20, 40, 80), gib=(9.75, 19.62, 19.62, 39.5, 79.25)),
    ),
    Family(
        name="H100-94GB",
        products=("H100-NVL",),
        memory_gib=94,
        slots=8,
        compute=7,
        max_instances=7,
        profiles=_eight_slot((12, 24, 24, 47, 94), gib=(10.75, 21.62, 21.62, 46.38, 93.12)),
    ),
    Family(
        name="H200-141GB",
        products=("H200",),
        memory_gib=141,
        slots=8,
        compute=7,
        max_instances=7,
        profiles=_eight_slot((18, 35, 35, 71, 141), gib=(16.0, 32.25, 32.25, 69.5, 139.75)),
    ),
)


def family_of(product: str) -> Family | None:
    """The MIG family of a GPU Feature Discovery product label (``NVIDIA-`` prefix optional)."""
    label = product.removeprefix("NVIDIA-").upper()
    for family in FAMILIES:
        if any(label == p.upper() or label.startswith(p.upper() + "-") for p in family.products):
            return family
    return None


def fits(family: Family, profiles: Iterable[str]) -> bool:
    """True when these profiles can all live on one card of ``family`` at once."""
    return placement(family, tuple(sorted(profiles))) is not None


@cache
def placement(family: Family, profiles: tuple[str, ...]) -> tuple[tuple[str, int], ...] | None:
    """One valid (profile, start) assignment for the multiset, or None (exhaustive search)."""
    chosen = [family.profile(name) for name in profiles]
    counts = Counter(p.name for p in chosen)
    if len(chosen) > family.max_instances or any(counts[p.name] > p.max_count for p in chosen):
        return None
    if sum(p.compute for p in chosen) > family.compute:
        return None
    order = sorted(chosen, key=lambda p: (-p.width, p.name))
    result: list[tuple[str, int]] = []

    def place(index: int, used: int) -> bool:
        if index == len(order):
            return True
        profile = order[index]
        for start in profile.starts:
            mask = ((1 << profile.width) - 1) << start
            if start + profile.width <= family.slots and not used & mask:
                result.append((profile.name, start))
                if place(index + 1, used | mask):
                    return True
                result.pop()
        return False

    return tuple(result) if place(0, 0) else None
