from typing import Any

from manager.decisions.local_routing import local_queues


def cq(name: str, *checks: str) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if checks:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": c} for c in checks]}
    return {"metadata": {"name": name}, "spec": spec}


def lq(namespace: str, name: str, target: str) -> dict[str, Any]:
    return {"metadata": {"namespace": namespace, "name": name}, "spec": {"clusterQueue": target}}


def ac(name: str, controller: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"controllerName": controller}}


CHECKS = [ac("mk", "kueue.x-k8s.io/multikueue"), ac("prov", "kueue.x-k8s.io/provisioning-request")]


def test_only_local_queues_of_cluster_queues_without_a_multikueue_check_are_local() -> None:
    routes = local_queues(
        local_queues=[
            lq("team-a", "remote", "federated"),
            lq("team-a", "here", "local"),
            lq("team-b", "here.too", "provisioned"),
            lq("team-b", "nowhere", "missing"),
        ],
        cluster_queues=[cq("federated", "mk"), cq("local"), cq("provisioned", "prov")],
        admission_checks=CHECKS,
    )
    assert routes == {"team-a.here": "local", "team-b.here.too": "provisioned"}


def test_a_cluster_queue_naming_a_check_not_created_yet_stays_multikueues() -> None:
    routes = local_queues(
        local_queues=[lq("ns", "q", "cq")], cluster_queues=[cq("cq", "not-yet")], admission_checks=CHECKS
    )
    assert routes == {}
