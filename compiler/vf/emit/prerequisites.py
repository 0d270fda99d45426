"""What an environment's objects assume of the cluster, for the tree's README (ADR 153).

Read from the objects themselves, so the list is exactly what the overlay and the chart
need: an API the cluster must serve (KEDA, DRA), a cluster-scoped object someone else
creates (a PriorityClass, a RuntimeClass, a DeviceClass), or a device plugin on the nodes.
Each comes with the ``vf.yaml`` setting that does without it. ``missing_references`` adds
the Secrets and PersistentVolumeClaims the pods name but the tree lacks, each with the
command that creates it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from vf.textio.objects import Obj
from vf_runtime.labels import INFRA_LABEL

DASHBOARD = "grafana_dashboard"  # the label Grafana's dashboard sidecar loads ConfigMaps by
_CORE_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage"})
# what each delivery does with an object of a kind the cluster does not serve (ADR 0202)
_OPTIONAL = (
    "without it Argo CD applies everything else and fails only these objects, in the last "
    "sync wave (`SkipDryRunOnMissingResource=true`), but the operation ends Failed: an "
    "automated sync retries it five times, then neither syncs nor self-heals that revision "
    "until the next commit; Flux holds them in the Kustomization `-optional`, which alone is "
    "not Ready; the chart leaves them out; and"
)


def _pod_specs(objects: Sequence[Mapping[str, Any]]) -> Iterator[Obj]:
    for obj in objects:
        spec = obj.get("spec") or {}
        template = (spec.get("jobTemplate") or {}).get("spec", spec).get("template")
        if isinstance(template, dict):
            yield template.get("spec") or {}


def _device_resources(pods: Sequence[Obj]) -> list[str]:
    found = {
        name
        for pod in pods
        for container in pod.get("containers") or []
        for name in ((container.get("resources") or {}).get("limits") or {})
        if name not in _CORE_RESOURCES and not name.startswith("hugepages-")
    }
    return sorted(found)


def prerequisites(objects: Sequence[Mapping[str, Any]], *, env: str) -> list[str]:
    """Markdown list items: what the cluster of ``env`` must provide, and how not to."""
    kinds = {str(o.get("kind")) for o in objects}
    pods = list(_pod_specs(objects))
    items: list[str] = []
    scaled = sum(1 for o in objects if o.get("kind") == "ScaledObject")
    if scaled:
        items.append(
            f"KEDA (`keda.sh/v1alpha1` ScaledObject), which scales {scaled} worker(s). "
            f"Optional: {_OPTIONAL} the scaled Deployments run one replica. Without it: "
            f"`environments.{env}.autoscaling.enabled: false`."
        )
    items += _monitoring(objects, kinds=kinds, env=env)
    if "ResourceClaimTemplate" in kinds:
        classes = sorted(
            {
                str(r["exactly"]["deviceClassName"])
                for o in objects
                if o.get("kind") == "ResourceClaimTemplate"
                for r in o["spec"]["spec"]["devices"]["requests"]
            }
        )
        named = ", ".join(f"`{c}`" for c in classes)
        items.append(
            "Dynamic Resource Allocation (`resource.k8s.io/v1` ResourceClaimTemplates, "
            f"Kubernetes 1.34 or later) and the DeviceClass {named} of a DRA driver. "
            f"Without them: set `environments.{env}.gpu.mode` to a mode other than `dra`."
        )
    devices = _device_resources(pods)
    if devices:
        named = ", ".join(f"`{d}`" for d in devices)
        items.append(
            f"A device plugin advertising {named} on GPU nodes (labelled "
            "`nvidia.com/gpu.present=true`). Without it: "
            f"`environments.{env}.gpu.mode: dra`, or no GPU grant."
        )
    runtimes = sorted({str(p["runtimeClassName"]) for p in pods if p.get("runtimeClassName")})
    for runtime in runtimes:
        items.append(
            f"The RuntimeClass `{runtime}` (the GPU container runtime). Without it: drop "
            f"`environments.{env}.gpu.runtime_class`."
        )
    created = {o["metadata"]["name"] for o in objects if o.get("kind") == "PriorityClass"}
    priorities = sorted({str(p["priorityClassName"]) for p in pods if p.get("priorityClassName")})
    for priority in priorities:
        if priority not in created:
            items.append(
                f"The PriorityClass `{priority}`. Without it: drop "
                f"`environments.{env}.priority_class`, or set `priority_class_value` so vf "
                "creates it."
            )
    items += _namespace_labels(objects)
    return items


def _monitoring(objects: Sequence[Mapping[str, Any]], *, kinds: set[str], env: str) -> list[str]:
    """What the flow's monitoring objects need: the Prometheus Operator, Grafana's sidecar."""
    items: list[str] = []
    if "ServiceMonitor" in kinds:
        items.append(
            "The Prometheus Operator (`monitoring.coreos.com/v1` ServiceMonitor), which has "
            f"Prometheus scrape the workers' `/metrics`. Optional: {_OPTIONAL} nothing "
            f"scrapes them. Without it: `environments.{env}.pods.metrics.service_monitor: false`."
        )
    if "PrometheusRule" in kinds:
        items.append(
            "The Prometheus Operator (`monitoring.coreos.com/v1` PrometheusRule), which loads "
            "the flow's alerts into a Prometheus that scrapes the workers (a Prometheus "
            "selects rules by label: add the one yours selects with "
            f"`environments.{env}.pods.labels`). Optional: {_OPTIONAL} no alert is "
            f"evaluated. Without it: `environments.{env}.observability.alerts: false`."
        )
    dashboards = [
        o for o in objects if ((o.get("metadata") or {}).get("labels") or {}).get(DASHBOARD)
    ]
    if dashboards:
        items.append(
            "Grafana with its dashboard sidecar watching this namespace for ConfigMaps "
            f'labelled `{DASHBOARD}: "1"` (`{dashboards[0]["metadata"]["name"]}`), and a '
            "Prometheus data source. Without it the ConfigMap is only stored. Without it: "
            f"`environments.{env}.observability.dashboard: false`."
        )
    return items


def _namespace_labels(objects: Sequence[Mapping[str, Any]]) -> list[str]:
    """The chart leaves the Namespace out (Helm cannot adopt the namespace it installs into),
    so ``helm --create-namespace`` and a HelmRelease's ``createNamespace`` make it without
    the labels the overlay gives it (ADR 206): say how to put them on once."""
    items = []
    for obj in objects:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        security = {k: v for k, v in labels.items() if k.startswith("pod-security.kubernetes.io/")}
        if obj.get("kind") != "Namespace" or not security:
            continue
        name = obj["metadata"]["name"]
        pairs = " ".join(f"{k}={v}" for k, v in sorted(security.items()))
        items.append(
            f"Delivered with Helm (`helm upgrade --install` or the Flux HelmRelease), the "
            f"namespace `{name}` with its Pod Security labels: the chart cannot adopt the "
            "namespace it installs into, and Helm creates it unlabelled. Once: "
            f"`kubectl create namespace {name}` (if it is new), then "
            f"`kubectl label namespace {name} --overwrite {pairs}`. Argo CD, Flux "
            "Kustomizations and `kubectl apply` apply the Namespace with them."
        )
    return items


def _pod_owners(objects: Sequence[Mapping[str, Any]]) -> Iterator[tuple[Obj, bool, str, bool]]:
    """Each pod template's spec, whether several of its pods may run at once (a count over
    one, or none: a scaler sets it), its namespace, and whether it is a broker or store vf
    runs."""
    for obj in objects:
        spec = obj.get("spec") or {}
        template = (spec.get("jobTemplate") or {}).get("spec", spec).get("template")
        if not isinstance(template, dict):
            continue
        count = spec.get("parallelism", 1) if obj.get("kind") == "Job" else spec.get("replicas")
        metadata = obj.get("metadata") or {}
        namespace = str(metadata.get("namespace") or "")
        infra = INFRA_LABEL in (metadata.get("labels") or {})
        yield template.get("spec") or {}, not isinstance(count, int) or count > 1, namespace, infra


def _secret_uses(pod: Obj) -> Iterator[tuple[str, str | None, str]]:
    """``(Secret, key or None, use)`` for each reference a pod makes (optional ones aside:
    the pod starts without them)."""
    for pull in pod.get("imagePullSecrets") or []:
        yield str(pull["name"]), None, "pull"
    for container in [*(pod.get("initContainers") or []), *(pod.get("containers") or [])]:
        for var in container.get("env") or []:
            ref = (var.get("valueFrom") or {}).get("secretKeyRef")
            if ref and not ref.get("optional"):
                yield str(ref["name"]), str(ref["key"]), "env"
        for source in container.get("envFrom") or []:
            ref = source.get("secretRef")
            if ref and not ref.get("optional"):
                yield str(ref["name"]), None, "env"
    for volume in pod.get("volumes") or []:
        refs = (
            [(volume["secret"].get("secretName"), volume["secret"])] if volume.get("secret") else []
        )
        sources = (volume.get("projected") or {}).get("sources") or []
        refs += [(s["secret"].get("name"), s["secret"]) for s in sources if s.get("secret")]
        for name, ref in refs:
            if ref.get("optional"):
                continue
            keys: list[str | None] = [str(item["key"]) for item in ref.get("items") or []]
            for key in keys or [None]:
                yield str(name), key, "file"


def _ns(namespace: str) -> str:
    return f" -n {namespace}" if namespace else ""


# The keys of a credential Secret whose server vf runs: any value will do, so the command
# makes one (hex: a route password sits in a URL, ADR 0212).
_RANDOM = '"$(openssl rand -hex 24)"'


def _secret_command(
    name: str, namespace: str, keys: set[str], uses: set[str], *, server: bool = False
) -> str:
    if "tls.key" in keys:  # a server's certificate (ADR 0222): the README's TLS section
        files = " ".join(f"--from-file={key}" for key in sorted(keys))
        return f"kubectl create secret generic {name}{_ns(namespace)} {files}"
    if server and uses == {"env"} and keys == {"user", "password"}:
        return (
            f"kubectl create secret generic {name}{_ns(namespace)} "
            f"--from-literal=user={name} --from-literal=password={_RANDOM}"
        )
    if "pull" in uses:
        return (
            f"kubectl create secret docker-registry {name}{_ns(namespace)} "
            "--docker-server=REGISTRY --docker-username=USER --docker-password=PASSWORD"
        )
    flag = "--from-file" if uses == {"file"} else "--from-literal"
    value = "PATH" if flag == "--from-file" else "VALUE"
    pairs = " ".join(f"{flag}={key}={value}" for key in sorted(keys)) or f"{flag}=KEY={value}"
    return f"kubectl create secret generic {name}{_ns(namespace)} {pairs}"


def _claim_command(name: str, namespace: str, mode: str) -> str:
    claim = (
        '{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"'
        + name
        + '"},"spec":{"accessModes":["'
        + mode
        + '"],"resources":{"requests":{"storage":"10Gi"}}}}'
    )
    return f"echo '{claim}' | kubectl apply{_ns(namespace)} -f -"


def missing_references(objects: Sequence[Mapping[str, Any]]) -> list[str]:
    """Markdown list items: each Secret and PersistentVolumeClaim the pods reference that
    the tree does not create, with a command that creates it (ADR 201)."""
    made = {
        (str(o.get("kind")), str(o["metadata"].get("namespace") or ""), str(o["metadata"]["name"]))
        for o in objects
    }
    secrets: dict[tuple[str, str], tuple[set[str], set[str]]] = {}
    claims: dict[tuple[str, str], list[bool]] = {}
    servers: set[tuple[str, str]] = set()  # the Secrets of a broker or store vf runs
    for pod, many, namespace, infra in _pod_owners(objects):
        for name, key, use in _secret_uses(pod):
            if ("Secret", namespace, name) in made:
                continue
            if infra:
                servers.add((namespace, name))
            keys, uses = secrets.setdefault((namespace, name), (set(), set()))
            uses.add(use)
            if key is not None:
                keys.add(key)
        for volume in pod.get("volumes") or []:
            claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
            if claim and ("PersistentVolumeClaim", namespace, str(claim)) not in made:
                claims.setdefault((namespace, str(claim)), []).append(many)
    items = []
    for (namespace, name), (keys, uses) in sorted(secrets.items()):
        named = ", ".join(f"`{k}`" for k in sorted(keys))
        what = {"pull": "image pull", "env": "environment", "file": "mounted"}
        used = " and ".join(what[u] for u in sorted(uses))
        server = (namespace, name) in servers
        whose = ": credentials of a server vf runs, any values" if server else ""
        if "tls.key" in keys:
            whose = (
                ": the certificate of a server vf runs and the CA its clients trust; a "
                "cert-manager Certificate can write it, see TLS above"
            )
        command = _secret_command(name, namespace, keys, uses, server=server)
        items.append(
            f"The Secret `{name}`{f' in `{namespace}`' if namespace else ''} ({used}"
            f"{f'; keys {named}' if named else ''}{whose}), which the tree does not contain: "
            f"`{command}`."
        )
    for (namespace, name), owners in sorted(claims.items()):
        several = len(owners) > 1 or owners[0]
        mode = "ReadWriteMany" if several else "ReadWriteOnce"
        who = "several pods mount it" if several else "one pod mounts it"
        items.append(
            f"The PersistentVolumeClaim `{name}`{f' in `{namespace}`' if namespace else ''} "
            f"({who}: {mode}), which the tree does not create; size it for its data and "
            f"name the StorageClass it needs: `{_claim_command(name, namespace, mode)}`."
        )
    return items
