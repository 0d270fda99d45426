"""The Kubernetes Pod Security Standards, "restricted" profile (which includes "baseline"),
plus vf's own rule of a read-only root filesystem, as a checker over pod specs.

Written from the published profile definitions; each rule names the field it reads.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

Obj = dict[str, Any]
RESTRICTED_VOLUMES = frozenset(
    {
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "persistentVolumeClaim",
        "projected",
        "secret",
    }
)
SAFE_SYSCTLS = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_local_reserved_ports",
        "net.ipv4.tcp_keepalive_time",
        "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
    }
)
SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t"})
POD_TEMPLATE_KINDS = frozenset({"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"})


def pod_specs(objects: list[Obj]) -> Iterator[tuple[str, Obj]]:
    """``(kind/name, pod spec)`` of every object that runs pods."""
    for obj in objects:
        name = f"{obj['kind']}/{obj['metadata']['name']}"
        if obj["kind"] == "Pod":
            yield name, obj["spec"]
        elif obj["kind"] in POD_TEMPLATE_KINDS:
            yield name, obj["spec"]["template"]["spec"]
        elif obj["kind"] == "CronJob":
            yield name, obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]


def _containers(pod: Obj) -> list[Obj]:
    return [
        *pod.get("containers", []),
        *pod.get("initContainers", []),
        *pod.get("ephemeralContainers", []),
    ]


def _pod_level(pod: Obj) -> list[str]:
    found = []
    ctx = pod.get("securityContext") or {}
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(field):
            found.append(f"{field} is set")
    if (ctx.get("windowsOptions") or {}).get("hostProcess"):
        found.append("pod hostProcess is set")
    for volume in pod.get("volumes", []):
        kinds = set(volume) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            found.append(f"volume {volume['name']} is of type {sorted(kinds)}")
    for sysctl in ctx.get("sysctls", []):
        if sysctl["name"] not in SAFE_SYSCTLS:
            found.append(f"sysctl {sysctl['name']} is not in the safe set")
    if ctx.get("runAsUser") == 0:
        found.append("pod runAsUser is 0")
    if (ctx.get("seLinuxOptions") or {}).get("type", "") not in SELINUX_TYPES:
        found.append("pod seLinuxOptions.type is not allowed")
    return found


def _container_level(pod: Obj, container: Obj) -> list[str]:
    pod_ctx = pod.get("securityContext") or {}
    ctx = container.get("securityContext") or {}
    name = container["name"]
    found = []
    if ctx.get("privileged"):
        found.append(f"{name}: privileged")
    if ctx.get("allowPrivilegeEscalation") is not False:
        found.append(f"{name}: allowPrivilegeEscalation is not false")
    if not ctx.get("runAsNonRoot", pod_ctx.get("runAsNonRoot")):
        found.append(f"{name}: runAsNonRoot is not true")
    if ctx.get("runAsUser") == 0:
        found.append(f"{name}: runAsUser is 0")
    seccomp = (ctx.get("seccompProfile") or pod_ctx.get("seccompProfile") or {}).get("type")
    if seccomp not in ("RuntimeDefault", "Localhost"):
        found.append(f"{name}: seccompProfile is {seccomp!r}")
    caps = ctx.get("capabilities") or {}
    if "ALL" not in caps.get("drop", []):
        found.append(f"{name}: capabilities do not drop ALL")
    if set(caps.get("add", [])) - {"NET_BIND_SERVICE"}:
        found.append(f"{name}: capabilities add {caps['add']}")
    return found + _container_host(container, ctx)


def _container_host(container: Obj, ctx: Obj) -> list[str]:
    """Baseline rules on what a container may take from its host, and the read-only root."""
    name = container["name"]
    found = []
    if any(p.get("hostPort") for p in container.get("ports", [])):
        found.append(f"{name}: hostPort is set")
    if ctx.get("procMount", "Default") != "Default":
        found.append(f"{name}: procMount is not Default")
    if (ctx.get("seLinuxOptions") or {}).get("type", "") not in SELINUX_TYPES:
        found.append(f"{name}: seLinuxOptions.type is not allowed")
    apparmor = (ctx.get("appArmorProfile") or {}).get("type", "RuntimeDefault")
    if apparmor not in ("RuntimeDefault", "Localhost"):
        found.append(f"{name}: appArmorProfile is {apparmor}")
    if ctx.get("readOnlyRootFilesystem") is not True:
        found.append(f"{name}: the root filesystem is writable")
    return found


def restricted_violations(pod: Obj) -> list[str]:
    """Every way ``pod`` falls short of "restricted" plus a read-only root filesystem."""
    found = _pod_level(pod)
    for container in _containers(pod):
        found.extend(_container_level(pod, container))
    return found
