"""``vf run-local``: run a flow on this machine from the same plan the cluster gets.

One subprocess per replica, each with the environment its pod would get, against
an embedded ``nats-server -js`` and, where the plan has a payload store, ``redis-server``
(started here on free loopback ports unless URLs are given), supervised with the Jobs'
restart budget. The embedded servers admit only credentials made for the run (held in
memory and handed to the workers' environments; ADR 0213), over TLS with a CA made for the
run where the environment asks it (ADR 0230); servers given by URL get the environment's
(``VF_NATS_*``, ``VF_BLOB_REDIS_*``).
Everything it starts joins the process group of a guardian (vf_runtime.local.guardian), so a
SIGTERM, SIGHUP or Ctrl-C at any moment, or even a SIGKILL of vf, leaves no server, worker
or run directory behind.

Exit codes: 0 the flow finished with every item processed, 4 nodes were lost, 5 the flow
stalled, 6 the flow finished but dead-lettered items (the final lines name them per
node, with their first reasons, and where a copy is kept), 7 a BATCH flow was stopped
before its work was done, 130 interrupted (after a clean stop); environment problems are
errors with code 3 (also when the run's dead letters cannot be read back).
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import sys
import threading
from collections.abc import Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from vf.commands.run_local.components import local_commands
from vf.commands.run_local.gpus import read_host
from vf.commands.run_local.grants import gpu_requests, grant_local_gpus
from vf.commands.run_local.mounts import claims, local_paths, mounted_env
from vf.commands.run_local.notices import not_applied
from vf.commands.run_local.signals import (
    cancelled_by_signals,
    guarded,
    start_guardian,
    stop_asked,
    stop_if_asked,
    stopped_by_signals,
)
from vf.commands.run_local.store import starts_store, store_note
from vf.commands.run_local.tls import (
    LocalTls,
    launch_broker,
    launch_store,
    local_tls,
    tls_notes,
)
from vf.errors import EnvironmentProblem
from vf.ir.capabilities import Known
from vf.ir.graph import Graph
from vf.ir.plan import Plan
from vf.runtree.capacity import Demand, check_fit, demand
from vf.textio.folders import writable_folder
from vf_runtime.broker.client import BrokerError, announce_stop
from vf_runtime.broker.naming import RunNames
from vf_runtime.broker.provision import RunTopology, provision_run
from vf_runtime.broker.topology import NodeTopology
from vf_runtime.clientauth import NatsAuth, StoreAuth
from vf_runtime.credentials import NATS_CREDS_ENV, NATS_TLS_CA_ENV, NATS_TOKEN_ENV, STORE_TLS_CA_ENV
from vf_runtime.local.deadletters import DeadLetterReport
from vf_runtime.local.guardian import Guardian
from vf_runtime.local.infra import (
    LocalServer,
    MissingTool,
    describe_nats,
    free_port,
    nats_identity,
)
from vf_runtime.local.outcome import exit_code, replayed_producers, report_dead_letters, settled
from vf_runtime.local.scrape import TARGETS_FILE, ScrapeTargets
from vf_runtime.local.supervisor import (
    Outcome,
    ReplicaSpec,
    SuperviseOptions,
    SupervisionPolicy,
    Supervisor,
)
from vf_runtime.local.zygote import Zygote
from vf_runtime.redact import redact


@dataclass(frozen=True, kw_only=True)
class RunLocalRequest:
    """What to run and against which services (None: start embedded ones)."""

    graph: str
    config: str | None = None
    environment: str | None = None
    nats_url: str | None = None
    redis_url: str | None = None
    stall_seconds: float | None = 120.0
    extra_env: tuple[tuple[str, str], ...] = ()
    output: TextIO = field(default_factory=lambda: sys.stderr)  # the stream at the call
    gpu_policy: str = "shared"
    generation: str | None = None  # None: a fresh one (a caller that must know it names it)
    run_dir: Path | None = None  # keeps the claims and the dead letters (None: removed at the end)
    oversubscribe: bool = False  # start a run that cannot fit this machine (ADR 0190)
    live: bool = False  # a per-node table instead of the progress line (ADR 0233)


@dataclass(frozen=True, kw_only=True)
class _Launch:
    """How each replica starts: native components' local commands, GPU grants' variables;
    the TLS the run's own servers speak."""

    commands: Mapping[str, tuple[str, ...]]
    gpus: Mapping[tuple[str, int], Mapping[str, str]]
    tls: LocalTls


