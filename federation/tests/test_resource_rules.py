"""Kueue's ``resources`` configuration: excluded resource prefixes and the quota check strategy."""

from typing import Any

from federation.admission.api_drain import drain
from federation.admission.api_state import QuotaStateBuilder
from federation.admission.api_workloads import ResourceRules
from federation.admission.decisions import Admit, Wait
from federation.tests.api_builders import cluster_queue, flavor, local_queue, workload


def _decide(rules: ResourceRules) -> tuple[str, str]:
    """The one workload's decision kind and message: it asks for 1 cpu and 2 example.com/nic; the ClusterQueue
    covers cpu only."""
    asking = workload("w", cpu="1")
    asking["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]["example.com/nic"] = "2"
    builder = QuotaStateBuilder(rules=rules)
    state = builder.build(
        flavors=[flavor("default")],
        cluster_queues=[cluster_queue("cq", {"default": {"cpu": "4"}})],
        cohorts=[],
        local_queues=[local_queue("ns", "lq", "cq")],
        namespaces=[{"metadata": {"name": "ns"}}],
        workloads=[asking],
    )
    [decision] = drain(state, now_seconds=0)
    if isinstance(decision, Admit):
        usage: dict[str, Any] = {}
        for psa in decision.assignment.pod_set_assignments:
            usage |= psa.resource_usage
        return "admit", ",".join(sorted(usage))
    assert isinstance(decision, Wait)
    return "wait", decision.message


def test_by_default_a_request_the_cluster_queue_does_not_cover_keeps_the_workload_pending() -> None:
    kind, message = _decide(ResourceRules())
    assert kind == "wait"
    assert "example.com/nic" in message


def test_an_excluded_prefix_is_not_counted_for_quota() -> None:
    assert _decide(ResourceRules(exclude_prefixes=("example.com/",))) == ("admit", "cpu")
    assert _decide(ResourceRules(exclude_prefixes=("other.io/",)))[0] == "wait"


def test_ignore_undeclared_counts_only_what_the_cluster_queue_covers() -> None:
    assert _decide(ResourceRules(ignore_undeclared=True)) == ("admit", "cpu")


def test_a_pod_set_asks_for_a_topology_by_kueues_annotations_or_its_topology_request() -> None:
    from federation.admission.api_workloads import asks_for_topology, core_pod_set

    def pod_set(annotations: dict[str, str], request: dict[str, object] | None = None) -> dict[str, object]:
        found: dict[str, object] = {"name": "main", "count": 1, "template": {"metadata": {"annotations": annotations}}}
        if request is not None:
            found["topologyRequest"] = request
        return found

    assert asks_for_topology(pod_set({"kueue.x-k8s.io/podset-required-topology": "rack"}))
    assert asks_for_topology(pod_set({"kueue.x-k8s.io/podset-preferred-topology": "rack"}))
    assert asks_for_topology(pod_set({"kueue.x-k8s.io/podset-unconstrained-topology": "true"}))
    assert not asks_for_topology(pod_set({"kueue.x-k8s.io/podset-unconstrained-topology": "false"}))
    assert asks_for_topology(pod_set({}, {"required": "rack"}))
    assert not asks_for_topology(pod_set({}, {"podIndexLabel": "batch.kubernetes.io/job-completion-index"}))
    assert not asks_for_topology(pod_set({"example.com/other": "x"}))
    assert core_pod_set(pod_set({"kueue.x-k8s.io/podset-required-topology": "rack"})).topology_request
