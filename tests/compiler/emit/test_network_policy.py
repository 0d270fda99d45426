"""NetworkPolicies: no ingress to the flow's pods, egress only to DNS, the broker and the payload
store; vf's broker and store accept only the flow's pods, and the broker's monitoring port only
the readers vf.yaml names (KEDA's operator by default when autoscaling is on)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.pod_security import POD_TEMPLATE_KINDS
from tests.support import EXAMPLE_ENVS
from vf.cli import cli
from vf.errors import VfError
from vf.pipeline import CompileRequest, CompileResult, compile_project

Obj = dict[str, Any]
DNS = {"ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]}
KEDA = {
    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "keda"}},
    "podSelector": {"matchLabels": {"app.kubernetes.io/name": "keda-operator"}},
}


def _policies(objects: list[Obj]) -> dict[str, Obj]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == "NetworkPolicy"}


def _selects(policy: Obj, labels: dict[str, str]) -> bool:
    wanted = policy["spec"]["podSelector"].get("matchLabels", {})
    return all(labels.get(k) == v for k, v in wanted.items())


def _tcp(port: int) -> list[Obj]:
    return [{"port": port, "protocol": "TCP"}]


def _pods(objects: list[Obj]) -> dict[str, dict[str, str]]:
    return {
        f"{o['kind']}/{o['metadata']['name']}": o["spec"]["template"]["metadata"]["labels"]
        for o in objects
        if o["kind"] in POD_TEMPLATE_KINDS
    }


@pytest.mark.parametrize(("example", "env"), EXAMPLE_ENVS)
def test_every_pod_is_behind_a_policy_that_governs_ingress(
    example: str, env: str, compiled_examples: dict[str, CompileResult]
) -> None:
    objects = compiled_examples[example].objects[env]
    policies = _policies(objects).values()
    for name, labels in _pods(objects).items():
        governing = [p for p in policies if _selects(p, labels)]
        assert governing, f"{name} is not selected by any NetworkPolicy"
        assert all("Ingress" in p["spec"]["policyTypes"] for p in governing)
        assert all("Egress" in p["spec"]["policyTypes"] for p in governing)


@pytest.mark.parametrize(("example", "env"), EXAMPLE_ENVS)
def test_flow_pods_get_no_ingress_and_reach_only_dns_broker_and_store(
    example: str, env: str, compiled_examples: dict[str, CompileResult]
) -> None:
    result = compiled_examples[example]
    plan = next(p for p in result.plans if p.environment == env)
    spec = _policies(result.objects[env])[plan.network_policy]["spec"]
    assert "ingress" not in spec
    assert spec["egress"][0] == DNS
    purposes = [rule.purpose for rule in plan.security.worker_egress]
    assert purposes[0] == "dns"
    assert set(purposes) <= {"dns", "broker", "payload-store"}
    assert "broker" in purposes
    assert ("payload-store" in purposes) == (plan.infra.store_profile != "none")
    for rule in spec["egress"][1:]:
        assert all(port["protocol"] == "TCP" for port in rule["ports"])


@pytest.mark.parametrize(("example", "env"), EXAMPLE_ENVS)
def test_vf_services_accept_only_the_flow_and_named_readers(
    example: str, env: str, compiled_examples: dict[str, CompileResult]
) -> None:
    result = compiled_examples[example]
    plan = next(p for p in result.plans if p.environment == env)
    flow = {"podSelector": {"matchLabels": {"vf.dev/flow": plan.flow_id}}}
    policies = _policies(result.objects[env])
    for policy in plan.security.infra_policies:
        ingress = policies[policy.name]["spec"]["ingress"]
        assert ingress[0] == {"from": [flow], "ports": _tcp(policy.client_port)}
        others = {rule["ports"][0]["port"] for rule in ingress[1:]}
        assert others <= {policy.cluster_port, policy.monitoring_port}
    if plan.infra.broker_profile == "external":
        assert plan.infra.broker_name not in policies


def test_examples_cover_each_monitoring_source(compiled_examples: dict[str, CompileResult]) -> None:
    def source(example: str, env: str) -> str:
        plan = next(p for p in compiled_examples[example].plans if p.environment == env)
        return plan.security.infra_policies[0].monitoring_source

    assert source("realtime_cameras", "dev") == "autoscaling"
    assert source("batch_pipeline", "prod") == "vf.yaml"
    assert source("batch_pipeline", "dev") == "none"


GRAPH = """
from vf import REALTIME, Consumer, Flow, Processor, Producer


class Src(Producer):
    def next(self):
        return 1


class Work(Processor):
    def process(self, x):
        return x


class Sink(Consumer):
    def consume(self, x):
        pass


def build_flow():
    return Flow([Sink()(Work()(Src()))], flow_type=REALTIME)
