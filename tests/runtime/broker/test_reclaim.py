"""``vf-provision`` reclaiming the flow's other runs on start-up, when the environment opts
in (``VF_PRUNE_SUPERSEDED=1``): never by default, never a run a replica still reads."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

import nats
from nats.aio.client import Client

from tests.runtime.opshelp import stream_names
from vf_runtime.broker.naming import RunNames
from vf_runtime.local.infra import LocalServer

NODES = [
    {"name": "src", "parents": [], "replicas": 1, "has_children": True, "max_deliver": 2},
    {"name": "out", "parents": ["src"], "replicas": 1, "has_children": False, "max_deliver": 2},
]


async def _provision(url: str, topology: Path, run: str, *, opt_in: str | None) -> str:
    env = {
        **os.environ,
        "VF_FLOW_ID": "reclaim",
        "VF_FLOW_TYPE": "realtime",
        "VF_RUN_ID": run,
        "VF_TOPOLOGY_DIR": str(topology),
    }
    env.pop("VF_PRUNE_SUPERSEDED", None)
    if opt_in is not None:
        env["VF_PRUNE_SUPERSEDED"] = opt_in
    process = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).with_name("vf-provision")),
        "--nats",
        url,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode == 0, out.decode()
    return out.decode()


async def _pull_requests(client: Client, stream: str, until: Callable[[int], bool]) -> None:
    """Wait until the reader durable's count of waiting pull requests satisfies ``until``."""
    js = client.jetstream()
    async with asyncio.timeout(20):
        while not until((await js.consumer_info(stream, "out--from--src")).num_waiting or 0):
            await asyncio.sleep(0.02)


async def _scenario(url: str, topology: Path) -> dict[str, object]:
    old = RunNames("reclaim", "r1")
    await _provision(url, topology, "r1", opt_in=None)
    default = await _provision(url, topology, "r2", opt_in=None)
    after_default = await asyncio.to_thread(stream_names, url)
    client = await nats.connect(url)
    reader = await client.jetstream().pull_subscribe_bind(
        "out--from--src", stream=old.stream("src")
    )
    waiting = asyncio.create_task(reader.fetch(1, timeout=20))  # a replica of r1 reading
    await _pull_requests(client, old.stream("src"), lambda n: n > 0)
    while_live = await _provision(url, topology, "r3", opt_in="1")
    after_live = await asyncio.to_thread(stream_names, url)
    waiting.cancel()
    await client.close()
    watcher = await nats.connect(url)
    await _pull_requests(watcher, old.stream("src"), lambda n: n == 0)  # the server saw it go
    await watcher.close()
    idle = await _provision(url, topology, "r3", opt_in="1")
    return {
        "default": default,
        "after_default": after_default,
        "while_live": while_live,
        "after_live": after_live,
        "idle": idle,
        "after_idle": await asyncio.to_thread(stream_names, url),
    }


def test_provision_reclaims_other_runs_only_on_opt_in_and_never_a_live_one(
    tmp_path: Path, nats_server: LocalServer
) -> None:
    (tmp_path / "nodes-000.jsonl").write_text("".join(json.dumps(n) + "\n" for n in NODES))
    seen = asyncio.run(_scenario(nats_server.url, tmp_path))
    r1, r2, r3 = (RunNames("reclaim", run).stream("src") for run in ("r1", "r2", "r3"))
    print(
        f"[reclaim] default keeps r1: {r1 in seen['after_default']}; live r1 kept: "
        f"{r1 in seen['after_live']}; idle r1 removed: {r1 not in seen['after_idle']}"
    )
    assert r1 in seen["after_default"] and "pruned" not in str(seen["default"])
    assert f"kept superseded stream {r1}" in str(seen["while_live"])
    assert r1 in seen["after_live"] and r2 not in seen["after_live"]
    assert f"pruned superseded stream {r1}" in str(seen["idle"])
    assert r1 not in seen["after_idle"] and r3 in seen["after_idle"]
    assert "vf-reclaim-dlq" in seen["after_idle"]
