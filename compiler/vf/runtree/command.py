"""``vf run-tree DIR --env ENV``: sync the committed tree into a local cluster and watch it.

Exit codes are ``vf run-local``'s (vf_runtime.local.outcome), read from the same things:
0 the flow did what a cluster would call done (BATCH: every Job Complete; REALTIME: every
workload ready and still ready at the end of ``--for``) and its dead letters were read
back and there were none, 1 the sync was refused (an immutable field, as the real
controller would refuse it), 3 the dead letters could not be read, 4 a Job failed, 5 not
done within ``--timeout``, 6 done but items were dead-lettered, 7 a Job failed because
the flow was stopped before its work was done, 130 interrupted (after stopping everything
it started). Bad input is exit 2, a missing tool exit 3.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

from vf.errors import EXIT_INTERRUPTED, EnvironmentProblem, VfError
from vf.runtree.capacity import check_fit, pod_demand
from vf.runtree.cluster import Cluster
from vf.runtree.controllers import JobController
from vf.runtree.credentials import run_credentials, run_tls
from vf.runtree.images import ImageContext, ImageResolver, pod_template, unknown_images
from vf.runtree.manifests import TreeEnvironment, render
from vf.runtree.notice import not_emulated, runtime_notice
from vf.runtree.outcome import (
    dead_letters,
    node_counts,
    restarts_by_node,
    run_status,
    summary_lines,
)
from vf.runtree.podhost import ClusterOptions
from vf.runtree.podman_runtime import select_runtime
from vf.runtree.podspec import decoded_secret, missing_secrets
from vf.runtree.scrape import monitored
from vf.runtree.sync import sync
from vf.runtree.validation import invalid_paths
from vf.textio.folders import writable_folder
from vf.textio.safe_read import read_regular
from vf.textio.yaml_guard import MAX_INPUT_BYTES, amplified
from vf_runtime.local.guardian import Guardian
from vf_runtime.local.outcome import exit_code, replayed_producers, settled
from vf_runtime.local.scrape import TARGETS_FILE

EXIT_SYNC = 1


@dataclass(frozen=True, kw_only=True)
class RunTreeRequest:
    tree: Path
    env: str
    renderer: str = "kustomize"
    app: Path | None = None
    secrets: Path | None = None
    sync: str = "kubectl"
    timeout: float = 300.0
    hold: float = 0.0
    backoff: float = 10.0
    run_dir: Path | None = None
    runtime: str = "auto"  # podman | process | auto (podman where it is installed)
    build: bool = True  # --runtime podman: build the worker image from --app (else reuse it)
    oversubscribe: bool = False  # start a run that cannot fit this machine (ADR 0190)
    absent_kinds: frozenset[str] = frozenset()  # --without-crd: kinds this cluster lacks
    output: TextIO = field(default_factory=lambda: sys.stderr)  # the stream at the call


def read_secrets(path: Path | None) -> dict[str, dict[str, str]]:
    """``--secrets FILE``: YAML or JSON ``{secret-name: {key: value}}``."""
    if path is None:
        return {}
    from vf.textio.yaml_read import reader

    problem = VfError(
        "VF_RUN_TREE_SECRETS",
        f"{path} is not a mapping of Secret names to {{key: value}} mappings",
        "write it as `my-secret: {url: nats://…}` (YAML or JSON)",
        str(path),
    )
    text = ""
    try:  # a regular file of at most 1 MiB: a FIFO or /dev/zero is refused, not waited on
        text = read_regular(path, limit=MAX_INPUT_BYTES, follow=True).decode("utf-8")
        loaded = reader("safe").load(text)
    except Exception:
        raise problem from None
    if not isinstance(loaded, dict) or not all(isinstance(v, dict) for v in loaded.values()):
        raise problem
    if amplified(loaded, text_length=len(text)):  # aliases standing for far more than the text
        raise problem
    return {str(k): {str(a): str(b) for a, b in v.items()} for k, v in loaded.items()}


def image_context(tree: TreeEnvironment, *, app: Path, log: Callable[[str], None]) -> ImageContext:
    from vf.runtree.worker_env import APP_DIR, IMAGE_ENV, ensure_worker_env

    worker = ensure_worker_env(log=log)
    return ImageContext(
        plan=tree.plan,
        app_dir=app.resolve(),
        worker_bin=worker.bin_dir,
        worker_python=worker.python,
        image_env=IMAGE_ENV,
        image_app_dir=APP_DIR,
    )


def prepare(
    request: RunTreeRequest,
    *,
    log: Callable[[str], None],
    secrets: Mapping[str, Mapping[str, str]] | None = None,
) -> tuple[TreeEnvironment, ImageResolver]:
    """Render, check every Secret and image the pods need; raise before anything starts.
    ``secrets`` are those of ``--secrets`` (read from ``request.secrets`` when None)."""
    secrets = read_secrets(request.secrets) if secrets is None else secrets
    tree = render(
        request.tree,
        env=request.env,
        renderer=request.renderer,
        sync=request.sync,
        absent_kinds=request.absent_kinds,
    )
    check_fit(
        pod_demand(tree.objects),
        way_out=f"lower the replicas of environment {request.env} in vf.yaml and compile "
        "again, or deploy this environment to a cluster and run a smaller one here (--env NAME)",
        oversubscribe=request.oversubscribe,
        warn=request.output.write,
    )
    app = request.app or Path.cwd()
    if not app.is_dir():
        raise VfError(
            "VF_RUN_TREE_APP",
            f"--app {app} is not a directory",
            "pass the project folder the image copies to /app (where the node modules are)",
        )
    given: dict[str, Mapping[str, str]] = {
        o["metadata"]["name"]: decoded_secret(o) for o in tree.objects if o["kind"] == "Secret"
    }
    given.update(secrets)
    made = run_credentials(tree.plan, given=given)
    made.update(run_tls(tree.plan, given=given))
    if made:
        tree = replace(tree, run_secrets=made)
        given.update(made)
    templates = [
        (f"{o['kind'].lower()}/{o['metadata']['name']}", (pod_template(o) or {}).get("spec") or {})
        for o in tree.objects
        if pod_template(o) is not None
    ]
    problems = invalid_paths(templates) + missing_secrets(templates, given)
    if problems:
        raise VfError.collect(problems)
    resolver = ImageResolver(image_context(tree, app=app, log=log))
    problems = unknown_images(tree.objects, resolver)
    if problems:
        raise VfError.collect(problems)
    return tree, resolver


def workloads_done(cluster: Cluster, *, batch: bool) -> bool:
    """BATCH: every Job Complete (or one Failed: nothing more will happen). REALTIME: every
    Deployment and StatefulSet has its replicas ready, and every Job is Complete or running
    (a finite source of a REALTIME flow is a Job that runs while the flow does)."""
    controllers = list(cluster.controllers.values())
    jobs = [c for c in controllers if isinstance(c, JobController)]
    if any(j.status == "Failed" for j in jobs):
        return True
    if batch:
        return bool(jobs) and all(j.status == "Complete" for j in jobs)
    running = all(j.status == "Complete" or any(p.phase == "Running" for p in j.pods) for j in jobs)
    return running and all(c.healthy() for c in controllers if not isinstance(c, JobController))


def report(cluster: Cluster, out: TextIO) -> None:
    for (kind, _ns, name), controller in sorted(cluster.controllers.items()):
        pods = controller.pods
        ready = sum(p.ready for p in pods)
        restarts = sum(p.restarts for p in pods)
        extra = f", {restarts} restarts" if restarts else ""
        if isinstance(controller, JobController):
            done, failed = controller.successes, controller.failures
            line = f"{controller.status} ({done} succeeded, {failed} failed)"
        else:
            line = (
                f"{controller.status} ({ready}/{getattr(controller, 'replicas', 0)} ready{extra})"
            )
        print(f"  {kind.lower()}/{name}: {line}", file=out)


def failure_logs(cluster: Cluster, out: TextIO) -> None:
    for pod in cluster.pods():
        container = pod.failed_container()
        if container is not None:
            print(f"--- pod {pod.name} ({container.launch.name}), last lines:", file=out)
            print(container.tail(), file=out)


def _logs_line(request: RunTreeRequest) -> str:
    """Where every pod's output is, or how to keep it."""
    if request.run_dir is not None:
        return f"the pods' logs are in {request.run_dir / 'pods'}"
    return "the pods' logs go with the run: pass --run-dir DIR to keep them"


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _guardian() -> Guardian:
    try:
        return Guardian.start(prefix="vf-run-tree-")
    except (OSError, RuntimeError) as exc:
        raise EnvironmentProblem(
            "VF_RUN_TREE_TOOL",
            f"cannot start the run's guardian: {exc}",
            "check that the temporary directory is writable (TMPDIR)",
        ) from exc


