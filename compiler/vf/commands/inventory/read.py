"""``vf inventory``: read a live cluster's GPU pool through ``kubectl``, read-only.

Four listings: nodes (GPU Feature Discovery labels, allocatable extended resources), pods
in all namespaces (GPU units held by running pods), the server version, and the
DeviceClasses served. A listing that fails is Unknown, never empty: the pods' occupancy,
the version or the DeviceClasses are then recorded as unknown with the reason. Without the
node listing there is nothing to record, and that is an environment error (exit 3).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vf.commands.inventory.nodes import Held, ObservedNode, gpu_resources, node_entry
from vf.errors import EnvironmentProblem
from vf.ir.capabilities import Known, Unknown
from vf.textio.safe_read import load_json

TIMEOUT_SECONDS = 60
_MINOR = re.compile(r"^(\d+)")


@dataclass(frozen=True, kw_only=True)
class ClusterInventory:
    """What one context showed: GPU nodes, version, DeviceClasses, and what was not seen."""

    context: str
    nodes: tuple[ObservedNode, ...]
    kubernetes_version: Known[str] | Unknown
    device_classes: Known[tuple[str, ...]] | Unknown
    notes: tuple[str, ...]  # GPU nodes left out, and every listing that failed


def kubectl_json(kubectl: str, *, context: str, args: tuple[str, ...]) -> Known[Any] | Unknown:
    """One read-only listing as JSON, or Unknown with kubectl's reason."""
    command = [kubectl, "--context", context, *args]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=TIMEOUT_SECONDS, check=False
        )
    except subprocess.TimeoutExpired:
        return Unknown(f"kubectl {' '.join(args[:2])} timed out after {TIMEOUT_SECONDS}s")
    except OSError as exc:
        return Unknown(f"kubectl could not run: {exc}")
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        return Unknown(f"kubectl {' '.join(args[:2])} failed: {reason}")
    try:
        return Known(load_json(done.stdout))
    except ValueError as exc:
        return Unknown(f"kubectl {' '.join(args[:2])} did not print JSON vf reads ({exc})")


def read_cluster(context: str, *, kubectl: str = "kubectl") -> ClusterInventory:
    """Run the four listings against ``context`` and build the inventory."""
    program = shutil.which(kubectl)
    if program is None:
        raise EnvironmentProblem(
            "VF_INVENTORY_KUBECTL",
            f"{kubectl!r} is not on PATH",
            "install kubectl, or pass --kubectl PATH",
        )
    nodes = kubectl_json(program, context=context, args=("get", "nodes", "-o", "json"))
    if isinstance(nodes, Unknown):
        raise EnvironmentProblem(
            "VF_INVENTORY_NODES",
            f"cannot list the nodes of context {context!r}: {nodes.reason}",
            "check the context name and your access (kubectl get nodes must work); "
            "nothing was written",
        )
    pods = kubectl_json(
        program,
        context=context,
        args=(
            "get",
            "pods",
            "--all-namespaces",
            "--field-selector=status.phase!=Succeeded,status.phase!=Failed",
            "-o",
            "json",
        ),
    )
    version = kubectl_json(program, context=context, args=("version", "-o", "json"))
    classes = kubectl_json(
        program, context=context, args=("get", "deviceclasses.resource.k8s.io", "-o", "json")
    )
    return inventory_from(nodes.value, context=context, pods=pods, version=version, classes=classes)


def inventory_from(
    nodes: Any,
    *,
    context: str,
    pods: Known[Any] | Unknown,
    version: Known[Any] | Unknown,
    classes: Known[Any] | Unknown,
) -> ClusterInventory:
    """The inventory of the listings (pure: the tests feed recorded JSON)."""
    notes: list[str] = []
    device_classes = _device_classes(classes)
    held = _held_units(pods)
    if isinstance(held, Unknown):
        notes.append(f"GPU units held by running pods: unknown ({held.reason})")
    if isinstance(device_classes, Unknown):
        notes.append(f"DeviceClasses: unknown ({device_classes.reason})")
    observed: list[ObservedNode] = []
    for item in sorted(_items(nodes), key=lambda n: str(n.get("metadata", {}).get("name", ""))):
        node = node_entry(item, held=held, classes=device_classes, notes=notes)
        if node is not None:
            observed.append(node)
    server = _server_version(version)
    if isinstance(server, Unknown):
        notes.append(f"Kubernetes version: unknown ({server.reason})")
    return ClusterInventory(
        context=context,
        nodes=tuple(observed),
        kubernetes_version=server,
        device_classes=device_classes,
        notes=tuple(notes),
    )


def _items(document: Any) -> list[Mapping[str, Any]]:
    items = document.get("items") if isinstance(document, Mapping) else None
    return [i for i in items if isinstance(i, Mapping)] if isinstance(items, list) else []


def _held_units(pods: Known[Any] | Unknown) -> Held:
    """Node → resource → units the pods bound there hold (limits of their containers)."""
    if isinstance(pods, Unknown):
        return pods
    held: dict[str, dict[str, int]] = {}
    for pod in _items(pods.value):
        spec = pod.get("spec") or {}
        phase = (pod.get("status") or {}).get("phase")
        node = spec.get("nodeName")
        if not node or phase in ("Succeeded", "Failed"):
            continue
        for container in spec.get("containers") or ():
            limits = ((container or {}).get("resources") or {}).get("limits")
            for resource, units in gpu_resources(limits).items():
                per_node = held.setdefault(str(node), {})
                per_node[resource] = per_node.get(resource, 0) + units
    return Known(held)


def _device_classes(classes: Known[Any] | Unknown) -> Known[tuple[str, ...]] | Unknown:
    if isinstance(classes, Unknown):
        # a cluster without the resource.k8s.io API serves no DeviceClass: that is an answer
        if "doesn't have a resource type" in classes.reason:
            return Known(())
        return classes
    names = {str((c.get("metadata") or {}).get("name", "")) for c in _items(classes.value)}
    return Known(tuple(sorted(n for n in names if n)))


def _server_version(version: Known[Any] | Unknown) -> Known[str] | Unknown:
    if isinstance(version, Unknown):
        return version
    server = version.value.get("serverVersion") if isinstance(version.value, Mapping) else None
    if not isinstance(server, Mapping):
        return Unknown("kubectl version printed no serverVersion")
    minor = _MINOR.match(str(server.get("minor", "")))
    if str(server.get("major")) != "1" or minor is None:
        return Unknown(f"unrecognised server version {server.get('gitVersion')!r}")
    return Known(f"1.{int(minor.group(1))}")
