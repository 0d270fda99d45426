"""``vf run-local --live``: the metrics read, the quantiles interpolated, the table drawn."""

from __future__ import annotations

import io
import math
import re
import sys
from pathlib import Path

import pytest

from tests.runtime.support import finish_flow, start_flow
from vf_runtime.local.infra import LocalServer
from vf_runtime.local.live import (
    LiveView,
    Replica,
    Sample,
    histogram_quantile,
    increase,
    parse,
)
from vf_runtime.local.supervisor import ReplicaSpec, SuperviseOptions, Supervisor
from vf_runtime.worker.health import Metrics

INF = math.inf
# 2 calls up to 0.1 s, 4 more up to 0.5 s, 4 more up to 1 s, none above
KNOWN = ((0.1, 2), (0.5, 6), (1.0, 10), (INF, 10))


@pytest.mark.parametrize(
    ("q", "expected"),
    [
        (0.1, 0.05),  # rank 1 of the first bucket's 2, from 0 up to 0.1
        (0.5, 0.4),  # rank 5: 3 of the second bucket's 4, from 0.1 up to 0.5
        (0.95, 0.9375),  # rank 9.5: 3.5 of the third bucket's 4, from 0.5 up to 1
        (1.0, 1.0),
    ],
)
def test_a_quantile_is_interpolated_within_its_bucket(q: float, expected: float) -> None:
    assert histogram_quantile(q, KNOWN) == pytest.approx(expected, rel=1e-12)


def test_a_quantile_in_the_inf_bucket_is_the_highest_finite_bound() -> None:
    assert histogram_quantile(0.5, ((0.1, 2), (0.5, 3), (INF, 10))) == 0.5


def test_no_observations_or_no_inf_bucket_give_no_quantile() -> None:
    assert math.isnan(histogram_quantile(0.5, ((0.1, 0), (INF, 0))))
    assert math.isnan(histogram_quantile(0.5, ((0.1, 2), (0.5, 6))))
    assert math.isnan(histogram_quantile(0.5, ()))
    assert histogram_quantile(-0.1, KNOWN) == -INF
    assert histogram_quantile(1.1, KNOWN) == INF


def test_buckets_of_replicas_add_up_by_bound_in_any_order() -> None:
    halves = ((INF, 5), (0.1, 1), (1.0, 5), (0.5, 3), (0.1, 1), (0.5, 3), (1.0, 5), (INF, 5))
    assert histogram_quantile(0.95, halves) == pytest.approx(0.9375, rel=1e-12)


def _metrics(node: str, seconds: list[float], backlog: int | None = None) -> Metrics:
    metrics = Metrics(node=node, flow="f", replica=0)
    for value in seconds:
        metrics.observe(value)
        metrics.bump("processed")
    if backlog is not None:
        metrics.backlog[("up", "f-up-" + node)] = backlog
    return metrics


def test_a_workers_metrics_give_its_buckets_and_backlog_and_no_other_nodes() -> None:
    text = _metrics('sc"ale', [0.003, 0.003, 0.2], backlog=7).render()
    sample = parse(text, 'sc"ale')
    assert sample is not None
    assert dict(sample.buckets)[0.0025] == 0
    assert dict(sample.buckets)[0.005] == 2
    assert dict(sample.buckets)[0.25] == 3
    assert sample.buckets[-1] == (INF, 3)
    assert sample.backlog == {("up", 'f-up-sc"ale'): 7}
    assert parse(text, "scale") is None


def test_an_interval_is_the_difference_unless_the_replica_restarted() -> None:
    before = Sample(buckets=((0.1, 2), (INF, 3)))
    after = Sample(buckets=((0.1, 5), (INF, 9)))
    assert increase(before, after) == ((0.1, 3), (INF, 6))
    restarted = Sample(buckets=((0.1, 1), (INF, 1)))
    assert increase(after, restarted) == restarted.buckets
    assert increase(None, after) == after.buckets


def test_the_table_gives_each_node_its_rate_quantiles_dead_letters_and_backlog() -> None:
    view = LiveView(started=100.0)
    first = _metrics("scale", [0.003] * 10, backlog=4)
    sample = parse(first.render(), "scale")
    replicas = [
        Replica("numbers/r0", "numbers", {"processed": 10}, None),
        Replica("scale/r0", "scale", {"processed": 10, "dead_lettered": 1}, sample),
    ]
    lines = view.table(replicas, now=105.0)
    titles = ["live", "node", "processed", "rate/s", "p50", "p95", "dead", "backlog"]
    assert lines[0].split() == titles
    assert lines[1].split() == ["numbers", "10", "2.0", "-", "-", "0", "-"]
    # 10 calls in (2.5 ms, 5 ms]: p50 at 3.75 ms, p95 at 4.875 ms
    assert lines[2].split() == ["scale", "10", "2.0", "3.75ms", "4.88ms", "1", "4"]
    for value in [0.3] * 10:  # the next interval's calls only: (0.25 s, 0.5 s]
        first.observe(value)
    later = Replica("scale/r0", "scale", {"processed": 30}, parse(first.render(), "scale"))
    assert view.table([later], now=115.0)[1].split() == [
        "scale", "30", "2.0", "375ms", "488ms", "0", "4",
    ]  # fmt: skip


WORKER = 'print("INFO vf.worker summary: processed=4 received=4 publish_retries=0")'


def test_a_live_supervisor_draws_a_last_table_instead_of_progress_lines(tmp_path: Path) -> None:
    out = io.StringIO()
    specs = [
        ReplicaSpec(node=node, replica=0, env={}, command=(sys.executable, "-c", WORKER))
        for node in ("numbers", "sink")
    ]
    options = SuperviseOptions(
        announce_stop=lambda: None, stall_seconds=None, output=out, live=True
    )
    assert Supervisor(specs, options).run().status == "ok"
    lines = out.getvalue().splitlines()
    assert "progress:" not in out.getvalue()
    header = max(i for i, line in enumerate(lines) if line.startswith("[vf] live "))
    assert [line.split()[1:3] for line in lines[header + 1 :]] == [["numbers", "4"], ["sink", "4"]]


def _tables(output: str) -> list[list[str]]:
    """Each ``[vf] live`` table: the names of the nodes its rows give."""
    tables: list[list[str]] = []
    row = re.compile(r"^\[vf\] {7}(\S+)(?: +\S+){6}$")
    for line in output.splitlines():
        if line.startswith("[vf] live "):
            tables.append([])
        elif tables and (found := row.match(line)) is not None:
            tables[-1].append(found.group(1))
    return tables


@pytest.mark.slow  # real servers and a whole paced run
def test_a_paced_run_with_live_draws_a_row_for_every_node(
    tmp_path: Path, nats_server: LocalServer, redis_server: LocalServer
) -> None:
    log = tmp_path / "run.log"
    env = {"VF_TEST_OUT": str(tmp_path / "out.jsonl"), "VF_TEST_COUNT": "40"}  # about 10 s
    process = start_flow(
        "paced.py",
        nats_url=nats_server.url,
        redis_url=redis_server.url,
        env=env,
        log=log,
        args=("--live",),
    )
    run = finish_flow(process, log=log, timeout=120)
    assert run.code == 0, run.output[-4000:]
    tables = _tables(run.output)
    assert len(tables) >= 2, run.output[-4000:]  # one while it ran, one at the end
    assert all(rows == ["numbers", "scale", "sink"] for rows in tables), tables
    assert "[vf] progress:" not in run.output
    last = run.output.splitlines()
    assert any(re.match(r"^\[vf\] {7}sink +40 ", line) for line in last), run.output[-2000:]
