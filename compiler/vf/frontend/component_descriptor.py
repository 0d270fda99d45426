"""Read and check a native component's descriptor (``component.yaml``) and the graph's params.

The descriptor is validated against ``schemas/component.v1.schema.json``, then against
the rules a schema cannot say (GPUs only on processors, no port clashing with the health
port); the graph's params are checked against the descriptor's own params schema. Every
problem is reported at once, at the user's graph line.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from vf.errors import Problem, VfError
from vf.frontend.params import json_problem, safe_repr
from vf.resources import schema_path
from vf.textio.patterns import validator as schema_validator
from vf.textio.safe_read import Unreadable, read_regular
from vf.textio.yaml_guard import amplified
from vf_runtime.components import ComponentPort, ComponentSpec
from vf_runtime.constants import HEALTH_PORT

SCHEMA = "component.v1.schema.json"
MAX_DESCRIPTOR_BYTES = 1 << 20


@cache
def descriptor_schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(schema_path(SCHEMA).read_text(encoding="utf-8"))
    return loaded


def _problem(code: str, what: str, remedy: str, where: str) -> Problem:
    return Problem(code=code, what=what, remedy=remedy, where=where)


def read_descriptor(path: Path, *, where: str) -> dict[str, Any]:
    """The descriptor at ``path`` as plain JSON data; a named error when it is not YAML."""
    from ruamel.yaml.error import YAMLError

    from vf.textio.yaml_read import reader

    try:
        if path.stat().st_size > MAX_DESCRIPTOR_BYTES:
            raise VfError(
                "VF_COMPONENT_DESCRIPTOR",
                f"component descriptor {path.name} is larger than 1 MiB",
                "a descriptor holds a few fields; move data out of it",
                where,
            )
        yaml = reader("rt")
        yaml.allow_duplicate_keys = False
        text = _descriptor_text(path, where=where)
        document = yaml.load(text)
    except RecursionError:
        document = None
    except (YAMLError, UnicodeDecodeError, OSError) as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" (line {mark.line + 1})" if mark is not None else ""
        raise VfError(
            "VF_COMPONENT_YAML",
            f"component descriptor {path.name}{line} is not valid YAML: "
            f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}",
            "fix the descriptor's YAML syntax (duplicate keys are not allowed)",
            where,
        ) from None
    if document is not None and amplified(document, text_length=len(text)):
        raise VfError(
            "VF_COMPONENT_ALIASES",
            f"component descriptor {path.name}'s aliases (*name) expand it far beyond its size",
            "write the repeated values out, or use an alias only for a small block",
            where,
        )
    if not isinstance(document, Mapping):
        raise VfError(
            "VF_COMPONENT_DESCRIPTOR",
            f"component descriptor {path.name} is not a mapping of fields",
            "start from the example in docs/components.md: apiVersion, name, kind, image, …",
            where,
        )
    plain: dict[str, Any] = json.loads(json.dumps(document, default=str))
    return plain


def _descriptor_text(path: Path, *, where: str) -> str:
    """The descriptor's text: a regular file (a link to one is fine) of at most 1 MiB."""
    try:
        return read_regular(path, limit=MAX_DESCRIPTOR_BYTES, follow=True).decode("utf-8")
    except Unreadable as why:
        raise VfError(
            "VF_COMPONENT_DESCRIPTOR",
            f"component descriptor {path.name} cannot be read: {why}",
            "point at the component.yaml file itself",
            where,
        ) from None


def check_descriptor(document: dict[str, Any], *, label: str, where: str) -> list[Problem]:
    """Every way ``document`` breaks the descriptor schema or vf's descriptor rules."""

    validator = schema_validator(descriptor_schema())
    problems = [
        _problem(
            "VF_COMPONENT_DESCRIPTOR",
            f"{label}: {error.json_path}: {error.message}",
            f"fix the descriptor; its fields are defined by schemas/{SCHEMA}",
            where,
        )
        for error in sorted(validator.iter_errors(document), key=lambda e: e.json_path)
    ]
    if problems:
        return problems
    return _rule_problems(document, label=label, where=where)


def _rule_problems(document: dict[str, Any], *, label: str, where: str) -> list[Problem]:
    import jsonschema

    problems: list[Problem] = []
    kind = document["kind"]
    gpu = (document.get("resources") or {}).get("gpu")
    if gpu is not None and kind != "processor":
        problems.append(
            _problem(
                "VF_COMPONENT_GPU",
                f"{label}: a {kind} cannot claim GPUs (resources.gpu)",
                "move the GPU work into a processor component, or drop resources.gpu",
                where,
            )
        )
    if gpu is not None and gpu.get("count", 1) > 1 and "memoryGiB" in gpu:
        problems.append(
            _problem(
                "VF_COMPONENT_GPU",
                f"{label}: resources.gpu sets count > 1 and memoryGiB; a memory share is "
                "one device",
                "drop memoryGiB to claim whole GPUs, or set count: 1",
                where,
            )
        )
    if "finite" in document and kind != "producer":
        problems.append(
            _problem(
                "VF_COMPONENT_DESCRIPTOR",
                f"{label}: finite applies to producers, not to a {kind}",
                "remove finite from the descriptor",
                where,
            )
        )
    problems.extend(_port_problems(document.get("ports") or [], label=label, where=where))
    try:
        jsonschema.Draft202012Validator.check_schema(document.get("params") or {})
    except jsonschema.SchemaError as error:
        problems.append(
            _problem(
                "VF_COMPONENT_PARAMS_SCHEMA",
                f"{label}: params is not a valid JSON Schema: {error.message}",
                "write params as a draft 2020-12 JSON Schema of the component's parameters",
                where,
            )
        )
    return problems


