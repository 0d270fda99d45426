"""Read ``vf.yaml``: the deployment targets of one pipeline, validated against its schema."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ruamel.yaml.error import YAMLError

from vf.config.delivery import Autoscaling, parse_autoscaling, parse_gitops
from vf.config.gpu import GpuTarget, parse_gpu
from vf.config.infra import (
    BrokerTarget,
    Requirements,
    StoreTarget,
    parse_broker,
    parse_requirements,
    parse_store,
)
from vf.config.network import PodSecurity, parse_pod_security
from vf.config.observability import parse_observability
from vf.config.pod_options import parse_pod_options
from vf.config.schema_hints import schema_hint
from vf.config.workload import WorkloadOptions, parse_workloads
from vf.errors import Problem, VfError, raise_if
from vf.ir.delivery import GitOps
from vf.ir.plan import ContainerResources
from vf.ir.records import Observability, PodOptions
from vf.resources import schema_path
from vf.textio.patterns import validator as schema_validator
from vf.textio.safe_read import Unreadable, read_regular
from vf.textio.schema_check import accepts, fast_validator, json_values
from vf.textio.yaml_errors import describe
from vf.textio.yaml_guard import MAX_INPUT_BYTES, amplified, too_large
from vf.textio.yaml_read import reader

if TYPE_CHECKING:
    import jsonschema

CONFIG_NAME = "vf.yaml"
CONFIG_SCHEMA = "vf.config.v1.schema.json"
DEFAULT_ENV = "default"
DEFAULT_NAMESPACE = "default"
DEFAULT_K8S_VERSION = "1.33"
DEFAULT_PULL_POLICY = "IfNotPresent"


@dataclass(frozen=True, kw_only=True)
class Environment:
    """One deployment target: where and how the pipeline runs."""

    name: str
    namespace: str = DEFAULT_NAMESPACE
    cluster: str | None = None  # the user's name for the cluster; None: not said
    kubernetes_version: str = DEFAULT_K8S_VERSION
    run_id: str | None = None
    default_image: str | None = None
    image_overrides: tuple[tuple[str, str], ...] = ()
    image_pull_policy: str = DEFAULT_PULL_POLICY
    replicas: tuple[tuple[str, int], ...] = ()
    resources: tuple[tuple[str, ContainerResources], ...] = ()
    priority_class: str | None = None
    broker: BrokerTarget = field(default_factory=BrokerTarget)
    payload_store: StoreTarget = field(default_factory=StoreTarget)
    requirements: Requirements = field(default_factory=Requirements)
    gpu: GpuTarget = field(default_factory=GpuTarget)
    autoscaling: Autoscaling | None = None
    workloads: WorkloadOptions = field(default_factory=WorkloadOptions)
    pod_security: PodSecurity = field(default_factory=PodSecurity)
    pods: PodOptions = field(default_factory=PodOptions)
    observability: Observability = field(default_factory=Observability)
    # Where entries are in the config file: ("replicas.double", "vf.yaml:12"), each
    # section of the environment ("gpu", ...) and the environment itself ("").
    places: tuple[tuple[str, str], ...] = ()
    source: str = CONFIG_NAME  # the config file's name (--config's, when given)

    def place_of(self, entry: str = "") -> str:
        """``FILE:LINE (environment 'NAME')`` of an entry such as ``replicas.double``, else
        of its section, else of the environment."""
        places = dict(self.places)
        where = places.get(entry) or places.get(entry.partition(".")[0]) or places.get("")
        return f"{where or self.source} (environment '{self.name}')"


NODE_SECTIONS = (
    ("images", "overrides"),
    ("replicas",),
    ("resources",),
    ("mounts",),
    ("rollout",),
)


@dataclass(frozen=True, kw_only=True)
class Targets:
    """Every environment of a pipeline, sorted by name, and the file they came from;
    ``declared``: the environments' names in the file's order (its first is the default
    of ``vf run-local``)."""

    flow_id: str | None
    environments: tuple[Environment, ...]
    source: str
    gitops: GitOps | None = None
    declared: tuple[str, ...] = ()
    flow_id_at: str = ""  # where the file sets flow_id ("vf.yaml:1")


@cache
def config_schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(schema_path(CONFIG_SCHEMA).read_text(encoding="utf-8"))
    return loaded


def find_config(graph_path: Path, explicit: str | None) -> Path | None:
    """``--config`` when given, else ``vf.yaml`` next to the graph module, else None."""
    if explicit is not None:
        path = Path(explicit)
        if not path.exists():  # anything else there is read, or refused by name
            raise VfError(
                "VF_CONFIG_NOT_FOUND",
                f"config file {explicit!r} does not exist",
                "pass the path of an existing vf.yaml, or omit --config",
                explicit,
            )
        return path
    beside = graph_path.parent / CONFIG_NAME
    return beside if beside.exists() else None


def load_targets(path: Path | None) -> Targets:
    """Parse and validate a vf.yaml; without one there is a single ``default`` environment."""
    if path is None:
        return Targets(
            flow_id=None,
            environments=(Environment(name=DEFAULT_ENV),),
            source="",
            declared=(DEFAULT_ENV,),
        )
    document = read_yaml(path)
    _check_text(document, path)
    _validate(document, path)
    plain: dict[str, Any] = json.loads(json.dumps(document, default=str))
    envs = plain.get("environments") or {DEFAULT_ENV: {}}
    environments = tuple(
        replace(env, places=_places(document, env.name, path.name), source=path.name)
        for env in _environments(envs, path.name)
    )
    gitops, problems = parse_gitops(plain.get("gitops"), environments=envs, source=path.name)
    raise_if(problems)
    return Targets(
        flow_id=plain.get("flow_id"),
        environments=environments,
        source=path.name,
        gitops=gitops,
        declared=tuple(str(name) for name in envs),
        flow_id_at=f"{path.name}:{_line_of(document, ['flow_id'])}",
    )


def read_yaml(path: Path) -> Any:
    """The YAML document at ``path``, round-trip loaded, duplicate keys refused."""
    yaml = reader("rt")
    yaml.allow_duplicate_keys = False
    text = ""
    try:
        text = _bounded_text(path)
        document = yaml.load(text)
    except RecursionError:
        raise VfError(
            "VF_CONFIG_SYNTAX",
            f"{path.name} nests deeper than vf reads",
            "flatten the document; vf.yaml needs only a few levels of nesting",
            str(path),
        ) from None
    except YAMLError as exc:
        report = describe(exc, text)
        raise VfError(
            "VF_CONFIG_SYNTAX",
            f"{path.name} is not valid YAML: {report.what}",
            report.fix,
            f"{path}:{report.line}" if report.line else str(path),
        ) from None
    except (UnicodeDecodeError, OSError) as exc:
        raise VfError(
            "VF_CONFIG_SYNTAX",
            f"{path.name} cannot be read as UTF-8 text: {str(exc).splitlines()[0]}",
            "save vf.yaml as UTF-8",
            str(path),
        ) from None
    if document is None:
        return {}
    if amplified(document, text_length=len(text)):
        raise VfError(
            "VF_CONFIG_ALIASES",
            f"{path.name}'s aliases (*name) expand it far beyond its own size",
            "write the repeated values out, or use an alias only for a small block",
            str(path),
        )
    if not isinstance(document, dict):
        raise VfError(
            "VF_CONFIG_SCHEMA",
            f"{path.name} must be a mapping at the top level",
            "start the file with flow_id: and environments:",
            str(path),
        )
    return document


def _bounded_text(path: Path) -> str:
    size = path.stat().st_size
    if too_large(size):
        raise VfError(
            "VF_CONFIG_TOO_LARGE",
            f"{path.name} is {size} bytes; vf reads a vf.yaml of at most {MAX_INPUT_BYTES}",
            "a vf.yaml holds deployment targets: move data out of it",
            str(path),
        )
    try:  # a FIFO or a device would block or never end
        data = read_regular(path, limit=MAX_INPUT_BYTES, follow=True)
    except Unreadable as why:
        raise VfError(
            "VF_CONFIG_SYNTAX",
            f"{path.name} cannot be read: {why}",
            "pass a regular file holding the deployment targets",
            str(path),
        ) from None
    return data.decode("utf-8")


def _check_text(document: Any, path: Path) -> None:
    """Refuse strings that cannot be written as UTF-8 (escaped unpaired surrogates)."""
    stack: list[tuple[Any, str]] = [(document, "")]
    while stack:
        item, where = stack.pop()
        if isinstance(item, dict):
            stack.extend((v, f"{where}.{k}" if where else str(k)) for k, v in item.items())
            stack.extend((k, where or "(top level)") for k in item if isinstance(k, str))
        elif isinstance(item, list):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(item))
        elif isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise VfError(
                    "VF_CONFIG_SCHEMA",
                    f"{where or '(top level)'}: a string holds an unpaired surrogate escape",
                    "write the character itself, or a valid \\uXXXX pair",
                    f"{path}:{_line_of(document, [])}",
                ) from None


@cache
def config_fast_validator() -> Any:
    """vf.yaml's schema as a jsonschema-rs validator (ADR 218)."""
    return fast_validator(config_schema())


