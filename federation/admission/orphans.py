"""A Workload whose Job is gone but which was left behind is finished as orphaned, as Kueue's workload controller
does it (pure; the agent and kfed-manager).

Why this module exists: ``kubectl delete job NAME --cascade=orphan`` (or any deletion that orphans dependents)
removes the Job and takes the Job's ownerReference off its Workload, which then stays. Kueue
(``FinishOrphanedWorkloads``, on by default since v0.18) finishes such a Workload at once, ``Finished=True`` reason
``OwnerNotFound``, message ``The workload's owner no longer exists``, which releases its quota. Without it, a worker
kept the quota held for ever, and the manager deactivated the Workload for want of an owner and kept it unfinished.

A Workload is left behind by Kueue's mark: the ``kueue.x-k8s.io/job-uid`` label (the Job it was made for) and no
ownerReferences (:func:`left_behind`). It is an orphan only once that Job is gone or going (:func:`orphaned`): one
whose ownerReference someone took off while the Job lives keeps its Job, which gets it back (kfed-manager) or ends
with it (kfed-agent); finished, it would leave a running Job with no Workload. A Workload copy from a MultiKueue
manager (``kueue.x-k8s.io/multikueue-origin``) is its manager's to end, never finished here; one made by hand carries
no job-uid label and is not left behind either.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

from federation.api.labels import JOB_UID_LABEL, MULTIKUEUE_ORIGIN_LABEL
from federation.api.workload import FINISHED
from federation.conditions import conditions_of, is_true, set_condition, workload_generation
from federation.protocol import REASON_OWNER_NOT_FOUND

OWNER_NOT_FOUND_MESSAGE = "The workload's owner no longer exists"
"""Kueue's message on the ``Finished`` condition of an orphaned Workload."""


def left_behind(workload: Mapping[str, Any]) -> bool:
    """The Workload was made for a Job (job-uid label), no longer has an owner, is not a manager's copy, and is
    neither finished nor being deleted (from the object alone)."""
    meta = workload.get("metadata") or {}
    labels = meta.get("labels") or {}
    return (
        bool(labels.get(JOB_UID_LABEL))
        and not meta.get("ownerReferences")
        and MULTIKUEUE_ORIGIN_LABEL not in labels
        and not meta.get("deletionTimestamp")
        and not is_true(workload, FINISHED)
    )


def being_deleted(obj: Mapping[str, Any] | None) -> bool:
    """``obj`` is being deleted: a finalizer someone put on it holds it. Kueue acts on it as if it were gone: it
    finishes the Workloads of a Job being deleted as orphaned, and stops the Job of a Workload being deleted."""
    return bool(((obj or {}).get("metadata") or {}).get("deletionTimestamp"))


def made_for(workload: Mapping[str, Any]) -> str | None:
    """The uid of the Job the Workload was made for (its job-uid label), or None."""
    found = ((workload.get("metadata") or {}).get("labels") or {}).get(JOB_UID_LABEL)
    return str(found) if found else None


def orphaned(workload: Mapping[str, Any], *, jobs: Iterable[Mapping[str, Any]]) -> bool:
    """Left behind (:func:`left_behind`) by a Job that is gone or being deleted: none of ``jobs`` (the cluster's, or
    at least its namespace's) is that Job and alive."""
    return left_behind(workload) and live_job(workload, jobs=jobs) is None


def live_job(workload: Mapping[str, Any], *, jobs: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The Job of ``jobs`` the Workload was made for (its namespace, the job-uid label's uid), unless it is being
    deleted; None when there is none."""
    uid, namespace = made_for(workload), (workload.get("metadata") or {}).get("namespace")
    for job in jobs:
        meta = job.get("metadata") or {}
        if meta.get("uid") == uid and meta.get("namespace") == namespace and not meta.get("deletionTimestamp"):
            return job
    return None


def orphan_finish(workload: Mapping[str, Any], *, now: dt.datetime) -> list[dict[str, Any]]:
    """The Workload's conditions with ``Finished=True`` reason ``OwnerNotFound`` (Kueue's message), observing its
    generation."""
    conditions, _ = set_condition(
        conditions_of(workload),
        condition_type=FINISHED,
        status=True,
        reason=REASON_OWNER_NOT_FOUND,
        message=OWNER_NOT_FOUND_MESSAGE,
        now=now,
        observed_generation=workload_generation(workload),
    )
    return conditions
