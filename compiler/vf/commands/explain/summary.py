"""Machine-readable summaries for ``--format json`` on ``explain`` and ``validate``."""

from __future__ import annotations

import json
from typing import Any

from vf.errors import VfError
from vf.ir.plan import plan_to_json
from vf.pipeline import CompileResult
from vf.textio.objects import Obj


def json_text(document: Any) -> str:
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def explain_document(result: CompileResult) -> Obj:
    """What ``vf explain`` says, as data: per environment, workloads, channels, verdicts."""
    graph = result.graph
    environments = []
    for plan in result.plans:
        document = plan_to_json(plan)
        scaled = sorted(
            o["spec"]["scaleTargetRef"]["name"]
            for o in result.objects[plan.environment]
            if o["kind"] == "ScaledObject"
        )
        workloads = []
        for workload in plan.workloads:
            node = graph.node(workload.node)
            workloads.append(
                {
                    "node": workload.node,
                    "node_kind": workload.node_kind,
                    "kind": workload.kind,
                    "replicas": workload.replicas,
                    "autoscaled": workload.name in scaled,
                    "image": workload.image,
                    "parents": list(node.parents),
                    "partition_by": node.partition_by,
                }
            )
        environments.append(
            {
                "name": plan.environment,
                "namespace": plan.namespace,
                "kubernetes_version": plan.kubernetes_version,
                "run_id": plan.run_id,
                "run_id_source": plan.run_id_source,
                "workloads": workloads,
                "channels": [
                    {
                        "node": c.node,
                        "profile": c.profile,
                        "stream": c.stream,
                        "readers": len(c.readers),
                    }
                    for c in plan.channels
                ],
                "admission": (document.get("admission") or {}).get("findings", []),
                "warnings": list(plan.warnings),
            }
        )
    return {
        "flow_id": result.plans[0].flow_id,
        "flow_type": graph.flow_type,
        "nodes": len(graph.nodes),
        "environments": environments,
    }


def validate_document(result: CompileResult) -> Obj:
    return {
        "ok": True,
        "nodes": len(result.graph.nodes),
        "environments": [p.environment for p in result.plans],
        "warnings": {p.environment: list(p.warnings) for p in result.plans},
    }


def problems_document(error: VfError) -> Obj:
    return {
        "ok": False,
        "exit_code": error.exit_code,
        "problems": [
            {"code": p.code, "what": p.what, "remedy": p.remedy, "where": p.where}
            for p in error.problems
        ],
    }
