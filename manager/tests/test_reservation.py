import datetime as dt
from typing import Any

from federation.admission.decisions import Assignment, PodSetAssignment
from federation.tests.api_builders import workload
from manager.decisions.reservation import multikueue_workers, reservation_update

NOW = dt.datetime(2026, 11, 21, 10, 0, tzinfo=dt.UTC)
CHECK = {
    "spec": {
        "controllerName": "kueue.x-k8s.io/multikueue",
        "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "kfed"},
    }
}
OTHER_CHECK: dict[str, Any] = {"spec": {"controllerName": "example.com/provisioning"}}
CONFIGS = {"kfed": {"spec": {"clusters": ["worker-1", "worker-2"]}}}


def cq(*checks: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "cq"},
        "spec": {"admissionChecksStrategy": {"admissionChecks": [{"name": c} for c in checks]}},
    }


def test_workers_come_from_the_multikueue_check_in_config_order() -> None:
    checks = {"mk": CHECK, "prov": OTHER_CHECK}
    assert multikueue_workers(cq("prov", "mk"), admission_checks=checks, configs=CONFIGS) == (
        ["mk"],
        ["worker-1", "worker-2"],
    )


def test_a_queue_without_somewhere_to_dispatch_says_why() -> None:
    assert "has no AdmissionCheck with controllerName kueue.x-k8s.io/multikueue" in str(
        multikueue_workers(cq("prov"), admission_checks={"prov": OTHER_CHECK}, configs=CONFIGS)
    )
    assert multikueue_workers(cq("gone"), admission_checks={}, configs=CONFIGS) == (
        "ClusterQueue cq references AdmissionCheck gone, which doesn't exist"
    )
    assert multikueue_workers(cq("mk"), admission_checks={"mk": CHECK}, configs={}) == (
        "AdmissionCheck mk does not point at an existing MultiKueueConfig"
    )


def test_reservation_reserves_quota_and_nominates_one_worker_but_does_not_admit() -> None:
    raw = workload("w", cpu="2", count=2)
    assignment = Assignment(
        cluster_queue="cq",
        pod_set_assignments=(
            PodSetAssignment(name="main", flavors={"cpu": "default"}, resource_usage={"cpu": 4000}, count=2),
        ),
        usage={("default", "cpu"): 4000},
        borrows=False,
    )
    update = reservation_update(raw, assignment, worker="worker-2", checks=["mk"], now=NOW, waited_seconds=3)
    status = update.status
    assert status["nominatedClusterNames"] == ["worker-2"]
    assert status["admission"]["clusterQueue"] == "cq"
    assert status["admission"]["podSetAssignments"][0]["resourceUsage"] == {"cpu": "4"}
    assert [(c["type"], c["status"]) for c in status["conditions"]] == [("QuotaReserved", "True")]
    assert status["admissionChecks"] == [
        {
            "name": "mk",
            "state": "Pending",
            "message": "Dispatched to worker cluster worker-2",
            "lastTransitionTime": "2026-11-21T10:00:00Z",
        }
    ]
    assert update.outcome == "reserved"
