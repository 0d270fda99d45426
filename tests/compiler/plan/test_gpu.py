"""GPU planning: MIG placement, the mix solver, whole-card packing and DRA gates."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from vf.cli import cli
from vf.plan.gpu.dra import judge_features
from vf.plan.gpu.mig import FAMILIES, Family, family_of, fits
from vf.plan.gpu.pack import Bin, Pod, pack_whole, solve_mix

# Written from NVIDIA's MIG user guide independently of vf.plan.gpu.mig: profile → (width, starts).
NVIDIA_8_SLOT = {1: (0, 1, 2, 3, 4, 5, 6), 2: (0, 2, 4), 4: (0, 4), 8: (0,)}


def _independent_fits(family: Family, profiles: list[str]) -> bool:
    """Brute force over every start assignment, straight from the lgipp table."""
    chosen = [family.profile(p) for p in profiles]
    if len(chosen) > family.max_instances or sum(p.compute for p in chosen) > family.compute:
        return False
    counts = Counter(p.name for p in chosen)
    if any(counts[p.name] > p.max_count for p in chosen):
        return False
    options = [p.starts for p in chosen]
    for starts in itertools.product(*options):
        slots = [0] * family.slots
        ok = True
        for profile, start in zip(chosen, starts, strict=True):
            for slot in range(start, start + profile.width):
                if slot >= family.slots or slots[slot]:
                    ok = False
                    break
                slots[slot] = 1
            if not ok:
                break
        if ok:
            return True
    return False


def test_profile_starts_follow_the_table() -> None:
    for family in FAMILIES:
        if family.slots != 8:
            continue
        for profile in family.profiles:
            if profile.compute == 1 and profile.width == 2:
                assert profile.starts == (0, 2, 4, 6)
            elif profile.compute == 4:
                assert profile.starts == (0,)
            else:
                assert profile.starts == NVIDIA_8_SLOT[profile.width]


def test_two_3g_fill_an_a100_and_leave_no_room_for_a_1g() -> None:
    a100 = next(f for f in FAMILIES if f.name == "A100-40GB")
    assert fits(a100, ["3g.20gb", "3g.20gb"])
    assert not fits(a100, ["3g.20gb", "3g.20gb", "1g.5gb"])
    assert fits(a100, ["4g.20gb", "3g.20gb"])
    assert not fits(a100, ["7g.40gb", "1g.5gb"])


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(FAMILIES), st.data())
def test_fits_agrees_with_an_independent_checker(family: Family, data: st.DataObject) -> None:
    names = [p.name for p in family.profiles]
    chosen = data.draw(st.lists(st.sampled_from(names), max_size=8))
    assert fits(family, chosen) == _independent_fits(family, chosen)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.sampled_from([4.0, 9.0, 18.0, 35.0, 60.0]), max_size=10),
    st.lists(st.integers(1, 3), max_size=3),
    st.lists(st.integers(1, 3), min_size=1, max_size=3),
)
def test_mix_layouts_are_valid_and_deterministic(
    memories: list[float], spans: list[int], cards: list[int]
) -> None:
    h100 = next(f for f in FAMILIES if f.name == "H100-80GB")
    nodes = [(f"n{i}", count, h100) for i, count in enumerate(cards)]
    sharers = [Pod(workload=f"s{m}", replica=i, memory_gib=m) for i, m in enumerate(memories)]
    spanners = [Pod(workload="big", replica=i, cards=c) for i, c in enumerate(spans)]
    first = solve_mix(spanners, sharers, nodes)
    again = solve_mix(spanners, sharers, nodes)
    assert [(c.host, c.use, c.profiles) for c in first.cards] == [
        (c.host, c.use, c.profiles) for c in again.cards
    ]
    for card in first.cards:
        if card.use == "mig":
            assert _independent_fits(card.family, card.profiles)
    if first.failed is None:
        assert len(first.hosts) == len(sharers) + len(spanners)


def _brute_force_whole(pods: list[Pod], bins: list[Bin]) -> bool:
    for assignment in itertools.product(range(len(bins)), repeat=len(pods)):
        used = [0] * len(bins)
        for pod, index in zip(pods, assignment, strict=True):
            used[index] += pod.cards
        if all(u <= b.cards for u, b in zip(used, bins, strict=True)):
            return True
    return not pods


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(1, 4), max_size=6),
    st.lists(st.integers(1, 8), min_size=1, max_size=4),
)
def test_whole_card_packing_agrees_with_brute_force(sizes: list[int], capacity: list[int]) -> None:
    pods = [Pod(workload="w", replica=i, cards=c) for i, c in enumerate(sizes)]
    bins = [Bin(host=f"h{i}", cards=c) for i, c in enumerate(capacity)]
    packing = pack_whole(pods, bins)
    assert packing.proven
    assert (packing.hosts is not None) == _brute_force_whole(pods, bins)
    if packing.hosts is not None:
        load = Counter()
        for pod in pods:
            load[packing.hosts[(pod.workload, pod.replica)]] += pod.cards
        assert all(load[b.host] <= b.cards for b in bins)


def test_ffd_failure_found_by_exhaustive_search() -> None:
    # First-fit-decreasing puts 3 on the 4-card host and strands 2 + 2; 2+2 | 3 fits.
    pods = [Pod(workload="w", replica=i, cards=c) for i, c in enumerate([2, 2, 3])]
    bins = [Bin(host="h0", cards=4), Bin(host="h1", cards=3)]
    packing = pack_whole(pods, bins)
    assert packing.proven
    assert packing.hosts == {("w", 0): "h0", ("w", 1): "h0", ("w", 2): "h1"}


def test_large_instances_are_unproven() -> None:
    pods = [Pod(workload="w", replica=i, cards=c) for i, c in enumerate([2, 2, 3] * 5)]
    bins = [Bin(host=f"h{i}", cards=c) for i, c in enumerate([4, 3] * 2)]
    packing = pack_whole(pods, bins)
    assert packing.hosts is None and not packing.proven


def test_product_labels_map_to_families() -> None:
    assert family_of("NVIDIA-A100-SXM4-80GB").name == "A100-80GB"  # type: ignore[union-attr]
    assert family_of("NVIDIA-H200").name == "H200-141GB"  # type: ignore[union-attr]
    assert family_of("A30").name == "A30-24GB"  # type: ignore[union-attr]
    assert family_of("NVIDIA-L4") is None


@pytest.mark.parametrize(
    ("features", "version", "gates", "message"),
    [
        ((), "1.33", {}, "has no resource.k8s.io/v1"),
        (("mps", "dynamic-mig"), "1.36", {}, "cannot be used together"),
        (("mps", "consumable-capacity"), "1.36", {}, "cannot be used together"),
        (("dynamic-mig",), "1.35", {}, "DRAPartitionableDevices is alpha in 1.35, off by default"),
        (("consumable-capacity",), "1.34", {}, "DRAConsumableCapacity is alpha in 1.34"),
    ],
)
def test_dra_rejections(
    features: tuple[str, ...], version: str, gates: dict[str, bool], message: str
) -> None:
    assert any(message in reason for reason in judge_features(features, version, gates))


def test_dra_accepted_combinations() -> None:
    assert judge_features(("dynamic-mig",), "1.36", {}) == []
    assert judge_features(("consumable-capacity",), "1.35", {"DRAConsumableCapacity": True}) == []
    assert judge_features(("mps",), "1.34", {}) == []


GRAPH = """
from vf import BATCH, GPU, Consumer, Flow, Processor, Producer


