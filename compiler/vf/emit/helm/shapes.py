"""What the role modules share: the record of a family of role templates, which
``vf.emit.helm.roles`` keeps a table of, and the marker of the release's namespace."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from vf.ir.plan import Plan
from vf.textio.objects import Obj

# a name in the environment's namespace names the release's: the template puts the
# release's namespace in place of this text (a plain replace, nothing evaluated)
RELEASE_NAMESPACE = "{{ .Release.Namespace }}"


@dataclass(frozen=True, kw_only=True)
class Family:
    """One family of role templates (``templates/helm/roles/<file>``); the schema of its
    sections is in ``templates/helm/values.schema.json``."""

    files: tuple[str, ...]
    sections: tuple[str, ...]  # its sections, empty in values.yaml (no environment's)
    owns: Callable[[Obj], bool]  # an object of the overlays its templates render
    values: Callable[[Plan], Obj]  # its sections of one environment, from the plan
    # the kind of each object its templates render from one environment's values, with a
    # key that is the same in every environment for what is one object of the chart
    objects: Callable[[Mapping[str, Any]], Iterable[tuple[str, str]]]


def in_release(namespace: str, value: str) -> str:
    """``value`` with a Service of ``namespace`` named in the release's namespace."""
    own = f".{namespace}.svc"
    return value.replace(own, f".{RELEASE_NAMESPACE}.svc") if own in value else value
