"""Kueue's object retention policies for Workloads on the manager (pure).

``objectRetentionPolicies.workloads``: with ``afterFinished``, a finished Workload is deleted that long after its
``Finished`` condition (its Job stays, finished; no new Workload is made for a finished Job); with
``afterDeactivatedByKueue``, a Workload that kfed deactivated (``Evicted`` reason ``DeactivatedDueTo…``, e.g. past
the requeuing limit) has its Job deleted that long after the eviction, and the Workload goes with it. A Workload a
user deactivated is kept. Both are off unless configured, as in Kueue.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from federation.conditions import find_condition, is_true, parse_time

Obj = Mapping[str, Any]

DEACTIVATED_BY_KUEUE_PREFIX = "DeactivatedDueTo"


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    after_finished: float | None = None
    after_deactivated_by_kueue: float | None = None

    @property
    def enabled(self) -> bool:
        return self.after_finished is not None or self.after_deactivated_by_kueue is not None


@dataclass(frozen=True, slots=True)
class RetentionStep:
    delete_workload: bool = False
    delete_job: bool = False
    wait: float | None = None
    """Seconds until this workload's retention ends (None: no retention applies)."""


def _expiry(condition: Mapping[str, Any] | None, seconds: float, now: dt.datetime) -> float | None:
    if condition is None or not condition.get("lastTransitionTime"):
        return None
    return (parse_time(str(condition["lastTransitionTime"])) + dt.timedelta(seconds=seconds) - now).total_seconds()


def retention_step(workload: Obj, *, now: dt.datetime, policy: RetentionPolicy) -> RetentionStep:
    if (workload.get("metadata") or {}).get("deletionTimestamp"):
        return RetentionStep()
    if is_true(workload, "Finished"):
        if policy.after_finished is None:
            return RetentionStep()
        left = _expiry(find_condition(workload, "Finished"), policy.after_finished, now)
        if left is None:
            return RetentionStep()
        return RetentionStep(delete_workload=True) if left <= 0 else RetentionStep(wait=left)
    evicted = find_condition(workload, "Evicted")
    if (
        policy.after_deactivated_by_kueue is not None
        and (workload.get("spec") or {}).get("active") is False
        and evicted is not None
        and evicted.get("status") == "True"
        and str(evicted.get("reason") or "").startswith(DEACTIVATED_BY_KUEUE_PREFIX)
    ):
        left = _expiry(evicted, policy.after_deactivated_by_kueue, now)
        if left is None:
            return RetentionStep()
        return RetentionStep(delete_job=True) if left <= 0 else RetentionStep(wait=left)
    return RetentionStep()
