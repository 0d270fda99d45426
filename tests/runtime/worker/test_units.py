"""Units of the runtime: naming against the compiler's plan, configs, joins, ownership, credit."""

from __future__ import annotations

import asyncio
import hashlib
import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import EXAMPLE_NAMES
from vf.pipeline import CompileResult
from vf.render.objects import broker_env
from vf_runtime.broker.naming import RunNames, token
from vf_runtime.broker.topology import PREFETCH, PUBLISH_WINDOW, NodeTopology, credit, readers_of
from vf_runtime.local.infra import free_port
from vf_runtime.policies import JoinPolicy
from vf_runtime.worker.assembler import TraceAssembler
from vf_runtime.worker.build import build_node
from vf_runtime.worker.config import ConfigError, leases_replica, load_worker_config, replica_id
from vf_runtime.worker.exits import EXIT_CONFIG
from vf_runtime.worker.inputs import owns
from vf_runtime.worker.replica import run_worker


@pytest.mark.parametrize("example", EXAMPLE_NAMES)
def test_runtime_names_match_the_compilers_plan(
    example: str, compiled_examples: dict[str, CompileResult]
) -> None:
    for plan in compiled_examples[example].plans:
        names = RunNames(plan.flow_id, plan.run_id, plan.generation or "")
        topology = [
            NodeTopology.from_json(json.loads(line))
            for shard in plan.provision.topology_shards
            for line in shard.splitlines()
        ]
        readers = {
            (s.parent, names.durable(s.child, parent=s.parent, partition=s.partition))
            for s in readers_of(tuple(topology), ack_wait=60)
        }
        for channel in plan.channels:
            assert names.stream(channel.node) == channel.stream
            assert names.subject(channel.node) == channel.subject
            assert names.eos_prefix(channel.node) == channel.eos_subject
            assert {d for p, d in readers if p == channel.node} == set(channel.readers)
        for workload in plan.workloads:
            env = dict(workload.env)
            assert env["VF_NODE_NAME"] == workload.node
            # a pod's environment: its own ConfigMap and the shared broker ConfigMap
            pod = {**env, "VF_NATS_URL": "nats://127.0.0.1:4222", **broker_env(plan)}
            config = load_worker_config(pod)
            assert config.names == names, "a worker would not find the streams of the plan"
            assert config.node_kind == workload.node_kind
            assert config.nb_tasks == workload.replicas


def test_tokens_are_sanitised_like_the_compiler() -> None:
    assert token("a.b c/d") == "a_b_c_d"
    assert token("ok_-Name9") == "ok_-Name9"
    names = RunNames("f", "r1")
    assert names.durable("Child.x", parent="p", partition=2) == "Child_x--from--p--p2"
    assert names.control() == "vf.f.r1._control.stop"
    assert names.dlq_stream() == "vf-f-dlq"
    assert names.dlq_subject("n") == "vf.f._dlq.r1.n"
    assert names.eos_subject("n", replica=3) == "vf.f.r1.n._eos.r3"


def _env(**overrides: str) -> dict[str, str]:
    env = {
        "VF_NODE_NAME": "scale",
        "VF_NODE_KIND": "processor",
        "VF_NODE_CLASS": "nodes.Scale",
        "VF_NODE_PARAMS_JSON": '{"factor": 2}',
        "VF_PARENT_NAMES": "a,b",
        "VF_HAS_CHILDREN": "1",
        "VF_FLOW_ID": "f",
        "VF_FLOW_TYPE": "batch",
        "VF_RUN_ID": "r1",
        "VF_NB_TASKS": "2",
        "VF_HEALTH_PORT": "8080",
        "VF_ENVELOPE_VERSION": "4",
        "VF_NATS_URL": "nats://127.0.0.1:4222",
        "VF_PARTITION_BY": "trace_id",
        "VF_PARENT_REPLICAS": "a=3,b=1",
    }
    env.update(overrides)
    return {k: v for k, v in env.items() if v != "<unset>"}