def _validate(document: Any, path: Path) -> None:
    if accepts(config_fast_validator(), json_values(document)):
        return  # valid: jsonschema is only loaded to decide and explain a refusal

    validator = schema_validator(config_schema())
    try:
        errors = sorted(validator.iter_errors(document), key=lambda e: list(map(str, e.path)))
    except (TypeError, ValueError) as exc:
        raise VfError(
            "VF_CONFIG_SCHEMA", f"{path.name}: {exc}", "fix the value", str(path)
        ) from None
    problems = [_problem(error, document, path) for error in errors]
    raise_if(problems)


def _problem(error: jsonschema.ValidationError, document: Any, path: Path) -> Problem:
    location = ".".join(str(p) for p in error.absolute_path) or "(top level)"
    where = f"{path}:{_line_of(document, list(error.absolute_path))}"
    if error.schema == config_schema()["$defs"]["serviceAuth"]:
        return _auth_problem(error.instance, location=location, where=where)
    if _within_tls(error):
        return Problem(
            code="VF_CONFIG_TLS",
            what=f"{location}: {error.message}",
            remedy="write tls: {secret: NAME}, NAME a Secret in lower case letters, digits, "
            "'-' and '.'",
            where=where,
        )
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        schema = error.schema if isinstance(error.schema, dict) else {}
        allowed = sorted(schema.get("properties", {}))
        extra = sorted(str(k) for k in error.instance if k not in allowed)
        import difflib  # only a misspelt key needs a suggestion

        hints = [difflib.get_close_matches(k, allowed, n=1) for k in extra]
        if extra:
            where = f"{path}:{_line_of(document, [*error.absolute_path, extra[0]])}"
        suggestion = "; ".join(
            f"did you mean {h[0]!r} for {k!r}?" for k, h in zip(extra, hints, strict=True) if h
        )
        return Problem(
            code="VF_CONFIG_UNKNOWN_KEY",
            what=f"{location}: unknown key(s) {', '.join(repr(k) for k in extra)}",
            remedy=suggestion or f"allowed keys here: {', '.join(allowed)}",
            where=where,
        )
    hint = schema_hint(
        error,
        location=location,
        line=_source_line(path, _line_of(document, list(error.absolute_path))),
        quantity=config_schema()["$defs"]["quantity"],
    )
    if hint is not None:
        return Problem(code="VF_CONFIG_SCHEMA", what=hint[0], remedy=hint[1], where=where)
    message = error.message if len(error.message) < 300 else error.message[:300] + "…"
    return Problem(
        code="VF_CONFIG_SCHEMA",
        what=f"{location}: {message}",
        remedy="see the vf.yaml reference in docs/configuration.md",
        where=where,
    )


