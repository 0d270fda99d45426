"""What the role modules share: the release's namespace in a value, and a values entry of
the keys a record sets."""

from __future__ import annotations

from typing import Any

from vf.textio.objects import Obj

# a name in the environment's namespace names the release's: the template puts the
# release's namespace in place of this text (a plain replace, nothing evaluated)
RELEASE_NAMESPACE = "{{ .Release.Namespace }}"


def in_release(namespace: str, value: str) -> str:
    """``value`` with a Service of ``namespace`` named in the release's namespace."""
    own = f".{namespace}.svc"
    return value.replace(own, f".{RELEASE_NAMESPACE}.svc") if own in value else value


def entry(**keys: Any) -> Obj:
    """A values entry of ``keys`` but those that are ``None``: an entry holds what its record
    sets, and a template takes a key it lacks for one not set."""
    return {key: value for key, value in keys.items() if value is not None}
