"""Credentials of the broker and store (ADR 0212): vf.yaml's ``auth:``, the plan's record,
what the pods reference, what ``vf explain`` and the README say, and the Secrets run-tree
makes up. The servers themselves are proven in
tests/compiler/runtree/test_credentials_servers.py."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.graph_sources import NODES
from tests.support import one_environment
from vf.cli import cli
from vf.config.infra import AuthChoice
from vf.emit.prerequisites import missing_references
from vf.pipeline import CompileResult
from vf.plan.infra import plan_auth
from vf.runtree.credentials import run_credentials, server_secrets

GRAPH = (
    NODES
    + """

def build_flow():
    src = Src(name="src")
    work = Work(name="work")(src)
    return Flow([Sink(name="sink")(work)], flow_type=BATCH, flow_id="creds")
"""
)


def _run(write_graph: Callable[..., Path], body: str, command: str = "validate") -> Any:
    path = write_graph(GRAPH, one_environment(body))
    return CliRunner().invoke(cli, [command, str(path)])


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("broker: {auth: off}", "is neither none nor a mapping"),
        ("broker: {auth: {secrett: x}}", "unknown key(s) 'secrett'"),
        ("broker: {profile: external, url: 'nats://n:4222', auth: {secret: s, kind: jwt}}",
         "'jwt' is not a kind"),
        ("broker: {auth: {secret: Not_A_Name}}", "not a DNS subdomain"),
        ("broker: {profile: dev, auth: {routes_secret: r}}", "only the durable broker's"),
        ("payload_store: {profile: dev, auth: {routes_secret: r}}", "only the durable broker's"),
        ("broker: {profile: durable, auth: {kind: token}}", "a kind chooses an external"),
        ("payload_store: {profile: external, url: 'redis://r:6379/0', "
         "auth: {secret: s, kind: token}}",
         "a kind chooses an external"),
        ("broker: {profile: external, url: 'nats://n:4222', auth: {kind: token}}",
         "cannot make up a name"),
        ("payload_store: {auth: none}", "no store runs with profile none"),
    ],
)  # fmt: skip
def test_an_auth_that_cannot_work_is_refused_by_name(
    body: str, message: str, write_graph: Callable[..., Path]
) -> None:
    result = _run(write_graph, body)
    assert result.exit_code == 2, result.output
    assert "error[VF_CONFIG_AUTH]" in result.output
    assert message in result.output


def test_shipped_servers_default_to_credentials_and_take_other_names() -> None:
    default = plan_auth(None, profile="durable", name="vf-f-nats", routes=True)
    assert (default.kind, default.declared) == ("password", False)
    assert (default.secret, default.routes_secret) == ("vf-f-nats-auth", "vf-f-nats-routes")
    dev = plan_auth(None, profile="dev", name="vf-f-nats", routes=True)
    assert (dev.secret, dev.routes_secret) == ("vf-f-nats-auth", None)
    named = plan_auth(
        AuthChoice(secret="mine", routes_secret="peers"), profile="durable", name="n", routes=True
    )
    assert (named.secret, named.routes_secret, named.declared) == ("mine", "peers", True)
    store = plan_auth(None, profile="cache", name="vf-f-redis", routes=False)
    assert (store.secret, store.routes_secret) == ("vf-f-redis-auth", None)
    off = plan_auth(AuthChoice(off=True), profile="dev", name="n", routes=True)
    assert (off.kind, off.declared, off.secret) == ("none", True, None)
    external = plan_auth(None, profile="external", name="n", routes=True)
    assert (external.kind, external.declared, external.secret) == ("none", False, None)
    token = plan_auth(
        AuthChoice(secret="t", kind="token"), profile="external", name="n", routes=True
    )
    assert (token.kind, token.secret, token.routes_secret) == ("token", "t", None)


def _compile(write_graph: Callable[..., Path], body: str, tmp_path: Path) -> dict[str, Any]:
    path = write_graph(GRAPH, one_environment(body))
    out = tmp_path / "tree"
    result = CliRunner().invoke(cli, ["compile", str(path), "--out", str(out)])
    assert result.exit_code == 0, result.output
    return {
        "plan": json.loads((out / "plan" / "dev.json").read_text()),
        "readme": (out / "README.md").read_text(),
        "out": out,
    }


def _worker_env(out: Path) -> list[dict[str, Any]]:
    from ruamel.yaml import YAML

    for path in sorted((out / "overlays" / "dev" / "resources").glob("job-*.yaml")):
        obj = YAML(typ="safe").load(path.read_text())
        if "provision" not in obj["metadata"]["name"]:
            env: list[dict[str, Any]] = obj["spec"]["template"]["spec"]["containers"][0]["env"]
            return env
    raise AssertionError("no worker Job")


def test_auth_none_is_a_named_choice_in_the_plan_readme_and_pods(
    write_graph: Callable[..., Path], tmp_path: Path
) -> None:
    tree = _compile(write_graph, "broker: {auth: none}\npayload_store: {profile: dev}", tmp_path)
    assert tree["plan"]["infra"]["broker_auth"] == {"kind": "none", "declared": True}
    assert tree["plan"]["infra"]["store_auth"]["secret"] == "vf-creds-redis-auth"
    assert "| dev, auth: none | dev, auth: vf-creds-redis-auth |" in tree["readme"]
    names = {e["name"] for e in _worker_env(tree["out"])}
    assert "VF_NATS_USER" not in names and "VF_BLOB_REDIS_PASSWORD" in names
    conf = (tree["out"] / "components" / "nats-dev").glob("configmap-*.yaml")
    assert "accounts" in next(conf).read_text()  # the shape, patched per environment
    patches = "".join(p.read_text() for p in (tree["out"] / "overlays/dev/patches").glob("*"))
    assert "accounts" not in patches.split("nats.conf")[-1]


def test_an_external_brokers_token_and_creds_file_reach_every_client(
    write_graph: Callable[..., Path], tmp_path: Path
) -> None:
    body = (
        "broker: {profile: external, url: 'nats://n:4222', auth: {secret: nats-token, kind: token}}"
    )
    tree = _compile(write_graph, body, tmp_path)
    token = {
        "name": "VF_NATS_TOKEN",
        "valueFrom": {"secretKeyRef": {"name": "nats-token", "key": "token"}},
    }
    assert token in _worker_env(tree["out"])
    assert "--from-literal=token=VALUE" in tree["readme"]  # an external service's own value
    body = (
        "broker: {profile: external, url: 'nats://n:4222', auth: {secret: nats-creds, kind: creds}}"
    )
    tree = _compile(write_graph, body, tmp_path / "b")
    env = _worker_env(tree["out"])
    assert {"name": "VF_NATS_CREDS", "value": "/etc/vf/nats/nats.creds"} in env
    assert "--from-file=creds=PATH" in tree["readme"]
    assert "openssl" not in tree["readme"]


def test_explain_names_the_network_policy_condition_and_the_credentials(
    write_graph: Callable[..., Path],
) -> None:
    result = _run(write_graph, "broker: {profile: durable}\npayload_store: {auth: none}", "explain")
    assert result.exit_code == 2, result.output  # no store: its auth is refused
    result = _run(
        write_graph,
        "broker: {profile: durable}\npayload_store: {profile: dev, auth: none}",
        "explain",
    )
    assert result.exit_code == 0, result.output
    text = result.output
    assert "accepts the flow's pods only;" not in text
    assert "where the cluster's network plugin enforces NetworkPolicies" in text
    assert (
        "broker credentials: a user and a password from the Secret vf-creds-nats-auth (vf's "
        "default); its servers route to each other with the Secret vf-creds-nats-routes"
    ) in text
    assert "store credentials: none (vf.yaml: auth: none)" in text


def test_the_readme_creates_each_server_secret_with_a_random_password(
    compiled_examples: dict[str, CompileResult],
) -> None:
    items = missing_references(compiled_examples["batch_pipeline"].objects["prod"])
    routes = next(i for i in items if "`vf-batch-demo-nats-routes`" in i)
    assert (
        "`kubectl create secret generic vf-batch-demo-nats-routes -n pipelines "
        "--from-literal=user=vf-batch-demo-nats-routes "
        '--from-literal=password="$(openssl rand -hex 24)"`'
    ) in routes


def test_run_tree_makes_up_the_server_secrets_nobody_gave() -> None:
    plan = {
        "infra": {
            "broker_profile": "durable",
            "broker_auth": {"kind": "password", "declared": False, "secret": "b-auth",
                            "routes_secret": "b-routes"},
            "store_profile": "external",
            "store_auth": {"kind": "password", "declared": True, "secret": "theirs"},
        }
    }  # fmt: skip
    assert server_secrets(plan) == ["b-auth", "b-routes"]
    made = run_credentials(plan, given={"b-routes": {"user": "u", "password": "p"}})
    assert set(made) == {"b-auth"}
    assert made["b-auth"]["user"] == "b-auth"
    assert len(made["b-auth"]["password"]) == 48 and made["b-auth"]["password"].isalnum()
    again = run_credentials(plan, given={})
    assert again["b-auth"]["password"] != made["b-auth"]["password"]  # fresh every run
    off = {"infra": {"broker_profile": "dev", "broker_auth": {"kind": "none", "declared": True}}}
    assert run_credentials(off, given={}) == {}


def test_run_tree_plays_the_prerequisite_for_every_server_secret_the_pods_name(
    compiled_examples: dict[str, CompileResult],
) -> None:
    """The pods of a tree with the default credentials name Secrets nobody gave; what
    run-tree makes up for the plan covers each of them (and --secrets' values stay)."""
    from vf.ir.plan import plan_to_json
    from vf.runtree.podspec import missing_secrets

    result = compiled_examples["batch_pipeline"]
    plan = plan_to_json(next(p for p in result.plans if p.environment == "prod"))
    templates = [
        (o["metadata"]["name"], o["spec"]["template"]["spec"])
        for o in result.objects["prod"]
        if "template" in (o.get("spec") or {})
    ]
    refused = {p.what.split("'")[1] for p in missing_secrets(templates, {})}
    assert refused == {
        "vf-batch-demo-nats-auth",
        "vf-batch-demo-nats-routes",
        "vf-batch-demo-redis-auth",
    }
    given = {"vf-batch-demo-redis-auth": {"user": "mine", "password": "given"}}
    made = run_credentials(plan, given=given)
    assert set(made) == refused - set(given)
    assert missing_secrets(templates, {**made, **given}) == []
