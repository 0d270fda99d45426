"""TLS on the broker and store connections (ADR 0222): vf.yaml's ``tls:``, the plan's
record, the servers' configuration and mounts, what every client of the flow is given, what
``vf explain`` and the README say. The servers themselves are proven in
tests/compiler/runtree/test_tls_servers.py."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.graph_sources import NODES
from tests.support import one_environment
from vf.cli import cli
from vf.pipeline import CompileRequest, CompileResult, compile_project

GRAPH = (
    NODES
    + """

def build_flow():
    src = Src(name="src")
    work = Work(name="work")(src)
    return Flow([Sink(name="sink")(work)], flow_type=BATCH, flow_id="tlsf")
"""
)
TLS = "broker: {profile: durable, tls: {secret: nats-tls}}\n" + (
    "payload_store: {profile: dev, tls: {secret: redis-tls}}"
)
Obj = dict[str, Any]


def _run(write_graph: Callable[..., Path], body: str, command: str = "validate") -> Any:
    path = write_graph(GRAPH, one_environment(body))
    return CliRunner().invoke(cli, [command, str(path)])


def compile_tls(write_graph: Callable[..., Path], body: str = TLS) -> CompileResult:
    """The test flow compiled with ``body`` as its one environment's broker and store."""
    return compile_project(CompileRequest(graph=str(write_graph(GRAPH, one_environment(body)))))


def _objects(result: CompileResult, kind: str, infra: str | None = None) -> list[Obj]:
    return [
        o
        for o in result.objects["dev"]
        if o["kind"] == kind
        and (infra is None or o["metadata"].get("labels", {}).get("vf.dev/infra") == infra)
    ]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("broker: {tls: nats-tls}", "is not of type 'object'"),
        ("broker: {tls: {}}", "'secret' is a required property"),
        ("broker: {tls: {secret: Not_A_Name}}", "environments.dev.broker.tls.secret"),
        ("payload_store: {profile: dev, tls: {secret: s, ca: x}}", "Additional properties"),
        ("payload_store: {tls: {secret: s}}", "no store runs with profile none"),
        ("payload_store: {profile: external, url: 'redis://r:6379/0', tls: {secret: s}}",
         "the url's scheme is not rediss://"),
    ],
)  # fmt: skip
def test_a_tls_that_cannot_work_is_refused_by_name(
    body: str, message: str, write_graph: Callable[..., Path]
) -> None:
    result = _run(write_graph, body)
    assert result.exit_code == 2, result.output
    assert "error[VF_CONFIG_TLS]" in result.output
    assert message in result.output


def test_tls_is_off_unless_vf_yaml_asks_it(write_graph: Callable[..., Path]) -> None:
    result = compile_tls(write_graph, "broker: {profile: durable}\npayload_store: {profile: dev}")
    infra = result.plans[0].infra
    assert (infra.broker_tls, infra.store_tls) == (None, None)
    assert infra.nats_url == "nats://vf-tlsf-nats:4222"
    assert infra.store_url == "redis://vf-tlsf-redis:6379/0"
    conf = _objects(result, "ConfigMap", "nats")[0]["data"]["nats.conf"]
    assert "tls" not in conf
    assert "VF_NATS_TLS_CA" not in str(result.objects["dev"])


