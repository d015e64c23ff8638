from typing import Any

from manager.decisions.scheduling_inputs import (
    copy_admitted_first,
    edited_while_queued,
    job_copy_finished_first,
    needs_scheduling,
    newly_reserved,
    released,
)


def wl(**status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "w", "namespace": "ns", "generation": 1, "resourceVersion": "1"},
        "spec": {"queueName": "q", "priority": 0},
        "status": status,
    }


def cond(kind: str, value: str = "True") -> dict[str, str]:
    return {"type": kind, "status": value, "reason": kind, "message": ""}


RESERVED = {"conditions": [cond("QuotaReserved")], "admission": {"clusterQueue": "cq"}}


def test_added_and_deleted_always_schedule() -> None:
    assert needs_scheduling("ADDED", wl(), None)
    assert needs_scheduling("DELETED", wl(), wl())


def test_status_writes_that_change_nothing_for_the_scheduler_do_not_schedule() -> None:
    pending = wl(conditions=[cond("QuotaReserved", "False")])
    repending = wl(conditions=[{**cond("QuotaReserved", "False"), "message": "couldn't assign flavors"}])
    assert not needs_scheduling("MODIFIED", repending, pending)  # the scheduler's own Pending message
    admitted = wl(**{**RESERVED, "conditions": [cond("QuotaReserved"), cond("Admitted")], "clusterName": "w1"})
    assert not needs_scheduling("MODIFIED", admitted, wl(**RESERVED))  # the remote sync's Admitted
    checks = wl(**{**RESERVED, "admissionChecks": [{"name": "mk", "state": "Ready"}]})
    assert not needs_scheduling("MODIFIED", checks, wl(**RESERVED))


def test_what_frees_or_takes_quota_or_changes_a_decision_schedules() -> None:
    reserved, pending = wl(**RESERVED), wl()
    assert needs_scheduling("MODIFIED", reserved, pending)
    finished = wl(**{**RESERVED, "conditions": [cond("QuotaReserved"), cond("Finished")]})
    assert needs_scheduling("MODIFIED", finished, reserved)
    evicting = wl(**{**RESERVED, "conditions": [cond("QuotaReserved"), cond("Evicted")]})
    assert needs_scheduling("MODIFIED", evicting, reserved)
    respec = wl()
    respec["metadata"]["generation"] = 2
    assert needs_scheduling("MODIFIED", respec, pending)
    annotated = wl()
    annotated["metadata"]["annotations"] = {"kfed.io/withdrawn-from": "w1"}
    assert needs_scheduling("MODIFIED", annotated, pending)
    deleting = wl()
    deleting["metadata"]["deletionTimestamp"] = "2026-11-23T00:00:00Z"
    assert needs_scheduling("MODIFIED", deleting, pending)
    requeued = wl(requeueState={"count": 1, "requeueAt": "2026-11-23T00:00:10Z"})
    assert needs_scheduling("MODIFIED", requeued, pending)


def test_critical_path_steps_are_told_apart_from_bookkeeping() -> None:
    pending = wl(conditions=[cond("QuotaReserved", "False")])
    reserved = wl(**RESERVED)
    admitted = wl(**{**RESERVED, "conditions": [cond("QuotaReserved"), cond("Admitted")]})
    assert newly_reserved(reserved, pending)
    assert newly_reserved(reserved, None)
    assert not newly_reserved(reserved, reserved)  # e.g. a message written afterwards
    assert not newly_reserved(admitted, pending)
    copy_reserved = wl(conditions=[cond("QuotaReserved"), cond("Admitted")])
    assert copy_admitted_first(copy_reserved, reserved)
    assert not copy_admitted_first(copy_reserved, admitted)  # marked already: mirrors and clean-ups can wait
    assert not copy_admitted_first(wl(), reserved)
    assert not copy_admitted_first(copy_reserved, None)


def test_a_finished_job_copy_is_on_the_critical_path_until_the_workload_is_finished() -> None:
    admitted = wl(**{**RESERVED, "conditions": [cond("QuotaReserved"), cond("Admitted")]})
    finished = wl(conditions=[cond("QuotaReserved"), cond("Admitted"), cond("Finished")])
    complete = {"status": {"conditions": [cond("Complete")]}}
    failed = {"status": {"conditions": [cond("Failed")]}}
    running = {"status": {"active": 1, "conditions": [cond("Complete", "False")]}}
    assert job_copy_finished_first(complete, admitted)
    assert job_copy_finished_first(failed, admitted)
    assert not job_copy_finished_first(running, admitted)  # a running mirror can wait
    assert not job_copy_finished_first(complete, finished)  # only the clean-up is left
    assert not job_copy_finished_first(complete, None)


def test_released_is_the_moment_the_reservation_goes() -> None:
    pending = wl(conditions=[cond("QuotaReserved", "False")])
    assert released(pending, wl(**RESERVED))
    assert not released(wl(**RESERVED), pending)  # reserved, not released
    assert not released(pending, pending)
    assert not released(pending, None)


def test_a_spec_edit_of_a_queued_workload_goes_to_its_job_and_one_of_an_admitted_workload_does_not() -> None:
    pending = wl()
    edited = {**pending, "metadata": {**pending["metadata"], "generation": 2}, "spec": {"queueName": "q"}}
    assert edited_while_queued("MODIFIED", edited, pending)
    assert not edited_while_queued("MODIFIED", pending, pending)  # a status write: same generation
    assert not edited_while_queued("ADDED", edited, None)
    admitted = {**edited, "status": RESERVED}
    assert not edited_while_queued("MODIFIED", admitted, {**pending, "status": RESERVED})
    finished = {**edited, "status": {"conditions": [cond("Finished")]}}
    assert not edited_while_queued("MODIFIED", finished, pending)