def test_a_complete_environment_parses() -> None:
    config = load_worker_config(_env())
    assert config.parents == ("a", "b")
    assert config.partitioned
    assert config.parent_replicas == {"a": 3, "b": 1}
    assert config.join_policy == JoinPolicy.default_for("batch")
    assert config.delivery.max_deliver == 4
    assert config.blob_ttl_seconds == 86400


def test_every_missing_or_malformed_variable_is_named_at_once() -> None:
    env = _env(
        VF_NODE_NAME="<unset>",
        VF_NATS_URL="<unset>",
        VF_FLOW_TYPE="streaming",
        VF_NB_TASKS="two",
        VF_NODE_PARAMS_JSON="{not json",
        VF_ENVELOPE_VERSION="3",
        VF_PARENT_REPLICAS="zzz=2",
    )
    with pytest.raises(ConfigError) as caught:
        load_worker_config(env)
    text = caught.value.render()
    for name in (
        "VF_NODE_NAME is missing",
        "VF_NATS_URL is missing",
        "VF_FLOW_TYPE='streaming'",
        "VF_NB_TASKS='two'",
        "VF_NODE_PARAMS_JSON is not valid JSON",
        "VF_ENVELOPE_VERSION=3",
        "VF_PARENT_REPLICAS entry 'zzz=2'",
    ):
        assert name in text


def test_unknown_vf_variables_are_ignored() -> None:
    assert load_worker_config(_env(VF_SOMETHING_NEW="x")).node_name == "scale"


def test_replica_id_comes_from_env_then_pod_ordinal_else_a_lease() -> None:
    assert replica_id({"VF_REPLICA_ID": "3", "POD_NAME": "x-7"}) == 3
    assert replica_id({"POD_NAME": "vf-flow-tracker-2"}) == 2
    assert replica_id({"POD_NAME": "deploy-7d9f8-abcde"}) == 0
    # a Deployment pod's random suffix can be all digits: the host name is no ordinal
    assert replica_id({"HOSTNAME": "vf-live-sink-5d8f7c6b9-24567"}) == 0
    assert leases_replica({"HOSTNAME": "box-11"}, nb_tasks=2)
    assert not leases_replica({"POD_NAME": "vf-flow-tracker-2"}, nb_tasks=2)
    assert not leases_replica({}, nb_tasks=1)


def test_partition_ownership_is_a_stable_sha256_prefix() -> None:
    for key in ("cam:1", "front", 17, None):
        expected = int(hashlib.sha256(str(key).encode()).hexdigest()[:8], 16) % 3
        assert [owns(key, replicas=3, replica=r) for r in range(3)] == [
            r == expected for r in range(3)
        ]


def test_credit_scales_with_replicas_and_covers_joins() -> None:
    per_replica = 1 + PREFETCH + PUBLISH_WINDOW  # what one replica may hold un-acked
    assert per_replica == 129
    assert credit(replicas=1, partitioned=False, parents=1, max_pending=256) == per_replica
    assert credit(replicas=10, partitioned=False, parents=1, max_pending=256) == 10 * per_replica
    assert credit(replicas=10, partitioned=True, parents=1, max_pending=256) == per_replica
    assert credit(replicas=2, partitioned=True, parents=3, max_pending=16) == per_replica
    assert credit(replicas=2, partitioned=True, parents=3, max_pending=256) == 513


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Iterator[Clock]:
    yield Clock()


def test_trace_join_completes_when_every_parent_arrived(clock: Clock) -> None:
    join: TraceAssembler[str] = TraceAssembler(("a", "b"), JoinPolicy(), clock=clock)
    assert join.add("a1", parent="a", trace_id="t1").complete == []
    assert join.held("a") == 1
    done = join.add("b1", parent="b", trace_id="t1").complete
    assert [g.items for g in done] == [{"a": "a1", "b": "b1"}]
    assert join.held("a") == 0


