"""When a dispatch is withdrawn from its worker, and the status that requeues the workload."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from federation.admission.deactivation import deactivation_reason
from federation.admission.eviction_counts import scheduling_stats_after
from manager.decisions.lifecycle import Phase, phase_of
from manager.decisions.refusals import REFUSED_BY_ANNOTATION, REFUSED_UNTIL_ANNOTATION
from manager.decisions.withdrawal import (
    EXCLUDED_CLUSTERS_ANNOTATION,
    FOREIGN_JOB_REASON,
    copies_not_deleted_message,
    copies_out_of_reach,
    exclusion_annotation,
    exclusions,
    linger_report_after,
    moved_message,
    pending_deactivation_status,
    preemption_status,
    requeue_status,
    unreachable_report_in,
    withdrawal_reason,
    worker_unreachable_message,
)

NOW = dt.datetime(2026, 11, 22, 12, 0, tzinfo=dt.UTC)


def cond(kind: str, status: bool = True) -> dict[str, Any]:
    return {"type": kind, "status": "True" if status else "False", "reason": kind, "message": ""}


def workload(*conditions: dict[str, Any], excluded: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "job-a-1", "namespace": "team-a", "generation": 1}
    if excluded is not None:
        meta["annotations"] = {EXCLUDED_CLUSTERS_ANNOTATION: excluded}
    return {
        "metadata": meta,
        "status": {
            "conditions": list(conditions),
            "admission": {"clusterQueue": "cq"},
            "clusterName": "worker-1",
            "admissionChecks": [{"name": "mk", "state": "Ready", "message": "ok"}],
        },
    }


JOB = {"metadata": {"name": "a", "namespace": "team-a"}}
RUNNING = {"metadata": {"name": "a"}, "status": {"active": 1}}
ADMITTED = workload(cond("QuotaReserved"), cond("Admitted"))


def reason(wl: dict[str, Any], *, remote_workload: Any, remote_job: Any) -> str | None:
    return withdrawal_reason(
        manager_workload=wl, worker="worker-1", remote_workload=remote_workload, remote_job=remote_job, manager_job=JOB
    )


def test_a_sound_dispatch_is_left_alone() -> None:
    remote = workload(cond("QuotaReserved"))
    assert reason(ADMITTED, remote_workload=remote, remote_job=RUNNING) is None
    # before admission a missing copy is (re)created by the sync plan, not withdrawn
    assert reason(workload(cond("QuotaReserved")), remote_workload=None, remote_job=None) is None


def test_a_copy_deleted_after_admission_withdraws() -> None:
    remote = workload(cond("QuotaReserved"))
    gone_wl = reason(ADMITTED, remote_workload=None, remote_job=RUNNING)
    assert gone_wl is not None
    assert "Workload copy" in gone_wl
    assert '"worker-1"' in gone_wl
    gone_job = reason(ADMITTED, remote_workload=remote, remote_job=None)
    assert gone_job is not None
    assert "Job copy" in gone_job
    # kfed finds copies by their origin label: one that lost it looks deleted, and the message says it may be that
    assert gone_job.endswith("(or lost its kueue.x-k8s.io/multikueue-origin label, by which kfed finds its copies)")


def test_a_finished_job_is_not_withdrawn_even_if_a_copy_is_gone() -> None:
    finished_job = {"metadata": {"name": "a"}, "status": {"conditions": [cond("Complete")]}}
    assert reason(ADMITTED, remote_workload=None, remote_job=finished_job) is None
    assert reason(ADMITTED, remote_workload=workload(cond("Finished")), remote_job=None) is None
    done = workload(cond("QuotaReserved"), cond("Admitted"), cond("Finished"))
    assert reason(done, remote_workload=None, remote_job=None) is None


def test_an_excluded_worker_withdraws_even_before_admission() -> None:
    wl = workload(cond("QuotaReserved"), excluded="worker-1")
    found = reason(wl, remote_workload=None, remote_job=None)
    assert found is not None
    assert "team-a/a already exists" in found


def test_exclusions_accumulate_sorted_and_deduplicated() -> None:
    wl = workload(excluded="worker-2, worker-1")
    assert exclusions(wl, now=NOW) == {"worker-1": FOREIGN_JOB_REASON, "worker-2": FOREIGN_JOB_REASON}
    assert exclusion_annotation(wl, "worker-3") == "worker-1,worker-2,worker-3"
    assert exclusion_annotation(wl, "worker-1") == "worker-1,worker-2"
    assert exclusions(workload(), now=NOW) == {}


def test_a_worker_that_refused_a_copy_is_excluded_and_named_as_refusing_until_its_refusal_ends() -> None:
    wl = workload(cond("QuotaReserved"), excluded="worker-2")
    wl["metadata"]["annotations"][REFUSED_BY_ANNOTATION] = "worker-1"
    wl["metadata"]["annotations"][REFUSED_UNTIL_ANNOTATION] = "2026-11-22T12:00:30Z"
    found_exclusions = exclusions(wl, now=NOW)
    assert found_exclusions.keys() == {"worker-1", "worker-2"}, "no dispatch to either"
    assert "refused" in found_exclusions["worker-1"]
    assert "2026-11-22T12:00:30Z" in found_exclusions["worker-1"]
    assert exclusions(wl, now=NOW + dt.timedelta(seconds=30)) == {"worker-2": FOREIGN_JOB_REASON}, "tried again"
    assert (
        withdrawal_reason(
            manager_workload=wl,
            worker="worker-1",
            remote_workload=None,
            remote_job=None,
            manager_job=JOB,
            now=NOW + dt.timedelta(seconds=30),
        )
        is None
    ), "a refusal that ended is no reason to withdraw a new dispatch"
    found = withdrawal_reason(
        manager_workload=wl, worker="worker-1", remote_workload=None, remote_job=None, manager_job=JOB, now=NOW
    )
    assert found is not None
    assert 'worker cluster "worker-1" refused' in found
    assert "403 Forbidden" in found
    assert "tried again after 2026-11-22T12:00:30Z" in found
    assert REFUSED_BY_ANNOTATION in found, "it says how to allow the worker again"


def test_requeue_status_releases_the_reservation_and_says_why() -> None:
    status = requeue_status(ADMITTED, reason="AdmissionCheck", message="copy deleted", now=NOW)
    by_type = {c["type"]: c for c in status["conditions"]}
    assert by_type["QuotaReserved"]["status"] == "False"
    assert by_type["QuotaReserved"]["reason"] == "PendingEvaluation"
    assert by_type["Admitted"]["status"] == "False"
    # Kueue v0.20: its checks reset to Pending, and Admitted says there is no reservation
    assert (by_type["Admitted"]["reason"], by_type["Admitted"]["message"]) == (
        "NoReservation",
        "The workload has no reservation",
    )
    assert by_type["Evicted"]["status"] == "True"
    assert by_type["Evicted"]["reason"] == "AdmissionCheck"
    assert by_type["Evicted"]["message"] == "copy deleted"
    # Kueue: an AdmissionCheck eviction leaves Requeued=False (the eviction's reason) until its backoff ends
    requeued = by_type["Requeued"]
    assert (requeued["status"], requeued["reason"], requeued["message"]) == ("False", "AdmissionCheck", "copy deleted")
    assert status["admission"] is None
    assert status["clusterName"] is None
    assert status["nominatedClusterNames"] is None
    assert [(c["name"], c["state"]) for c in status["admissionChecks"]] == [("mk", "Pending")]


def test_a_workload_kfed_deactivated_says_why_and_its_requeue_leaves_a_clean_slate() -> None:
    target = {
        "type": "DeactivationTarget",
        "status": "True",
        "reason": "RequeuingLimitExceeded",
        "message": "exceeding the maximum number of re-queuing retries",
    }
    wl = workload(cond("QuotaReserved"), cond("Admitted"), target)
    wl["spec"] = {"active": False}
    wl["status"]["requeueState"] = {"count": 2, "requeueAt": "2026-11-22T12:00:00Z"}
    assert deactivation_reason(wl) == (
        "DeactivatedDueToRequeuingLimitExceeded",
        "The workload is deactivated due to exceeding the maximum number of re-queuing retries",
    )
    patch = requeue_status(wl, reason="DeactivatedDueToRequeuingLimitExceeded", message="m", now=NOW)
    assert patch["requeueState"] is None
    assert "DeactivationTarget" not in {c["type"] for c in patch["conditions"]}
    requeued = next(c for c in patch["conditions"] if c["type"] == "Requeued")
    assert (requeued["status"], requeued["reason"], requeued["message"]) == (
        "False",
        "DeactivatedDueToRequeuingLimitExceeded",
        "m",
    )
    user = workload(cond("QuotaReserved"))
    user["spec"] = {"active": False}
    assert deactivation_reason(user)[0] == "Deactivated"


def test_a_deactivation_after_an_earlier_requeue_turns_requeued_false() -> None:
    # Kueue: a deactivated workload's quota release writes Requeued=False with the eviction's reason and message;
    # an earlier eviction's Requeued=True must not stay behind, or the workload reads as queued again.
    earlier = {
        "type": "Requeued",
        "status": "True",
        "reason": "Preempted",
        "message": "preempted earlier",
        "lastTransitionTime": "2026-11-22T11:00:00Z",
    }
    wl = workload(cond("QuotaReserved"), cond("Admitted"), earlier)
    wl["spec"] = {"active": False}
    patch = requeue_status(wl, reason="Deactivated", message="The workload is deactivated", now=NOW)
    requeued = next(c for c in patch["conditions"] if c["type"] == "Requeued")
    assert (requeued["status"], requeued["reason"], requeued["message"]) == (
        "False",
        "Deactivated",
        "The workload is deactivated",
    )
    assert phase_of({**wl, "status": {**wl["status"], **patch}}) is Phase.DEACTIVATED
    reserved = next(c for c in patch["conditions"] if c["type"] == "QuotaReserved")
    # Kueue v0.20: a deactivated workload waits for reactivation, not for the scheduler
    assert (reserved["status"], reserved["reason"], reserved["message"]) == (
        "False",
        "Deactivated",
        "The workload is deactivated",
    )


def test_a_copy_a_kueue_worker_finished_as_orphaned_is_withdrawn_and_dispatched_again() -> None:
    orphaned = workload(cond("QuotaReserved"))
    orphaned["status"]["conditions"].append(
        {"type": "Finished", "status": "True", "reason": "OwnerNotFound", "message": "missing owner"}
    )
    reserved = workload(cond("QuotaReserved"))
    why = reason(reserved, remote_workload=orphaned, remote_job=None)
    assert why == 'the Workload copy in worker cluster "worker-1" was finished as orphaned (OwnerNotFound)'
    assert reason(ADMITTED, remote_workload=orphaned, remote_job=RUNNING) == why


def test_a_copy_a_kueue_worker_finished_out_of_sync_is_withdrawn_and_dispatched_again() -> None:
    # a stock Kueue worker finishes a prebuilt Workload whose Job copy no longer matches it (its parallelism changed
    # there): not the Job's end, so the manager takes it back (Kueue v0.20's manager resets its check to Retry)
    out_of_sync = workload(cond("QuotaReserved"), cond("Admitted"))
    out_of_sync["status"]["conditions"].append(
        {
            "type": "Finished",
            "status": "True",
            "reason": "OutOfSync",
            "message": "The prebuilt workload is out of sync with its user job",
        }
    )
    assert reason(ADMITTED, remote_workload=out_of_sync, remote_job=RUNNING) == (
        'the Workload copy in worker cluster "worker-1" was finished out of sync with its Job copy '
        "(OutOfSync: The prebuilt workload is out of sync with its user job)"
    )
    done = {**RUNNING, "status": {"conditions": [{"type": "Complete", "status": "True"}]}}
    assert reason(ADMITTED, remote_workload=out_of_sync, remote_job=done) is None, "a Job that ended is mirrored"


def test_a_copy_the_agent_evicted_out_of_sync_is_taken_back_while_its_job_copy_runs() -> None:
    # kfed-agent deactivates and evicts a copy whose Job copy came with stale flavor labels (reason OutOfSync); the
    # manager withdraws it and dispatches it again, even though the Job copy is not finished
    evicted = {**cond("Evicted"), "reason": "OutOfSync", "message": "its pod template lacks nodeSelector pool=b"}
    copy_ = workload(cond("QuotaReserved", status=False), evicted)
    copy_["spec"] = {"active": False}
    why = reason(ADMITTED, remote_workload=copy_, remote_job=RUNNING)
    assert why == 'evicted in worker cluster "worker-1" (OutOfSync: its pod template lacks nodeSelector pool=b)'


def test_a_copy_a_user_deactivated_on_the_worker_is_taken_back_like_multikueue_does() -> None:
    """kfed-agent evicts a copy someone deactivated on the worker (Kueue's reason ``Deactivated``), first while it
    still holds quota there, then released; the manager withdraws it and dispatches it again (MultiKueue: the
    check goes to Retry on a remote eviction, the Workload is evicted and requeued)."""
    evicted = {**cond("Evicted"), "reason": "Deactivated", "message": "The workload is deactivated"}
    held = workload(cond("QuotaReserved"), cond("Admitted"), evicted)
    held["spec"] = {"active": False}
    expected = 'evicted in worker cluster "worker-1" (Deactivated: The workload is deactivated)'
    assert reason(ADMITTED, remote_workload=held, remote_job=RUNNING) == expected
    released = workload(cond("QuotaReserved", status=False), evicted)
    released["spec"] = {"active": False}
    assert reason(ADMITTED, remote_workload=released, remote_job=None) == expected


@pytest.mark.parametrize(
    ("reason", "requeued"),
    [("Preempted", "True"), ("NodeFailures", "True"), ("PodsReadyTimeout", "False"), ("AdmissionCheck", "False")],
)
def test_requeued_after_release_is_false_for_the_evictions_with_a_backoff(reason: str, requeued: str) -> None:
    """Kueue's job reconciler: Requeued takes the eviction's reason; the workload controller makes it True
    (BackoffFinished) only once the backoff of a PodsReadyTimeout or AdmissionCheck eviction has passed."""
    status = requeue_status(ADMITTED, reason=reason, message="why", now=NOW)
    found = {c["type"]: c for c in status["conditions"]}["Requeued"]
    assert (found["status"], found["reason"], found["message"]) == (requeued, reason, "why")


def _pending(*conditions: dict[str, Any], active: bool = False, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "job-a-1", "namespace": "team-a", "generation": 2},
        "spec": {"active": active},
        "status": {"conditions": list(conditions), **status},
    }


def test_a_deactivated_workload_without_quota_is_marked_evicted_as_kueue_does() -> None:
    patch = pending_deactivation_status(
        _pending(cond("QuotaReserved", False), nominatedClusterNames=["worker-1"]), now=NOW
    )
    assert patch is not None
    evicted = next(c for c in patch["conditions"] if c["type"] == "Evicted")
    assert (evicted["status"], evicted["reason"], evicted["message"]) == (
        "True",
        "Deactivated",
        "The workload is deactivated",
    )
    assert evicted["observedGeneration"] == 2
    assert patch["nominatedClusterNames"] is None
    assert "requeueState" not in patch
    assert patch["schedulingStats"] == {"evictions": [{"reason": "Deactivated", "underlyingCause": "", "count": 1}]}


def test_kfeds_own_deactivation_names_its_cause_and_drops_the_marker() -> None:
    target = {"type": "DeactivationTarget", "status": "True", "reason": "RequeuingLimitExceeded", "message": "x"}
    patch = pending_deactivation_status(_pending(target, requeueState={"count": 3}), now=NOW)
    assert patch is not None
    assert [c["type"] for c in patch["conditions"]] == ["Evicted"]
    assert patch["conditions"][0]["reason"] == "DeactivatedDueToRequeuingLimitExceeded"
    assert patch["requeueState"] is None


def test_an_evicted_workload_keeps_its_eviction_and_nothing_is_written_twice() -> None:
    preempted = {**cond("Evicted"), "reason": "Preempted"}
    assert pending_deactivation_status(_pending(preempted), now=NOW) is None
    assert pending_deactivation_status(_pending(preempted, requeueState={"count": 1}), now=NOW) == {
        "requeueState": None
    }


@pytest.mark.parametrize(
    "case",
    [
        _pending(active=True),  # active
        _pending(cond("QuotaReserved")),  # holds quota: withdrawn by the eviction path instead
        _pending(cond("Finished")),
    ],
    ids=["active", "reserved", "finished"],
)
def test_only_a_deactivated_unfinished_workload_without_quota_is_marked(case: dict[str, Any]) -> None:
    assert pending_deactivation_status(case, now=NOW) is None


def test_each_eviction_is_counted_in_scheduling_stats_by_reason_and_underlying_cause() -> None:
    wl = workload(cond("QuotaReserved"), cond("Admitted"))
    first = scheduling_stats_after(wl, "Preempted")
    assert first == {"evictions": [{"reason": "Preempted", "underlyingCause": "", "count": 1}]}
    wl["status"]["schedulingStats"] = first
    again = scheduling_stats_after(wl, "Preempted")
    assert again["evictions"] == [{"reason": "Preempted", "underlyingCause": "", "count": 2}]
    assert first["evictions"][0]["count"] == 1, "the workload's own status is not changed in place"
    deactivated = scheduling_stats_after(wl, "DeactivatedDueToMaximumExecutionTimeExceeded")
    assert deactivated["evictions"][-1] == {
        "reason": "Deactivated",
        "underlyingCause": "MaximumExecutionTimeExceeded",
        "count": 1,
    }
    timed_out = scheduling_stats_after(wl, "PodsReadyTimeout", underlying_cause="WaitForStart")
    assert timed_out["evictions"][-1] == {"reason": "PodsReadyTimeout", "underlyingCause": "WaitForStart", "count": 1}
    preempted = preemption_status(wl, preemption_reason="InClusterQueue", message="m", now=NOW)
    assert preempted["schedulingStats"]["evictions"] == [{"reason": "Preempted", "underlyingCause": "", "count": 2}]


def test_a_workload_is_told_of_its_unreachable_worker_after_a_short_while_and_until_when_it_waits() -> None:
    since = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)
    assert unreachable_report_in(since, now=since + dt.timedelta(seconds=4), timeout=900) == 6
    assert unreachable_report_in(since, now=since + dt.timedelta(seconds=11), timeout=900) == 0
    assert unreachable_report_in(since, now=since + dt.timedelta(seconds=1), timeout=15) == 4  # a third of it
    assert unreachable_report_in(None, now=since, timeout=900) == 10
    message = worker_unreachable_message("w1", since=since, timeout=900)
    assert message == (
        'worker cluster "w1" has not answered since 2026-01-01T12:00:00Z; the workload stays there until '
        "2026-01-01T12:15:00Z (the worker-lost timeout, 900s) and is requeued then unless the worker answers again"
    )
    deleted = worker_unreachable_message("w1", since=since, timeout=900, problem="no MultiKueueCluster w1")
    assert deleted == (
        'worker cluster "w1" cannot be used since 2026-01-01T12:00:00Z (no MultiKueueCluster w1); the workload stays '
        "there until 2026-01-01T12:15:00Z (the worker-lost timeout, 900s) and is requeued then unless the worker can "
        "be used again"
    )


def test_copies_that_do_not_go_are_named_with_what_holds_them() -> None:
    job_copy: dict[str, Any] = {
        "kind": "Job",
        "metadata": {
            "namespace": "ns",
            "name": "train",
            "deletionTimestamp": "2026-12-07T03:13:05Z",
            "finalizers": ["foregroundDeletion", "example.com/hold"],
        },
        "status": {"active": 1, "terminating": 2},
    }
    workload_copy = {"kind": "Workload", "metadata": {"namespace": "ns", "name": "job-train-1"}}
    waiting = copies_not_deleted_message("w1", [job_copy, workload_copy], waited=5, timeout=900, given_up=False)
    assert waiting == (
        'waiting 5s so far for the copies in worker cluster "w1" to be deleted: Job ns/train is being deleted: its '
        "pods are being deleted (3 left) and finalizers example.com/hold hold it; Workload ns/job-train-1 is not "
        "deleted yet; the workload is requeued once they are gone, or after the worker-lost timeout (900s)"
    )
    job_copy["metadata"]["finalizers"] = ["example.com/hold"]
    given_up = copies_not_deleted_message("w1", [job_copy], waited=900, timeout=900, given_up=True)
    assert given_up == (
        'the copies in worker cluster "w1" were not deleted within the worker-lost timeout (900s): Job ns/train is '
        "being deleted: finalizers example.com/hold hold it; requeued without waiting for them"
    )


def test_a_withdrawal_is_reported_only_past_a_graceful_stop_of_its_pods() -> None:
    def job_copy(grace: int | None) -> dict[str, Any]:
        pod_spec = {} if grace is None else {"terminationGracePeriodSeconds": grace}
        return {"kind": "Job", "spec": {"template": {"spec": pod_spec}}}

    assert linger_report_after([job_copy(None)], timeout=900) == 60  # Kubernetes' default grace, 30 s, plus slack
    assert linger_report_after([job_copy(120), {"kind": "Workload"}], timeout=900) == 150
    assert linger_report_after([{"kind": "Workload"}], timeout=900) == 60
    assert linger_report_after([job_copy(600)], timeout=900) == 300, "at most a third of the worker-lost timeout"


def test_copies_a_worker_kubeconfig_edited_to_another_server_left_behind_are_out_of_reach_not_deleted() -> None:
    reserved = {**cond("QuotaReserved"), "lastTransitionTime": "2026-11-22T11:59:00Z"}
    held = workload(reserved, cond("Admitted"))
    moved_at = NOW - dt.timedelta(seconds=30)
    assert copies_out_of_reach(held, remote_workload=None, remote_job=None, moved_at=moved_at)
    assert not copies_out_of_reach(held, remote_workload=None, remote_job=None, moved_at=None), "never moved"
    seen = {"metadata": {"name": "job-a-1"}}
    assert not copies_out_of_reach(held, remote_workload=seen, remote_job=None, moved_at=moved_at), "copies there"
    later = workload({**reserved, "lastTransitionTime": "2026-11-22T11:59:45Z"})
    assert not copies_out_of_reach(later, remote_workload=None, remote_job=None, moved_at=moved_at), (
        "sent after the move: to the new server, where a missing copy is made again"
    )
    assert not copies_out_of_reach(
        workload(cond("QuotaReserved", False)), remote_workload=None, remote_job=None, moved_at=moved_at
    )
    assert not copies_out_of_reach(
        workload(reserved, cond("Finished")), remote_workload=None, remote_job=None, moved_at=moved_at
    )
    assert moved_message(was="https://10.0.0.1:6443", now="https://10.0.0.2:6443") == (
        "its kubeconfig now reaches https://10.0.0.2:6443, not https://10.0.0.1:6443, where the workload's copies "
        "were sent"
    )
