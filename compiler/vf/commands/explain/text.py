"""A human summary of the plans: what will run where, and what vf warns about."""

from __future__ import annotations

from collections.abc import Mapping

from vf.emit import shards as sharding
from vf.emit.manifests import reads_manifests
from vf.emit.shards import argocd_shards, environment_shards, flux_shards, sharded
from vf.ir.delivery import GitOps
from vf.ir.gpu import GpuPlan
from vf.ir.plan import Plan, ServiceAuth, ServiceTls, StreamBytes
from vf.ir.records import Peer
from vf.ir.security import EgressRule
from vf.pipeline import CompileResult
from vf.plan.warmup import STARTUP_PERIOD_SECONDS, startup_failures


def explain(result: CompileResult) -> str:
    """Nodes, workload kinds, replicas, images, channels and warnings, per environment."""
    graph = result.graph
    lines = [f"flow {result.plans[0].flow_id} ({graph.flow_type}), {len(graph.nodes)} nodes"]
    lines.extend(_delivery_lines(result))
    for plan in result.plans:
        lines.append("")
        lines.append(
            f"environment {plan.environment}: namespace {plan.namespace}, "
            f"Kubernetes {plan.kubernetes_version}, run {plan.run_id} ({plan.run_id_source})"
        )
        for workload in plan.workloads:
            node = next(n for n in graph.nodes if n.name == workload.node)
            parents = ", ".join(node.parents) or "-"
            extra = f", partition_by {node.partition_by}" if node.partition_by else ""
            lines.append(
                f"  {workload.node}: {workload.node_kind} → {workload.kind} x{workload.replicas}"
                f", image {workload.image}, parents {parents}{extra}"
            )
        for channel in plan.channels:
            request = next(r for r in plan.admission.requests if r.channel == channel.node)
            lines.append(
                f"  channel {channel.node}: {channel.profile} ({request.source}), "
                f"stream {channel.stream}, {len(channel.readers)} reader(s)"
            )
        lines.extend(_admission_lines(plan))
        lines.extend(warmup_lines(plan))
        lines.extend(_gpu_lines(plan))
        lines.extend(security_lines(plan))
        for warning in plan.warnings:
            lines.append(f"  warning: {warning}")
    return "\n".join(lines) + "\n"


def _delivery_lines(result: CompileResult) -> list[str]:
    counts = {env: len(objects) for env, objects in result.objects.items()}
    gitops = result.targets.gitops
    shards = {env: len(s) for env, s in environment_shards(gitops, result.objects).items()}
    return delivery_lines(gitops, counts=counts, shards=shards)


def delivery_lines(
    gitops: GitOps | None, *, counts: Mapping[str, int], shards: Mapping[str, int] | None = None
) -> list[str]:
    """What Argo CD and Flux read, when vf.yaml has them: the overlays (a kustomize build),
    ``manifests/``, shards or the chart, given each environment's count of objects and,
    for those delivered in shards, of shards."""
    if gitops is None:
        return []
    lines = []
    if gitops.argocd is not None:
        whole = {e: n for e, n in counts.items() if not argocd_shards(gitops, count=n)}
        if whole or not counts:
            lines.append(_argocd_line(gitops, most=max(whole.values(), default=0)))
    if gitops.flux is not None and gitops.flux.helm_release:
        lines.append("Flux installs chart/ with a HelmRelease per environment (helm renders)")
    elif gitops.flux is not None:
        whole = {e: n for e, n in counts.items() if not flux_shards(gitops, count=n)}
        if whole or not counts:
            most = max(whole.values(), default=0)
            lines.append(f"Flux builds overlays/<env> with kustomize (at most {most} objects)")
    for env, count in sorted(counts.items()):
        if sharded(gitops, count=count):
            lines.append(_shards_line(gitops, env=env, count=count, shards=(shards or {}).get(env)))
    return lines


def _argocd_line(gitops: GitOps, *, most: int) -> str:
    if not reads_manifests(gitops):
        return f"Argo CD reads overlays/<env> (kustomize builds; at most {most} objects)"
    return (
        "Argo CD reads manifests/<env>, plain files without a kustomize build "
        "(gitops.argocd.source: manifests)"
    )


def _shards_line(gitops: GitOps, *, env: str, count: int, shards: int | None) -> str:
    who = [
        name
        for name, reads in (
            ("Argo CD", argocd_shards(gitops, count=count)),
            ("Flux", flux_shards(gitops, count=count)),
        )
        if reads
    ]
    many = f"{shards} shards" if shards is not None else "shards"
    return (
        f"{env}: {count} objects, over {sharding.SHARD_OVER}: {' and '.join(who)} read it in "
        f"{many} (shards/{env}/<nn>, an Application or Kustomization each, at most "
        f"{sharding.SHARD_MAX_OBJECTS} objects and {sharding.SHARD_MAX_BYTES // 1_000_000} MB "
        "each): one render "
        "of the whole overlay grows with the square of its objects and passes Argo CD's "
        "10 MB directory limit near 3,500 objects"
    )