def test_the_broker_speaks_tls_to_clients_and_routes(write_graph: Callable[..., Path]) -> None:
    result = compile_tls(write_graph)
    infra = result.plans[0].infra
    assert infra.broker_tls is not None and infra.broker_tls.secret == "nats-tls"
    assert infra.nats_url == "tls://vf-tlsf-nats:4222"
    conf = _objects(result, "ConfigMap", "nats")[0]["data"]["nats.conf"]
    block = 'tls {\n  cert_file: "/etc/nats-tls/tls.crt"\n'
    assert conf.startswith("port: 4222") and block in conf
    cluster = conf[conf.index("cluster {") :]
    assert '  tls {\n    cert_file: "/etc/nats-tls/tls.crt"' in cluster
    assert 'ca_file: "/etc/nats-tls/ca.crt"' in cluster
    pod = _objects(result, "StatefulSet", "nats")[0]["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v["name"] == "tls")
    assert volume["secret"]["secretName"] == "nats-tls"
    assert {"name": "tls", "mountPath": "/etc/nats-tls", "readOnly": True} in pod["containers"][0][
        "volumeMounts"
    ]
    # the probes read the monitoring port, which stays plain HTTP
    assert pod["containers"][0]["readinessProbe"]["httpGet"]["port"] == "monitor"


def test_the_store_speaks_tls_alone_and_asks_no_client_certificate(
    write_graph: Callable[..., Path],
) -> None:
    result = compile_tls(write_graph)
    assert result.plans[0].infra.store_url == "rediss://vf-tlsf-redis:6379/0"
    pod = _objects(result, "Deployment", "redis")[0]["spec"]["template"]["spec"]
    args = [str(a) for a in pod["containers"][0]["args"]]
    at = args.index("--tls-port")
    assert args[at - 2 : at + 2] == ["--port", "0", "--tls-port", "6379"]
    assert args[args.index("--tls-auth-clients") + 1] == "no"
    assert args.index("--tls-port") < args.index("--user")  # the users end the arguments
    assert pod["containers"][0]["readinessProbe"] == {
        "tcpSocket": {"port": "redis"},
        "periodSeconds": 5,
    }
    assert any(v.get("secret", {}).get("secretName") == "redis-tls" for v in pod["volumes"])


def test_every_client_trusts_the_ca_and_never_sees_the_key(
    write_graph: Callable[..., Path],
) -> None:
    result = compile_tls(write_graph)
    jobs = _objects(result, "Job")
    assert len(jobs) >= 2  # the provision Job and the workers
    for job in jobs:
        pod = job["spec"]["template"]["spec"]
        container = pod["containers"][0]
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["VF_NATS_TLS_CA"] == "/etc/vf/tls/nats/ca.crt"
        assert env["VF_BLOB_REDIS_TLS_CA"] == "/etc/vf/tls/redis/ca.crt"
        secrets = {v["secret"]["secretName"]: v["secret"] for v in pod["volumes"] if "secret" in v}
        for name in ("nats-tls", "redis-tls"):
            assert secrets[name]["items"] == [{"key": "ca.crt", "path": "ca.crt"}]
        mounts = {m["mountPath"] for m in container["volumeMounts"]}
        assert {"/etc/vf/tls/nats", "/etc/vf/tls/redis"} <= mounts


def test_an_external_services_tls_secret_is_the_ca_its_clients_trust(
    write_graph: Callable[..., Path],
) -> None:
    body = (
        "broker: {profile: external, url: 'nats://n.example:4222', tls: {secret: their-ca}}\n"
        "payload_store: {profile: external, url: 'rediss://r.example:6379/0', "
        "tls: {secret: store-ca}}"
    )
    result = compile_tls(write_graph, body)
    infra = result.plans[0].infra
    assert infra.nats_url == "nats://n.example:4222"  # the client upgrades, and insists
    assert infra.store_url == "rediss://r.example:6379/0"
    worker = next(j for j in _objects(result, "Job") if "provision" not in j["metadata"]["name"])
    names = {v["secret"]["secretName"] for v in worker["spec"]["template"]["spec"]["volumes"]
             if "secret" in v}  # fmt: skip
    assert {"their-ca", "store-ca"} <= names


def test_explain_names_tls_on_and_off_per_component(write_graph: Callable[..., Path]) -> None:
    result = _run(write_graph, TLS, "explain")
    assert result.exit_code == 0, result.output
    assert "broker TLS: on: the certificate and CA of the Secret nats-tls" in result.output
    assert "store TLS: on: the certificate and CA of the Secret redis-tls" in result.output
    result = _run(write_graph, "payload_store: {profile: dev}", "explain")
    assert "broker TLS: off: the flow's connections" in result.output
    assert "store TLS: off" in result.output


def test_the_readme_shows_the_certificate_each_secret_needs(
    write_graph: Callable[..., Path], tmp_path: Path
) -> None:
    path = write_graph(GRAPH, one_environment(TLS))
    out = tmp_path / "tree"
    done = CliRunner().invoke(cli, ["compile", str(path), "--out", str(out)])
    assert done.exit_code == 0, done.output
    readme = (out / "README.md").read_text()
    assert "| durable, auth: vf-tlsf-nats-auth, tls: nats-tls |" in readme
    assert "kind: Certificate" in readme and "secretName: nats-tls" in readme
    assert '  - "*.vf-tlsf-nats-headless.ns.svc"' in readme
    assert '  - "vf-tlsf-redis.ns.svc"' in readme
    assert "usages: [server auth, client auth" in readme
    assert (
        "a cert-manager Certificate can write it, see TLS above), which the tree does not "
        "contain: `kubectl create secret generic nats-tls -n ns --from-file=ca.crt "
        "--from-file=tls.crt --from-file=tls.key`"
    ) in readme
    assert "openssl x509 -req -in tls.csr" in readme


def test_a_ca_the_client_cannot_read_is_named_before_anything_connects(tmp_path: Path) -> None:
    from vf_runtime.clientauth import CredentialsError, nats_auth, store_auth

    bogus = tmp_path / "ca.crt"
    bogus.write_text("not a certificate\n")
    with pytest.raises(CredentialsError) as broker:
        nats_auth({"VF_NATS_TLS_CA": str(bogus)})
    assert broker.value.code == "VF_BROKER_CREDENTIALS"
    with pytest.raises(CredentialsError) as store:
        store_auth({"VF_BLOB_REDIS_TLS_CA": str(tmp_path / "missing.crt")})
    assert store.value.code == "VF_STORE_CREDENTIALS"
    assert "VF_BLOB_REDIS_TLS_CA" in str(store.value)


def test_the_store_client_passes_the_ca_for_rediss_only() -> None:
    from vf_runtime.clientauth import StoreAuth

    auth = StoreAuth(user="u", password="p", ca="/etc/vf/tls/redis/ca.crt")
    assert auth.options("rediss://s:6379/0")["ssl_ca_certs"] == "/etc/vf/tls/redis/ca.crt"
    assert "ssl_ca_certs" not in auth.options("redis://s:6379/0")
    assert auth.env()["VF_BLOB_REDIS_TLS_CA"] == "/etc/vf/tls/redis/ca.crt"
