"""A Workload deactivated on the worker is evicted as Kueue does it, then stopped and released like any eviction."""

from __future__ import annotations

import datetime as dt
from typing import Any

from federation.admission.deactivation import deactivation_eviction, needs_deactivation_eviction
from federation.conditions import find_condition
from federation.tests.api_builders import admitted_status, workload
from worker_agent.decisions.preemption import evicted_holding_quota, release_status

NOW = dt.datetime(2026, 11, 23, 6, 0, tzinfo=dt.UTC)
Obj = dict[str, Any]


def admitted(*, active: bool = True, **extra: Any) -> Obj:
    wl = workload("w", status={**admitted_status("cq", "rf", "1"), **extra})
    wl["spec"]["active"] = active
    return wl


def merged(wl: Obj, status: Obj) -> Obj:
    return {**wl, "status": {**(wl.get("status") or {}), **status}}


def test_a_user_deactivated_admitted_workload_is_evicted_then_its_quota_released_not_requeued() -> None:
    wl = admitted(active=False, requeueState={"count": 2})
    assert needs_deactivation_eviction(wl)
    eviction = deactivation_eviction(wl, now=NOW)
    assert eviction is not None
    assert (eviction.reason, eviction.message) == ("Deactivated", "The workload is deactivated")
    evicted = find_condition({"status": eviction.status}, "Evicted") or {}
    assert (evicted.get("status"), evicted.get("reason"), evicted.get("message")) == (
        "True",
        "Deactivated",
        "The workload is deactivated",
    )
    assert eviction.status["requeueState"] is None
    assert eviction.status["schedulingStats"] == {
        "evictions": [{"reason": "Deactivated", "underlyingCause": "", "count": 1}]
    }
    after = merged(wl, eviction.status)
    assert not needs_deactivation_eviction(after)  # evicted once
    assert evicted_holding_quota(after)  # the job pass stops its Job, then releases the quota
    released = merged(after, release_status(after, now=NOW))
    requeued = find_condition(released, "Requeued") or {}
    assert (requeued.get("status"), requeued.get("reason")) == ("False", "Deactivated")
    assert find_condition(released, "QuotaReserved")["status"] == "False"  # type: ignore[index]


def test_a_deactivation_target_names_the_cause_and_goes() -> None:
    target = {"type": "DeactivationTarget", "status": "True", "reason": "RequeuingLimitExceeded", "message": "too many"}
    wl = admitted(active=False)
    wl["status"]["conditions"].append(target)
    eviction = deactivation_eviction(wl, now=NOW)
    assert eviction is not None
    assert eviction.reason == "DeactivatedDueToRequeuingLimitExceeded"
    assert eviction.message == "The workload is deactivated due to too many"
    assert find_condition({"status": eviction.status}, "DeactivationTarget") is None
    assert "requeueState" not in eviction.status
    counted = {"reason": "Deactivated", "underlyingCause": "RequeuingLimitExceeded", "count": 1}
    assert eviction.status["schedulingStats"] == {"evictions": [counted]}


def test_active_finished_or_already_evicted_workloads_are_left_alone() -> None:
    assert deactivation_eviction(admitted(), now=NOW) is None
    finished = admitted(active=False)
    finished["status"]["conditions"].append({"type": "Finished", "status": "True", "reason": "Succeeded"})
    assert deactivation_eviction(finished, now=NOW) is None
    evicted = admitted(active=False)  # the agent's own JobCopyMissing/OutOfSync eviction came with it
    evicted["status"]["conditions"].append({"type": "Evicted", "status": "True", "reason": "JobCopyMissing"})
    assert deactivation_eviction(evicted, now=NOW) is None
    pending = workload("p")
    pending["spec"]["active"] = False
    found = deactivation_eviction(pending, now=NOW)  # Kueue evicts a pending one too (nothing to release)
    assert found is not None
    assert not evicted_holding_quota(merged(pending, found.status))
