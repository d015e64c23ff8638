"""The Job side of the protocol: start a prebuilt-workload Job once its Workload is admitted, finish the Workload
once the Job ends.

Starting is one Job write: ``spec.suspend: false`` with what the admission adds to the pod template (flavors'
node labels and tolerations, TAS markings, admission checks' pod set updates; ``federation.pod_injection``, which
kfed-manager also uses to create a Job copy already started once the agent admitted its Workload copy).

Ending is one Workload status write: ``Finished=True`` with reason ``Succeeded`` or ``Failed`` and the Job
condition's message, which releases the workload's quota.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from federation.admission.api_quotas import FlavorInfo
from federation.admission.api_workloads import FINISHED_STATE, is_admitted, workload_state
from federation.api.labels import PREBUILT_WORKLOAD_ANNOTATION, PREBUILT_WORKLOAD_LABEL
from federation.api.workload import FINISHED
from federation.conditions import conditions_of, set_condition, workload_generation
from federation.pod_injection import FlavorInjection, start_patch
from federation.protocol import MANAGER_UID_LABEL, REASON_FAILED, REASON_SUCCEEDED

Obj = dict[str, Any]

JOB_SUCCEEDED_MESSAGE = "Job finished successfully"


@dataclass(frozen=True, slots=True)
class StartJob:
    """Merge-patch ``patch`` into the Job (at its resourceVersion)."""

    patch: Obj
    flavors: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class FinishWorkload:
    """Merge ``status`` into the Workload; ``reason`` is Succeeded or Failed."""

    status: Obj
    reason: str
    message: str


def prebuilt_workload_name(job: Mapping[str, Any]) -> str | None:
    """The Job's prebuilt Workload, as Kueue v0.19 reads it: the annotation (what a stock Kueue MultiKueue manager
    writes), else the label (what kfed-manager and older Kueue write)."""
    meta = job.get("metadata") or {}
    name = (meta.get("annotations") or {}).get(PREBUILT_WORKLOAD_ANNOTATION) or (meta.get("labels") or {}).get(
        PREBUILT_WORKLOAD_LABEL
    )
    return str(name) if name else None


def job_finished(job: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(reason, message)`` when the Job has a true Complete or Failed condition."""
    for condition in conditions_of(job):
        if condition.get("status") != "True":
            continue
        if condition.get("type") == "Complete":
            return REASON_SUCCEEDED, str(condition.get("message") or JOB_SUCCEEDED_MESSAGE)
        if condition.get("type") == "Failed":
            reason = str(condition.get("reason") or "")
            message = str(condition.get("message") or "")
            return REASON_FAILED, message or (f"Job failed: {reason}" if reason else "Job failed")
    return None


def finish_decision(job: Mapping[str, Any], workload: Mapping[str, Any], *, now: dt.datetime) -> FinishWorkload | None:
    """Finish the workload when the Job ended and the workload is not finished yet."""
    ended = job_finished(job)
    if ended is None or workload_state(workload) == FINISHED_STATE:
        return None
    return finish_with(workload, *ended, now=now)


def finish_with(workload: Mapping[str, Any], reason: str, message: str, *, now: dt.datetime) -> FinishWorkload:
    """``Finished=True`` with ``reason`` and ``message`` on the workload."""
    conditions, _ = set_condition(
        conditions_of(workload),
        condition_type=FINISHED,
        status=True,
        reason=reason,
        message=message,
        now=now,
        observed_generation=workload_generation(workload),
    )
    return FinishWorkload({"conditions": conditions}, reason, message)


FINISH_GRACE_SECONDS = 10.0
"""How long a kfed-manager copy whose Job ended stays finished in the agent's memory only (see ``finish_deferred``)."""


def finish_deferred(workload: Mapping[str, Any]) -> bool:
    """Whether the ``Finished`` write on this copy waits ``FINISH_GRACE_SECONDS``.

    kfed-manager (its copies carry ``kfed.io/manager-workload-uid``) finishes its own Workload from the Job's status
    and then deletes the copy, so a ``Finished`` on the copy is a write nobody reads, one per Job. The agent treats
    the copy as finished at once in its own memory (its quota is free for the next copy and in the capacity report)
    and writes the condition only if the copy is still there after the grace (the manager is down or slow). Copies
    from a Kueue manager, which reads the copy's ``Finished``, are finished at once."""
    labels = (workload.get("metadata") or {}).get("labels") or {}
    return MANAGER_UID_LABEL in labels


def finished_view(workload: Mapping[str, Any], finish: FinishWorkload) -> dict[str, Any]:
    """The copy as it will be once finished, same resourceVersion: what the agent's passes see during the grace."""
    return {**workload, "status": {**(workload.get("status") or {}), **finish.status}}


def start_decision(
    job: Mapping[str, Any], workload: Mapping[str, Any], *, flavors: Mapping[str, FlavorInfo]
) -> StartJob | None:
    """Unsuspend a suspended Job whose workload is admitted, with what the admission adds to its pod template
    (``federation.pod_injection``). Raises ``KeyError`` naming a ResourceFlavor the assignment uses that does not
    exist (the caller reports it)."""
    spec = job.get("spec") or {}
    if spec.get("suspend") is not True or not is_admitted(workload) or job_finished(job) is not None:
        return None
    if workload_state(workload) == FINISHED_STATE:
        return None
    annotations = (job.get("metadata") or {}).get("annotations") or {}
    start = start_patch(spec, workload, flavors=injections(flavors), annotations=annotations)
    return StartJob(start.patch, start.flavors)


def injections(flavors: Mapping[str, FlavorInfo]) -> dict[str, FlavorInjection]:
    """What each flavor adds to the pods assigned to it."""
    return {name: FlavorInjection(info.spec.node_labels, info.tolerations) for name, info in flavors.items()}


__all__ = [
    "FINISH_GRACE_SECONDS",
    "FinishWorkload",
    "StartJob",
    "finish_decision",
    "finish_deferred",
    "finish_with",
    "finished_view",
    "injections",
    "job_finished",
    "prebuilt_workload_name",
    "start_decision",
]
