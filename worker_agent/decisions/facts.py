"""What the agent's passes ask of every Workload and Job, derived from the object alone.

Why this module exists: the reconciler's passes ask the same questions of every Workload and Job (which Workloads are
evicted but still hold quota, which may have an admission-check or requeue step to take, which kfed-manager copies
wait for their Job copy, when an admitted Workload's maximum execution time is spent, which Workloads their Jobs left
behind, which Workload each Job belongs to). The answers depend on the object alone, so
``worker_agent.indexes`` keeps them by key, derives them again only for the objects that changed, and the passes ask
the full decisions only where an answer says there may be something to do. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from federation.admission.deactivation import needs_deactivation_eviction
from federation.admission.execution_time import execution_deadline
from federation.admission.orphans import left_behind
from federation.admission.pods_ready import ready_pod_count
from federation.admission.requeued import may_take_requeued_step
from federation.protocol import MANAGER_UID_LABEL
from federation.reclaimable_pods import reclaimable_pods
from worker_agent.decisions.checks import may_take_checks_step
from worker_agent.decisions.job_copies import admitted_since, waits_for_job_copy
from worker_agent.decisions.jobs import job_finished, prebuilt_workload_name
from worker_agent.decisions.local_jobs import local_workload_key
from worker_agent.decisions.preemption import evicted_holding_quota
from worker_agent.decisions.run_limits import readiness_judged_here, unready_quota_holder


@dataclass(frozen=True, slots=True)
class WorkloadFacts:
    evicted_holding_quota: bool
    """``decisions.preemption.evicted_holding_quota``: its Job must stop and its quota be released."""
    may_take_checks_step: bool
    """``decisions.checks.may_take_checks_step``: ``checks_step`` may have a step for it."""
    may_take_requeued_step: bool
    """``federation.admission.requeued.may_take_requeued_step``: ``Requeued=False`` may become True."""
    needs_deactivation_eviction: bool
    """``federation.admission.deactivation.needs_deactivation_eviction``: deactivated here, not evicted yet."""
    job_copy_admitted_since: float | None
    """For a kfed-manager copy waiting for its Job copy (``decisions.job_copies.waits_for_job_copy``), when it was
    admitted (``admitted_since``); None for every other Workload."""
    readiness_judged_here: bool = False
    """``decisions.run_limits.readiness_judged_here``: its pods' readiness is judged here (waitForPodsReady)."""
    unready_quota_holder: bool = False
    """``decisions.run_limits.unready_quota_holder``: it holds back new admissions under ``blockAdmission``."""
    execution_deadline: float | None = None
    """For an admitted Workload with ``maximumExecutionTimeSeconds``, when its budget is spent (epoch seconds,
    ``federation.admission.execution_time.execution_deadline``); None for every other Workload."""
    left_behind: bool = False
    """``federation.admission.orphans.left_behind``: it lost its owner; once its Job is gone too, it is finished."""


def workload_facts(workload: Mapping[str, Any]) -> WorkloadFacts:
    return WorkloadFacts(
        evicted_holding_quota=evicted_holding_quota(workload),
        may_take_checks_step=may_take_checks_step(workload),
        may_take_requeued_step=may_take_requeued_step(workload),
        needs_deactivation_eviction=needs_deactivation_eviction(workload),
        job_copy_admitted_since=admitted_since(workload) if waits_for_job_copy(workload) else None,
        readiness_judged_here=readiness_judged_here(workload),
        unready_quota_holder=unready_quota_holder(workload),
        execution_deadline=execution_deadline(workload),
        left_behind=left_behind(workload),
    )


def job_change_matters(event_type: str, job: Mapping[str, Any], old: Mapping[str, Any] | None) -> bool:
    """Whether a watch event of a Job can change what the agent decides about it: everything but a status update
    that leaves what the passes read as it was (the Job controller writes a Job's status several times in its life,
    e.g. ``ready`` or ``uncountedTerminatedPods``, and each woke a whole pass). The passes read the Job's uid, labels
    and spec, the Workload it names, ``status.active`` (a stopped Job of an evicted Workload) and its true
    ``Complete`` or ``Failed`` condition (``decisions.jobs.job_finished``), how many of its pods are reclaimable
    (``federation.reclaimable_pods``); and, of a Job that is not one of kfed-manager's copies, how many of its pods
    are ready (waitForPodsReady, ``federation.admission.pods_ready``)."""
    if old is None or event_type != "MODIFIED":
        return True
    return _read_of(job) != _read_of(old)


def _read_of(job: Mapping[str, Any]) -> tuple[Any, ...]:
    return (
        (job.get("metadata") or {}).get("uid"),
        prebuilt_workload_name(job),
        (job.get("metadata") or {}).get("labels"),
        job.get("spec"),
        (job.get("status") or {}).get("active"),
        job_finished(job),
        None if MANAGER_UID_LABEL in ((job.get("metadata") or {}).get("labels") or {}) else ready_pod_count(job),
        reclaimable_pods(job),
    )


def job_target(job: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(namespace, name)`` of the Workload of the Job: the prebuilt Workload it names
    (``decisions.jobs.prebuilt_workload_name``), or, for a Job queued on this worker itself, Kueue's name for its
    Workload (``decisions.local_jobs``)."""
    name = prebuilt_workload_name(job)
    if name is None:
        return local_workload_key(job)
    return str((job.get("metadata") or {}).get("namespace", "")), name


__all__ = ["WorkloadFacts", "job_change_matters", "job_target", "workload_facts"]