def test_a_redelivered_half_supersedes_the_held_one(clock: Clock) -> None:
    join: TraceAssembler[str] = TraceAssembler(("a", "b"), JoinPolicy(), clock=clock)
    join.add("old", parent="a", trace_id="t1")
    outcome = join.add("new", parent="a", trace_id="t1")
    assert outcome.superseded == ["old"]
    assert join.add("b", parent="b", trace_id="t1").complete[0].items["a"] == "new"


def test_groups_time_out_and_overflow_unless_waiting(clock: Clock) -> None:
    policy = JoinPolicy(timeout_seconds=2.0, missing="drop", max_pending=2)
    join: TraceAssembler[str] = TraceAssembler(("a", "b"), policy, clock=clock)
    join.add("x", parent="a", trace_id="t1")
    join.add("x", parent="a", trace_id="t2")
    evicted = join.add("x", parent="a", trace_id="t3").evicted
    assert [g.trace_id for g in evicted] == ["t1"]
    clock.now = 5.0
    assert sorted(g.trace_id for g in join.expire()) == ["t2", "t3"]
    waiting: TraceAssembler[str] = TraceAssembler(
        ("a", "b"), JoinPolicy(missing="wait", max_pending=1), clock=clock
    )
    for trace in ("t1", "t2", "t3"):
        assert waiting.add("x", parent="a", trace_id=trace).evicted == []
    clock.now = 1e9
    assert waiting.expire() == []
    assert len(waiting.take_all()) == 3


def test_a_node_module_importing_a_missing_module_names_that_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "needs_missing.py").write_text("import vf_absent_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    env = {
        "VF_NODE_NAME": "reader",
        "VF_NODE_KIND": "producer",
        "VF_NODE_CLASS": "needs_missing.RecordReader",
        "VF_NODE_PARAMS_JSON": "{}",
        "VF_PARENT_NAMES": "",
        "VF_HAS_CHILDREN": "1",
        "VF_FLOW_ID": "f",
        "VF_RUN_ID": "r1",
        "VF_FLOW_TYPE": "batch",
        "VF_NB_TASKS": "1",
        "VF_NATS_URL": "nats://127.0.0.1:4222",
    }
    with pytest.raises(ConfigError) as caught:
        build_node(load_worker_config(env))
    message = str(caught.value)
    assert "No module named 'vf_absent_dependency'" in message, message
    assert "no importable module" not in message


def test_a_worker_refuses_a_node_that_cannot_take_one_input_per_parent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "one_arg.py").write_text(
        "from vf_runtime.nodes import Processor\n\n"
        "class Pair(Processor):\n    def process(self, item):\n        return item\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    env = {
        "VF_NODE_NAME": "pair",
        "VF_NODE_KIND": "processor",
        "VF_NODE_CLASS": "one_arg.Pair",
        "VF_NODE_PARAMS_JSON": "{}",
        "VF_PARENT_NAMES": "left,right",
        "VF_HAS_CHILDREN": "1",
        "VF_FLOW_ID": "f",
        "VF_RUN_ID": "r1",
        "VF_FLOW_TYPE": "batch",
        "VF_NB_TASKS": "1",
        "VF_NATS_URL": "nats://127.0.0.1:4222",
    }
    with pytest.raises(ConfigError) as caught:
        build_node(load_worker_config(env))
    assert "Pair.process(item) cannot take 2 input(s)" in str(caught.value)


def test_free_ports_are_distinct_bindable_and_below_the_ephemeral_range() -> None:
    """A port vf hands out is bound later (a worker's health port, seconds after): it comes
    from below the range the kernel gives outgoing connections, so none of those takes it
    first, and it is never handed out twice."""
    ports = [free_port() for _ in range(300)]
    assert len(set(ports)) == len(ports)
    ephemeral = Path("/proc/sys/net/ipv4/ip_local_port_range")
    if ephemeral.exists():
        floor = int(ephemeral.read_text().split()[0])
        assert all(port < floor for port in ports), [p for p in ports if p >= floor]
    for port in ports[:20]:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", port))


