"""Kueue's maximum execution time: from the Job's label to the Workload, the manager's clock, and the copies."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from federation.admission.deactivation import deactivation_reason
from federation.admission.execution_time import (
    accumulated_on_release,
    exceeded_note,
    exceeded_status,
    execution_time_left,
    total_execution_time,
)
from federation.api.labels import MAX_EXEC_TIME_LABEL
from federation.conditions import find_condition, format_time, set_condition
from federation.workload_from_job import JobNotQueueable, Priority, workload_for_job
from federation.workload_match import WorkloadEdit, edit_for_job
from manager.decisions.remote_copies import remote_job, remote_workload
from manager.decisions.withdrawal import requeue_status
from manager.tests.builders import make_job

NOW = dt.datetime(2026, 11, 24, 12, 0, tzinfo=dt.UTC)


def _limited(seconds: str = "30") -> dict[str, Any]:
    return make_job("capped").queue("lq").label(MAX_EXEC_TIME_LABEL, seconds).obj()


def _admitted(workload: dict[str, Any], *, since: dt.datetime, accumulated: int | None = None) -> dict[str, Any]:
    conditions: list[dict[str, Any]] = []
    for kind in ("QuotaReserved", "Admitted"):
        conditions, _ = set_condition(conditions, condition_type=kind, status=True, reason=kind, message="", now=since)
    workload["metadata"].update(uid="wl-uid", generation=1)
    workload["status"] = {"conditions": conditions, "admission": {"clusterQueue": "cq"}}
    if accumulated is not None:
        workload["status"]["accumulatedPastExecutionTimeSeconds"] = accumulated
    return workload


def test_the_label_becomes_the_workloads_maximum_execution_time() -> None:
    assert workload_for_job(_limited("30"), priority=Priority(None, 0))["spec"]["maximumExecutionTimeSeconds"] == 30
    plain = workload_for_job(make_job("p").queue("lq").obj(), priority=Priority(None, 0))
    assert "maximumExecutionTimeSeconds" not in plain["spec"]


@pytest.mark.parametrize("bad", ["0", "-5", "abc", "1.5", " 30", "", "\uff12", str(2**31)])
def test_a_bad_limit_makes_the_job_not_queueable_saying_why(bad: str) -> None:
    with pytest.raises(JobNotQueueable, match=r"max-exec-time-seconds.*whole number of seconds greater than 0"):
        workload_for_job(_limited(bad), priority=Priority(None, 0))


@pytest.mark.parametrize("bad", ["Team_A", "team-a-", "-team", "UPPER", "a..b", "x" * 254])
def test_a_queue_name_the_workload_api_would_refuse_makes_the_job_not_queueable(bad: str) -> None:
    with pytest.raises(JobNotQueueable, match="not a valid LocalQueue name"):
        workload_for_job(make_job("q").queue(bad).obj(), priority=Priority(None, 0))
    assert workload_for_job(make_job("q").queue("team-a.batch").obj(), priority=Priority(None, 0))["spec"][
        "queueName"
    ] == ("team-a.batch")


def test_the_copies_carry_neither_the_label_nor_the_limit() -> None:
    job = _limited("30")
    workload = _admitted(workload_for_job(job, priority=Priority(None, 0)), since=NOW)
    assert "maximumExecutionTimeSeconds" not in remote_workload(workload, origin="m", sent_at=NOW)["spec"]
    assert MAX_EXEC_TIME_LABEL not in remote_job(job, manager_workload=workload, origin="m")["metadata"]["labels"]
    assert workload["spec"]["maximumExecutionTimeSeconds"] == 30, "the manager's Workload keeps it"


def test_the_clock_runs_while_admitted_and_counts_earlier_runs() -> None:
    workload = workload_for_job(_limited("30"), priority=Priority(None, 0))
    workload["metadata"].update(uid="wl-uid", generation=1)
    assert execution_time_left(workload, now=NOW) is None, "not admitted: no clock"
    admitted = _admitted(workload, since=NOW - dt.timedelta(seconds=10), accumulated=5)
    assert execution_time_left(admitted, now=NOW) == pytest.approx(15.0)
    assert execution_time_left(admitted, now=NOW + dt.timedelta(seconds=20)) == pytest.approx(-5.0)
    unlimited = _admitted(workload_for_job(make_job("p").queue("lq").obj(), priority=Priority(None, 0)), since=NOW)
    assert execution_time_left(unlimited, now=NOW) is None


def test_a_release_adds_the_admitted_time_and_a_deactivation_starts_afresh() -> None:
    workload = _admitted(
        workload_for_job(_limited("30"), priority=Priority(None, 0)),
        since=NOW - dt.timedelta(seconds=12),
        accumulated=5,
    )
    assert accumulated_on_release(workload, now=NOW) == 17
    released = requeue_status(workload, reason="Preempted", message="preempted", now=NOW)
    assert released["accumulatedPastExecutionTimeSeconds"] == 17
    workload["spec"]["active"] = False
    assert requeue_status(workload, reason="x", message="y", now=NOW)["accumulatedPastExecutionTimeSeconds"] is None


def test_a_spent_budget_deactivates_with_kueues_reason_and_message() -> None:
    workload = _admitted(workload_for_job(_limited("30"), priority=Priority(None, 0)), since=NOW)
    status = exceeded_status(workload, now=NOW)
    target = find_condition({"status": status}, "DeactivationTarget")
    assert target is not None
    assert (target["status"], target["reason"], target["message"]) == (
        "True",
        "MaximumExecutionTimeExceeded",
        "exceeding the maximum execution time",
    )
    assert target["lastTransitionTime"] == format_time(NOW)
    marked = {**workload, "spec": {**workload["spec"], "active": False}, "status": {**workload["status"], **status}}
    assert deactivation_reason(marked) == (
        "DeactivatedDueToMaximumExecutionTimeExceeded",
        "The workload is deactivated due to exceeding the maximum execution time",
    )
    assert exceeded_note(30) == "The maximum execution time (30s) exceeded"


def test_a_waiting_jobs_new_limit_updates_or_replaces_its_workload() -> None:
    job = _limited("30")
    workload = workload_for_job(job, priority=Priority(None, 0))
    assert edit_for_job(job, workload) is WorkloadEdit.KEEP
    assert edit_for_job(_limited("60"), workload) is WorkloadEdit.UPDATE
    assert edit_for_job(make_job("capped").queue("lq").obj(), workload) is WorkloadEdit.UPDATE
    reserved = _admitted(workload_for_job(job, priority=Priority(None, 0)), since=NOW)
    assert edit_for_job(_limited("60"), reserved) is WorkloadEdit.REPLACE
    with pytest.raises(JobNotQueueable, match="max-exec-time-seconds"):
        edit_for_job(_limited("never"), workload)
    with pytest.raises(JobNotQueueable, match="not a valid LocalQueue name"):
        edit_for_job(make_job("capped").queue("Team_A").label(MAX_EXEC_TIME_LABEL, "30").obj(), workload)


def test_total_execution_time_runs_from_admitted_to_finished_plus_earlier_admissions() -> None:
    workload = _admitted(workload_for_job(_limited("30"), priority=Priority(None, 0)), since=NOW, accumulated=7)
    assert total_execution_time(workload) is None  # not finished yet
    finished, _ = set_condition(
        workload["status"]["conditions"],
        condition_type="Finished",
        status=True,
        reason="Succeeded",
        message="Job finished successfully",
        now=NOW + dt.timedelta(seconds=12.4),  # conditions keep whole seconds, as metav1.Time does
    )
    done = {**workload, "status": {**workload["status"], "conditions": finished}}
    assert total_execution_time(done) == 19
    never_admitted, _ = set_condition(
        finished, condition_type="Admitted", status=False, reason="NoReservation", message="", now=NOW
    )
    assert total_execution_time({**done, "status": {**done["status"], "conditions": never_admitted}}) is None
