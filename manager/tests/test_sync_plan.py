from typing import Any

from manager.decisions.sync import MIRROR_INTERVAL, mirror_wait, plan


def cond(kind: str, status: bool = True, message: str = "") -> dict[str, Any]:
    return {"type": kind, "status": "True" if status else "False", "reason": kind, "message": message}


def obj(
    *conditions: dict[str, Any], suspend: bool | None = None, status: dict[str, Any] | None = None
) -> dict[str, Any]:
    o: dict[str, Any] = {"metadata": {"name": "x"}, "status": {"conditions": list(conditions), **(status or {})}}
    if suspend is not None:
        o["spec"] = {"suspend": suspend}
    return o


RESERVED = obj(cond("QuotaReserved"))


def test_nothing_remote_yet_creates_both_copies() -> None:
    job = obj(suspend=True)
    assert plan(manager_workload=RESERVED, manager_job=job, remote_workload=None, remote_job=None) == [
        "create_remote_workload",
        "create_remote_job",
    ]


def test_remote_not_admitted_yet_waits() -> None:
    job = obj(suspend=True)
    assert plan(manager_workload=RESERVED, manager_job=job, remote_workload=obj(), remote_job=obj()) == []


def test_remote_admission_marks_admitted_then_starts_and_mirrors() -> None:
    job = obj(suspend=True)
    remote_job = obj(status={"active": 1, "startTime": "2026-11-21T10:00:00Z"})
    steps = plan(manager_workload=RESERVED, manager_job=job, remote_workload=RESERVED, remote_job=remote_job)
    assert steps == ["mark_admitted", "unsuspend_manager_job", "mirror_job_status"]


def test_a_remote_job_that_has_not_started_is_not_mirrored_yet() -> None:
    job = obj(suspend=True)
    not_started = obj(cond("Suspended", status=False))
    steps = plan(manager_workload=RESERVED, manager_job=job, remote_workload=RESERVED, remote_job=not_started)
    assert steps == ["mark_admitted", "unsuspend_manager_job"]


def test_fast_finish_still_syncs_final_status_before_finishing() -> None:
    job = obj(suspend=True)
    done = obj(cond("Complete", message="Reached expected number of succeeded pods"), status={"succeeded": 1})
    steps = plan(manager_workload=RESERVED, manager_job=job, remote_workload=obj(), remote_job=done)
    assert steps == ["mark_admitted", "unsuspend_manager_job", "mirror_job_status", "finish_manager_workload"]


def test_finished_manager_workload_only_cleans_up() -> None:
    finished = obj(cond("QuotaReserved"), cond("Finished"))
    assert plan(manager_workload=finished, manager_job=None, remote_workload=obj(), remote_job=None) == [
        "delete_remote"
    ]
    assert plan(manager_workload=finished, manager_job=None, remote_workload=None, remote_job=None) == []


def test_mirrored_running_job_needs_nothing() -> None:
    admitted = obj(cond("QuotaReserved"), cond("Admitted"))
    status = {"active": 1, "startTime": "2026-11-21T10:00:00Z"}
    job = obj(suspend=False, status=status)
    remote_job = obj(status=status)
    remote_job["status"]["conditions"] = []
    job["status"]["conditions"] = []
    assert plan(manager_workload=admitted, manager_job=job, remote_workload=RESERVED, remote_job=remote_job) == []


def test_a_vanished_remote_job_is_never_recreated_after_admission() -> None:
    admitted = obj(cond("QuotaReserved"), cond("Admitted"))
    job = obj(suspend=False)
    assert plan(manager_workload=admitted, manager_job=job, remote_workload=RESERVED, remote_job=None) == []


def test_a_missing_remote_job_is_created_while_the_workload_is_reserved_there() -> None:
    job = obj(suspend=True)
    assert plan(manager_workload=RESERVED, manager_job=job, remote_workload=RESERVED, remote_job=None) == [
        "create_remote_job"
    ]


def test_no_copy_is_created_while_another_admission_check_is_not_ready() -> None:
    job = obj(suspend=True)
    assert (
        plan(manager_workload=RESERVED, manager_job=job, remote_workload=None, remote_job=None, checks_ready=False)
        == []
    )
    assert plan(
        manager_workload=RESERVED, manager_job=job, remote_workload=None, remote_job=None, checks_ready=True
    ) == ["create_remote_workload", "create_remote_job"]


def test_copies_already_sent_keep_syncing_whatever_the_other_checks_say() -> None:
    job = obj(suspend=True)
    remote_job = obj(status={"active": 1, "startTime": "2026-11-21T10:00:00Z"})
    steps = plan(
        manager_workload=RESERVED, manager_job=job, remote_workload=RESERVED, remote_job=remote_job, checks_ready=False
    )
    assert steps == ["mark_admitted", "unsuspend_manager_job", "mirror_job_status"]


