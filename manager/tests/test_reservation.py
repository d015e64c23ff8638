import datetime as dt
from typing import Any

from federation.admission.decisions import Assignment, PodSetAssignment
from federation.tests.api_builders import workload
from manager.decisions.reservation import assigned_flavors, multikueue_workers, reservation_update, workload_checks

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
    update = reservation_update(
        raw, assignment, worker="worker-2", checks=["mk"], multikueue_checks=["mk"], now=NOW, waited_seconds=3
    )
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


def _assignment(flavor: str = "default") -> Assignment:
    return Assignment(
        cluster_queue="cq",
        pod_set_assignments=(
            PodSetAssignment(name="main", flavors={"cpu": flavor}, resource_usage={"cpu": 1000}, count=1),
        ),
        usage={(flavor, "cpu"): 1000},
        borrows=False,
    )


def test_every_check_of_the_queue_is_listed_respecting_on_flavors() -> None:
    queue = {
        "metadata": {"name": "cq"},
        "spec": {
            "admissionChecksStrategy": {
                "admissionChecks": [
                    {"name": "mk"},
                    {"name": "prov", "onFlavors": ["spot"]},
                    {"name": "budget"},
                    {"name": "gpu-quota", "onFlavors": ["gpu", "default"]},
                ]
            }
        },
    }
    assert assigned_flavors(_assignment("default")) == {"default"}
    assert workload_checks(queue, flavors={"default"}) == ["mk", "budget", "gpu-quota"]
    assert workload_checks(queue, flavors={"spot"}) == ["mk", "prov", "budget"]
    assert workload_checks({"metadata": {"name": "bare"}, "spec": {}}, flavors={"default"}) == []


def test_other_checks_are_listed_pending_and_the_multikueue_check_says_what_it_waits_for() -> None:
    update = reservation_update(
        workload("w", cpu="1"),
        _assignment(),
        worker="worker-1",
        checks=["prov", "mk", "budget"],
        multikueue_checks={"mk"},
        now=NOW,
        waited_seconds=0,
    )
    checks = update.status["admissionChecks"]
    assert [(c["name"], c["state"]) for c in checks] == [("prov", "Pending"), ("mk", "Pending"), ("budget", "Pending")]
    assert checks[1]["message"] == (
        "Waiting for admission check(s) prov, budget to be Ready before dispatching to worker cluster worker-1"
    )
    assert checks[0]["message"] == checks[2]["message"] == ""
    assert "waiting for admission check(s) prov, budget" in update.events[0].message


def test_a_tas_pod_set_waits_for_its_topology_on_the_worker_pending_then_ready() -> None:
    """Kueue's manager under MultiKueue: a pod set on a TAS flavor gets delayedTopologyRequest Pending at
    reservation, Ready once the worker's copy carries its topologyAssignment; other pod sets carry no such field."""
    from manager.decisions.reservation import tas_flavor_names, topology_ready

    flavors = [
        {"metadata": {"name": "tas"}, "spec": {"topologyName": "default"}},
        {"metadata": {"name": "default"}, "spec": {}},
    ]
    assert tas_flavor_names(flavors) == {"tas"}
    assert tas_flavor_names(flavors, ["worker-tas"]) == {"tas", "worker-tas"}
    assignment = Assignment(
        cluster_queue="cq",
        pod_set_assignments=(
            PodSetAssignment(name="main", flavors={"cpu": "tas"}, resource_usage={"cpu": 1000}, count=1),
            PodSetAssignment(name="aux", flavors={"cpu": "default"}, resource_usage={"cpu": 1000}, count=1),
        ),
        usage={("tas", "cpu"): 1000, ("default", "cpu"): 1000},
        borrows=False,
    )
    raw = workload("w")
    update = reservation_update(
        raw,
        assignment,
        worker="worker-1",
        checks=["mk"],
        multikueue_checks=["mk"],
        now=NOW,
        waited_seconds=0,
        tas_flavors=tas_flavor_names(flavors),
    )
    psas = update.status["admission"]["podSetAssignments"]
    assert [psa.get("delayedTopologyRequest") for psa in psas] == ["Pending", None]
    reserved = {**raw, "status": {"admission": update.status["admission"]}}
    remote_before = {"status": {"admission": {"podSetAssignments": [{"name": "main"}, {"name": "aux"}]}}}
    assert topology_ready(reserved, remote_before) is None
    assert topology_ready(reserved, None) is None
    remote = {
        "status": {
            "admission": {
                "podSetAssignments": [
                    {"name": "main", "topologyAssignment": {"levels": ["kubernetes.io/hostname"], "slices": []}},
                    {"name": "aux"},
                ]
            }
        }
    }
    ready = topology_ready(reserved, remote)
    assert ready is not None
    assert [psa.get("delayedTopologyRequest") for psa in ready["podSetAssignments"]] == ["Ready", None]
    assert "topologyAssignment" not in ready["podSetAssignments"][0], "the assignment stays on the worker, as in Kueue"
    assert topology_ready({**raw, "status": {"admission": ready}}, remote) is None


def test_a_new_reservation_ends_the_eviction_and_preemption_before_it_saying_what_they_were() -> None:
    """As Kueue's SetQuotaReservation: Evicted and Preempted that were True turn False, reason QuotaReserved,
    "Previously: <their message>"; one already False is left as it was."""
    raw = workload("w", cpu="1")
    raw["status"] = {
        "conditions": [
            {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": "requeued"},
            {"type": "Evicted", "status": "True", "reason": "AdmissionCheck", "message": "the Job copy was deleted"},
            {"type": "Preempted", "status": "True", "reason": "InClusterQueue", "message": "Preempted to fit w2"},
            {"type": "Requeued", "status": "True", "reason": "BackoffFinished", "message": "backoff over"},
        ]
    }
    update = reservation_update(
        raw, _assignment(), worker="worker-1", checks=["mk"], multikueue_checks=["mk"], now=NOW, waited_seconds=1
    )
    by_type = {c["type"]: c for c in update.status["conditions"]}
    assert by_type["QuotaReserved"]["status"] == "True"
    assert (by_type["Evicted"]["status"], by_type["Evicted"]["reason"], by_type["Evicted"]["message"]) == (
        "False",
        "QuotaReserved",
        "Previously: the Job copy was deleted",
    )
    assert (by_type["Preempted"]["status"], by_type["Preempted"]["message"]) == (
        "False",
        "Previously: Preempted to fit w2",
    )
    assert by_type["Requeued"]["message"] == "backoff over"

    raw["status"] = update.status  # reserved again later: the False conditions are not touched a second time
    again = reservation_update(
        raw, _assignment(), worker="worker-1", checks=["mk"], multikueue_checks=["mk"], now=NOW, waited_seconds=1
    )
    assert {c["type"]: c for c in again.status["conditions"]}["Evicted"]["message"] == (
        "Previously: the Job copy was deleted"
    )
