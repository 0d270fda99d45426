"""What a run of the tree did, read as ``vf run-local`` reads a run: the Jobs' and
workloads' status, the workers' own counters, and the flow's dead letters on the tree's
broker. The exit code comes from ``vf_runtime.local.outcome``, which both runners share.
"""

from __future__ import annotations

import http.client
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from vf.runtree.controllers import JobController
from vf.runtree.pods import Container, Pod
from vf.textio.objects import Obj
from vf_runtime.broker.naming import RunNames
from vf_runtime.clientauth import NatsAuth, nats_auth
from vf_runtime.credentials import NATS_CREDS_ENV, NATS_TLS_CA_ENV
from vf_runtime.labels import FLOW_LABEL, NODE_LABEL
from vf_runtime.local.deadletters import DeadLetterReport
from vf_runtime.local.outcome import report_dead_letters
from vf_runtime.worker.exits import EXIT_ABORTED as WORKER_ABORTED
from vf_runtime.worker.exits import EXIT_STOPPED as WORKER_STOPPED
from vf_runtime.worker.health import summary_counts

if TYPE_CHECKING:
    from vf.runtree.cluster import Cluster

SHOWN = ("received", "processed", "published", "redelivered")
# restarts of one long-running workload's pods beyond which it is crash-looping: a worker
# may restart once or twice while the broker it reaches is still starting
CRASH_RESTARTS = 2  # the counters the summary prints, beside the dead letters
_METRIC = re.compile(
    r'^vf_messages_(\w+)_total\{(?:[^"}]|"(?:[^"\\]|\\.)*")*\} (\d+)$', re.MULTILINE
)


@dataclass(frozen=True, kw_only=True)
class RunStatus:
    """How the workloads ended, in the words of ``vf run-local``'s outcome: ok, lost
    (a Job failed, or a long-running workload crash-loops), stopped (its failures began
    with a stop of the flow), aborted (they began with an abort from upstream, EOS-5), or
    stalled (not done in time); ``lost`` names the Jobs that failed, or the crash-looping
    workloads with their ready pods and restarts."""

    status: str
    lost: tuple[str, ...] = ()


def run_status(cluster: Cluster, *, done: bool) -> RunStatus:
    """The status the workloads leave. A failed Job whose first failed pod's worker ended
    with the worker's stopped code was stopped: ``vf run-local`` reads a stopped replica
    so, and the Job's later pods fail only because that life had ended the generation
    (``VF_GENERATION_FINISHED``). One whose first failed pod ended with the worker's aborted
    code ended on an abort from upstream (EOS-5). Any other failed Job is a lost node, and
    so is a crash-looping Deployment or StatefulSet (:func:`crash_looping`), as
    ``vf run-local`` reads a replica whose restarts ran out."""
    jobs = [c for c in cluster.controllers.values() if isinstance(c, JobController)]
    failed = sorted((j for j in jobs if j.status == "Failed"), key=lambda j: j.name)
    if not failed:
        looping = crash_looping(cluster, done=done)
        if looping:
            return RunStatus(status="lost", lost=looping)
        return RunStatus(status="ok" if done else "stalled")
    names = tuple(j.name for j in failed)
    firsts = {_first_failure(job) for job in failed}
    if firsts == {WORKER_STOPPED}:
        return RunStatus(status="stopped", lost=names)
    if firsts <= {WORKER_STOPPED, WORKER_ABORTED}:  # the Jobs an abort reached, and stops
        aborted = tuple(j.name for j in failed if _first_failure(j) == WORKER_ABORTED)
        return RunStatus(status="aborted", lost=aborted)
    return RunStatus(status="lost", lost=names)


def crash_looping(cluster: Cluster, *, done: bool) -> tuple[str, ...]:
    """The long-running workloads (Deployments, StatefulSets) that are not running at the
    end, each with its ready pods and restarts: those whose pods restarted more than
    ``CRASH_RESTARTS`` times, and, once every workload had been ready (``done``), those
    not ready any more because a container of theirs ended. A pod that crashes after it
    became ready restarts for ever and never fails the way a Job does, so its controller
    alone never says so; a pod whose processes all run but whose probe has not passed yet
    (a slow answer on a loaded machine, a pod of a rollout still starting) is not one."""
    found = []
    for (kind, _ns, name), controller in sorted(cluster.controllers.items()):
        if isinstance(controller, JobController):
            continue
        restarts = sum(p.restarts for p in controller.pods)
        ended = any(_ended(p) for p in controller.pods)
        if restarts > CRASH_RESTARTS or (done and ended and not controller.healthy()):
            ready = sum(p.ready for p in controller.pods)
            found.append(
                f"{kind.lower()}/{name} crash-looping ({ready}/{controller.replicas} ready, "
                f"{restarts} restarts)"
            )
    return tuple(found)


def _ended(pod: Pod) -> bool:
    """Whether a container of ``pod`` ended in one of its lives: it restarted, or it is down."""
    return pod.restarts > 0 or any(c.exit_code is not None for c in pod.containers)