def _prepare(plan: Plan, graph: Graph, request: RunLocalRequest) -> _Launch:
    """Everything decided before any server or worker starts, so a refusal leaves nothing."""
    check_fit(
        plan_demand(plan),
        way_out=f"run fewer replicas (vf.yaml's replicas: of environment {plan.environment}) "
        "or a subset of the nodes (a graph of those alone), or deploy this environment to a "
        "cluster and run a smaller one here (--env NAME)",
        oversubscribe=request.oversubscribe,
        warn=request.output.write,
    )
    commands = local_commands(graph)
    requests = gpu_requests(plan, graph)
    grants = grant_local_gpus(
        requests, host=read_host() if requests else Known(()), policy=request.gpu_policy
    )
    for warning in grants.warnings:
        request.output.write(f"[vf] warning: {warning}\n")
    tls = local_tls(plan, nats_url=request.nats_url, redis_url=request.redis_url)
    return _Launch(commands=commands, gpus=grants.env, tls=tls)


def _plan(request: RunLocalRequest) -> tuple[Plan, Graph]:
    from vf.pipeline import CompileRequest, compile_project  # while the zygote imports

    env = request.environment or default_environment(request)
    result = compile_project(
        CompileRequest(
            graph=request.graph, config=request.config, environments=(env,), images_optional=True
        )
    )
    return result.plans[0], result.graph


def default_environment(request: RunLocalRequest) -> str:
    """The environment a run without ``--env`` takes: the first vf.yaml lists (said on the
    output, with the way to run another); ``default`` without a vf.yaml."""
    from vf.config.targets import find_config, load_targets
    from vf.frontend.load import split_target

    targets = load_targets(find_config(split_target(request.graph)[0], request.config))
    first = targets.declared[0]
    where = f"the first in {targets.source}" if targets.source else "no vf.yaml"
    others = [name for name in targets.declared if name != first]
    choice = f"; --env {others[0]} runs another" if others else ""
    request.output.write(f"[vf] environment {first} ({where}{choice})\n")
    return first


def plan_demand(plan: Plan) -> Demand:
    """One worker process per replica, with its workload's requests and limits."""
    return demand(
        (
            w.replicas,
            {
                "requests": {"cpu": w.resources.cpu, "memory": w.resources.memory},
                "limits": {"memory": w.resources.memory_limit},
            },
        )
        for w in plan.workloads
    )


def fresh_generation() -> str:
    """A generation of its own for one local run: ``l`` and 8 random hex digits.

    Every invocation gets a fresh one, so running a flow twice against one long-lived
    broker and store processes everything twice and neither run reads the other's
    streams, markers or stops (docs/PROTOCOL.md GEN-5).
    """
    return "l" + secrets.token_hex(4)


def provision_topology(plan: Plan, generation: str = "") -> RunTopology:
    """What ``vf-provision`` creates for ``plan``'s run: read from its topology shards."""
    nodes = tuple(
        NodeTopology.from_json(json.loads(line))
        for shard in plan.provision.topology_shards
        for line in shard.splitlines()
        if line.strip()
    )
    return RunTopology(
        flow_id=plan.flow_id,
        run_id=plan.run_id,
        flow_type=plan.flow_type,
        nodes=nodes,
        ack_wait=float(os.environ.get("VF_ACK_WAIT_SECONDS", "60")),
        generation=generation,
    )


