"""Turn one pod of a rendered workload into local process specs, as the kubelet would.

Environment: the image's ``ENV``, the Service link variables, ``envFrom``, then ``env``
(``value`` with ``$(VAR)`` expansion, ``fieldRef``, ``configMapKeyRef``, ``secretKeyRef``,
``resourceFieldRef``). Volumes: ``configMap``, ``secret``, ``projected``, ``emptyDir``,
``persistentVolumeClaim`` (one folder per claim, kept across pods), ``hostPath`` (an empty
folder: the host's files are not this machine's). There are no mount namespaces here, so
every mount path, and the image's node-module folder, is translated to its local folder
in the environment, the arguments and the mounted configuration files.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vf.errors import Problem, VfError
from vf.runtree.images import LocalImage
from vf.textio.objects import Obj

if TYPE_CHECKING:
    from vf.runtree.ocispec import OciSpec

_EXPAND = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")
_FIELD = re.compile(r"metadata\.(labels|annotations)\['([^']+)'\]")


@dataclass(frozen=True, kw_only=True)
class PodMeta:
    """Identity the downward API exposes."""

    name: str
    namespace: str
    uid: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    hostname: str
    service_account: str = "default"


@dataclass(frozen=True, kw_only=True)
class Sources:
    """What ``envFrom``/``valueFrom``/volumes read: ConfigMaps, Secrets, claim folders."""

    config_maps: Mapping[str, Mapping[str, str]]
    secrets: Mapping[str, Mapping[str, str]]
    claim_dir: Callable[[str], Path]
    links: Sequence[tuple[str, str]] = ()


@dataclass
class ContainerLaunch:
    """One container as a process: argv, environment, working directory, log file."""

    name: str
    argv: list[str]
    env: dict[str, str]
    cwd: Path
    image: LocalImage
    ports: dict[str, int] = field(default_factory=dict)  # port name or number → container port
    init: bool = False
    oci: OciSpec | None = None  # run as an OCI container (--runtime podman), not a process


class Translator:
    """Rewrites cluster names and container paths in a string to their local equivalents."""

    def __init__(self, paths: Mapping[str, Path], rewrite_address: Callable[[str], str]) -> None:
        self._paths = dict(paths)
        self._address = rewrite_address
        ordered = sorted(self._paths, key=len, reverse=True)
        self._pattern = (
            re.compile(
                r"(?<![\w.\-/])("
                + "|".join(re.escape(p.rstrip("/") or "/") for p in ordered)
                + r")(?=$|[/\s\"',;:\]\)}=])"
            )
            if ordered
            else None
        )

    def __call__(self, text: str) -> str:
        text = self._address(text)
        if self._pattern is None or "/" not in text:
            return text
        return self._pattern.sub(lambda m: str(self._paths[m.group(1)]), text)


def _missing(what: str, where: str, fix: str) -> VfError:
    return VfError("VF_RUN_TREE_REFERENCE", what, fix, where)


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` expansion: known variables are replaced, ``$$`` escapes."""

    def sub(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        return env.get(name, match.group(0))

    return _EXPAND.sub(sub, text)


def field_value(path: str, meta: PodMeta) -> str | None:
    """A ``fieldRef`` value, or None when the field is not one the downward API offers."""
    simple = {
        "metadata.name": meta.name,
        "metadata.namespace": meta.namespace,
        "metadata.uid": meta.uid,
        "spec.nodeName": "vf-run-tree",
        "spec.serviceAccountName": meta.service_account,
        "status.podIP": "127.0.0.1",
        "status.hostIP": "127.0.0.1",
        "status.podIPs": "127.0.0.1",
    }
    if path in simple:
        return simple[path]
    match = _FIELD.fullmatch(path)
    if match:
        source = meta.labels if match.group(1) == "labels" else meta.annotations
        return source.get(match.group(2), "")
    return None


def _value_from(item: Obj, *, meta: PodMeta, sources: Sources, where: str) -> str | None:
    ref = item["valueFrom"]
    name = item.get("name", "?")
    if "fieldRef" in ref:
        value = field_value(ref["fieldRef"].get("fieldPath", ""), meta)
        if value is None:
            raise _missing(
                f"env {name}: fieldRef {ref['fieldRef'].get('fieldPath')!r} is not supported",
                where,
                "use metadata.name/namespace/uid/labels/annotations",
            )
        return value
    for kind, table in (
        ("configMapKeyRef", sources.config_maps),
        ("secretKeyRef", sources.secrets),
    ):
        if kind in ref:
            spec = ref[kind]
            data = table.get(spec.get("name", ""))
            if data is not None and spec.get("key") in data:
                return data[spec["key"]]
            if spec.get("optional"):
                return None
            label = "Secret" if kind == "secretKeyRef" else "ConfigMap"
            fix = (
                "give the value in the file passed with --secrets "
                f"({spec.get('name')}: {{{spec.get('key')}: …}})"
                if kind == "secretKeyRef"
                else "render the tree with the ConfigMap it references"
            )
            raise _missing(
                f"env {name}: {label} {spec.get('name')!r} key {spec.get('key')!r} does not exist",
                where,
                fix,
            )
    if "resourceFieldRef" in ref:
        return "0"
    raise _missing(f"env {name}: unsupported valueFrom {sorted(ref)}", where, "recompile the tree")


def container_env(
    container: Obj, *, image: LocalImage, meta: PodMeta, sources: Sources, where: str
) -> dict[str, str]:
    """The environment the kubelet and the image give this container, in their order."""
    env: dict[str, str] = dict(image.env)
    env["HOSTNAME"] = meta.hostname
    env.update(sources.links)
    for source in container.get("envFrom") or []:
        prefix = source.get("prefix", "")
        ref = source.get("configMapRef") or source.get("secretRef") or {}
        table = sources.config_maps if "configMapRef" in source else sources.secrets
        data = table.get(ref.get("name", ""))
        if data is None:
            if ref.get("optional"):
                continue
            kind = "ConfigMap" if "configMapRef" in source else "Secret"
            raise _missing(
                f"envFrom: {kind} {ref.get('name')!r} does not exist",
                where,
                "render the whole tree (kubectl kustomize / helm template) and run that",
            )
        env.update({prefix + k: v for k, v in data.items()})
    for item in container.get("env") or []:
        if "valueFrom" in item:
            value = _value_from(item, meta=meta, sources=sources, where=where)
            if value is not None:
                env[item["name"]] = value
        else:
            env[item["name"]] = expand(str(item.get("value", "")), env)
    return env


def decoded_secret(obj: Obj) -> dict[str, str]:
    data = {k: base64.b64decode(v).decode("utf-8") for k, v in (obj.get("data") or {}).items()}
    data.update({k: str(v) for k, v in (obj.get("stringData") or {}).items()})
    return data


def _write_items(target: Path, data: Mapping[str, str], items: Sequence[Obj] | None) -> None:
    target.mkdir(parents=True, exist_ok=True)
    chosen: list[tuple[str, str]] = (
        [(str(i["key"]), str(i.get("path", i["key"]))) for i in items]
        if items
        else [(k, k) for k in data]
    )
    for key, rel in chosen:
        if key in data:
            path = target / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(data[key], encoding="utf-8")


def _volume_data(
    volume: Obj, *, sources: Sources, where: str
) -> list[tuple[Mapping[str, str], Any]]:
    """(data, items) for every ConfigMap/Secret a volume projects."""
    projections = []
    if "configMap" in volume:
        projections.append(("configMap", volume["configMap"]))
    if "secret" in volume:
        projections.append(
            ("secret", {**volume["secret"], "name": volume["secret"].get("secretName")})
        )
    for src in (volume.get("projected") or {}).get("sources") or []:
        projections += [(k, v) for k, v in src.items() if k in ("configMap", "secret")]
    found: list[tuple[Mapping[str, str], Any]] = []
    for kind, spec in projections:
        table = sources.config_maps if kind == "configMap" else sources.secrets
        data = table.get(spec.get("name", ""))
        if data is None:
            if spec.get("optional"):
                continue
            raise _missing(
                f"volume {volume.get('name')!r}: {kind} {spec.get('name')!r} does not exist",
                where,
                "render the whole tree and run that",
            )
        found.append((data, spec.get("items")))
    return found


def materialize_volumes(
    pod_spec: Obj, *, pod_dir: Path, sources: Sources, claims: Mapping[str, str]
) -> tuple[dict[str, Path], list[tuple[str, Obj]]]:
    """Volume name → local folder, and the (volume, config) pairs to write after translation."""
    folders: dict[str, Path] = {}
    deferred: list[tuple[str, Obj]] = []
    for volume in pod_spec.get("volumes") or []:
        name = volume["name"]
        if "persistentVolumeClaim" in volume:
            folders[name] = sources.claim_dir(volume["persistentVolumeClaim"]["claimName"])
        elif name in claims:
            folders[name] = sources.claim_dir(claims[name])
        else:
            folders[name] = pod_dir / "volumes" / name
            folders[name].mkdir(parents=True, exist_ok=True)
            if any(k in volume for k in ("configMap", "secret", "projected")):
                deferred.append((name, volume))
    for template_name, claim in claims.items():
        folders.setdefault(template_name, sources.claim_dir(claim))
    return folders, deferred


def write_config_volumes(
    deferred: Sequence[tuple[str, Obj]],
    *,
    folders: Mapping[str, Path],
    sources: Sources,
    translate: Callable[[str], str],
    where: str,
) -> None:
    """Write each ConfigMap/Secret volume, its text translated like the environment."""
    for name, volume in deferred:
        for data, items in _volume_data(volume, sources=sources, where=where):
            _write_items(folders[name], {k: translate(v) for k, v in data.items()}, items)


def mount_paths(container: Obj, folders: Mapping[str, Path]) -> dict[str, Path]:
    paths: dict[str, Path] = {}
    for mount in container.get("volumeMounts") or []:
        base = folders.get(mount["name"])
        if base is None:
            continue
        local = base / mount["subPath"] if mount.get("subPath") else base
        local.mkdir(parents=True, exist_ok=True)
        paths[mount["mountPath"]] = local
    return paths


def _secret_refs(spec: Obj) -> set[tuple[str, str | None, bool]]:
    """(secret, key or None, optional) for every Secret a pod spec reads."""
    refs: set[tuple[str, str | None, bool]] = set()
    for container in list(spec.get("initContainers") or []) + list(spec.get("containers") or []):
        for item in container.get("env") or []:
            ref = (item.get("valueFrom") or {}).get("secretKeyRef")
            if ref:
                refs.add((ref.get("name", ""), ref.get("key"), bool(ref.get("optional"))))
        for source in container.get("envFrom") or []:
            ref = source.get("secretRef")
            if ref:
                refs.add((ref.get("name", ""), None, bool(ref.get("optional"))))
    for volume in spec.get("volumes") or []:
        if "secret" in volume:
            secret = volume["secret"]
            refs.add((secret.get("secretName", ""), None, bool(secret.get("optional"))))
    return refs


def missing_secrets(
    templates: Sequence[tuple[str, Obj]], secrets: Mapping[str, Mapping[str, str]]
) -> list[Problem]:
    """A problem for each Secret (or key) a pod needs that neither the tree nor --secrets has."""
    problems: dict[tuple[str, str | None], Problem] = {}
    for where, spec in templates:
        for name, item, optional in sorted(_secret_refs(spec), key=str):
            data = secrets.get(name)
            if optional or (data is not None and (item is None or item in data)):
                continue
            label = f"Secret {name!r}" + (f" key {item!r}" if item else "")
            problems.setdefault(
                (name, item),
                Problem(
                    code="VF_RUN_TREE_SECRET",
                    what=f"{label} is referenced by the pods but not given",
                    remedy=f"pass --secrets FILE with `{name}: {{{item or 'KEY'}: VALUE}}` "
                    "(the values your cluster's Secret holds)",
                    where=where,
                ),
            )
    return list(problems.values())