def _admission_lines(plan: Plan) -> list[str]:
    infra = plan.infra
    broker = infra.broker_profile
    if broker == "durable":
        broker += f" ({infra.broker_replicas} servers, streams x{infra.stream_replicas})"
    lines = [f"  broker: {broker}; payload store: {infra.store_profile}"]
    lines += _stream_bytes_lines(infra.stream_bytes)
    admitted = sum(f.status == "admitted" for f in plan.admission.findings)
    lines.append(f"  admission: {admitted} channel(s) admitted")
    for finding in plan.admission.findings:
        if finding.status == "rejected":
            lines.append(f"  rejected: {finding.subject}: {finding.reason}")
    return lines


def _stream_bytes_lines(chosen: StreamBytes | None) -> list[str]:
    """Each BATCH stream's byte limit and where it comes from (ADR 0232)."""
    if chosen is None:
        return []
    mib = 1024 * 1024
    each = f"  stream bytes: each of {chosen.streams} BATCH stream(s) holds at most "
    each += f"{chosen.max_bytes // mib} MiB (VF_STREAM_MAX_BYTES)"
    if chosen.source == "vf.yaml":
        return [each + ", from broker.stream_max_bytes"]
    store = (chosen.max_file_store or 0) // mib
    return [
        each + f": the broker's max_file_store of {store} MiB in {chosen.shares} shares, "
        "one per stream for this generation and one for the superseded generation "
        "vf-provision caps before making its streams, and one for the dead-letter "
        "stream; a full stream holds back its own writers (VF_BROKER_FULL) and "
        "no other, a full dead-letter stream stops the replica it refuses (VF_DLQ_FULL)"
    ]


def has_rejections(result: CompileResult) -> bool:
    return any(plan.admission.rejections for plan in result.plans)


def _gpu_lines(plan: Plan) -> list[str]:
    gpu = plan.gpu
    if gpu is None:
        return []
    lines = [f"  gpu: mode {gpu.mode}; feasibility {gpu.feasibility}"]
    for grant in gpu.grants:
        what = f"{grant.count} x {grant.profile or gpu.resource_name}"
        if grant.claim_template:
            what = f"claim {grant.claim_template} ({grant.count} device(s))"
        hosts = f" on {', '.join(grant.hosts)}" if grant.hosts else ""
        lines.append(f"  gpu {grant.node}: {grant.kind}, {what} per pod{hosts}")
    for node in gpu.mig_nodes:
        layout = "; ".join(
            f"card {c.index}: " + (", ".join(f"{n}x{p}" for p, n in c.devices) or c.use)
            for c in node.cards
        )
        lines.append(f"  mig {node.host} ({node.family}): {layout}")
        lines.append(f"    label the node nvidia.com/mig.config={node.config_name}")
    lines.extend(f"  gpu note: {note}" for note in gpu.notes)
    lines.extend(_moment_lines(gpu))
    return lines


MOMENT_WORDS = {"planned": "planned", "autoscaled": "autoscaling maximum", "rollout": "rollout"}


def _moment_lines(gpu: GpuPlan) -> list[str]:
    """What each moment of the flow's life costs in GPUs, and what vf decided to fit it."""
    if not gpu.moments:
        return []
    parts = []
    for moment in gpu.moments:
        text = f"{MOMENT_WORDS[moment.name]} {moment.gpus} GPU(s)"
        if moment.slices:
            text += " (" + ", ".join(f"{n}x{p}" for p, n in moment.slices) + ")"
        if moment.surge:
            text += " with surge " + ", ".join(f"{w} +{n}" for w, n in moment.surge)
        parts.append(text)
    fits = gpu.moments[0].fits
    lines = [f"  gpu cost: {'; '.join(parts)} ({'fit proven' if fits == 'proven' else fits})"]
    lines.extend(_hours_lines(gpu))
    for decision in gpu.decisions or ():
        lines.append(f"  gpu decision {decision.node}: {decision.reason}")
    return lines


def _hours_lines(gpu: GpuPlan) -> list[str]:
    """GPU-hours a day at the plan and at the autoscaling maximum, held all day."""
    if not gpu.hours_per_day:
        return []
    parts = []
    for hours in gpu.hours_per_day:
        text = f"{MOMENT_WORDS[hours.moment]} {hours.gpu_hours}"
        if hours.slice_hours:
            text += " (" + ", ".join(f"{n} {p} slice-hours" for p, n in hours.slice_hours) + ")"
        parts.append(text)
    return [f"  gpu-hours a day: {'; '.join(parts)} (GPUs x 24)"]