def _replicas(
    plan: Plan,
    *,
    urls: dict[str, str],
    request: RunLocalRequest,
    launch: _Launch,
    generation: str,
    run_dir: Path,
) -> list[ReplicaSpec]:
    """One process per replica; a native component runs its local command instead of
    ``vf-worker``; a GPU replica gets its local grant instead of the cluster's count;
    mounted paths are the run directory's claim folders (vf.commands.run_local.mounts)."""
    specs = []
    for workload in plan.workloads:
        paths = local_paths(workload, run_dir=run_dir, namespace=plan.namespace)
        own = mounted_env(dict(workload.env), paths)
        for replica in range(workload.replicas):
            port = free_port()
            env = {
                **own,
                **urls,
                "VF_GENERATION": generation,
                "VF_REPLICA_ID": str(replica),
                "VF_HEALTH_PORT": str(port),
                **_common_env(request),
            }
            grant = launch.gpus.get((workload.node, replica))
            if grant is not None:
                env.pop("VF_GPU_COUNT", None)  # the cluster's count; the grant says what is here
                env.update(grant)
            native = launch.commands.get(workload.node)
            specs.append(
                ReplicaSpec(node=workload.node, replica=replica, env=env, health_port=port)
                if native is None
                else ReplicaSpec(
                    node=workload.node, replica=replica, env=env, health_port=port, command=native
                )
            )
    return specs


def _common_env(request: RunLocalRequest) -> dict[str, str]:
    """What every replica's environment adds to vf's, besides its workload's and the
    services': the graph's folder on the import path, unbuffered output, the exit with vf."""
    graph_dir = str(Path(request.graph.split(":")[0]).resolve().parent)
    path = os.pathsep.join(filter(None, [graph_dir, os.environ.get("PYTHONPATH", "")]))
    return {
        "PYTHONPATH": path,
        "PYTHONUNBUFFERED": "1",
        "VF_EXIT_WITH_PARENT": "1",
        **dict(request.extra_env),
    }


@dataclass(frozen=True)
class _Services:
    """What the run's clients use: the workers' variables, and vf's own broker client's."""

    env: dict[str, str] = field(repr=False)
    nats_url: str
    nats_auth: NatsAuth | None  # None: the environment's (a broker given by URL)


def run_credentials(flow_id: str) -> tuple[NatsAuth, StoreAuth]:
    """Fresh random credentials for one run's embedded broker and store (never written
    anywhere but the servers' private configuration, the store's as a digest)."""
    user = f"vf-{flow_id}"
    return (
        NatsAuth(user=user, password=secrets.token_hex(24)),
        StoreAuth(user=user, password=secrets.token_hex(24)),
    )


def _start_services(
    plan: Plan, launch: _Launch, *, request: RunLocalRequest, stack: ExitStack, guardian: Guardian
) -> _Services:
    """The embedded servers the run needs, started together and then waited on, each
    admitting only the run's own credentials, over TLS where the environment asks it."""
    out = request.output
    urls: dict[str, str] = {}
    started: list[LocalServer] = []
    workdir, group = guardian.directory, guardian.group
    nats, store = run_credentials(plan.flow_id)
    tls = launch.tls.made(workdir / "tls")  # the run's folder: removed with it
    try:
        if request.nats_url is None:
            server, nats = launch_broker(workdir / "nats", group=group, auth=nats, tls=tls)
            started.append(server)
            # the run's user and CA only: another in vf's environment is not for this broker
            urls.update({NATS_TLS_CA_ENV: "", **nats.env(), NATS_TOKEN_ENV: "", NATS_CREDS_ENV: ""})
        if starts_store(plan, request.redis_url):
            server, store = launch_store(
                workdir / "redis", group=group, auth=store, flow_id=plan.flow_id, tls=tls
            )
            started.append(server)
            urls.update({STORE_TLS_CA_ENV: "", **store.env()})  # the run's CA, or none
        for server in started:
            server.ready()
    except (MissingTool, RuntimeError) as exc:
        for server in started:
            server.stop()
        raise EnvironmentProblem(
            "VF_LOCAL_INFRA", f"cannot start a local server: {exc}", str(exc)
        ) from exc
    for server in started:
        stack.callback(server.stop)
        binary = f" ({server.binary.describe()})" if server.binary else ""
        out.write(f"[vf] started {server.name} at {server.url}{binary}\n")
    by_name = {s.name: s.url for s in started}
    urls["VF_NATS_URL"] = request.nats_url or by_name["nats-server"]
    if request.nats_url is not None:  # not vf's server: say whose answered
        answered = describe_nats(nats_identity(request.nats_url))
        out.write(f"[vf] using the broker at {redact(request.nats_url)}: {answered}\n")
    redis = request.redis_url or by_name.get("redis-server")
    if redis is not None:
        urls["VF_BLOB_REDIS_URL"] = redis
    note = store_note(plan, redis_url=request.redis_url)
    if note is not None:
        out.write(note)
    out.write(tls_notes(plan, nats_url=request.nats_url, redis_url=request.redis_url, tls=tls))
    own = None if request.nats_url is not None else nats
    return _Services(env=urls, nats_url=urls["VF_NATS_URL"], nats_auth=own)


