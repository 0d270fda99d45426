"""Local GPU grants for ``vf run-local``, against a fake ``nvidia-smi`` on PATH.

No GPU machine was available where these were written; the fake presents zero, one,
several, MIG-split, busy and failing hosts (tests/gpu_fakes.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests import gpu_fakes
from tests.gpu_fakes import uuid
from vf.cli import cli
from vf.commands.run_local.gpus import LocalDevice, apply_mask, read_host
from vf.commands.run_local.grants import GpuRequest, LocalGrants, grant_local_gpus
from vf.errors import EXIT_ENVIRONMENT, VfError
from vf.ir.capabilities import Known, Unknown

MIG_A = "MIG-11111111-2222-3333-4444-555555555555"
MIG_B = "MIG-66666666-7777-8888-9999-000000000000"


@pytest.fixture
def fake_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    def present(scenario: dict[str, Any]) -> None:
        for key, value in gpu_fakes.install(tmp_path, scenario).items():
            monkeypatch.setenv(key, value)

    return present


def _read(fake_host: Any, scenario: dict[str, Any]) -> Known[tuple[LocalDevice, ...]] | Unknown:
    fake_host(scenario)
    return read_host()


def _known(fake_host: Any, scenario: dict[str, Any]) -> tuple[LocalDevice, ...]:
    host = _read(fake_host, scenario)
    assert isinstance(host, Known), host
    return host.value


def _grant(env: LocalGrants, node: str, replica: int = 0) -> dict[str, Any]:
    record: dict[str, Any] = json.loads(env.env[(node, replica)]["VF_GPU_GRANT_JSON"])
    return record


# --- reading the host ------------------------------------------------------------------------


def test_a_host_without_devices_is_a_known_zero(fake_host: Any) -> None:
    assert _known(fake_host, gpu_fakes.ZERO) == ()


def test_one_card(fake_host: Any) -> None:
    (card,) = _known(fake_host, gpu_fakes.ONE)
    assert (card.key, card.memory_mib, card.used_mib, card.busy) == (uuid(0), 24576, 512, False)


def test_several_cards_in_order(fake_host: Any) -> None:
    devices = _known(fake_host, gpu_fakes.SEVERAL)
    assert [d.key for d in devices] == [uuid(n) for n in range(4)]


def test_a_mig_enabled_card_is_handed_out_as_its_mig_devices(fake_host: Any) -> None:
    devices = _known(fake_host, gpu_fakes.MIG_SPLIT)
    assert [(d.key, d.profile, d.memory_mib) for d in devices] == [
        (MIG_A, "3g.40gb", 40 * 1024),
        (MIG_B, "1g.10gb", 10 * 1024),
        (uuid(1), None, 81920),
    ]
    assert {d.card_uuid for d in devices[:2]} == {uuid(0)}


def test_a_failed_read_is_unknown_never_zero(fake_host: Any) -> None:
    host = _read(fake_host, gpu_fakes.FAILING)
    assert isinstance(host, Unknown)
    assert "couldn't communicate with the NVIDIA driver" in host.reason


def test_no_nvidia_smi_is_unknown(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    host = read_host()
    assert isinstance(host, Unknown) and "not on PATH" in host.reason


def test_compute_processes_mark_their_card_busy(fake_host: Any) -> None:
    idle, busy = _known(fake_host, gpu_fakes.BUSY)
    assert (idle.busy, busy.busy, busy.used_mib) == (False, True, 30000)


def test_failed_process_listing_leaves_business_unknown(fake_host: Any) -> None:
    scenario = dict(gpu_fakes.ONE, fail={"apps": gpu_fakes.NO_DRIVER})
    (card,) = _known(fake_host, scenario)
    assert card.busy is None


# --- CUDA_VISIBLE_DEVICES, as CUDA reads it --------------------------------------------------


@pytest.mark.parametrize(
    ("mask", "expected"),
    [
        (None, [uuid(0), uuid(1), uuid(2), uuid(3)]),
        ("2,0", [uuid(2), uuid(0)]),
        (uuid(3), [uuid(3)]),
        ("GPU-1aaa", [uuid(1)]),  # a unique prefix is enough
        ("1,7,2", [uuid(1)]),  # the first entry naming nothing ends the list
        ("1,1", [uuid(1)]),
        ("", []),
        ("-1", []),
    ],
)
def test_an_inherited_mask_narrows_the_pool(
    fake_host: Any, mask: str | None, expected: list[str]
) -> None:
    devices, _ = apply_mask(_known(fake_host, gpu_fakes.SEVERAL), mask)
    assert [d.key for d in devices] == expected


def test_mig_uuids_and_card_ordinals_in_the_mask(fake_host: Any) -> None:
    devices = _known(fake_host, gpu_fakes.MIG_SPLIT)
    assert [d.key for d in apply_mask(devices, MIG_B)[0]] == [MIG_B]
    assert [d.key for d in apply_mask(devices, "0")[0]] == [MIG_A, MIG_B]
    narrowed, warnings = apply_mask(devices, "1,GPU-nope")
    assert [d.key for d in narrowed] == [uuid(1)]
    assert "GPU-nope" in warnings[0]


# --- shared policy ---------------------------------------------------------------------------


def _requests(*spec: tuple[str, int, int] | tuple[str, int, int, float]) -> list[GpuRequest]:
    return [
        GpuRequest(node=s[0], replica=s[1], count=s[2], memory_gib=s[3] if len(s) > 3 else None)
        for s in spec
    ]


def test_shared_gives_distinct_devices_while_they_last(fake_host: Any) -> None:
    host = Known(_known(fake_host, gpu_fakes.SEVERAL))
    grants = grant_local_gpus(
        _requests(("a", 0, 1), ("a", 1, 1), ("b", 0, 2)), host=host, environ={}
    )
    assert grants.env[("b", 0)]["CUDA_VISIBLE_DEVICES"] == f"{uuid(2)},{uuid(3)}"
    assert grants.env[("b", 0)]["VF_GPU_COUNT"] == "2"
    assert all(_grant(grants, n, r)["exclusive"] for n, r in (("a", 0), ("a", 1), ("b", 0)))
    assert grants.warnings == ()


def test_shared_wraps_around_and_says_the_cluster_will_not(fake_host: Any) -> None:
    host = Known(_known(fake_host, gpu_fakes.ONE))
    grants = grant_local_gpus(
        _requests(("a", 0, 1), ("a", 1, 1), ("b", 0, 2)), host=host, environ={}
    )
    for replica in (("a", 0), ("a", 1), ("b", 0)):
        assert grants.env[replica]["CUDA_VISIBLE_DEVICES"] == uuid(0)
        assert grants.env[replica]["VF_GPU_COUNT"] == "1"
        assert _grant(grants, *replica)["exclusive"] is False
    assert _grant(grants, "b") == {
        "delivered": 1,
        "devices": [uuid(0)],
        "exclusive": False,
        "host": "observed",
        "memory_gib": None,
        "policy": "shared",
        "requested": 2,
    }
    text = "\n".join(grants.warnings)
    assert "asked for 2 GPU(s) and gets 1" in text
    assert "will not run this way there" in text


def test_shared_on_a_machine_without_gpus_hides_devices(fake_host: Any) -> None:
    grants = grant_local_gpus(_requests(("a", 0, 1)), host=Known(()), environ={})
    assert grants.env[("a", 0)]["CUDA_VISIBLE_DEVICES"] == ""
    assert grants.env[("a", 0)]["VF_GPU_COUNT"] == "0"
    assert "no GPU is visible" in grants.warnings[0]


def test_shared_on_an_unobserved_host_sets_no_mask_and_says_so() -> None:
    grants = grant_local_gpus(_requests(("a", 0, 1)), host=Unknown("driver gone"), environ={})
    env = grants.env[("a", 0)]
    assert "CUDA_VISIBLE_DEVICES" not in env and "VF_GPU_COUNT" not in env
    assert _grant(grants, "a")["host"] == "unobserved"
    assert _grant(grants, "a")["delivered"] is None
    assert "could not observe" in grants.warnings[0]


def test_shared_honours_the_inherited_mask(fake_host: Any) -> None:
    host = Known(_known(fake_host, gpu_fakes.SEVERAL))
    grants = grant_local_gpus(
        _requests(("a", 0, 1), ("a", 1, 1)), host=host, environ={"CUDA_VISIBLE_DEVICES": "3"}
    )
    assert {grants.env[("a", r)]["CUDA_VISIBLE_DEVICES"] for r in (0, 1)} == {uuid(3)}


# --- strict policy ---------------------------------------------------------------------------


def _strict(requests: list[GpuRequest], host: Any, **environ: str) -> LocalGrants:
    return grant_local_gpus(requests, host=host, policy="strict", environ=environ)


def test_strict_grants_distinct_devices_when_they_fit(fake_host: Any) -> None:
    host = Known(_known(fake_host, gpu_fakes.SEVERAL))
    grants = _strict(_requests(("a", 0, 2), ("b", 0, 1)), host)
    assert grants.env[("a", 0)]["CUDA_VISIBLE_DEVICES"] == f"{uuid(0)},{uuid(1)}"
    assert grants.env[("b", 0)]["CUDA_VISIBLE_DEVICES"] == uuid(2)
    assert _grant(grants, "a")["exclusive"] is True


def test_strict_refuses_before_launch_naming_every_short_replica(fake_host: Any) -> None:
    host = Known(_known(fake_host, gpu_fakes.ONE))
    with pytest.raises(VfError) as caught:
        _strict(_requests(("a", 0, 1), ("a", 1, 1), ("b", 0, 2)), host)
    error = caught.value
    assert error.exit_code == EXIT_ENVIRONMENT and error.code == "VF_LOCAL_GPU_STRICT"
    assert len(error.problems) == 2
    assert "node 'a' replica 1" in error.render() and "node 'b' replica 0" in error.render()


def test_strict_never_grants_a_busy_device_exclusively(fake_host: Any) -> None:
    host = Known(_known(fake_host, gpu_fakes.BUSY))
    grants = _strict(_requests(("a", 0, 1)), host)
    assert grants.env[("a", 0)]["CUDA_VISIBLE_DEVICES"] == uuid(0)
    with pytest.raises(VfError):
        _strict(_requests(("a", 0, 1), ("a", 1, 1)), host)


def test_strict_admits_sharers_within_declared_memory_plus_headroom(fake_host: Any) -> None:
    host = Known(_known(fake_host, gpu_fakes.ONE))  # 24 GiB, 0.5 GiB in use
    grants = _strict(_requests(("s", 0, 1, 10.0), ("s", 1, 1, 12.0)), host)
    assert _grant(grants, "s", 1)["exclusive"] is False
    assert _grant(grants, "s", 1)["memory_gib"] == 12.0
    with pytest.raises(VfError) as caught:  # 10 + 12 + 2 GiB headroom > 23.5 GiB free
        _strict(
            _requests(("s", 0, 1, 10.0), ("s", 1, 1, 12.0)),
            host,
            VF_GPU_HEADROOM_BYTES=str(2 << 30),
        )
    assert "declares 12 GiB" in caught.value.render()
    # the arithmetic: 24 GiB - 0.5 in use - 10 placed - 2 headroom leaves 11.5, under 12
    assert "24.0 GiB, 0.5 in use, 10.0 placed, 11.5 left" in caught.value.render()


def test_strict_places_sharers_on_mig_devices(fake_host: Any) -> None:
    host = Known(_known(fake_host, gpu_fakes.MIG_SPLIT))
    grants = _strict(_requests(("big", 0, 1, 30.0), ("small", 0, 1, 5.0)), host)
    assert grants.env[("big", 0)]["CUDA_VISIBLE_DEVICES"] == MIG_A
    assert grants.env[("small", 0)]["CUDA_VISIBLE_DEVICES"] == MIG_A


def test_strict_refuses_an_unobserved_host() -> None:
    with pytest.raises(VfError) as caught:
        _strict(_requests(("a", 0, 1)), Unknown("nvidia-smi is not on PATH"))
    assert caught.value.code == "VF_LOCAL_GPU_UNOBSERVED"


def test_strict_refuses_when_processes_cannot_be_listed(fake_host: Any) -> None:
    scenario = dict(gpu_fakes.ONE, fail={"apps": gpu_fakes.NO_DRIVER})
    with pytest.raises(VfError) as caught:
        _strict(_requests(("a", 0, 1)), Known(_known(fake_host, scenario)))
    assert "cannot tell whether other processes use" in caught.value.render()


# --- through vf run-local --------------------------------------------------------------------

GPU_GRAPH = """\
from typing import Any

from vf import BATCH, GPU, Consumer, Flow, Processor, Producer


class Src(Producer):
    def next(self) -> Any:
        raise StopIteration


class Infer(Processor):
    def process(self, item: Any) -> Any:
        return item


class Sink(Consumer):
    def consume(self, item: Any) -> None:
        pass


def build_flow() -> Flow:
    infer = Infer(nb_tasks=3, device_type=GPU)(Src())
    return Flow([Sink()(infer)], flow_type=BATCH)
"""


def test_run_local_strict_refuses_before_starting_anything(tmp_path: Path, fake_host: Any) -> None:
    fake_host(gpu_fakes.ONE)
    graph = tmp_path / "graph.py"
    graph.write_text(GPU_GRAPH)
    (tmp_path / "vf.yaml").write_text(
        "environments:\n  dev:\n    images: {default: registry.example.com/t:1}\n"
    )
    result = CliRunner().invoke(
        cli,
        ["run-local", str(graph), "--gpu-policy", "strict", "--nats", "nats://127.0.0.1:1"],
    )
    assert result.exit_code == EXIT_ENVIRONMENT, result.output
    assert "error[VF_LOCAL_GPU_STRICT]" in result.output
    assert "started" not in result.output
