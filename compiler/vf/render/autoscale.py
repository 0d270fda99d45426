"""Render the plan's autoscaling: KEDA ScaledObjects, and Deployments that leave replicas to them.

A scaled Deployment has no ``spec.replicas`` so that no GitOps controller fights the
autoscaler (ADR 0013); the workers to scale are decided in the plan (``plan.autoscaling``).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

from vf.ir.plan import Plan, ScaleBehavior, Scaler
from vf.textio.objects import Obj
from vf_runtime.labels import OPTIONAL_LABEL

KEDA_API = "keda.sh/v1alpha1"


def hpa_behavior(behavior: ScaleBehavior) -> Obj:
    """What KEDA hands as ``advanced.horizontalPodAutoscalerConfig.behavior`` to the HPA it
    makes (autoscaling/v2 ``HorizontalPodAutoscalerBehavior``); the chart's values hold it."""
    scale_up = {
        "stabilizationWindowSeconds": behavior.scale_up_window,
        "policies": [
            {
                "type": "Percent",
                "value": behavior.scale_up_percent,
                "periodSeconds": behavior.scale_up_period,
            }
        ],
    }
    scale_down = {"stabilizationWindowSeconds": behavior.scale_down_window}
    return {"scaleUp": scale_up, "scaleDown": scale_down}


def scaled_object(plan: Plan, *, scaler: Scaler) -> Obj:
    """The KEDA ScaledObject of one scaler (``nats-jetstream`` trigger per input)."""
    obj: Obj = {
        "apiVersion": KEDA_API,
        "kind": "ScaledObject",
        "metadata": {
            "name": scaler.deployment,
            "namespace": plan.namespace,
            # optional: a cluster without KEDA runs the flow without it (one replica each)
            "labels": {**dict(scaler.labels), OPTIONAL_LABEL: "true"},
        },
        "spec": {
            "scaleTargetRef": {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "name": scaler.deployment,
            },
            "minReplicaCount": scaler.min_replicas,
            "maxReplicaCount": scaler.max_replicas,
            "pollingInterval": scaler.polling_interval,
            "cooldownPeriod": scaler.cooldown,
            "triggers": [
                {
                    "type": "nats-jetstream",
                    "metadata": {
                        "natsServerMonitoringEndpoint": scaler.endpoint,
                        "account": scaler.account,
                        "stream": trigger.stream,
                        "consumer": trigger.consumer,
                        "lagThreshold": str(scaler.lag_threshold),
                    },
                }
                for trigger in scaler.triggers
            ],
        },
    }
    if scaler.behavior is not None:
        behavior = hpa_behavior(scaler.behavior)
        obj["spec"]["advanced"] = {"horizontalPodAutoscalerConfig": {"behavior": behavior}}
    return obj


def apply_autoscaling(plan: Plan, *, objects: Sequence[Obj]) -> list[Obj]:
    """The objects with each scaled Deployment's replicas left to KEDA, plus the ScaledObjects."""
    scalers = plan.autoscaling or ()
    scaled = {scaler.deployment for scaler in scalers}
    out: list[Obj] = []
    for obj in objects:
        if obj["kind"] == "Deployment" and obj["metadata"]["name"] in scaled:
            unreplicated = copy.deepcopy(obj)
            del unreplicated["spec"]["replicas"]
            out.append(unreplicated)
        else:
            out.append(obj)
    out.extend(scaled_object(plan, scaler=scaler) for scaler in scalers)
    return out
