"""The Workload's phases on the manager, derived from Kueue's conditions, and the transitions between them."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from federation.protocol import SENT_AT_ANNOTATION
from manager.decisions.lifecycle import (
    TRANSITIONS,
    Phase,
    adoptions,
    copy_belongs,
    held_worker,
    holds_worker,
    may_follow,
    phase_of,
    runs_unadmitted,
)
from manager.decisions.withdrawal import (
    dispatch_time_left,
    drained_by_stop_policy,
    eviction_of,
    eviction_status,
    foreign_reservation,
    foreign_reservation_release,
    requeue_status,
    withdrawal_reason,
    worker_lost_time_left,
)

NOW = dt.datetime(2026, 11, 22, 12, 0, tzinfo=dt.UTC)


def wl(*true: str, active: bool = True, reserved_at: str = "2026-11-22T11:55:00Z") -> dict[str, Any]:
    conditions = [
        {
            "type": kind,
            "status": "True",
            "reason": kind,
            "message": "m",
            "lastTransitionTime": reserved_at if kind == "QuotaReserved" else "2026-11-22T11:00:00Z",
        }
        for kind in true
    ]
    return {
        "metadata": {"name": "w", "namespace": "ns", "generation": 1},
        "spec": {"active": active},
        "status": {"conditions": conditions, "admissionChecks": [{"name": "mk", "state": "Pending", "message": ""}]},
    }


@pytest.mark.parametrize(
    ("workload", "kwargs", "phase"),
    [
        (wl(), {}, Phase.PENDING),
        (wl(active=False), {}, Phase.DEACTIVATED),
        (wl("Evicted", "Requeued"), {}, Phase.REQUEUED),
        (wl("QuotaReserved"), {}, Phase.RESERVED),
        (wl("QuotaReserved"), {"copies_known": True, "remote_workload": {"metadata": {}}}, Phase.DISPATCHED),
        (wl("QuotaReserved", "Admitted"), {}, Phase.ADMITTED),
        (wl("QuotaReserved", "Admitted"), {"manager_job": {"status": {"active": 1}}}, Phase.RUNNING),
        (wl("QuotaReserved", "Admitted", "Evicted"), {}, Phase.EVICTING),
        (wl("QuotaReserved", "Admitted", "Finished"), {}, Phase.FINISHED),
    ],
)
def test_phase_from_conditions(workload: dict[str, Any], kwargs: dict[str, Any], phase: Phase) -> None:
    assert phase_of(workload, **kwargs) is phase


def test_transitions_cover_every_phase_and_only_finished_is_final() -> None:
    assert set(TRANSITIONS) == set(Phase)
    assert [p for p, nxt in TRANSITIONS.items() if not nxt] == [Phase.FINISHED]
    for phase in Phase:
        assert may_follow(phase, phase)


def test_backwards_only_through_eviction() -> None:
    for phase in (Phase.RESERVED, Phase.DISPATCHED, Phase.ADMITTED, Phase.RUNNING):
        assert may_follow(phase, Phase.EVICTING)
        assert not may_follow(phase, Phase.PENDING)
        assert not may_follow(phase, Phase.REQUEUED)
    assert may_follow(Phase.EVICTING, Phase.REQUEUED)
    assert not may_follow(Phase.EVICTING, Phase.RUNNING)
    assert not may_follow(Phase.FINISHED, Phase.PENDING)
    assert may_follow(Phase.REQUEUED, Phase.RESERVED)
    assert holds_worker(Phase.EVICTING)
    assert not holds_worker(Phase.REQUEUED)


def test_eviction_then_requeue_walks_the_lifecycle() -> None:
    running = wl("QuotaReserved", "Admitted")
    evicting = {
        **running,
        "status": {
            **running["status"],
            **eviction_status(running, reason="AdmissionCheck", message="gone", now=NOW, retry_checks={"mk"}),
        },
    }
    assert phase_of(evicting) is Phase.EVICTING
    assert [c["state"] for c in evicting["status"]["admissionChecks"]] == ["Retry"]
    others = eviction_status(running, reason="AdmissionCheck", message="gone", now=NOW, retry_checks={"other"})
    assert [c["state"] for c in others["admissionChecks"]] == ["Pending"]  # another controller's check: untouched
    assert eviction_of(evicting) == ("AdmissionCheck", "gone")
    requeued = {**evicting, "status": requeue_status(evicting, reason="AdmissionCheck", message="gone", now=NOW)}
    assert phase_of(requeued) is Phase.REQUEUED
    assert may_follow(Phase.RUNNING, Phase.EVICTING)
    assert may_follow(Phase.EVICTING, Phase.REQUEUED)


def test_dispatch_timeout_counts_by_the_managers_clock_from_when_the_copy_was_sent() -> None:
    # sent a minute ago by the manager's clock; the worker's clock, ten minutes behind, dated the copy 11 minutes ago
    sent = {
        "metadata": {
            "creationTimestamp": "2026-11-22T11:49:00Z",
            "annotations": {SENT_AT_ANNOTATION: "2026-11-22T11:59:00Z"},
        }
    }
    assert dispatch_time_left(sent, now=NOW, timeout=300) == pytest.approx(240)
    # an annotation edited into something that is not a time (or one without a zone): the worker's date stands in
    for bad in ("soon", "2026-11-22T11:59:00"):
        edited = {"metadata": {**sent["metadata"], "annotations": {SENT_AT_ANNOTATION: bad}}}
        assert dispatch_time_left(edited, now=NOW, timeout=300) == pytest.approx(-360)


def test_dispatch_timeout_counts_from_the_copy_until_the_worker_reserves() -> None:
    copy = {"metadata": {"creationTimestamp": "2026-11-22T11:55:00Z"}}  # sent 5 minutes ago
    assert dispatch_time_left(copy, now=NOW, timeout=600) == pytest.approx(300)
    assert dispatch_time_left(None, now=NOW, timeout=600) is None  # not sent yet (checks pending)
    reserved_copy = {**copy, "status": {"conditions": [{"type": "QuotaReserved", "status": "True"}]}}
    assert dispatch_time_left(reserved_copy, now=NOW, timeout=600) is None

    def reason(timeout: float, remote: dict[str, Any] = copy) -> str | None:
        return withdrawal_reason(
            manager_workload=wl("QuotaReserved"),
            worker="worker-1",
            remote_workload=remote,
            remote_job=None,
            manager_job=None,
            now=NOW,
            dispatch_timeout=timeout,
        )

    assert reason(600) is None
    timed_out = reason(200)
    assert timed_out is not None
    assert "within the dispatch timeout (200s)" in timed_out
    assert reason(200, reserved_copy) is None


def test_an_eviction_on_the_worker_withdraws_with_its_reason() -> None:
    remote = {
        "metadata": {},
        "status": {
            "conditions": [{"type": "Evicted", "status": "True", "reason": "Preempted", "message": "to make room"}]
        },
    }
    found = withdrawal_reason(
        manager_workload=wl("QuotaReserved", "Admitted"),
        worker="worker-2",
        remote_workload=remote,
        remote_job={"metadata": {}, "status": {"active": 1}},
        manager_job=None,
    )
    assert found == 'evicted in worker cluster "worker-2" (Preempted: to make room)'


def test_a_rejected_admission_check_deactivates_through_eviction() -> None:
    # spec.active false and Evicted while still reserved, then the reservation released (Kueue's order).
    assert may_follow(Phase.RESERVED, Phase.EVICTING)
    assert may_follow(Phase.EVICTING, Phase.DEACTIVATED)
    assert not may_follow(Phase.RESERVED, Phase.DEACTIVATED)


def test_the_worker_holding_a_workload_and_which_copies_belong() -> None:
    nominated = wl("QuotaReserved")
    nominated["metadata"]["uid"] = "u1"
    nominated["status"]["nominatedClusterNames"] = ["worker-1"]
    admitted = wl("QuotaReserved", "Admitted")
    admitted["metadata"]["uid"] = "u1"
    admitted["status"]["clusterName"] = "worker-2"
    requeued = wl("Evicted", "Requeued")
    requeued["metadata"]["uid"] = "u1"
    assert held_worker(nominated) == "worker-1"
    assert held_worker(admitted) == "worker-2"
    assert held_worker(requeued) is None
    assert copy_belongs(admitted, worker_names={"worker-2"}, manager_uid="u1")
    assert not copy_belongs(admitted, worker_names={"worker-1"}, manager_uid="u1")  # left on a worker it was taken from
    assert not copy_belongs(admitted, worker_names={"worker-2"}, manager_uid="u0")  # an earlier Workload of that name
    assert not copy_belongs(requeued, worker_names={"worker-2"}, manager_uid="u1")
    assert not copy_belongs(None, worker_names={"worker-2"}, manager_uid="u1")
    # one worker cluster named by two MultiKueueClusters (shared_servers): held by either name, the copy belongs
    assert copy_belongs(admitted, worker_names={"worker-1", "worker-2"}, manager_uid="u1")


def test_worker_lost_counts_from_when_the_connection_was_lost() -> None:
    since = NOW - dt.timedelta(seconds=600)
    assert worker_lost_time_left(since, now=NOW, timeout=900) == pytest.approx(300)
    assert worker_lost_time_left(since, now=NOW, timeout=300) <= 0
    assert worker_lost_time_left(None, now=NOW, timeout=900) == 900


def test_a_deactivated_workload_is_released_but_not_queued_again() -> None:
    running = wl("QuotaReserved", "Admitted", active=False)
    status = requeue_status(running, reason="Deactivated", message="off", now=NOW)
    by_type = {c["type"]: c for c in status["conditions"]}
    assert by_type["Evicted"]["reason"] == "Deactivated"
    assert by_type["QuotaReserved"]["status"] == "False"
    assert (by_type["Requeued"]["status"], by_type["Requeued"]["reason"]) == ("False", "Deactivated")
    assert phase_of({**running, "status": status}) is Phase.DEACTIVATED


def test_hold_and_drain_evicts_with_the_queue_that_stopped() -> None:
    def queue(policy: str) -> dict[str, Any]:
        return {"spec": {"stopPolicy": policy}}

    running = wl("QuotaReserved", "Admitted")
    assert drained_by_stop_policy(running, cluster_queue=queue("None"), local_queue=queue("None")) is None
    assert drained_by_stop_policy(running, cluster_queue=queue("Hold"), local_queue=None) is None  # no new ones only
    found = drained_by_stop_policy(running, cluster_queue=queue("HoldAndDrain"), local_queue=None)
    assert found is not None
    assert found[0] == "ClusterQueueStopped"
    local = drained_by_stop_policy(running, cluster_queue=queue("None"), local_queue=queue("HoldAndDrain"))
    assert local is not None
    assert local[0] == "LocalQueueStopped"


def _copy(kind: str, created: str, **labels: str) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": "w" if kind == "Workload" else "job",
        "namespace": "ns",
        "creationTimestamp": created,
        "labels": {"kueue.x-k8s.io/multikueue-origin": "multikueue", **labels},
    }
    if kind == "Job":
        meta["annotations"] = {"kueue.x-k8s.io/prebuilt-workload-name": "w"}
        return {"kind": kind, "metadata": meta}
    return {"kind": kind, "metadata": meta, "spec": {"podSets": [{"name": "main", "count": 1}]}}


def test_a_stock_kueue_managers_copies_of_the_held_workload_are_adopted_and_nothing_else() -> None:
    admitted = wl("QuotaReserved", "Admitted")
    admitted["metadata"] |= {"uid": "u1", "creationTimestamp": "2026-11-22T11:00:00Z"}
    admitted["status"]["clusterName"] = "worker-2"
    admitted["spec"]["podSets"] = [{"name": "main", "count": 1}]
    kueue_wl = _copy("Workload", "2026-11-22T11:00:01Z")
    kueue_job = _copy("Job", "2026-11-22T11:00:02Z")

    def adopt(workload_copy: Any, job_copy: Any, *, worker: str = "worker-2", origin: str = "multikueue") -> list[Any]:
        return adoptions(workload_copy, job_copy, workload=admitted, worker=worker, origin=origin)

    assert adopt(kueue_wl, kueue_job) == [kueue_wl, kueue_job]
    assert adopt(kueue_wl, None) == [kueue_wl]
    assert adopt(None, kueue_job) == [], "a Job copy goes only with its Workload copy"
    assert adopt(kueue_wl, kueue_job, worker="worker-1") == [], "not the worker that holds the Workload"
    assert adopt(kueue_wl, kueue_job, origin="another-manager") == [], "another manager's copies"
    # the worker's clock a second behind the manager's: the copy looks older than its Workload, and is still its copy
    skewed = _copy("Workload", "2026-11-22T10:59:59Z")
    assert adopt(skewed, kueue_job) == [skewed, kueue_job]
    resized = _copy("Workload", "2026-11-22T11:00:01Z")
    resized["spec"] = {"podSets": [{"name": "main", "count": 2}]}
    assert adopt(resized, kueue_job) == [], "a copy of an earlier Workload of that name, replaced at another size"
    ours_wl = _copy("Workload", "2026-11-22T11:00:01Z", **{"kfed.io/manager-workload-uid": "u1"})
    assert adopt(ours_wl, None) == [], "kfed-manager's own copy needs nothing"
    assert adopt(ours_wl, kueue_job) == [kueue_job], "the Job copy joins a Workload copy already adopted"
    other_job = _copy("Job", "2026-11-22T11:00:02Z")
    other_job["metadata"]["annotations"] = {"kueue.x-k8s.io/prebuilt-workload-name": "other"}
    assert adopt(kueue_wl, other_job) == [kueue_wl]
    assert adoptions(kueue_wl, kueue_job, workload=wl(), worker="worker-2", origin="multikueue") == [], "not held"


def test_a_reservation_naming_several_workers_is_another_dispatchers_and_is_released_without_an_eviction() -> None:
    spread = wl("QuotaReserved")
    spread["status"]["nominatedClusterNames"] = ["worker-1", "worker-2"]
    why = foreign_reservation(spread, multikueue_checks={"mk"})
    assert why is not None
    assert "nominated workers: worker-1, worker-2" in why
    ours = wl("QuotaReserved")
    ours["status"]["nominatedClusterNames"] = ["worker-1"]
    assert foreign_reservation(ours, multikueue_checks={"mk"}) is None, "kfed-manager's own: one worker"
    admitted = wl("QuotaReserved", "Admitted")
    admitted["status"]["clusterName"] = "worker-2"
    assert foreign_reservation(admitted, multikueue_checks={"mk"}) is None, "a worker admitted it: adopted instead"
    assert foreign_reservation(spread, multikueue_checks={"other"}) is None, "not behind a MultiKueue check"
    assert foreign_reservation(wl(), multikueue_checks={"mk"}) is None, "no reservation"
    release = foreign_reservation_release(spread, message=why, now=NOW)
    assert (release["nominatedClusterNames"], release["admission"], release["clusterName"]) == (None, None, None)
    types = {c["type"]: c for c in release["conditions"]}
    assert types["QuotaReserved"]["status"] == "False"
    assert types["QuotaReserved"]["message"] == why
    assert "Evicted" not in types, "nothing ran: no eviction"
    assert [c["state"] for c in release["admissionChecks"]] == ["Pending"]


@pytest.mark.parametrize(
    ("workload", "suspended", "stop"),
    [
        (wl(), False, True),  # its user unsuspended a waiting Job
        (wl("Evicted", "Requeued"), False, True),
        (wl(active=False), False, True),
        (wl(), True, False),  # waiting, suspended: as it should be
        (wl("QuotaReserved"), False, False),  # being dispatched: kfed's own start may be under way
        (wl("QuotaReserved", "Admitted"), False, False),
        (wl("QuotaReserved", "Evicted"), False, False),  # being withdrawn: the withdrawal stops it
        (wl("Finished"), False, False),
    ],
)
def test_a_job_started_while_its_workload_waits_is_to_be_stopped(
    workload: dict[str, Any], suspended: bool, stop: bool
) -> None:
    assert runs_unadmitted(workload, {"spec": {"suspend": suspended}}) is stop
