"""YAML readers whose every failure is a ``YAMLError`` with the place of the bad value.

ruamel's constructors turn a scalar into a value with Python's ``int()``, ``float()``,
``datetime`` and dictionary lookups, and let their exceptions through: ``+_`` or
``0x_`` (which the YAML 1.2 resolver takes for integers), ``!!int a``, ``!!bool a`` or
``2001-13-45`` end a load with an ``IndexError``, ``ValueError`` or ``KeyError`` that
says neither what nor where. vf reads YAML from users (vf.yaml, component descriptors,
the committed tree, run-tree secrets), so it reads through these constructors, which
report such a value as a ``ConstructorError`` marked at the value. Every caller
already turns a ``YAMLError`` into a named error with its line.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Literal

from ruamel.yaml import YAML
from ruamel.yaml.constructor import ConstructorError, RoundTripConstructor, SafeConstructor
from ruamel.yaml.nodes import Node, ScalarNode

_VALUE_ERRORS = (ValueError, IndexError, KeyError, TypeError, OverflowError)


def _guarded(node: Node, construct: Callable[[], Any]) -> Any:
    try:
        return construct()
    except _VALUE_ERRORS:
        kind = str(node.tag).rsplit(":", 1)[-1]
        what = repr(node.value) if isinstance(node, ScalarNode) else "this value"
        raise ConstructorError(
            None,
            None,
            f"{what} is not a valid {kind}; quote it to keep it as text",
            node.start_mark,
        ) from None


class _GuardedRoundTrip(RoundTripConstructor):
    def construct_non_recursive_object(self, node: Node, tag: str | None = None) -> Any:
        parent = super().construct_non_recursive_object
        return _guarded(node, lambda: parent(node, tag))


class _GuardedSafe(SafeConstructor):
    def construct_non_recursive_object(self, node: Node, tag: str | None = None) -> Any:
        parent = super().construct_non_recursive_object
        return _guarded(node, lambda: parent(node, tag))

    def construct_yaml_float(self, node: Node) -> Any:
        """A plain number too large for a double (``6e56571281414078``) is text, as Go's
        YAML readers take it (yaml.v2 and v3 ``resolve``: a float whose
        ``strconv.ParseFloat`` fails stays a string), and as kustomize writes such a string
        unquoted: the objects read are the ones kubectl, Argo CD and Flux read."""
        value = super().construct_yaml_float(node)
        plain = isinstance(node, ScalarNode) and node.style is None
        if plain and math.isinf(value) and "inf" not in str(node.value).lower():
            return str(node.value)
        return value


_GuardedSafe.add_constructor("tag:yaml.org,2002:float", _GuardedSafe.construct_yaml_float)


def reader(typ: Literal["rt", "safe"]) -> YAML:
    """A ruamel ``YAML`` of ``typ`` whose bad scalars raise ``ConstructorError``."""
    if typ == "rt":
        yaml = YAML(typ="rt")
        yaml.Constructor = _GuardedRoundTrip
    else:
        yaml = YAML(typ="safe", pure=True)
        yaml.Constructor = _GuardedSafe
    return yaml