def _policy(plan: Plan) -> SupervisionPolicy:
    """The plan's restart budget (the Jobs' backoff limit) with its local backoff."""
    supervision = getattr(plan, "supervision", None)
    if supervision is None:
        return SupervisionPolicy()
    return SupervisionPolicy(
        max_restarts=int(supervision.max_restarts),
        backoff=tuple(float(s) for s in supervision.local_backoff_seconds),
    )


def run_local(request: RunLocalRequest) -> int:
    """Compile, start services, provision, run every replica; return the exit code."""
    out = request.output
    generation = request.generation or fresh_generation()
    with stopped_by_signals(), ExitStack() as stack:
        guardian = start_guardian()  # first: whatever starts next dies with this run
        stack.callback(guardian.close)
        # it imports the worker while vf compiles, then forks each replica (ADR 0132)
        zygote = Zygote.start({**os.environ, **_common_env(request)}, group=guardian.group)
        stack.callback(zygote.close)
        plan, graph = _plan(request)  # forks the graph loader: vf still has one thread
        zygote.listen()  # vf's first thread (ADR 0170)
        launch = _prepare(plan, graph, request)  # before any server starts: refuse what cannot run
        kept = _kept_run_dir(request)  # made and tried before anything is written, claims or not
        guarded(guardian)
        run_dir = kept or guardian.directory
        stop_if_asked()
        services = _start_services(plan, launch, request=request, stack=stack, guardian=guardian)
        stop_if_asked()
        nats_url, auth = services.nats_url, services.nats_auth
        try:
            _provision(nats_url, provision_topology(plan, generation), auth)
        except BrokerError as exc:
            raise EnvironmentProblem(
                exc.code, str(exc), exc.fix or "start nats-server with -js, or pass --nats URL"
            ) from exc
        replicas = _replicas(
            plan,
            urls=services.env,
            request=request,
            launch=launch,
            generation=generation,
            run_dir=run_dir,
        )
        for node, path, folder in claims(plan, run_dir):
            out.write(f"[vf] {node}: {path} is the claim folder {folder}\n")
        out.write(
            f"[vf] running flow {plan.flow_id} run {plan.run_id} generation {generation} "
            f"({plan.flow_type}, environment {plan.environment}): "
            f"{len(replicas)} worker process(es)\n"
        )
        out.write(not_applied(plan))
        names = RunNames(plan.flow_id, plan.run_id, generation)
        options = SuperviseOptions(
            announce_stop=lambda: announce_stop(nats_url, names, auth=auth),
            policy=_policy(plan),
            stall_seconds=request.stall_seconds,
            output=out,
            group=guardian.group,
            zygote=zygote,
            interrupted=stop_asked,
            targets=_scrape_targets(plan, run_dir, out),
            live=request.live,
        )
        outcome = Supervisor(replicas, options).run()
        letters = _dead_letters(nats_url, names, plan=plan, request=request, auth=auth)
        _claims_go(plan, run_dir, request)
    return _finish(outcome, letters, unreplayable=plan.unreplayable_producers or (), out=out)


