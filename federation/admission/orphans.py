"""A Workload whose Job is gone but which was left behind is finished as orphaned, as Kueue's workload controller
does it (pure; the agent and kfed-manager).

Why this module exists: ``kubectl delete job NAME --cascade=orphan`` (or any deletion that orphans dependents)
removes the Job and takes the Job's ownerReference off its Workload, which then stays. Kueue
(``FinishOrphanedWorkloads``, on by default since v0.18) finishes such a Workload at once, ``Finished=True`` reason
``OwnerNotFound``, message ``The workload's owner no longer exists``, which releases its quota. Without it, a worker
kept the quota held for ever, and the manager deactivated the Workload for want of an owner and kept it unfinished.

An orphan is told by Kueue's mark: the ``kueue.x-k8s.io/job-uid`` label (the Job it was made for) and no
ownerReferences. A Workload copy from a MultiKueue manager (``kueue.x-k8s.io/multikueue-origin``) is its manager's to
end, never finished here; one made by hand carries no job-uid label and is not an orphan either.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from federation.api.labels import MULTIKUEUE_ORIGIN_LABEL
from federation.api.workload import FINISHED
from federation.conditions import conditions_of, is_true, set_condition, workload_generation
from federation.protocol import REASON_OWNER_NOT_FOUND
from federation.workload_from_job import JOB_UID_LABEL

OWNER_NOT_FOUND_MESSAGE = "The workload's owner no longer exists"
"""Kueue's message on the ``Finished`` condition of an orphaned Workload."""


def is_orphaned(workload: Mapping[str, Any]) -> bool:
    """The Workload was made for a Job (job-uid label), no longer has an owner, is not a manager's copy, and is
    neither finished nor being deleted."""
    meta = workload.get("metadata") or {}
    labels = meta.get("labels") or {}
    return (
        bool(labels.get(JOB_UID_LABEL))
        and not meta.get("ownerReferences")
        and MULTIKUEUE_ORIGIN_LABEL not in labels
        and not meta.get("deletionTimestamp")
        and not is_true(workload, FINISHED)
    )


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
