"""Which changes of a manager Workload can change what the global scheduler decides (pure).

Every Workload event used to start a scheduling pass, and a pass reads every Workload: the remote sync's
``Admitted``, mirrored-status and admission-check writes, and the scheduler's own ``Pending`` messages, each cost
a full pass that could not decide anything new (with a 300-Job burst, most of kfed-manager's CPU). A pass is
needed when a Workload appears or goes, moves between pending / reserved / finished / inactive, its spec
(queue, priority, pod sets, active) or the annotations dispatch reads change, an eviction starts or ends, its
requeue state or the ClusterQueue holding its quota changes, or it starts being deleted.

It also says which changes put a Workload's next remote-sync step on a Job's critical path (sending the copies,
marking it Admitted, bringing a finished Job's final status back): those go first in the remote sync's queue, ahead
of running-status mirrors and clean-ups.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from federation.admission.api_workloads import workload_state
from federation.api.workload import EVICTED
from federation.conditions import is_true
from manager.decisions.sync import job_finish


def scheduling_inputs(workload: Mapping[str, Any]) -> tuple[object, ...]:
    meta = workload.get("metadata") or {}
    status = workload.get("status") or {}
    generation = meta.get("generation")
    return (
        workload_state(workload),
        generation if generation is not None else workload.get("spec"),
        tuple(sorted((meta.get("annotations") or {}).items())),
        is_true(workload, EVICTED),
        str(status.get("requeueState")),
        (status.get("admission") or {}).get("clusterQueue"),
        meta.get("deletionTimestamp") is not None,
    )


def needs_scheduling(event: str, workload: Mapping[str, Any], old: Mapping[str, Any] | None) -> bool:
    """Whether this watch event can change a scheduling decision."""
    if event != "MODIFIED" or old is None:
        return True
    return scheduling_inputs(workload) != scheduling_inputs(old)


def newly_reserved(workload: Mapping[str, Any], old: Mapping[str, Any] | None) -> bool:
    """The scheduler just reserved quota for it: its copies are to be sent, on the Job's critical path."""
    return (
        is_true(workload, "QuotaReserved")
        and not is_true(workload, "Admitted")
        and (old is None or not is_true(old, "QuotaReserved"))
    )


def released(workload: Mapping[str, Any], old: Mapping[str, Any] | None) -> bool:
    """The Workload's quota reservation just went (evicted, preempted or deactivated, and released)."""
    return old is not None and is_true(old, "QuotaReserved") and not is_true(workload, "QuotaReserved")


def edited_while_queued(event: str, workload: Mapping[str, Any], old: Mapping[str, Any] | None) -> bool:
    """Someone changed the spec of a Workload that holds no quota (``kubectl edit``): its Job decides what it asks
    for, so the Job controller brings the Workload back in line with it, as Kueue does on any Workload change. An
    admitted Workload is left alone: following an edit there would stop a running Job."""
    return (
        event == "MODIFIED"
        and old is not None
        and (workload.get("metadata") or {}).get("generation") != (old.get("metadata") or {}).get("generation")
        and not is_true(workload, "QuotaReserved")
        and not is_true(workload, "Finished")
    )


def copy_admitted_first(copy: Mapping[str, Any], workload: Mapping[str, Any] | None) -> bool:
    """A worker admitted the copy and the manager has not marked the Workload Admitted yet (the next step on the
    Job's critical path: the manager Job is unsuspended with it)."""
    return is_true(copy, "QuotaReserved") and workload is not None and not is_true(workload, "Admitted")


def job_copy_finished_first(job_copy: Mapping[str, Any], workload: Mapping[str, Any] | None) -> bool:
    """The Job copy finished (Complete or Failed) and the manager Workload is not Finished yet: mirroring the final
    status is what the user waits for. As bookkeeping it waited behind a burst's dispatches: with ten workers, a
    median 20 s between the Job's end on its worker and Complete on the manager."""
    return job_finish(job_copy) is not None and workload is not None and not is_true(workload, "Finished")
