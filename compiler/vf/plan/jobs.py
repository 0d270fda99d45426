"""Job names that change whenever a Job's pod template does.

A Job's pod template is immutable. A Job whose template changes therefore gets a new name,
so every delivery tool replaces it the same way: it creates the new Job and prunes the old
one (Argo CD prune, Flux prune, Helm deleting what left the release, ``kubectl apply
--prune``). No Job is ever changed in place, and no tool needs a force or replace rule.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace

from vf import names
from vf.ir.gpu import GpuPlan
from vf.ir.plan import Provision, Workload, record_to_json
from vf.ir.records import PodOptions
from vf.textio.jsontext import compact_json

# podFailurePolicy is beta and on by default from Kubernetes 1.26 (alpha, off, in 1.25: the
# API server drops the field), GA from 1.31; so is the DisruptionTarget pod condition.
POD_FAILURE_POLICY_MINOR = 26
TAG_LEN = 8  # "g" or "t" and 7 hex digits
_ROOM = names.K8S_NAME_MAX - TAG_LEN - 1


def template_tag(record: object, *, generation: str | None) -> str:
    """What a Job's name carries: the BATCH generation (a digest of all the flow's work, so
    every Job is replaced together), else a digest of the Job's own plan record."""
    if generation is not None:
        return generation
    text = compact_json(record_to_json(record))
    return "t" + hashlib.sha256(text.encode()).hexdigest()[:7]


def ignores_disruptions(kubernetes_version: str) -> bool:
    """Whether a Job at this target version carries a podFailurePolicy that ignores pod
    disruptions. It is a plan field, so it enters each Job's tag: the field is immutable
    on a Job, and a Job that gains it gets a new name like any other template change."""
    return int(kubernetes_version.split(".")[1]) >= POD_FAILURE_POLICY_MINOR


def tagged_name(*parts: str, tag: str) -> str:
    """``parts`` as a name that fits with ``-<tag>`` appended (hashed to fit when long)."""
    return f"{names.k8s_name(*parts, limit=_ROOM)}-{tag}"


def tag_jobs(
    workloads: tuple[Workload, ...],
    *,
    flow_id: str,
    run_id: str,
    generation: str | None,
    gpu: GpuPlan | None,
    pods: PodOptions,
) -> tuple[Workload, ...]:
    """Each Job named with its template tag (which covers the Job's GPU grant: its pods
    name the claim template)."""
    out = []
    for w in workloads:
        if w.kind != "Job":
            out.append(w)
            continue
        grant = gpu.grant_for(w.node) if gpu is not None else None
        tag = template_tag((w, grant, pods), generation=generation)
        out.append(replace(w, name=tagged_name("vf", flow_id, run_id, w.node, tag=tag)))
    return tuple(out)


def tag_provision(
    provision: Provision, *, flow_id: str, run_id: str, generation: str | None, pods: PodOptions
) -> Provision:
    tag = template_tag((provision, pods), generation=generation)
    return replace(provision, job=tagged_name("vf", flow_id, run_id, "provision", tag=tag))


def broker_configmap(*, flow_id: str, run_id: str, generation: str | None) -> str:
    """The ConfigMap every worker reads: per generation under BATCH, so a running Job's pods
    never see the next generation's ``VF_GENERATION``."""
    if generation is None:
        return names.k8s_name("vf", flow_id, run_id, "broker")
    return tagged_name("vf", flow_id, run_id, "broker", tag=generation)
