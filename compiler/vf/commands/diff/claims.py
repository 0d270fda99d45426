"""What ``vf diff`` says about a changed PersistentVolumeClaim: the API server refuses a new
storage class and a smaller size, and grows a claim only where its class allows it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vf.commands.diff.plan import BREAKING, WARNING, Finding
from vf.textio.quantity import quantity_bytes


def _size(spec: Mapping[str, Any]) -> Any:
    return ((spec.get("resources") or {}).get("requests") or {}).get("storage")


# argo-cd compares with a server-side dry-run apply of every object; one the API server
# refuses turns the Application's whole comparison into an error (ADR 206)
ARGOCD_REFUSAL = (
    ". Under Argo CD (ServerSideDiff=true) the refused dry-run makes the whole "
    "Application's comparison an error, so nothing else of it syncs until this is done"
)


def _class(name: Any) -> str:
    return "(the cluster's default)" if name is None else str(name)


def claim_findings(name: str, *, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Finding]:
    subject = f"PersistentVolumeClaim/{name}"
    found = []
    before_class, after_class = old.get("storageClassName"), new.get("storageClassName")
    if before_class != after_class:
        keep = "" if before_class is None else f", or keep it: storage_class: {before_class}"
        found.append(
            Finding(
                category="immutable",
                subject=subject,
                message=f"storage class {_class(before_class)} → {_class(after_class)}: the "
                "API server refuses this on an existing claim. Copy the data out, delete the "
                "claim (its volume goes with it unless reclaimPolicy is Retain), then sync"
                + keep
                + ARGOCD_REFUSAL,
                severity=BREAKING,
            )
        )
    before, after = quantity_bytes(_size(old)), quantity_bytes(_size(new))
    if before is not None and after is not None and after < before:
        found.append(
            Finding(
                category="immutable",
                subject=subject,
                message=f"size {_size(old)} → {_size(new)}: a claim never shrinks; the API "
                "server refuses it. Keep the size, or copy the data out and delete the claim"
                + ARGOCD_REFUSAL,
                severity=BREAKING,
            )
        )
    elif before is not None and after is not None and after > before:
        found.append(
            Finding(
                category="storage",
                subject=subject,
                message=f"size {_size(old)} → {_size(new)}: grows in place only if its storage "
                "class has allowVolumeExpansion: true; otherwise the sync is refused",
                severity=WARNING,
            )
        )
    return found
