"""Kueue's Requeued condition after a release: Reactivated, BackoffFinished, LocalQueueRestarted and
ClusterQueueRestarted (federation.admission.requeued)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from federation.admission.requeued import (
    MESSAGE_BACKOFF_FINISHED,
    MESSAGE_CLUSTER_QUEUE_RESTARTED,
    MESSAGE_LOCAL_QUEUE_RESTARTED,
    MESSAGE_REACTIVATED,
    REASON_BACKOFF_FINISHED,
    REASON_CLUSTER_QUEUE_RESTARTED,
    REASON_LOCAL_QUEUE_RESTARTED,
    REASON_REACTIVATED,
    RequeuedStep,
    queues_of,
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


def step_of(workload: Obj, *, now: dt.datetime = NOW) -> RequeuedStep | None:
    """The step for a workload no stopped queue drained (its queues are not read)."""
    return requeued_step(workload, now=now, local_queue=None, cluster_queue=None)


def requeued_of(status: Obj) -> tuple[str, str, str]:
    found = find_condition({"status": status}, "Requeued") or {}
    return found.get("status", ""), found.get("reason", ""), found.get("message", "")


def test_a_user_deactivated_workload_set_active_again_is_requeued_reactivated() -> None:
    assert step_of(released("Deactivated", active=False)) is None  # still inactive: nothing yet
    step = step_of(released("Deactivated"))
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
    assert step_of(released(reason)) is None


@pytest.mark.parametrize("reason", ["PodsReadyTimeout", "AdmissionCheck"])
def test_a_backoff_eviction_is_requeued_backoff_finished_once_the_backoff_has_passed(reason: str) -> None:
    waiting = released(reason, requeue_at="2026-11-23T06:01:00Z")
    step = step_of(waiting)
    assert step is not None
    assert step.status is None
    assert step.wait_until == dt.datetime(2026, 11, 23, 6, 1, tzinfo=dt.UTC)
    done = step_of(waiting, now=NOW + dt.timedelta(seconds=60))
    assert done is not None
    assert done.status is not None
    assert requeued_of(done.status) == ("True", REASON_BACKOFF_FINISHED, MESSAGE_BACKOFF_FINISHED)
    assert done.status["requeueState"] == {"requeueAt": None}  # cleared; the count stays (merge patch)
    no_backoff = step_of(released(reason))  # e.g. a Retry check without requeueAfterSeconds
    assert no_backoff is not None
    assert no_backoff.status is not None
    assert requeued_of(no_backoff.status) == ("True", "BackoffFinished", "The workload backoff was finished")
    assert "requeueState" not in no_backoff.status


def test_no_step_for_other_reasons_a_true_requeued_or_a_finished_workload() -> None:
    assert step_of(released("Preempted")) is None
    assert step_of(released("AdmissionCheck", active=False)) is None
    reserved_first = step_of(released("AdmissionCheck", reserved=True))  # Kueue flips it all the same
    assert reserved_first is not None
    assert reserved_first.status is not None
    assert requeued_of(reserved_first.status)[1] == "BackoffFinished"
    finished = released("AdmissionCheck")
    finished["status"]["conditions"].append({"type": "Finished", "status": "True", "reason": "Succeeded"})
    assert step_of(finished) is None
    true = released("AdmissionCheck")
    true["status"]["conditions"][2]["status"] = "True"
    assert step_of(true) is None
    assert step_of({"metadata": {}, "spec": {}, "status": {}}) is None


def test_requeued_on_release_is_false_when_deactivated_or_with_a_backoff() -> None:
    active: Obj = {"spec": {}}
    inactive: Obj = {"spec": {"active": False}}
    assert requeued_on_release(active, reason="Preempted")
    assert requeued_on_release(active, reason="NodeFailures")
    assert not requeued_on_release(active, reason="PodsReadyTimeout")
    assert not requeued_on_release(active, reason="AdmissionCheck")
    assert not requeued_on_release(inactive, reason="Preempted")


def queue(name: str, stop_policy: str | None = None, **spec: str) -> Obj:
    return {"metadata": {"name": name}, "spec": {**spec, **({"stopPolicy": stop_policy} if stop_policy else {})}}


@pytest.mark.parametrize("reason", ["ClusterQueueStopped", "LocalQueueStopped"])
def test_a_workload_drained_by_a_stopped_queue_is_not_requeued_on_release(reason: str) -> None:
    assert not requeued_on_release(released("Preempted"), reason=reason)
    assert requeued_on_release(released("Preempted"), reason="Preempted")


def test_a_workload_drained_by_its_stopped_local_queue_is_requeued_once_the_queue_is_started() -> None:
    drained = released("LocalQueueStopped")
    for still_stopped in (queue("lq", "HoldAndDrain"), queue("lq", "Hold"), None):
        assert requeued_step(drained, now=NOW, local_queue=still_stopped, cluster_queue=queue("cq")) is None
    for started in (queue("lq"), queue("lq", "None")):
        step = requeued_step(drained, now=NOW, local_queue=started, cluster_queue=None)
        assert step is not None
        assert step.status is not None
        assert requeued_of(step.status) == ("True", REASON_LOCAL_QUEUE_RESTARTED, MESSAGE_LOCAL_QUEUE_RESTARTED)
        assert (step.reason, step.message) == (
            "LocalQueueRestarted",
            "The LocalQueue was restarted after being stopped",
        )


def test_a_workload_drained_by_its_stopped_cluster_queue_is_requeued_once_the_queue_is_started() -> None:
    drained = released("ClusterQueueStopped")
    assert requeued_step(drained, now=NOW, local_queue=queue("lq"), cluster_queue=queue("cq", "Hold")) is None
    assert requeued_step(drained, now=NOW, local_queue=queue("lq"), cluster_queue=None) is None  # not found
    step = requeued_step(drained, now=NOW, local_queue=None, cluster_queue=queue("cq"))
    assert step is not None
    assert step.status is not None
    assert requeued_of(step.status) == ("True", REASON_CLUSTER_QUEUE_RESTARTED, MESSAGE_CLUSTER_QUEUE_RESTARTED)
    assert MESSAGE_CLUSTER_QUEUE_RESTARTED == "The ClusterQueue was restarted after being stopped"
    assert (
        requeued_step(
            released("ClusterQueueStopped", active=False), now=NOW, local_queue=None, cluster_queue=queue("cq")
        )
        is None
    )


def test_the_queues_of_a_drained_workload_are_its_local_queue_and_the_cluster_queue_it_points_to() -> None:
    local = {("ns", "lq"): queue("lq", clusterQueue="cq")}
    cluster = {"cq": queue("cq")}
    asked: list[str] = []

    def cluster_queue(name: str) -> Obj | None:
        asked.append(name)
        return cluster.get(name)

    drained = released("ClusterQueueStopped")
    drained["spec"]["queueName"] = "lq"
    found = queues_of(drained, local_queue=lambda ns, name: local.get((ns, name)), cluster_queue=cluster_queue)
    assert found == (local[("ns", "lq")], cluster["cq"])
    preempted = released("Preempted")
    preempted["spec"]["queueName"] = "lq"
    assert queues_of(preempted, local_queue=lambda ns, name: local.get((ns, name)), cluster_queue=cluster_queue) == (
        None,
        None,
    )
    assert asked == ["cq"]  # looked up only for a workload a stopped queue drained