def _within_tls(error: jsonschema.ValidationError) -> bool:
    """Whether the refusal is of a ``tls:`` value (ADR 0222): its mapping or its Secret."""
    path = [str(p) for p in error.absolute_path]
    at = [i for i in range(max(1, len(path) - 2), len(path)) if path[i] == "tls"]
    return bool(at) and path[at[-1] - 1] in ("broker", "payload_store")


AUTH_KEYS = ("kind", "routes_secret", "secret")
AUTH_KINDS = ("password", "token", "creds")


def _auth_problem(value: Any, *, location: str, where: str) -> Problem:
    """What is wrong with a broker's or store's ``auth:`` (ADR 0212), by name."""
    fix = "write auth: none, or auth: {secret: NAME} (with routes_secret: or kind: where allowed)"
    what = f"{location}: {value!r} is neither none nor a mapping of {', '.join(AUTH_KEYS)}"
    if isinstance(value, dict):
        unknown = sorted(str(k) for k in value if k not in AUTH_KEYS)
        kind = value.get("kind")
        if unknown:
            what = f"{location}: unknown key(s) {', '.join(repr(k) for k in unknown)}"
            fix = f"allowed keys here: {', '.join(AUTH_KEYS)}"
        elif kind is not None and kind not in AUTH_KINDS:
            what = f"{location}.kind: {kind!r} is not a kind of credentials vf knows"
            fix = f"use one of: {', '.join(AUTH_KINDS)}"
        else:
            what = f"{location}: a Secret name is not a DNS subdomain"
            fix = "name the Secret in lower case letters, digits, '-' and '.'"
    return Problem(code="VF_CONFIG_AUTH", what=what, remedy=fix, where=where)


