from __future__ import annotations

from typing import Any

from federation.admission.check_problems import cluster_queue_check_problems, merged, topology_problems


def test_a_cluster_queue_with_a_missing_or_inactive_check_has_a_problem_kueue_names() -> None:
    def cq(name: str, *checks: str) -> dict[str, Any]:
        rules = [{"name": check} for check in checks]
        return {"metadata": {"name": name}, "spec": {"admissionChecksStrategy": {"admissionChecks": rules}}}

    def check(name: str, active: str | None) -> dict[str, Any]:
        conditions = [] if active is None else [{"type": "Active", "status": active}]
        return {"metadata": {"name": name}, "status": {"conditions": conditions}}

    # a check its controller never said is Active counts as inactive, as in Kueue
    checks = [check("mk", "True"), check("broken", "False"), check("unanswered", None)]
    problems = cluster_queue_check_problems(
        [cq("fine", "mk"), cq("gone", "mk", "nope", "also-gone"), cq("off", "broken", "unanswered"), cq("plain")],
        checks,
    )
    assert problems == {
        "gone": [("AdmissionCheckNotFound", "references missing AdmissionCheck(s): also-gone,nope")],
        "off": [("AdmissionCheckInactive", "references inactive AdmissionCheck(s): broken,unanswered")],
    }


def test_a_cluster_queue_whose_multikueue_checks_kueue_refuses_has_the_problems_kueue_names() -> None:
    def check(name: str, controller: str) -> dict[str, Any]:
        active = {"conditions": [{"type": "Active", "status": "True"}]}
        return {"metadata": {"name": name}, "spec": {"controllerName": controller}, "status": active}

    def cq(name: str, *rules: dict[str, Any]) -> dict[str, Any]:
        groups = [{"coveredResources": ["cpu"], "flavors": [{"name": "a"}, {"name": "b"}]}]
        strategy = {"admissionChecks": list(rules)}
        return {"metadata": {"name": name}, "spec": {"resourceGroups": groups, "admissionChecksStrategy": strategy}}

    checks = [
        check("mk", "kueue.x-k8s.io/multikueue"),
        check("mk2", "kueue.x-k8s.io/multikueue"),
        check("prov", "kueue.x-k8s.io/provisioning-request"),
    ]
    problems = cluster_queue_check_problems(
        [
            cq("two", {"name": "mk2"}, {"name": "mk"}),
            cq("some-flavors", {"name": "mk", "onFlavors": ["a"]}),
            cq("all-flavors", {"name": "mk", "onFlavors": ["b", "a"]}),  # every flavor: as if none were named
            cq("with-prov", {"name": "mk"}, {"name": "prov"}),
            cq("prov-only", {"name": "prov", "onFlavors": ["a"]}),
        ],
        checks,
    )
    assert problems == {
        "two": [
            (
                "MultipleMultiKueueAdmissionChecks",
                "Cannot use multiple MultiKueue AdmissionChecks on the same ClusterQueue, found: mk,mk2",
            )
        ],
        "some-flavors": [
            (
                "MultiKueueAdmissionCheckAppliedPerFlavor",
                "Cannot specify MultiKueue AdmissionCheck per flavor, found: mk",
            )
        ],
        "with-prov": [
            (
                "MultiKueueWithProvisioningRequest",
                "Cannot use both MultiKueue and ProvisioningRequest AdmissionChecks together, found: mk, prov",
            )
        ],
    }


def test_a_queue_whose_tas_flavor_has_no_topology_is_named_as_kueue_names_it() -> None:
    def cq(name: str, *flavors: str) -> dict[str, Any]:
        groups = [{"coveredResources": ["cpu"], "flavors": [{"name": f} for f in flavors]}]
        return {"metadata": {"name": name}, "spec": {"resourceGroups": groups}}

    flavors = [
        {"metadata": {"name": "tas"}, "spec": {"topologyName": "racks"}},
        {"metadata": {"name": "tas-gone"}, "spec": {"topologyName": "gone"}},
        {"metadata": {"name": "plain"}, "spec": {}},
    ]
    topologies = [{"metadata": {"name": "racks"}}]
    problems = topology_problems([cq("fine", "tas", "plain"), cq("broken", "plain", "tas-gone")], flavors, topologies)
    assert problems == {"broken": [("TopologyNotFound", 'there is no Topology "gone" for TAS flavor "tas-gone"')]}
    # after the admission checks' causes, as Kueue lists them
    checks = {"broken": [("AdmissionCheckNotFound", "references missing AdmissionCheck(s): x")]}
    assert [reason for reason, _ in merged(checks, problems)["broken"]] == [
        "AdmissionCheckNotFound",
        "TopologyNotFound",
    ]