def warmup_lines(plan: Plan) -> list[str]:
    """What each node's declared warm-up sets: its startup budget and its autoscaling pace."""
    scalers = {s.node: s for s in plan.autoscaling or ()}
    lines = []
    for workload in plan.workloads:
        warmup = workload.warmup_seconds
        if warmup is None:
            continue
        budget = STARTUP_PERIOD_SECONDS * startup_failures(warmup)
        text = f"  warm-up {workload.node}: {warmup} s; the startup probe allows {budget} s"
        scaler = scalers.get(workload.node)
        if scaler is not None and scaler.behavior is not None:
            b = scaler.behavior
            text += (
                f"; KEDA scales up on lag that lasted {b.scale_up_window} s, by at most "
                f"{b.scale_up_percent}% per {b.scale_up_period} s, and down after "
                f"{b.scale_down_window} s without it (cooldown {scaler.cooldown} s)"
            )
        lines.append(text)
    return lines


def _peer_text(peer: Peer) -> str:
    if peer.cidr is not None:
        return peer.cidr
    parts = [f"namespace {peer.namespace}"] if peer.namespace is not None else []
    if peer.pod_labels:
        parts.append("pods " + ",".join(f"{k}={v}" for k, v in peer.pod_labels))
    return " ".join(parts)


def _peers_text(peers: tuple[Peer, ...]) -> str:
    return " or ".join(_peer_text(p) for p in peers) if peers else "anywhere"


def _egress_text(rule: EgressRule) -> str:
    ports = ",".join(str(p) for p in rule.ports)
    return f"{rule.purpose}:{ports} to {_peers_text(rule.to)}"


def security_lines(plan: Plan) -> list[str]:
    """The pods' Pod Security level and what the NetworkPolicies let through."""
    sec = plan.security
    level = sec.pod_security_level
    if sec.host_path_nodes:
        level += f" (host paths: {', '.join(sec.host_path_nodes)})"
    labelled = "labelled by vf" if sec.namespace_labels else "not labelled by vf"
    lines = [
        f"  pod security: {level}; namespace {labelled}",
        "  network: ingress to the flow's pods denied; egress "
        + ", ".join(_egress_text(rule) for rule in sec.worker_egress),
    ]
    for policy in sec.infra_policies:
        readers = (
            f"monitoring port {policy.monitoring_port} open to "
            f"{_peers_text(policy.monitoring_from)} ({policy.monitoring_source})"
            if policy.monitoring_port is not None
            else "no monitoring readers"
        )
        lines.append(
            f"  {policy.name}: a NetworkPolicy admits the flow's pods only, where the "
            f"cluster's network plugin enforces NetworkPolicies; {readers}"
        )
    infra = plan.infra
    lines.append(f"  broker credentials: {auth_text(infra.broker_auth, 'broker')}")
    lines.append(f"  broker TLS: {tls_text(infra.broker_tls, infra.broker_profile)}")
    if infra.store_auth is not None:
        lines.append(f"  store credentials: {auth_text(infra.store_auth, 'store')}")
        lines.append(f"  store TLS: {tls_text(infra.store_tls, infra.store_profile)}")
    return lines


def tls_text(tls: ServiceTls | None, profile: str) -> str:
    """Whether the flow's connections to a broker or store speak TLS (ADR 0222)."""
    if tls is None:
        return "off: the flow's connections (and credentials) cross the network in the clear"
    if profile == "external":
        return f"on: the clients trust the CA in the Secret {tls.secret} (key ca.crt)"
    return f"on: the certificate and CA of the Secret {tls.secret}; the clients trust its CA"


_KINDS = {
    "password": "a user and a password",
    "token": "a token",
    "creds": "a .creds file",
}


def auth_text(auth: ServiceAuth, what: str) -> str:
    """Who may use the broker or store (ADR 0212), as ``vf explain`` and the README say it."""
    if auth.kind == "none" and auth.declared:
        return f"none (vf.yaml: auth: none): any pod that reaches the {what} may use it"
    if auth.kind == "none":
        return "none of vf's (an external service: its URL may carry them)"
    source = "vf.yaml's" if auth.declared else "vf's default"
    text = f"{_KINDS[auth.kind]} from the Secret {auth.secret} ({source})"
    if auth.routes_secret is not None:
        text += f"; its servers route to each other with the Secret {auth.routes_secret}"
    return text