def _port_problems(ports: list[dict[str, Any]], *, label: str, where: str) -> list[Problem]:
    problems: list[Problem] = []
    names: set[str] = set()
    numbers: set[int] = set()
    for port in ports:
        name, number = port["name"], port["port"]
        clash = name in names or number in numbers
        reserved = name == "health" or number == HEALTH_PORT
        if clash or reserved:
            why = "is declared twice" if clash else f"is vf's health port ({HEALTH_PORT})"
            problems.append(
                _problem(
                    "VF_COMPONENT_PORT",
                    f"{label}: port {name!r} ({number}) {why}",
                    "give every port its own name and number; vf declares the health port",
                    where,
                )
            )
        names.add(name)
        numbers.add(number)
    return problems


def check_params(
    document: dict[str, Any], params: object, *, label: str, where: str
) -> tuple[str, list[Problem]]:
    """The params as canonical JSON, and every way they break the descriptor's params schema."""

    def bad(what: str, remedy: str) -> tuple[str, list[Problem]]:
        return "{}", [_problem("VF_COMPONENT_PARAMS", f"{label}: {what}", remedy, where)]

    given = {} if params is None else params
    if not isinstance(given, Mapping):
        return bad(f"params={safe_repr(params)} is not a mapping", "pass params={'key': value}")
    problem = json_problem(dict(given), "params")
    if problem is not None:
        return bad(
            f"params value {problem} is not JSON-serializable",
            "pass only str, int, float, bool, None, lists and str-keyed dicts",
        )
    plain = json.loads(json.dumps(dict(given)))
    schema = document.get("params")
    if schema is None:
        if plain:
            return bad(
                f"the descriptor declares no params, but {', '.join(sorted(plain))} were given",
                "drop params=, or declare a params schema in the descriptor",
            )
        return "{}", []
    validator = schema_validator(schema)
    try:
        errors = sorted(validator.iter_errors(plain), key=lambda e: e.json_path)
    except Exception as exc:  # an unresolvable $ref, a pattern Python cannot compile
        return bad(f"params cannot be checked: {exc}", "fix the descriptor's params schema")
    problems = [
        _problem(
            "VF_COMPONENT_PARAMS",
            f"{label}: params{error.json_path[1:]}: {error.message}",
            "pass params that satisfy the descriptor's params schema",
            where,
        )
        for error in errors
    ]
    text = json.dumps(plain, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text, problems


def build_spec(document: dict[str, Any], *, directory: Path) -> ComponentSpec:
    """The spec of a descriptor that passed :func:`check_descriptor`."""
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    digest = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    resources = document.get("resources") or {}
    gpu = resources.get("gpu")
    local = (document.get("runtime") or {}).get("localCommand")
    return ComponentSpec(
        name=document["name"],
        kind=document["kind"],
        ref=f"{document['name']}@sha256:{digest}",
        image=document.get("image"),
        command=tuple(document.get("command") or ()),
        ports=tuple(
            ComponentPort(name=p["name"], port=p["port"], protocol=p.get("protocol", "TCP"))
            for p in document.get("ports") or ()
        ),
        finite=bool(document.get("finite", True)),
        gpu_count=None if gpu is None else int(gpu.get("count", 1)),
        gpu_memory_gib=None if gpu is None else gpu.get("memoryGiB"),
        cpu=resources.get("cpu"),
        memory=resources.get("memory"),
        local_command=None if local is None else tuple(local),
        directory=str(directory),
    )


def local_command(spec: ComponentSpec) -> tuple[str, ...] | None:
    """The argv that runs ``spec`` on this machine, or None when it declares none.

    ``{python}`` in ``runtime.localCommand`` is the interpreter running vf and ``{dir}`` the
    descriptor's folder; a relative program path (``bin/tool``) is relative to that folder.
    """
    if spec.local_command is None:
        return None
    argv = [
        arg.replace("{python}", sys.executable).replace("{dir}", spec.directory)
        for arg in spec.local_command
    ]
    program = argv[0]
    if not os.path.isabs(program) and "/" in program:
        argv[0] = str(Path(spec.directory) / program)
    return tuple(argv)
