"""The values of the provision role template (``templates/helm/roles/provision.yaml``, ADR
243) from one environment's plan: ``provision``, the Job as vf planned it (a Helm hook in the
chart only), and ``topology``, its ConfigMaps' names and the nodes' records, one JSON line
each, without the count that ``nodes.<node>.replicas`` holds and the template writes back.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from vf.ir.plan import Plan
from vf.render.objects import container_resources, provision_env
from vf.textio.jsontext import compact_json
from vf.textio.objects import Obj

PROVISION_SECTION = "provision"
TOPOLOGY = "topology"


def provision_values(plan: Plan) -> Obj:
    prov = plan.provision
    counts = {w.node: w.replicas for w in plan.workloads}
    shards = [[_record(line, counts) for line in t.splitlines()] for t in prov.topology_shards]
    job: Obj = {
        "job": prov.job,
        "image": prov.image,
        "resources": container_resources(prov.resources),
        "backoffLimit": prov.backoff_limit,
        "ignoreDisruptions": prov.ignore_disruptions,
        "env": provision_env(plan),
    }
    topology = {"configMaps": list(prov.topology_configmaps), "shards": shards}
    return {PROVISION_SECTION: job, TOPOLOGY: topology}


def provision_objects(values: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    for index, _ in enumerate((values.get(TOPOLOGY) or {}).get("configMaps") or ()):
        yield "ConfigMap", f"topology-{index}"
    if (values.get("workerPod") or {}).get("replicasConfigMap"):
        yield "ConfigMap", "replicas"
    if values.get(PROVISION_SECTION):
        yield "Job", PROVISION_SECTION


def _record(line: str, counts: Mapping[str, int]) -> str:
    """A node's topology line without its count where the node's values hold the same."""
    record = json.loads(line)
    if counts.get(record.get("name")) == record.get("replicas"):
        del record["replicas"]
    return compact_json(record)