def with_priority(o: dict[str, Any], value: int, class_name: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"priority": value}
    if class_name:
        spec["priorityClassRef"] = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": class_name}
    return {**o, "spec": {**(o.get("spec") or {}), **spec}}


def test_a_priority_change_reaches_the_copy_before_anything_else_and_the_rest_still_runs() -> None:
    admitted = with_priority(obj(cond("QuotaReserved"), cond("Admitted")), 1000, "high")
    copy = with_priority(RESERVED, 100, "low")
    job = obj(suspend=False, status={"active": 1})
    remote_job = obj(status={"active": 2, "startTime": "2026-11-21T10:00:00Z"})
    steps = plan(manager_workload=admitted, manager_job=job, remote_workload=copy, remote_job=remote_job)
    assert steps == ["update_remote_priority", "mirror_job_status"]


def test_a_pending_copy_gets_the_new_priority_too_and_an_equal_one_needs_nothing() -> None:
    reserved = with_priority(RESERVED, 5, None)
    job = obj(suspend=True)
    assert plan(
        manager_workload=reserved, manager_job=job, remote_workload=with_priority(obj(), 0, None), remote_job=obj()
    ) == ["update_remote_priority"]
    assert (
        plan(
            manager_workload=reserved, manager_job=job, remote_workload=with_priority(obj(), 5, None), remote_job=obj()
        )
        == []
    )


def test_a_finished_copy_is_not_reprioritized() -> None:
    reserved = with_priority(RESERVED, 5, "high")
    done = obj(cond("Complete"), status={"succeeded": 1})
    steps = plan(manager_workload=reserved, manager_job=obj(suspend=True), remote_workload=obj(), remote_job=done)
    assert "update_remote_priority" not in steps


def test_a_kfed_agent_worker_gets_the_workload_copy_alone_first() -> None:
    job = obj(suspend=True)
    steps = plan(
        manager_workload=RESERVED, manager_job=job, remote_workload=None, remote_job=None, job_after_admission=True
    )
    assert steps == ["create_remote_workload"]


def test_a_kfed_agent_worker_waits_for_its_admission_before_the_job_copy() -> None:
    job = obj(suspend=True)
    steps = plan(
        manager_workload=RESERVED, manager_job=job, remote_workload=obj(), remote_job=None, job_after_admission=True
    )
    assert steps == []


def test_once_the_kfed_agent_admitted_the_copy_the_job_copy_is_created_started_and_admitted_here() -> None:
    job = obj(suspend=True)
    steps = plan(
        manager_workload=RESERVED, manager_job=job, remote_workload=RESERVED, remote_job=None, job_after_admission=True
    )
    assert steps == ["create_started_job", "mark_admitted", "unsuspend_manager_job"]
    blocked = plan(
        manager_workload=RESERVED,
        manager_job=job,
        remote_workload=RESERVED,
        remote_job=None,
        checks_ready=False,
        job_after_admission=True,
    )
    assert blocked == []


def test_a_job_copy_missing_after_admission_here_is_not_created_again_for_a_kfed_agent_worker() -> None:
    admitted = obj(cond("QuotaReserved"), cond("Admitted"))
    steps = plan(
        manager_workload=admitted,
        manager_job=obj(suspend=False),
        remote_workload=RESERVED,
        remote_job=None,
        job_after_admission=True,
    )
    assert steps == []  # the withdrawal path requeues it (``withdrawal_reason``): it could otherwise run twice


def test_a_finished_copy_without_a_job_copy_gets_none() -> None:
    finished = obj(cond("QuotaReserved"), cond("Finished"))
    steps = plan(
        manager_workload=RESERVED,
        manager_job=obj(suspend=True),
        remote_workload=finished,
        remote_job=None,
        job_after_admission=True,
    )
    assert steps == []


def test_a_running_status_waits_out_the_mirror_interval_and_the_first_and_final_ones_do_not() -> None:
    mirrored = 100.0  # the running status was mirrored then
    assert mirror_wait(None, now=mirrored, finished=None) == 0  # the first: users see the Job running at once
    assert mirror_wait(mirrored, now=mirrored + 1, finished=None) == MIRROR_INTERVAL - 1
    assert mirror_wait(mirrored, now=mirrored + MIRROR_INTERVAL + 1, finished=None) == 0
    assert mirror_wait(mirrored, now=mirrored + 1, finished="Complete") == 0  # the final status: at once