def test_stored_headers_keep_non_ascii_values_as_text() -> None:
    """nats-py parses a stored message's headers with the e-mail parser, which turns a
    non-ASCII value into an ``email.header.Header``; vf reads the raw block as UTF-8."""
    import base64
    from email.parser import BytesParser

    from nats.js.api import RawStreamMsg

    from vf_runtime.broker.headers import as_text, stored_headers

    block = "NATS/1.0\r\nVF-Code: VF_NODE_X\r\nVF-Error: ValueError: café ✓ 3\r\n\r\n".encode()
    parsed = BytesParser().parsebytes(block[len(b"NATS/1.0\r\n") :])
    raw = RawStreamMsg(hdrs=base64.b64encode(block).decode(), headers=dict(parsed.items()))  # type: ignore[arg-type]
    assert stored_headers(raw) == {"VF-Code": "VF_NODE_X", "VF-Error": "ValueError: café ✓ 3"}
    assert as_text(parsed["VF-Error"]) == "ValueError: café ✓ 3"
    json.dumps(stored_headers(raw))  # the run's dead-letter copy serialises them
    assert stored_headers(RawStreamMsg(headers={"A": "b"})) == {"A": "b"}


def test_an_abort_is_its_own_outcome_never_a_success() -> None:
    from vf_runtime.local.outcome import exit_code, settled
    from vf_runtime.worker.exits import EXIT_ABORTED, EXIT_OK, EXIT_STOPPED

    assert EXIT_ABORTED not in (EXIT_OK, EXIT_STOPPED)
    assert settled("aborted", None) == "aborted" and exit_code("aborted") == 8


def test_a_node_constructor_that_fails_in_the_pod_names_its_own_line_and_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """I/O in ``__init__`` passes at compile time (the file is on the author's machine) and
    fails in the pod: the worker says the node's constructor failed, where, and to use
    ``open()``; not that the environment is wrong."""
    (tmp_path / "label_nodes.py").write_text(
        "from vf_runtime.nodes import Producer\n\n"
        "class Labels(Producer):\n"
        "    def __init__(self, path='labels.txt', **kw):\n"
        "        super().__init__(**kw)\n"
        "        self.labels = open(path).read().split()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    env = {
        "VF_NODE_NAME": "labels",
        "VF_NODE_KIND": "producer",
        "VF_NODE_CLASS": "label_nodes.Labels",
        "VF_NODE_PARAMS_JSON": '{"path": "labels.txt"}',
        "VF_PARENT_NAMES": "",
        "VF_HAS_CHILDREN": "1",
        "VF_FLOW_ID": "f",
        "VF_RUN_ID": "r1",
        "VF_FLOW_TYPE": "batch",
        "VF_NB_TASKS": "1",
        "VF_NATS_URL": "nats://127.0.0.1:4222",
    }
    assert asyncio.run(run_worker(env)) == EXIT_CONFIG
    text = capsys.readouterr().err
    first = text.splitlines()[0]
    assert first.startswith("error[VF_NODE_INIT_FAILED] node 'labels': its constructor"), text
    assert f"{tmp_path / 'label_nodes.py'}:6" in first, text
    assert "FileNotFoundError: [Errno 2] No such file or directory: 'labels.txt'" in first
    assert "in __init__" in text and "self.labels = open(path).read().split()" in text
    assert "open()" in text.splitlines()[-1], text
    assert "VF_ENV" not in text and "ConfigMap" not in text, text


def test_a_worker_missing_its_environment_still_says_vf_env(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert asyncio.run(run_worker(_env(VF_NODE_NAME="<unset>"))) == EXIT_CONFIG
    text = capsys.readouterr().err
    assert text.startswith("error[VF_ENV] the worker environment is not usable:"), text
    assert "VF_NODE_NAME is missing" in text and "env ConfigMap" in text
