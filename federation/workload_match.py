"""Does a Job's Workload still describe the Job? (pure; kfed-manager asks it of the Jobs queued on the manager
cluster, kfed-agent of those queued on its worker cluster itself)

A user may edit a Job after its Workload was made: while it waits suspended, ``parallelism`` and ``completions``
(the pod count), the ``kueue.x-k8s.io/job-min-parallelism`` annotation (the ``minCount``), the pod template's
tolerations, its ``kueue.x-k8s.io/queue-name`` and its ``kueue.x-k8s.io/max-exec-time-seconds`` (the Workload's
``maximumExecutionTimeSeconds``). A Workload that kept the old values would reserve quota
for pods the Job no longer has, or too few for those it now has, and the worker would admit its copy for one size
while the Job copy runs another. Kueue compares the two on every reconcile and brings the Workload in line:

- a suspended Job's Workload holding no quota gets the Job's new pod sets and execution time limit (Event
  ``UpdatedWorkload`` on the Job);
- one holding quota is deleted, which releases the quota and withdraws any copy, and a new Workload is queued for
  the Job (Event ``DeletedWorkload``);
- a suspended Job relabelled with another ``kueue.x-k8s.io/queue-name`` moves its Workload to that LocalQueue
  while the Workload holds no quota (no Event: Kueue writes none), and once its quota is released otherwise.

What is compared is what Kueue compares and the Job API lets a user change on a suspended Job: the pod count,
``minCount``, the tolerations (not once the Workload is admitted: admission may add a flavor's) and each
container's resource requests and limits, as quantities ("1000m" is "1"), where the cluster lets a suspended Job's
resources change.

A running Job can only have its pod count changed (``parallelism``; the template is immutable). Kueue compares it
with the count its Workload was admitted with (the admission's, under partial admission) and, when they differ,
stops the Job and deletes the Workload, so the Job is queued again at its new size. Here the Workload is deleted
(``RUNNING_REPLACE``) and kfed's handling of a Workload deleted under a running Job does the rest: it withdraws the
copies, suspends the Job and queues a new Workload (on a worker, kfed-agent suspends the Job and queues a new one).
Suspending the Job first, as Kueue orders it, would race the remote sync, which resumes the Job of a Workload that
is still admitted. Only an admitted Workload is compared
with its running Job: while it is being requeued the two legitimately differ for a moment. kfed has no admission
webhook, so the min-parallelism annotation Kueue's webhook keeps fixed on a running Job is not compared either.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import Any

from federation.conditions import find_condition, is_true
from federation.pod_injection import admitted_count, requested_count
from federation.quantity import parse_quantity
from federation.workload_from_job import (
    checked_queue_name,
    maximum_execution_time,
    pod_count,
    pod_sets_for_job,
    queue_name_of,
)


class WorkloadEdit(enum.Enum):
    """What a Job's edit asks of its existing Workload."""

    KEEP = "keep"
    UPDATE = "update"
    """The Workload holds no quota: its pod sets and execution time limit become the Job's."""
    REPLACE = "replace"
    """The suspended Job's Workload holds quota: delete it; the Job gets a new one, queued from the start."""
    RUNNING_REPLACE = "running-replace"
    """A running Job's pod count is not what its Workload was admitted with: delete the Workload; the Job is then
    stopped and gets a new one, queued from the start."""
    UPDATE_QUEUE = "update-queue"
    """Only the Job's ``kueue.x-k8s.io/queue-name`` changed and the Workload holds no quota: its ``queueName``
    follows (Kueue writes no Event for it). While it holds quota it stays in its queue (Kueue's API keeps
    ``queueName`` immutable then) and follows once the quota is released."""


def _quantities(values: Mapping[str, Any] | None) -> dict[str, int | str]:
    out: dict[str, int | str] = {}
    for name, text in (values or {}).items():
        try:
            out[name] = parse_quantity(str(text))
        except ValueError:
            out[name] = str(text)  # the apiserver validated it; compare it as written
    return out


_Resources = tuple[str, dict[str, int | str], dict[str, int | str]]


