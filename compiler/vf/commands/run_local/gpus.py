"""This machine's GPUs, as ``nvidia-smi`` reports them, narrowed by ``CUDA_VISIBLE_DEVICES``.

Three reads: the cards (index, UUID, name, memory, MIG mode), ``nvidia-smi -L`` for the MIG
devices' UUIDs, and the compute processes. A read that fails makes the host Unknown
("could not observe"), never "no GPUs"; only nvidia-smi saying it found no devices is a
known zero. A MIG-enabled card is handed out as its MIG devices; a card that is not is
handed out whole.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass

from vf.ir.capabilities import Known, Unknown

TIMEOUT_SECONDS = 15
MIB = 1 << 20
QUERY_GPU = "index,uuid,name,memory.total,memory.used,mig.mode.current"
QUERY_APPS = "gpu_uuid,pid,used_memory"
_MIG_LINE = re.compile(
    r"^\s+MIG\s+(?P<profile>\S+)\s+Device\s+(?P<n>\d+):\s+\(UUID:\s+(?P<uuid>MIG-[^)\s]+)\)"
)
_GPU_LINE = re.compile(r"^GPU\s+(?P<index>\d+):.*\(UUID:\s+(?P<uuid>GPU-[^)\s]+)\)")
_PROFILE_GB = re.compile(r"\.(\d+)gb\Z")
NO_DEVICES = "No devices were found"


@dataclass(frozen=True, kw_only=True)
class LocalDevice:
    """One device a process can be given: a whole card, or one MIG device of a card."""

    ordinal: int  # the card's nvidia-smi index
    card_uuid: str
    mig_uuid: str | None
    profile: str | None  # the MIG profile, e.g. 3g.40gb
    name: str
    memory_mib: int
    used_mib: int | None  # memory in use; None when it cannot be attributed
    busy: bool | None  # a compute process runs on the card; None when unknown

    @property
    def key(self) -> str:
        """What ``CUDA_VISIBLE_DEVICES`` names it by: the MIG UUID, else the card UUID."""
        return self.mig_uuid or self.card_uuid


HostGpus = Known[tuple[LocalDevice, ...]] | Unknown


def _run(program: str, args: list[str]) -> Known[str] | Unknown:
    try:
        done = subprocess.run(
            [program, *args], capture_output=True, text=True, timeout=TIMEOUT_SECONDS, check=False
        )
    except subprocess.TimeoutExpired:
        return Unknown(f"nvidia-smi {args[0]} timed out after {TIMEOUT_SECONDS}s")
    except OSError as exc:
        return Unknown(f"nvidia-smi could not run: {exc}")
    if done.returncode != 0:
        if NO_DEVICES in done.stdout + done.stderr:
            return Known("")
        reason = done.stderr.strip() or done.stdout.strip() or f"exit {done.returncode}"
        return Unknown(f"nvidia-smi failed: {reason.splitlines()[-1]}")
    return Known("" if NO_DEVICES in done.stdout else done.stdout)


def read_host(program: str = "nvidia-smi") -> HostGpus:
    """Every device of this machine, or Unknown with the reason it could not be read."""
    found = shutil.which(program)
    if found is None:
        return Unknown(f"{program} is not on PATH")
    cards = _run(found, [f"--query-gpu={QUERY_GPU}", "--format=csv,noheader,nounits"])
    if isinstance(cards, Unknown):
        return cards
    listing = _run(found, ["-L"])
    if isinstance(listing, Unknown):
        return listing
    apps = _run(found, [f"--query-compute-apps={QUERY_APPS}", "--format=csv,noheader,nounits"])
    try:
        return Known(devices_from(cards.value, listing=listing.value, apps=apps))
    except ValueError as exc:
        return Unknown(f"nvidia-smi printed something vf cannot read: {exc}")


def _card_rows(text: str) -> list[list[str]]:
    rows = [[c.strip() for c in line.split(",")] for line in text.splitlines() if line.strip()]
    for row in rows:
        if len(row) != 6 or not row[0].isdigit() or not row[1].startswith("GPU-"):
            raise ValueError(f"unexpected --query-gpu row {', '.join(row)!r}")
    return rows


def _mig_devices(listing: str) -> dict[str, list[tuple[str, str]]]:
    """Card UUID → [(profile, MIG UUID)] in nvidia-smi -L order."""
    found: dict[str, list[tuple[str, str]]] = {}
    card: str | None = None
    for line in listing.splitlines():
        gpu = _GPU_LINE.match(line)
        if gpu:
            card = gpu["uuid"]
            continue
        mig = _MIG_LINE.match(line)
        if mig and card is not None:
            found.setdefault(card, []).append((mig["profile"], mig["uuid"]))
    return found


def _processes(apps: Known[str] | Unknown) -> dict[str, int] | None:
    """Card UUID → MiB used by compute processes; None when they could not be listed."""
    if isinstance(apps, Unknown):
        return None
    used: dict[str, int] = {}
    for line in apps.value.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3 and parts[0].startswith("GPU-"):
            mib = int(parts[2]) if parts[2].isdigit() else 0
            used[parts[0]] = used.get(parts[0], 0) + mib
    return used


def devices_from(
    cards: str, *, listing: str, apps: Known[str] | Unknown
) -> tuple[LocalDevice, ...]:
    """The devices of the three reads (pure, for the tests)."""
    migs = _mig_devices(listing)
    processes = _processes(apps)
    devices: list[LocalDevice] = []
    for index, uuid, name, total, used, mig_mode in _card_rows(cards):
        busy = None if processes is None else uuid in processes
        if mig_mode == "Enabled":
            for profile, mig_uuid in migs.get(uuid, []):
                size = _PROFILE_GB.search(profile)
                devices.append(
                    LocalDevice(
                        ordinal=int(index),
                        card_uuid=uuid,
                        mig_uuid=mig_uuid,
                        profile=profile,
                        name=name,
                        memory_mib=int(size.group(1)) * 1024 if size else 0,
                        used_mib=0 if busy is False else None,  # not attributable per instance
                        busy=busy,
                    )
                )
            continue
        devices.append(
            LocalDevice(
                ordinal=int(index),
                card_uuid=uuid,
                mig_uuid=None,
                profile=None,
                name=name,
                memory_mib=int(total),
                used_mib=int(used) if used.isdigit() else None,
                busy=busy,
            )
        )
    return tuple(devices)


def apply_mask(
    devices: tuple[LocalDevice, ...], mask: str | None
) -> tuple[tuple[LocalDevice, ...], list[str]]:
    """The devices a process inheriting ``CUDA_VISIBLE_DEVICES=mask`` may use, as CUDA reads
    it: ordinals, card UUIDs (``GPU-…``, a unique prefix is enough) and MIG UUIDs, in the
    mask's order; the first entry that names nothing ends the list; unset means all."""
    if mask is None:
        return devices, []
    chosen: list[LocalDevice] = []
    warnings: list[str] = []
    for raw in mask.split(","):
        entry = raw.strip()
        matches = _match(devices, entry)
        if not matches:
            if entry:
                warnings.append(
                    f"CUDA_VISIBLE_DEVICES entry {entry!r} names no device here; like CUDA, "
                    "vf ignores it and every entry after it"
                )
            break
        chosen.extend(d for d in matches if d not in chosen)
    return tuple(chosen), warnings


def _match(devices: tuple[LocalDevice, ...], entry: str) -> list[LocalDevice]:
    if entry.isdigit():
        return [d for d in devices if d.ordinal == int(entry)]
    if entry.startswith("MIG-"):
        return [d for d in devices if d.mig_uuid == entry]
    if entry.startswith("GPU-"):
        cards = {d.card_uuid for d in devices if d.card_uuid.startswith(entry)}
        if len(cards) != 1:
            return []
        return [d for d in devices if d.card_uuid in cards]
    return []
