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


def ns(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name, **labels}}}


def test_unlabelled_jobs_get_the_default_local_queue_only_in_selected_namespaces() -> None:
    from manager.decisions.local_routing import default_managed_namespace_selector, unlabelled_job_routes

    namespaces = [ns("team-a"), ns("team-b"), ns("kube-system"), ns("kfed-system"), ns("plain")]
    queues = [lq(name, "default", "cq") for name in ("team-a", "kube-system", "kfed-system")] + [
        lq("team-b", "other", "cq")
    ]
    selector = default_managed_namespace_selector("kfed-system")
    # Kueue's LocalQueue defaulting needs no flag; kube-system and kfed's own namespace are never selected.
    assert unlabelled_job_routes(
        namespaces=namespaces, local_queues=queues, namespace_selector=selector, manage_jobs_without_queue_name=False
    ) == {"team-a": "default"}
    # manageJobsWithoutQueueName: the other selected namespaces keep such Jobs suspended (empty value).
    assert unlabelled_job_routes(
        namespaces=namespaces, local_queues=queues, namespace_selector=selector, manage_jobs_without_queue_name=True
    ) == {"team-a": "default", "team-b": "", "plain": ""}
    only_b = {"matchLabels": {"kueue": "on"}}
    assert unlabelled_job_routes(
        namespaces=[ns("team-a"), ns("team-b", kueue="on")],
        local_queues=queues,
        namespace_selector=only_b,
        manage_jobs_without_queue_name=True,
    ) == {"team-b": ""}
