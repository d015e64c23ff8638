"""The worker's own admission checks (a ProvisioningRequest) as the manager sees them on its copy."""

import datetime as dt
from typing import Any

from manager.cli import render_workloads
from manager.decisions.admission_checks import worker_checks_message, worker_rejection
from manager.decisions.sync import plan
from manager.decisions.withdrawal import dispatch_time_left, withdrawal_reason

NOW = dt.datetime(2026, 11, 23, 6, 0, tzinfo=dt.UTC)


def cond(kind: str, status: bool = True, reason: str = "", message: str = "") -> dict[str, Any]:
    return {"type": kind, "status": "True" if status else "False", "reason": reason or kind, "message": message}


def copy(*conditions: dict[str, Any], checks: list[dict[str, Any]], active: bool = True) -> dict[str, Any]:
    return {
        "metadata": {"name": "w", "namespace": "ns", "creationTimestamp": "2026-11-23T05:00:00Z"},
        "spec": {"active": active},
        "status": {"conditions": list(conditions), "admissionChecks": checks},
    }


PENDING = [{"name": "prov", "state": "Pending", "message": "ETA 5m"}]
MANAGER_WL = {
    "metadata": {"name": "w", "namespace": "ns"},
    "status": {"conditions": [cond("QuotaReserved")], "nominatedClusterNames": ["worker-2"]},
}


def test_a_copy_reserved_behind_its_checks_is_not_admitted_yet() -> None:
    job = {"metadata": {"name": "j"}, "spec": {"suspend": True}}
    waiting = copy(cond("QuotaReserved"), checks=PENDING)
    steps = plan(manager_workload=MANAGER_WL, manager_job=job, remote_workload=waiting, remote_job=job)
    assert "mark_admitted" not in steps
    ready = copy(cond("QuotaReserved"), cond("Admitted"), checks=[{**PENDING[0], "state": "Ready"}])
    assert "mark_admitted" in plan(manager_workload=MANAGER_WL, manager_job=job, remote_workload=ready, remote_job=job)


def test_a_copy_the_worker_retries_is_neither_withdrawn_nor_timed_out() -> None:
    evicted = copy(
        cond("QuotaReserved", status=False),
        cond("Evicted", reason="AdmissionCheck", message="Evicted due to AdmissionCheck in Retry state"),
        checks=[{"name": "prov", "state": "Pending", "retryCount": 1, "message": "Reset to Pending"}],
    )
    assert dispatch_time_left(evicted, now=NOW, timeout=60) is None
    reason = withdrawal_reason(
        manager_workload=MANAGER_WL,
        worker="worker-2",
        remote_workload=evicted,
        remote_job=None,
        manager_job=None,
        now=NOW,
        dispatch_timeout=60,
    )
    assert reason is None
    preempted = copy(cond("Evicted", reason="Preempted"), checks=[])
    assert withdrawal_reason(
        manager_workload=MANAGER_WL, worker="worker-2", remote_workload=preempted, remote_job=None, manager_job=None
    )


def test_the_manager_shows_the_workers_checks_and_deactivates_on_their_rejection() -> None:
    waiting = copy(cond("QuotaReserved"), checks=PENDING)
    assert worker_checks_message(waiting, "worker-2") == 'admission checks on "worker-2": prov Pending: ETA 5m'
    assert worker_rejection(waiting, "worker-2") is None
    rejected = copy(checks=[{"name": "prov", "state": "Rejected", "message": "out of stock"}], active=False)
    eviction = worker_rejection(rejected, "worker-2")
    assert eviction is not None
    assert eviction.deactivate
    assert eviction.reason == "DeactivatedDueToAdmissionCheck"
    assert eviction.event_message == (
        'Deactivated due to AdmissionCheck in Rejected state: "prov" (out of stock) in worker cluster "worker-2"'
    )
    shown = {
        "metadata": {"name": "w", "namespace": "ns", "creationTimestamp": "2026-11-23T05:59:00Z"},
        "spec": {"queueName": "q"},
        "status": {
            "conditions": [cond("QuotaReserved")],
            "nominatedClusterNames": ["worker-2"],
            "admissionChecks": [{"name": "kfed-multikueue", "state": "Pending", "message": "provisioning on worker-2"}],
        },
    }
    line = render_workloads([shown], now=NOW, all_namespaces=False).splitlines()[1]
    assert "provisioning on worker-2" in line