"""


def _compile(write_graph: Callable[..., Path], env_body: str) -> tuple[Any, list[Obj]]:
    body = "".join(f"    {line}\n" for line in env_body.strip("\n").splitlines())
    config = "environments:\n  dev:\n    images:\n      default: r.io/a:1\n" + body
    result = compile_project(CompileRequest(graph=str(write_graph(GRAPH, config))))
    return result.plans[0], result.objects["dev"]


def _broker_policy(objects: list[Obj]) -> Obj:
    (policy,) = [
        p
        for p in _policies(objects).values()
        if p["metadata"]["labels"].get("vf.dev/infra") == "nats"
    ]
    return policy


def _broker_ingress(objects: list[Obj]) -> list[Obj]:
    rules: list[Obj] = _broker_policy(objects)["spec"]["ingress"]
    return rules


def test_autoscaling_opens_monitoring_to_keda(write_graph: Callable[..., Path]) -> None:
    _, objects = _compile(write_graph, "autoscaling:\n  max_replicas: 3")
    assert _broker_ingress(objects)[1:] == [{"from": [KEDA], "ports": _tcp(8222)}]
    assert any(o["kind"] == "ScaledObject" for o in objects)


def test_without_readers_the_monitoring_port_stays_closed(
    write_graph: Callable[..., Path],
) -> None:
    _, objects = _compile(write_graph, "broker:\n  profile: dev")
    assert len(_broker_ingress(objects)) == 1


def test_declared_monitoring_readers_replace_the_default(write_graph: Callable[..., Path]) -> None:
    body = """
autoscaling:
  max_replicas: 3
broker:
  monitoring_from:
    - cidr: 10.1.0.0/16
    - namespace: obs
    - pod_labels: {app: scraper}
"""
    _, objects = _compile(write_graph, body)
    peers = [
        {"ipBlock": {"cidr": "10.1.0.0/16"}},
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "obs"}}},
        {"podSelector": {"matchLabels": {"app": "scraper"}}},
    ]
    assert _broker_ingress(objects)[1:] == [{"from": peers, "ports": _tcp(8222)}]


def test_durable_brokers_route_to_each_other(write_graph: Callable[..., Path]) -> None:
    plan, objects = _compile(write_graph, "broker:\n  profile: durable")
    spec = _broker_policy(objects)["spec"]
    assert _broker_policy(objects)["metadata"]["name"] == f"vf-{plan.flow_id}-nats"
    labels = {"vf.dev/flow": plan.flow_id, "vf.dev/infra": "nats"}  # only this flow's servers
    own = {"podSelector": {"matchLabels": labels}}
    assert {"from": [own], "ports": _tcp(6222)} in spec["ingress"]
    assert spec["egress"] == [{"to": [own], "ports": _tcp(6222)}, DNS]


def test_external_services_are_reached_by_port_or_declared_peers(
    write_graph: Callable[..., Path],
) -> None:
    body = """
broker:
  profile: external
  url: nats://nats-a.messaging:4333,nats://nats-b.messaging:4334
payload_store:
  profile: external
  url_secret: {name: store, key: url}
  egress:
    to:
      - cidr: 192.0.2.0/24
"""
    plan, objects = _compile(write_graph, body)
    egress = _policies(objects)[plan.network_policy]["spec"]["egress"]
    assert egress[1] == {"ports": _tcp(4333) + _tcp(4334)}
    assert egress[2] == {"ports": _tcp(6379), "to": [{"ipBlock": {"cidr": "192.0.2.0/24"}}]}
    assert plan.security.infra_policies == ()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            "broker:\n  profile: external\n  url: nats://n:4222\n"
            "  monitoring_from: [{namespace: a}]",
            "cannot guard its monitoring endpoint",
        ),
        ("broker:\n  profile: dev\n  egress: {ports: [4222]}", "applies only to profile external"),
        ("broker:\n  monitoring_from: [{cidr: 10.0.0.1/8}]", "is not an address block"),
        (
            "broker:\n  monitoring_from: [{cidr: 10.0.0.0/8, namespace: a}]",
            "cannot be combined",
        ),
        ("broker:\n  profile: external\n  url: nats://user:pw@n:4222", "carries credentials"),
        (
            "payload_store:\n  profile: external\n  url: redis://n:6379/0?password=pw",
            "carries credentials",
        ),
        ("broker:\n  monitoring_from: [{}]", "should be non-empty"),
    ],
)
def test_bad_network_options_are_named(
    body: str, message: str, write_graph: Callable[..., Path]
) -> None:
    config = "environments:\n  dev:\n    images:\n      default: r.io/a:1\n" + "".join(
        f"    {line}\n" for line in body.splitlines()
    )
    result = CliRunner().invoke(cli, ["validate", str(write_graph(GRAPH, config))])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output


def test_credentials_never_reach_the_plan(write_graph: Callable[..., Path]) -> None:
    with pytest.raises(VfError) as caught:
        _compile(write_graph, "broker:\n  profile: external\n  url: nats://tok@n:4222")
    assert "tok@" not in caught.value.render()


def test_diff_reports_opened_reach_and_a_weaker_pod_security_level(
    write_graph: Callable[..., Path],
) -> None:
    from vf.commands.diff.plan import WARNING, plan_findings
    from vf.ir.plan import plan_to_json

    before, _ = _compile(write_graph, "broker:\n  profile: dev")
    body = "broker:\n  monitoring_from: [{namespace: obs}]\nmounts:\n  sink: ['/srv:/srv:ro']"
    after, _ = _compile(write_graph, body)
    findings = plan_findings(plan_to_json(before), new=plan_to_json(after))
    security = {f.subject: f for f in findings if f.category == "security"}
    assert security["monitoring"].message == "monitoring readers widened"
    assert security["pod security"].severity == WARNING
    assert "weakened" in security["pod security"].message
    back = plan_findings(plan_to_json(after), new=plan_to_json(before))
    assert {f.subject: f.message for f in back if f.category == "security"}["monitoring"] == (
        "monitoring readers narrowed"
    )