def _source_line(path: Path, line: int) -> str | None:
    """Line ``line`` of vf.yaml as written (None where it cannot be read back)."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    return lines[line - 1] if 0 < line <= len(lines) else None


def _line_of(document: Any, parts: list[Any]) -> int:
    """1-based line of the deepest key of ``parts`` found in a round-trip document."""
    line = 1
    node = document
    for part in parts:
        lc = getattr(node, "lc", None)
        try:
            if lc is not None and isinstance(part, str):
                line = lc.key(part)[0] + 1
            elif lc is not None and isinstance(part, int):
                line = lc.item(part)[0] + 1
            node = node[part]
        except (KeyError, IndexError, TypeError, AttributeError):
            break
    return line


def _quantity(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _places(document: Any, env: str, source: str) -> tuple[tuple[str, str], ...]:
    """The line of each node-keyed entry of environment ``env`` (see ``Environment``)."""
    found: list[tuple[str, str]] = []
    declared = (document.get("environments") or {}).get(env)
    if isinstance(declared, dict):
        found.append(("", f"{source}:{_line_of(document, ['environments', env])}"))
        for key in declared:
            line = _line_of(document, ["environments", env, key])
            found.append((str(key), f"{source}:{line}"))
    section: Any
    for parts in NODE_SECTIONS:
        section = (document.get("environments") or {}).get(env) or {}
        for part in parts:
            section = section.get(part) if isinstance(section, dict) else None
        for key in section if isinstance(section, dict) else ():
            line = _line_of(document, ["environments", env, *parts, key])
            found.append((".".join((*parts, str(key))), f"{source}:{line}"))
    return tuple(found)


def _environments(envs: dict[str, Any], source: str) -> tuple[Environment, ...]:
    problems: list[Problem] = []
    parsed = []
    for name in sorted(envs):
        raw = envs[name] or {}
        broker, broker_problems = parse_broker(raw.get("broker"), env=name, source=source)
        store, store_problems = parse_store(raw.get("payload_store"), env=name, source=source)
        workloads, workload_problems = parse_workloads(raw, env=name, source=source)
        problems.extend(broker_problems + store_problems + workload_problems)
        parsed.append(
            replace(
                _environment(name, raw),
                broker=broker,
                payload_store=store,
                requirements=parse_requirements(raw.get("requirements")),
                workloads=workloads,
            )
        )
    raise_if(problems)
    return tuple(parsed)


def _environment(name: str, raw: dict[str, Any]) -> Environment:
    images = raw.get("images") or {}
    resources = raw.get("resources") or {}
    return Environment(
        name=name,
        namespace=raw.get("namespace", DEFAULT_NAMESPACE),
        cluster=raw.get("cluster"),
        kubernetes_version=raw.get("kubernetes_version", DEFAULT_K8S_VERSION),
        run_id=raw.get("run_id"),
        default_image=images.get("default"),
        image_overrides=tuple(sorted((images.get("overrides") or {}).items())),
        image_pull_policy=raw.get("image_pull_policy", DEFAULT_PULL_POLICY),
        replicas=tuple(sorted((k, int(v)) for k, v in (raw.get("replicas") or {}).items())),
        resources=tuple(
            (key, ContainerResources(**{f: _quantity(v) for f, v in spec.items()}))
            for key, spec in sorted(resources.items())
        ),
        priority_class=raw.get("priority_class"),
        gpu=parse_gpu(raw.get("gpu")),
        autoscaling=parse_autoscaling(raw.get("autoscaling")),
        pod_security=parse_pod_security(raw.get("pod_security")),
        pods=parse_pod_options(raw.get("pods")),
        observability=parse_observability(raw.get("observability")),
    )


def select_environments(targets: Targets, wanted: tuple[str, ...]) -> Targets:
    """Keep only the environments named by ``--env`` (all when none is named)."""
    if not wanted:
        return targets
    known = {env.name for env in targets.environments}
    unknown = sorted(set(wanted) - known)
    if unknown:
        raise VfError(
            "VF_CONFIG_UNKNOWN_ENV",
            f"unknown environment(s): {', '.join(unknown)}",
            f"choose from: {', '.join(sorted(known))}",
            targets.source or "(no vf.yaml)",
        )
    kept = tuple(env for env in targets.environments if env.name in set(wanted))
    return replace(targets, environments=kept)
