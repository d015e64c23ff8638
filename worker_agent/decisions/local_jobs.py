"""Jobs queued on the worker cluster itself: kfed-agent queues them as Kueue on that worker would (pure).

A Job created straight on the worker with a ``kueue.x-k8s.io/queue-name`` label, that no manager sent (no prebuilt
Workload names it) and that the cluster's own Job controller runs, gets a Workload of Kueue's name
(``federation.workload_from_job``), owned by the Job. The agent admits it against the worker's ClusterQueue like a
manager's copy, starts the Job with the admission's placement, stops it when the Workload is evicted and finishes the
Workload when the Job ends, as it does for a stock Kueue manager's copies; its quota counts in the capacity report
the manager reads. The kfed-agent chart's MutatingAdmissionPolicy creates such Jobs suspended, as Kueue's webhook
does. One that runs without a Workload (the policy not installed, or its Workload deleted under it) is stopped first
and queued once its pods are gone, as Kueue's Job integration does (:func:`without_workload`): a new Workload is
admitted afresh, its flavors and topology chosen anew, never booked for pods that already run somewhere. A Job
being deleted (a finalizer holds it) gets no Workload, and the one it has is finished as orphaned, which releases its
quota (:func:`owner_going`), as Kueue does.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

from federation.admission.orphans import being_deleted
from federation.api.labels import QUEUE_NAME_LABEL
from federation.conditions import is_true
from federation.workload_from_job import JobNotQueueable, Priority, workload_for_job, workload_name_for_job
from worker_agent.decisions.jobs import job_finished, prebuilt_workload_name

JOB_CONTROLLER = "kubernetes.io/job-controller"
"""``spec.managedBy`` of a Job the cluster's own Job controller runs (also what an unset field means)."""

REASON_NOT_QUEUEABLE = "CreatingWorkloadFailed"
"""The Warning Event reason of a local Job that cannot become a Workload (Kueue's)."""


class WithoutWorkload(enum.Enum):
    """What a Job queued on this worker that has no Workload needs next."""

    STOP = "stop"
    """It runs: suspended first (Event ``Stopped``), its Workload made once its pods are gone."""
    WAIT = "wait"
    """Suspended, with pods still active: nothing until they are gone (the Job's status change says so)."""
    QUEUE = "queue"
    """Its Workload is created."""


def without_workload(job: Mapping[str, Any]) -> WithoutWorkload:
    """The next step for a Job that ``needs_local_workload`` and has none."""
    spec, status = job.get("spec") or {}, job.get("status") or {}
    if spec.get("suspend") is not True:
        return WithoutWorkload.STOP
    if int(status.get("active") or 0):
        return WithoutWorkload.WAIT
    return WithoutWorkload.QUEUE


def local_queue_name(job: Mapping[str, Any]) -> str | None:
    """The LocalQueue a Job queued on this worker itself names; None for every other Job: no queue-name label, a copy
    a manager sent (a prebuilt Workload names it), or one another controller runs (``spec.managedBy``: a MultiKueue
    manager's own Job on a cluster that is also a worker)."""
    meta = job.get("metadata") or {}
    queue = (meta.get("labels") or {}).get(QUEUE_NAME_LABEL)
    if not queue or prebuilt_workload_name(job) is not None:
        return None
    if ((job.get("spec") or {}).get("managedBy") or JOB_CONTROLLER) != JOB_CONTROLLER:
        return None
    return str(queue)


def local_workload_key(job: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(namespace, name)`` of the Workload of a Job queued on this worker (Kueue's name for it); None for other
    Jobs and for one without a uid yet."""
    if local_queue_name(job) is None:
        return None
    meta = job.get("metadata") or {}
    name, uid = meta.get("name"), meta.get("uid")
    if not name or not uid:
        return None
    return str(meta.get("namespace") or ""), workload_name_for_job(str(name), str(uid))


def needs_local_workload(job: Mapping[str, Any]) -> bool:
    """A Job queued on this worker that has not ended and is not being deleted: it gets a Workload when it has none
    (an ended one needs none, nor does one being deleted, as in Kueue's Job integration)."""
    return local_queue_name(job) is not None and job_finished(job) is None and not being_deleted(job)


def owner_going(job: Mapping[str, Any], workload: Mapping[str, Any]) -> bool:
    """``workload`` belongs to ``job``, a Job queued on this worker that someone deleted while a finalizer holds it,
    and has not finished: Kueue finishes it at once as orphaned (``OwnerNotFound``), which releases its quota, rather
    than holding the quota until the finalizer goes. A Workload itself being deleted is left to go with it."""
    return (
        local_queue_name(job) is not None
        and being_deleted(job)
        and not being_deleted(workload)
        and not is_true(workload, "Finished")
    )


def local_workload(job: Mapping[str, Any], *, priority: Priority) -> dict[str, Any] | str:
    """The Workload of a Job queued on this worker, or why it cannot have one (a message for the Job's Warning
    Event, reason :data:`REASON_NOT_QUEUEABLE`)."""
    try:
        return workload_for_job(job, priority=priority)
    except JobNotQueueable as err:
        return str(err)
