"""Jobs queued on the worker cluster itself, which kfed-agent does not admit (pure).

kfed-agent admits the Workload copies that a MultiKueue manager (kfed-manager or stock Kueue) sends to its worker,
and starts their Job copies. A Job that someone creates straight on the worker with a
``kueue.x-k8s.io/queue-name`` label gets no Workload here: where stock Kueue ran, it would have been queued on the
worker, so it must not look queued when it is not. This module says which Jobs are such, and the message of the
one Warning Event and log line each gets: a suspended one waits for something that never comes, an unsuspended
one runs outside every quota and outside the capacity kfed-agent reports to the manager.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from federation.api.labels import QUEUE_NAME_LABEL
from worker_agent.decisions.jobs import job_finished, prebuilt_workload_name

REASON_NOT_QUEUED = "NotQueuedOnWorker"
JOB_CONTROLLER = "kubernetes.io/job-controller"
"""``spec.managedBy`` of a Job the cluster's own Job controller runs (also what an unset field means)."""


def unqueued_job_message(job: Mapping[str, Any]) -> str | None:
    """Why ``job`` is not queued although it names a LocalQueue; None when it is not such a Job: it has no
    queue-name label, is a copy a manager sent (a prebuilt Workload names it), is managed by another controller
    (a MultiKueue manager's own Job on a cluster that is also a worker), or has ended."""
    meta = job.get("metadata") or {}
    queue = (meta.get("labels") or {}).get(QUEUE_NAME_LABEL)
    if not queue or prebuilt_workload_name(job) is not None or job_finished(job) is not None:
        return None
    spec = job.get("spec") or {}
    if (spec.get("managedBy") or JOB_CONTROLLER) != JOB_CONTROLLER:
        return None
    head = (
        f"the Job names LocalQueue {queue}, but kfed-agent queues no Job created in this worker cluster: it admits "
        "only the Jobs a MultiKueue manager sends here"
    )
    if spec.get("suspend") is True:
        return f"{head}, so nothing will unsuspend this one. Create it on the manager cluster to queue it"
    return (
        f"{head}, so this one runs without quota, on capacity kfed-agent does not report to the manager. Create it "
        "on the manager cluster to queue it"
    )