def restarts_by_node(cluster: Cluster) -> dict[str, int]:
    """Per node, the lives of its workers that ended and were followed by another: a Job's
    failures (its pods that failed and its containers restarted in place, as counted
    toward ``backoffLimit``), and the container restarts of any other workload."""
    found: dict[str, int] = {}
    for controller in cluster.controllers.values():
        nodes = {p.labels.get(NODE_LABEL) for p in controller.pods}
        nodes.discard(None)
        if len(nodes) != 1:
            continue
        node = str(nodes.pop())
        if isinstance(controller, JobController):
            lives = controller.failures
        else:
            lives = sum(p.restarts for p in controller.pods)
        found[node] = found.get(node, 0) + lives
    return found


def _first_failure(job: JobController) -> int | None:
    """The worker's exit code in the Job's first failed pod, when it is one code."""
    pods = sorted((p for p in job.pods if p.phase == "Failed"), key=lambda p: p.created)
    codes = {c.exit_code for c in pods[0].containers if c.exit_code} if pods else set()
    return codes.pop() if len(codes) == 1 else None


def _worker_containers(cluster: Cluster) -> Iterator[tuple[str, Container]]:
    for pod in cluster.pods():
        node = pod.labels.get(NODE_LABEL)
        if node is not None:
            for container in pod.containers:
                yield node, container


def run_names(cluster: Cluster, plan: Obj) -> tuple[str, RunNames] | None:
    """The broker URL the flow's workers were given (translated to this machine) and the
    names of their run; None when no worker pod was made."""
    for _node, container in _worker_containers(cluster):
        env = container.launch.env
        if env.get("VF_NATS_URL"):
            names = RunNames(
                str(plan["flow_id"]), str(plan["run_id"]), env.get("VF_GENERATION", "")
            )
            return env["VF_NATS_URL"], names
    return None


def dead_letters(
    cluster: Cluster, plan: Obj, *, out: TextIO, copy_dir: Path | None
) -> DeadLetterReport | None:
    """The flow's dead letters on the tree's broker, reported as ``vf run-local`` does."""
    found = run_names(cluster, plan)
    if found is None:
        return DeadLetterReport(nodes=())  # no worker ran: nothing could be set aside
    url, names = found
    nodes = tuple(str(w["node"]) for w in plan.get("workloads") or [])
    external = bool((plan.get("infra") or {}).get("nats_url_secret"))
    kept = f"on the broker at {url}" if external else "gone with the tree's broker"
    auth = worker_auth(cluster)  # read as the workers connect: with their credentials
    return report_dead_letters(url, names, nodes, out=out, kept=kept, copy_dir=copy_dir, auth=auth)


def worker_auth(cluster: Cluster, flow: str | None = None) -> NatsAuth | None:
    """The broker credentials the workers (of ``flow``, when named) were given (ADR 0212),
    as an operator's shell holds them for ``vf`` commands; None when no worker ran."""
    for pod in cluster.pods():
        if pod.labels.get(NODE_LABEL) is None:
            continue
        if flow is None or pod.labels.get(FLOW_LABEL) == flow:
            launch = pod.containers[0].launch
            env = dict(launch.env)
            if launch.oci is not None:  # a container's files, where this machine reads them
                for key in (NATS_TLS_CA_ENV, NATS_CREDS_ENV):
                    if env.get(key):
                        env[key] = launch.oci.host_path(env[key])
            return nats_auth(env)
    return None


def _scrape(container: Container) -> dict[str, int]:
    port = container.launch.ports.get("health")
    if port is None or not container.running:
        return {}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
    except (OSError, http.client.HTTPException):
        return {}
    finally:
        conn.close()
    return {name: int(value) for name, value in _METRIC.findall(text)}


def _ended_lives(container: Container) -> dict[str, int]:
    """The counters of the container's lives that ended: each writes a summary line."""
    try:
        text = container.log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    counts: dict[str, int] = {}
    for line in text.splitlines():
        for name, value in (summary_counts(line) or {}).items():
            counts[name] = counts.get(name, 0) + value
    return counts


def node_counts(cluster: Cluster) -> dict[str, dict[str, int]]:
    """What each node's workers received and processed, over every life of every pod:
    the summary line a worker writes when it ends, and ``/metrics`` of a running one."""
    totals: dict[str, dict[str, int]] = {}
    for node, container in _worker_containers(cluster):
        into = totals.setdefault(node, dict.fromkeys(SHOWN, 0))
        for counts in (_ended_lives(container), _scrape(container)):
            for name in SHOWN:
                into[name] += counts.get(name, 0)
    return totals


def summary_lines(counts: dict[str, dict[str, int]], letters: DeadLetterReport | None) -> list[str]:
    """One line per node: processed (first, as earlier versions printed it), received,
    dead-lettered (``?`` when the dead letters could not be read), then what it published
    and how many of its inputs came again: a failed attempt's work counts as processed, and
    only these two tell that nothing of it got through."""
    dead = {n.node: n.count for n in letters.nodes} if letters is not None else None
    lines = []
    for node, seen in sorted(counts.items()):
        lettered = "?" if dead is None else str(dead.get(node, 0))
        lines.append(
            f"  node {node}: {seen['processed']} messages processed, "
            f"{seen['received']} received, {lettered} dead-lettered, "
            f"{seen['published']} published, {seen['redelivered']} redelivered"
        )
    return lines
