"""Kueue's Requeued condition after a release: Reactivated and BackoffFinished (federation.admission.requeued)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from federation.admission.requeued import (
    MESSAGE_BACKOFF_FINISHED,
    MESSAGE_REACTIVATED,
    REASON_BACKOFF_FINISHED,
    REASON_REACTIVATED,
    requeued_on_release,
    requeued_step,
)
from federation.conditions import find_condition

NOW = dt.datetime(2026, 11, 23, 6, 0, tzinfo=dt.UTC)
Obj = dict[str, Any]


def released(reason: str, *, active: bool = True, requeue_at: str | None = None, reserved: bool = False) -> Obj:
    """A workload whose quota was released after an eviction with ``reason`` (Requeued=False, as Kueue leaves it)."""
    conditions = [
        {"type": "QuotaReserved", "status": "True" if reserved else "False", "reason": "Pending", "message": ""},
        {"type": "Evicted", "status": "True", "reason": reason, "message": "why"},
        {"type": "Requeued", "status": "False", "reason": reason, "message": "why"},
    ]
    status: Obj = {"conditions": conditions}
    if requeue_at is not None:
        status["requeueState"] = {"count": 2, "requeueAt": requeue_at}
    return {"metadata": {"name": "w", "namespace": "ns", "generation": 3}, "spec": {"active": active}, "status": status}


def requeued_of(status: Obj) -> tuple[str, str, str]:
    found = find_condition({"status": status}, "Requeued") or {}
    return found.get("status", ""), found.get("reason", ""), found.get("message", "")


def test_a_user_deactivated_workload_set_active_again_is_requeued_reactivated() -> None:
    assert requeued_step(released("Deactivated", active=False), now=NOW) is None  # still inactive: nothing yet
    step = requeued_step(released("Deactivated"), now=NOW)
    assert step is not None
    assert step.status is not None
    assert requeued_of(step.status) == ("True", REASON_REACTIVATED, MESSAGE_REACTIVATED)
    assert (step.reason, step.message) == ("Reactivated", "The workload was reactivated")
    assert "requeueState" not in step.status
    evicted = find_condition({"status": step.status}, "Evicted") or {}
    assert evicted.get("status") == "True"  # the eviction stays on record until the next admission


@pytest.mark.parametrize("reason", ["DeactivatedDueToRequeuingLimitExceeded", "DeactivatedDueToAdmissionCheck"])
def test_only_a_plain_deactivation_is_reactivated(reason: str) -> None:
    """Kueue matches the reason ``Deactivated`` exactly: its own deactivations (with a cause) are not."""
    assert requeued_step(released(reason), now=NOW) is None


@pytest.mark.parametrize("reason", ["PodsReadyTimeout", "AdmissionCheck"])
def test_a_backoff_eviction_is_requeued_backoff_finished_once_the_backoff_has_passed(reason: str) -> None:
    waiting = released(reason, requeue_at="2026-11-23T06:01:00Z")
    step = requeued_step(waiting, now=NOW)
    assert step is not None
    assert step.status is None
    assert step.wait_until == dt.datetime(2026, 11, 23, 6, 1, tzinfo=dt.UTC)
    done = requeued_step(waiting, now=NOW + dt.timedelta(seconds=60))
    assert done is not None
    assert done.status is not None
    assert requeued_of(done.status) == ("True", REASON_BACKOFF_FINISHED, MESSAGE_BACKOFF_FINISHED)
    assert done.status["requeueState"] == {"requeueAt": None}  # cleared; the count stays (merge patch)
    no_backoff = requeued_step(released(reason), now=NOW)  # e.g. a Retry check without requeueAfterSeconds
    assert no_backoff is not None
    assert no_backoff.status is not None
    assert requeued_of(no_backoff.status) == ("True", "BackoffFinished", "The workload backoff was finished")
    assert "requeueState" not in no_backoff.status


def test_no_step_for_other_reasons_a_true_requeued_or_a_finished_workload() -> None:
    assert requeued_step(released("Preempted"), now=NOW) is None
    assert requeued_step(released("AdmissionCheck", active=False), now=NOW) is None
    reserved_first = requeued_step(released("AdmissionCheck", reserved=True), now=NOW)  # Kueue flips it all the same
    assert reserved_first is not None
    assert reserved_first.status is not None
    assert requeued_of(reserved_first.status)[1] == "BackoffFinished"
    finished = released("AdmissionCheck")
    finished["status"]["conditions"].append({"type": "Finished", "status": "True", "reason": "Succeeded"})
    assert requeued_step(finished, now=NOW) is None
    true = released("AdmissionCheck")
    true["status"]["conditions"][2]["status"] = "True"
    assert requeued_step(true, now=NOW) is None
    assert requeued_step({"metadata": {}, "spec": {}, "status": {}}, now=NOW) is None


def test_requeued_on_release_is_false_when_deactivated_or_with_a_backoff() -> None:
    active: Obj = {"spec": {}}
    inactive: Obj = {"spec": {"active": False}}
    assert requeued_on_release(active, reason="Preempted")
    assert requeued_on_release(active, reason="NodeFailures")
    assert not requeued_on_release(active, reason="PodsReadyTimeout")
    assert not requeued_on_release(active, reason="AdmissionCheck")
    assert not requeued_on_release(inactive, reason="Preempted")