def _claims_go(plan: Plan, run_dir: Path, request: RunLocalRequest) -> None:
    """Say that the claim folders go with the run, where it has some and keeps no folder."""
    if claims(plan, run_dir) and request.run_dir is None:
        request.output.write(
            "[vf] the claim folders are removed with the run: pass --run-dir to keep them\n"
        )


def _scrape_targets(plan: Plan, run_dir: Path, out: TextIO) -> ScrapeTargets:
    """The run's Prometheus file_sd file, its path said once (docs/observability.md)."""
    targets = ScrapeTargets(path=run_dir / TARGETS_FILE, labels={"namespace": plan.namespace})
    out.write(f"[vf] the workers' /metrics, for Prometheus' file_sd_configs: {targets.path}\n")
    return targets


def _kept_run_dir(request: RunLocalRequest) -> Path | None:
    """``--run-dir``, made with its parents and shown writable; None without one."""
    if request.run_dir is None:
        return None
    return writable_folder(
        request.run_dir, what="the run directory", other="pass another --run-dir"
    )


def _provision(nats_url: str, topology: RunTopology, auth: NatsAuth | None = None) -> None:
    """Provision the run's streams and durables. A stop signal meanwhile cancels the
    provisioning at an ``await``: a KeyboardInterrupt raised at any instruction of the
    event loop could leave the NATS client's tasks running, and the run waited on them for
    minutes before it stopped. One that lands as provisioning ends stops the run after."""

    async def provisioned() -> None:
        task = asyncio.current_task()
        if task is None or threading.current_thread() is not threading.main_thread():
            await provision_run(nats_url, topology, prune=False, timeout=15, auth=auth)
            return
        with cancelled_by_signals(task):
            await provision_run(nats_url, topology, prune=False, timeout=15, auth=auth)

    try:
        asyncio.run(provisioned())
    except asyncio.CancelledError:
        if not stop_asked():
            raise
        raise KeyboardInterrupt from None
    stop_if_asked()


def _dead_letters(
    url: str,
    names: RunNames,
    *,
    plan: Plan,
    request: RunLocalRequest,
    auth: NatsAuth | None = None,
) -> DeadLetterReport | None:
    """This generation's dead letters, reported by node and copied to a file that
    outlives an embedded broker; None when they could not be read."""
    kept = "on the broker at " + url if request.nats_url else "gone with the embedded broker"
    nodes = tuple(w.node for w in plan.workloads)
    keep = request.run_dir.resolve() if request.run_dir else None
    out = request.output
    return report_dead_letters(url, names, nodes, out=out, kept=kept, copy_dir=keep, auth=auth)


def _finish(
    outcome: Outcome,
    letters: DeadLetterReport | None,
    *,
    unreplayable: tuple[str, ...],
    out: TextIO,
) -> int:
    """The final line and the exit code: success only when nothing was lost or set aside,
    and no producer of ``unreplayable`` restarted."""
    replayed = replayed_producers(unreplayable, outcome.by_node, out=out)
    status = settled(outcome.status, letters, replayed=replayed)
    code = exit_code(status)
    summary = {
        "ok": "flow finished",
        "unverified": "flow finished, but its dead letters could not be read",
        "dead-lettered": f"flow finished with {letters.total if letters else 0} item(s) "
        "dead-lettered",
        "lost": f"flow lost node(s): {', '.join(outcome.lost)}",
        "stalled": "flow stalled: no progress",
        "stopped": f"flow stopped before its work was done: {', '.join(outcome.lost)}",
        "aborted": f"flow aborted: {', '.join(outcome.lost)} ended on an abort from upstream "
        "(VF_UPSTREAM_ABORTED, its reason among the dead letters)",
        "interrupted": "interrupted; workers stopped",
        "replayed": f"flow finished, but {', '.join(replayed)} restarted and re-emitted items "
        "(VF_PRODUCER_NOT_REPLAYABLE)",
    }[status]
    out.write(f"[vf] {summary} (restarts: {outcome.restarts}, exit {code})\n")
    return code