def _container_resources(containers: Sequence[Mapping[str, Any]] | None) -> list[_Resources]:
    return [
        (
            str(c.get("name")),
            _quantities((c.get("resources") or {}).get("requests")),
            _quantities((c.get("resources") or {}).get("limits")),
        )
        for c in containers or ()
    ]


def _pod_set_key(pod_set: Mapping[str, Any], *, with_tolerations: bool) -> tuple[object, ...]:
    spec = (pod_set.get("template") or {}).get("spec") or {}
    return (
        pod_set.get("name"),
        int(pod_set.get("count", 1)),
        pod_set.get("minCount"),
        _container_resources(spec.get("containers")),
        _container_resources(spec.get("initContainers")),
        (spec.get("tolerations") or []) if with_tolerations else None,
    )


def pod_sets_match(
    wanted: Sequence[Mapping[str, Any]], existing: Sequence[Mapping[str, Any]], *, admitted: bool
) -> bool:
    """Whether the pod sets built from the Job now (``wanted``) are those the Workload has."""
    if len(wanted) != len(existing):
        return False
    return all(
        _pod_set_key(a, with_tolerations=not admitted) == _pod_set_key(b, with_tolerations=not admitted)
        for a, b in zip(wanted, existing, strict=True)
    )


def _ended(job: Mapping[str, Any]) -> bool:
    """The Job has a true ``Complete`` or ``Failed`` condition."""
    return any(
        (found := find_condition(job, kind)) is not None and found.get("status") == "True"
        for kind in ("Complete", "Failed")
    )


def running_count(workload: Mapping[str, Any]) -> int | None:
    """The pod count an admitted Workload's Job runs with: the admission's under partial admission (the pod set has
    a ``minCount``), else the pod set's; None for a Workload that is not admitted or has no single pod set."""
    pod_sets = (workload.get("spec") or {}).get("podSets") or []
    if len(pod_sets) != 1 or not (is_true(workload, "QuotaReserved") and is_true(workload, "Admitted")):
        return None
    admitted = admitted_count(workload)
    if pod_sets[0].get("minCount") is not None and admitted is not None:
        return admitted
    return requested_count(workload)


def edit_for_job(job: Mapping[str, Any], workload: Mapping[str, Any]) -> WorkloadEdit:
    """What to do with ``workload`` now that its Job is as it is; ``JobNotQueueable`` when the Job's
    min-parallelism, queue name or execution time limit is bad (the Workload then keeps what it has)."""
    if is_true(workload, "Finished") or (workload.get("metadata") or {}).get("deletionTimestamp"):
        return WorkloadEdit.KEEP
    if not (job.get("spec") or {}).get("suspend", False):
        if _ended(job):
            return WorkloadEdit.KEEP
        expected = running_count(workload)
        if expected is None or pod_count(job.get("spec") or {}) == expected:
            return WorkloadEdit.KEEP
        return WorkloadEdit.RUNNING_REPLACE
    existing = (workload.get("spec") or {}).get("podSets") or []
    reserved = is_true(workload, "QuotaReserved")
    limit_changed = maximum_execution_time(job) != (workload.get("spec") or {}).get("maximumExecutionTimeSeconds")
    if limit_changed or not pod_sets_match(pod_sets_for_job(job), existing, admitted=is_true(workload, "Admitted")):
        return WorkloadEdit.REPLACE if reserved else WorkloadEdit.UPDATE
    queue = checked_queue_name(job) if queue_name_of(job) else None
    if queue and queue != (workload.get("spec") or {}).get("queueName") and not reserved:
        return WorkloadEdit.UPDATE_QUEUE
    return WorkloadEdit.KEEP


def updated_spec(job: Mapping[str, Any], edit: WorkloadEdit) -> dict[str, Any]:
    """The merge patch of the Workload's ``spec`` for an ``UPDATE`` or ``UPDATE_QUEUE`` edit: the Job's queue, and for
    ``UPDATE`` its pod sets and execution time limit (None removes the limit)."""
    spec: dict[str, Any] = {"queueName": queue_name_of(job)}
    if edit is WorkloadEdit.UPDATE:
        spec["podSets"] = pod_sets_for_job(job)
        spec["maximumExecutionTimeSeconds"] = maximum_execution_time(job)
    return spec