class Src(Producer):
    def next(self):
        raise StopIteration


class Infer(Processor):
    def process(self, x):
        return x


class Sink(Consumer):
    def consume(self, x):
        pass


def build_flow():
    work = Infer(name="infer", device_type=GPU, GPU_FIELDS)(Src())
    return Flow([Sink()(work)], flow_type=BATCH)
"""


def _compile(write_graph: Callable[..., Path], fields: str, gpu: str) -> tuple[int, str]:
    env = "".join(f"    {line}\n" for line in gpu.strip("\n").splitlines())
    config = "environments:\n  dev:\n    images:\n      default: r.io/a:1\n" + env
    path = write_graph(GRAPH.replace("GPU_FIELDS", fields), config)
    result = CliRunner().invoke(cli, ["explain", str(path)])
    return result.exit_code, result.output


INVENTORY = (
    "gpu:\n  mode: {mode}\n  inventory:\n  - name: node-a\n    product: {product}\n"
    "    cards: {cards}\n    memory_gib: 80\n    sharing: {sharing}\n"
)


def _inventory(
    mode: str = "exclusive",
    product: str = "NVIDIA-H100-80GB-HBM3",
    cards: int = 2,
    sharing: str = "physical",
) -> str:
    return INVENTORY.format(mode=mode, product=product, cards=cards, sharing=sharing)


@pytest.mark.parametrize(
    ("fields", "gpu", "message"),
    [
        ("gpu_count=3", _inventory(cards=2), "cannot be packed"),
        ("gpu_count=2, nb_tasks=3", _inventory(cards=4), "cannot be packed"),
        ("gpu_count=2", _inventory(sharing="time-sliced", cards=8), "never combined"),
        ("gpu_memory_gib=100", _inventory(mode="mix"), "no MIG layout fits"),
        ("gpu_memory_gib=10, nb_tasks=8", _inventory(mode="mix", cards=1), "no MIG layout fits"),
        ("gpu_memory_gib=10", "gpu: {mode: mix}", "needs gpu.inventory"),
        ("gpu_memory_gib=10", _inventory(mode="mix", product="NVIDIA-L4"), "no MIG layout fits"),
        ("gpu_count=1", "kubernetes_version: '1.33'\ngpu: {mode: dra}", "no resource.k8s.io/v1"),
        (
            "gpu_memory_gib=10",
            "kubernetes_version: '1.34'\ngpu: {mode: dra}",
            "offers no sharing feature",
        ),
    ],
)
def test_infeasible_gpu_requests_are_errors(
    fields: str, gpu: str, message: str, write_graph: Callable[..., Path]
) -> None:
    code, output = _compile(write_graph, fields, gpu)
    assert code == 2, output
    assert "error[VF_GPU_INFEASIBLE]" in output
    assert message in output


def test_a_whole_card_refusal_gives_its_arithmetic(write_graph: Callable[..., Path]) -> None:
    code, output = _compile(write_graph, "gpu_count=2, nb_tasks=3", _inventory(cards=4))
    assert code == 2, output
    flat = " ".join(output.split())
    assert "6 card(s) asked in all, 4 declared" in flat
    assert "replica 2 of 'infer' (2 card(s)) found no node after 2 replica(s) were placed" in flat


def test_without_inventory_feasibility_is_unknown(write_graph: Callable[..., Path]) -> None:
    code, output = _compile(write_graph, "gpu_count=2", "gpu: {mode: exclusive}")
    assert code == 0, output
    assert "feasibility unknown: no inventory declared, feasibility was not checked" in output


def test_mix_explains_geometry_and_labels(write_graph: Callable[..., Path]) -> None:
    code, output = _compile(write_graph, "gpu_memory_gib=18, nb_tasks=3", _inventory(mode="mix"))
    assert code == 0, output
    assert "3x1g.20gb" in output
    assert "nvidia.com/mig.config=" in output


def test_a_mig_refusal_gives_its_arithmetic(write_graph: Callable[..., Path]) -> None:
    """Eight 10 GiB slices on one 80 GiB H100: a 10 GiB request takes a 1g.20gb slice
    (1g.10gb holds a little under 10 GiB), four fit, the fifth does not, and the error
    says so with the card's memory and what it holds."""
    code, output = _compile(
        write_graph, "gpu_memory_gib=10, nb_tasks=8", _inventory(mode="mix", cards=1)
    )
    print(output)
    assert code == 2 and "no MIG layout fits" in output
    assert "placed 4 of 8 replica(s)" in output and "80 GiB" in output
    assert "MIG 1g.20gb+1g.20gb+1g.20gb+1g.20gb" in output
