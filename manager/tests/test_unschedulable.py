from __future__ import annotations

import datetime as dt
from typing import Any

from federation.conditions import find_condition
from federation.protocol import PODS_UNSCHEDULABLE_CONDITION
from manager.decisions.unschedulable import REASON_FINISHED, cleared_on_finish, shown_unschedulable

NOW = dt.datetime(2026, 1, 1, 0, 2, tzinfo=dt.UTC)


def workload(*conditions: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "job-a", "namespace": "ns"}, "status": {"conditions": list(conditions)}}


def unschedulable(status: str, message: str = "pod a-1 cannot be scheduled: 0/8 nodes are available") -> dict[str, Any]:
    return {"type": PODS_UNSCHEDULABLE_CONDITION, "status": status, "reason": "Unschedulable", "message": message}


ADMITTED = {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "The workload is admitted"}


def test_the_copys_condition_is_shown_naming_the_worker() -> None:
    shown = shown_unschedulable(workload(ADMITTED), workload(unschedulable("True")), worker="w1", now=NOW)
    assert shown is not None
    assert shown.unschedulable
    condition = find_condition(workload(*shown.conditions), PODS_UNSCHEDULABLE_CONDITION)
    assert condition is not None
    assert condition["status"] == "True"
    assert condition["message"] == "worker cluster w1: pod a-1 cannot be scheduled: 0/8 nodes are available"
    assert find_condition(workload(*shown.conditions), "Admitted") == ADMITTED
    assert (
        shown_unschedulable(workload(*shown.conditions), workload(unschedulable("True")), worker="w1", now=NOW) is None
    )


def test_nothing_to_show_without_a_copy_or_without_the_condition_anywhere() -> None:
    assert shown_unschedulable(workload(ADMITTED), None, worker="w1", now=NOW) is None
    assert shown_unschedulable(workload(ADMITTED), workload(ADMITTED), worker="w1", now=NOW) is None
    assert shown_unschedulable(workload(), workload(unschedulable("False")), worker="w1", now=NOW) is None


def test_a_copy_whose_pods_are_placed_clears_a_true_condition() -> None:
    for copy in (workload(unschedulable("False")), workload()):  # cleared by the agent, or a new dispatch's copy
        shown = shown_unschedulable(workload(unschedulable("True")), copy, worker="w2", now=NOW)
        assert shown is not None
        assert not shown.unschedulable
        condition = find_condition(workload(*shown.conditions), PODS_UNSCHEDULABLE_CONDITION)
        assert condition is not None
        assert (condition["status"], condition["reason"]) == ("False", "Scheduled")
        assert "w2" in condition["message"]


def test_finishing_turns_a_true_condition_false_and_leaves_others_alone() -> None:
    cleared = cleared_on_finish([ADMITTED, unschedulable("True")], now=NOW)
    condition = find_condition(workload(*cleared), PODS_UNSCHEDULABLE_CONDITION)
    assert condition is not None
    assert (condition["status"], condition["reason"]) == ("False", REASON_FINISHED)
    assert cleared_on_finish([ADMITTED], now=NOW) == [ADMITTED]


def test_pods_the_worker_cannot_create_are_shown_with_the_copys_reason() -> None:
    failed = {**unschedulable("True", "the Job copy cannot create its pods: quota exceeded"), "reason": "FailedCreate"}
    shown = shown_unschedulable(workload(ADMITTED), workload(failed), worker="w1", now=NOW)
    assert shown is not None
    assert shown.unschedulable
    condition = find_condition(workload(*shown.conditions), PODS_UNSCHEDULABLE_CONDITION)
    assert condition is not None
    assert (condition["reason"], condition["message"]) == (
        "FailedCreate",
        "worker cluster w1: the Job copy cannot create its pods: quota exceeded",
    )
