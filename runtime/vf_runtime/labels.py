"""The keys vf marks what it owns with: Kubernetes labels and annotations, stream metadata.

One vocabulary for the compiler (labels on every object it renders, read back by its
emitters and by ``vf run-tree``) and the runtime (metadata on every stream it creates,
read back by ``vf runs`` and reclamation). Values are plain strings; nothing here
imports anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

DOMAIN = "vf.dev"
FLOW_LABEL, RUN_LABEL, NODE_LABEL, INFRA_LABEL, ENVIRONMENT_LABEL, METRICS_LABEL = (
    f"{DOMAIN}/{key}" for key in ("flow", "run", "node", "infra", "environment", "metrics")
)
OWNER_KEY, ROLE_KEY = f"{DOMAIN}/owner", f"{DOMAIN}/role"  # stream metadata only
GENERATION_KEY = f"{DOMAIN}/generation"  # a pod template annotation, and stream metadata
# stream metadata: vf-provision capped this superseded stream at what it held (PROV-6); a
# worker never raises its byte limit again, only a provisioning of its own run does
CAPPED_KEY = f"{DOMAIN}/capped"
CONFIG_HASH_KEY = f"{DOMAIN}/config-hash"  # a pod template annotation
# a workload's and its pod template's annotation: the node's whole name, where the object's
# name or its vf.dev/node label had to shorten it (ADR 0209)
NODE_NAME_KEY = f"{DOMAIN}/node-name"
RUN_TREE_LABEL = f"{DOMAIN}/run-tree"  # a container's label: the vf run-tree run that started it
# on each Application and Kustomization of an environment delivered in shards (ADR 220):
# the shard it reads, and what that shard holds, in words
SHARD_KEY, SHARD_HOLDS_KEY = f"{DOMAIN}/shard", f"{DOMAIN}/shard-holds"
# an object of an API (a CRD: KEDA's, the Prometheus Operator's) the cluster may lack; every
# delivery keeps the rest of the flow running without it (ADR 0202)
OPTIONAL_LABEL = f"{DOMAIN}/optional"

PART_OF, NAME, INSTANCE, COMPONENT, MANAGED_BY = (
    f"app.kubernetes.io/{key}" for key in ("part-of", "name", "instance", "component", "managed-by")
)
NAMESPACE_NAME = "kubernetes.io/metadata.name"  # the label Kubernetes puts on every Namespace
POD_SECURITY = "pod-security.kubernetes.io"  # the prefix of the Pod Security admission labels
MANAGER = "vf"  # the value of managed-by, and of a stream's owner
PROVISION = "provision"  # the component of the provision Job
BROKER_CONFIG = "broker-config"  # the component of the provision topology ConfigMap
REPLICA_COUNTS = "replica-counts"  # the ConfigMap of the replica counts read by reference


def labels_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """A Kubernetes object's labels (none: empty)."""
    return obj.get("metadata", {}).get("labels") or {}


def is_provision_job(obj: Mapping[str, Any]) -> bool:
    return obj.get("kind") == "Job" and labels_of(obj).get(COMPONENT) == PROVISION


def is_optional(obj: Mapping[str, Any]) -> bool:
    """An object the flow runs without, on a cluster that does not serve its kind."""
    return labels_of(obj).get(OPTIONAL_LABEL) == "true"


def is_broker_config(obj: Mapping[str, Any]) -> bool:
    """The ConfigMap that holds a run's provision topology."""
    return labels_of(obj).get(COMPONENT) == BROKER_CONFIG