def _cluster(
    request: RunTreeRequest, *, run_dir: Path, guardian: Guardian, oci: Any, scraped: bool
) -> Cluster:
    """The emulated cluster the run syncs into; ``run_dir`` absolute, since every pod's
    files (a server's config among them) name it from their own working directory. With
    ``scraped`` (the tree has a ServiceMonitor) it keeps the Prometheus targets file."""
    targets = run_dir / TARGETS_FILE if scraped else None
    if targets is not None:
        print(
            f"[vf] the workers' /metrics, for Prometheus' file_sd_configs: {targets}",
            file=request.output,
            flush=True,
        )
    options = ClusterOptions(
        run_dir=run_dir,
        backoff_base=request.backoff,
        log=lambda text: print(text, file=request.output, flush=True),
        guardian=guardian,
        keep_volumes=request.run_dir is not None,
        oci=oci,
        absent_kinds=request.absent_kinds,
        scrape_targets=targets,
    )
    return Cluster(options)


def run_tree(request: RunTreeRequest) -> int:
    out = request.output

    def log(text: str) -> None:
        print(text, file=out, flush=True)

    secrets = read_secrets(request.secrets)
    tree, resolver = prepare(request, log=log, secrets=secrets)
    kept = None  # --run-dir, made and tried once the run is known to fit, before it starts
    if request.run_dir is not None:
        kept = writable_folder(
            request.run_dir, what="the run directory", other="pass another --run-dir"
        )
    batch = tree.plan["flow_type"] == "batch"
    app = (request.app or Path.cwd()).resolve()
    oci = select_runtime(request.runtime, resolver, app_dir=app, build=request.build, log=log)
    for line in runtime_notice(oci, not_emulated(tree.objects, containers=oci is not None)):
        log(line)
    guardian = _guardian()  # whatever starts next ends with this run, even on SIGKILL
    if oci is not None:
        oci.attach(guardian)  # the guardian removes the run's containers if vf is killed
    cluster = _cluster(
        request,
        run_dir=kept or guardian.directory,
        guardian=guardian,
        oci=oci,
        scraped=monitored(tree.objects, absent_kinds=request.absent_kinds),
    )
    cluster.extra_secrets = {k: dict(v) for k, v in secrets.items()}
    code = EXIT_INTERRUPTED
    verdict = "interrupted"
    # SIGTERM and SIGHUP stop what we started, as Ctrl-C does
    previous = {sig: signal.signal(sig, _interrupt) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        errors = sync(
            cluster, tree, resolver, mode=request.sync, app=str(tree.tree), timeout=request.timeout
        )
        for error in errors:
            log(f"sync refused: {error}")
        done = cluster.run_until(
            lambda: workloads_done(cluster, batch=batch), timeout=request.timeout
        )
        if done and not batch and request.hold > 0:
            log(f"all workloads ready; holding {request.hold:g}s")
            cluster.run_until(lambda: False, timeout=request.hold)
        code, verdict = _judge(cluster, tree, request=request, done=done, refused=bool(errors))
        if not done:
            log(f"not done after {request.timeout:g}s")
        report(cluster, out)
        if code:
            failure_logs(cluster, out)
        log(_logs_line(request))
    finally:
        cluster.shutdown()
        guardian.close()  # removes its directory, the run's unless --run-dir named one
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    label = f"flow {tree.plan['flow_id']} ({tree.env}, {request.renderer})"
    log(f"{label}: {verdict} (exit {code})")
    return code


def _judge(
    cluster: Cluster, tree: TreeEnvironment, *, request: RunTreeRequest, done: bool, refused: bool
) -> tuple[int, str]:
    """The exit code and its words, read as ``vf run-local`` reads a run: the workloads'
    status, then the flow's dead letters (a run that set items aside never passes)."""
    if refused:
        return EXIT_SYNC, "sync refused"
    status = run_status(cluster, done=done)
    keep = request.run_dir.resolve() if request.run_dir else None
    letters = dead_letters(cluster, tree.plan, out=request.output, copy_dir=keep)
    for line in summary_lines(node_counts(cluster), letters):
        print(line, file=request.output)
    unreplayable = [str(p) for p in tree.plan.get("unreplayable_producers") or ()]
    replayed = replayed_producers(unreplayable, restarts_by_node(cluster), out=request.output)
    final = settled(status.status, letters, replayed=replayed)
    words = {
        "ok": "done",
        "unverified": "done, but its dead letters could not be read",
        "dead-lettered": f"done with {letters.total if letters else 0} item(s) dead-lettered",
        "lost": f"failed: {', '.join(status.lost)}",
        "stopped": f"stopped before its work was done: {', '.join(status.lost)}",
        "aborted": f"aborted: {', '.join(status.lost)} ended on an abort from upstream",
        "stalled": "timed out",
        "replayed": f"done, but {', '.join(replayed)} restarted and re-emitted items",
    }
    return exit_code(final), words[final]
