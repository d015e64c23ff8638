from __future__ import annotations

import pytest

from federation.admission.cycle import run_cycle
from federation.admission.decisions import Admit, Preempt, Wait
from federation.admission.flavors import FIT, NO_FIT, PREEMPT, assign_flavors
from federation.admission.model import NodeSelectorRequirement
from federation.tests.builders import make_cluster_queue, make_flavor, make_snapshot, make_workload


def _flavors_of(decision: object) -> dict[str, str]:
    assert isinstance(decision, Admit | Preempt), decision
    return dict(decision.assignment.pod_set_assignments[0].flavors)


@pytest.mark.parametrize(
    ("when_can_borrow", "expected_flavor"),
    [("MayStopSearch", "one"), ("TryNextFlavor", "two")],
)
def test_when_can_borrow(when_can_borrow: str, expected_flavor: str) -> None:
    # "one" only fits by borrowing; "two" fits within nominal quota.
    queue = (
        make_cluster_queue("cq")
        .cohort("c")
        .fungibility(when_can_borrow=when_can_borrow)
        .flavor_quota("one", cpu="2")
        .flavor_quota("two", cpu="8")
    )
    lender = make_cluster_queue("lender").cohort("c").flavor_quota("one", cpu="10").flavor_quota("two", cpu="0")
    snapshot = make_snapshot([queue, lender])
    [decision] = run_cycle(snapshot, [make_workload("w").queue("cq").request("cpu", "4").obj()])
    assert _flavors_of(decision) == {"cpu": expected_flavor}
    assert decision.assignment.borrows is (expected_flavor == "one")  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("when_can_preempt", "expected_flavor", "expected_type"),
    [("TryNextFlavor", "two", Admit), ("MayStopSearch", "one", Preempt)],
)
def test_when_can_preempt(when_can_preempt: str, expected_flavor: str, expected_type: type) -> None:
    queue = (
        make_cluster_queue("cq")
        .preemption(within="LowerPriority")
        .fungibility(when_can_preempt=when_can_preempt)
        .flavor_quota("one", cpu="4")
        .flavor_quota("two", cpu="4")
    )
    low = make_workload("low").queue("cq").priority(0).request("cpu", "3").admitted("one")
    snapshot = make_snapshot([queue], admitted=(low,))
    [decision] = run_cycle(snapshot, [make_workload("w").queue("cq").priority(10).request("cpu", "2").obj()])
    assert isinstance(decision, expected_type)
    assert _flavors_of(decision) == {"cpu": expected_flavor}


def test_preemption_in_an_earlier_flavor_is_chosen_when_no_flavor_fits() -> None:
    queue = (
        make_cluster_queue("cq")
        .preemption(within="LowerPriority")
        .flavor_quota("one", cpu="4")
        .flavor_quota("two", cpu="1")
    )
    low = make_workload("low").queue("cq").request("cpu", "3").admitted("one")
    snapshot = make_snapshot([queue], admitted=(low,))
    [decision] = run_cycle(snapshot, [make_workload("w").queue("cq").priority(10).request("cpu", "2").obj()])
    assert isinstance(decision, Preempt)
    assert _flavors_of(decision) == {"cpu": "one"}
    assert [v.key for v in decision.victims] == ["low"]


def test_exceeding_the_maximum_capacity_is_explained() -> None:
    snapshot = make_snapshot([make_cluster_queue("cq").flavor_quota("default-flavor", cpu="20")])
    [decision] = run_cycle(snapshot, [make_workload("w").queue("cq").request("cpu", "24").obj()])
    assert decision == Wait(
        decision.workload,
        "ExceedsMaxQuota",
        "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor default-flavor, "
        "previously considered podsets requests (0) + current podset request (24) > maximum capacity (20)",
    )


def test_exceeding_the_maximum_capacity_with_the_earlier_pod_sets_names_both_parts() -> None:
    # Kueue's message: what the pod sets before this one take of the flavor, plus this pod set's request
    snapshot = make_snapshot([make_cluster_queue("cq").flavor_quota("default-flavor", cpu="20")])
    two = make_workload("w").queue("cq").request("cpu", "12").pod_set("tail").request("cpu", "9").obj()
    [decision] = run_cycle(snapshot, [two])
    assert decision == Wait(
        decision.workload,
        "ExceedsMaxQuota",
        "couldn't assign flavors to pod set tail: insufficient quota for cpu in flavor default-flavor, "
        "previously considered podsets requests (12) + current podset request (9) > maximum capacity (20)",
    )


def test_waiting_for_quota_says_how_much_more_is_needed() -> None:
    snapshot = make_snapshot(
        [make_cluster_queue("cq").flavor_quota("default", memory="4Gi")],
        admitted=(make_workload("old").queue("cq").request("memory", "3Gi").admitted(),),
    )
    [decision] = run_cycle(snapshot, [make_workload("w").queue("cq").request("memory", "1536Mi").obj()])
    assert isinstance(decision, Wait)
    assert decision.reason == "WaitingForQuota"
    assert decision.message == (
        "couldn't assign flavors to pod set main: insufficient unused quota for memory in flavor default, "
        "512Mi more needed"
    )
    assert not decision.retry_immediately


def test_over_a_lowered_quota_the_amount_needed_counts_the_usage_above_it_as_kueue_does() -> None:
    # 24 cpu in use, the quota then lowered to 8: a 4-cpu workload needs 20 more (Kueue: used + request - quota)
    snapshot = make_snapshot(
        [make_cluster_queue("cq").flavor_quota("default", cpu="8")],
        admitted=(make_workload("old").queue("cq").request("cpu", "24").admitted(),),
    )
    [decision] = run_cycle(snapshot, [make_workload("w").queue("cq").request("cpu", "4").obj()])
    assert isinstance(decision, Wait)
    assert decision.message == (
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, 20 more needed"
    )


def test_resource_the_queue_does_not_cover() -> None:
    snapshot = make_snapshot([make_cluster_queue("cq").flavor_quota("default", cpu="20")])
    workload = make_workload("w").queue("cq").request("cpu", "1").request("example.com/gpu", "1").obj()
    [decision] = run_cycle(snapshot, [workload])
    assert isinstance(decision, Wait)
    assert decision.reason == "NoMatchingFlavor"
    assert "resource example.com/gpu unavailable in ClusterQueue" in decision.message


def test_taints_must_be_tolerated() -> None:
    queue = make_cluster_queue("cq").flavor_quota("spot", cpu="10").flavor_quota("on-demand", cpu="10")
    flavors = (make_flavor("spot").taint("spot", "true", "NoSchedule"), make_flavor("on-demand"))
    snapshot = make_snapshot([queue], flavors=flavors)
    plain = make_workload("plain").queue("cq").request("cpu", "1")
    tolerant = make_workload("tolerant").queue("cq").request("cpu", "1").toleration("spot", "Equal", "true")
    decisions = run_cycle(snapshot, [plain.obj()])
    assert _flavors_of(decisions[0]) == {"cpu": "on-demand"}
    assert _flavors_of(run_cycle(snapshot, [tolerant.obj()])[0]) == {"cpu": "spot"}
    only_spot = make_snapshot([make_cluster_queue("cq").flavor_quota("spot", cpu="10")], flavors=flavors)
    [decision] = run_cycle(only_spot, [plain.obj()])
    assert isinstance(decision, Wait)
    assert decision.reason == "NoMatchingFlavor"
    assert "untolerated taint spot=true:NoSchedule in flavor spot" in decision.message


def test_a_pod_set_asking_for_a_topology_takes_only_a_flavor_with_one_as_in_kueue() -> None:
    queue = make_cluster_queue("cq").flavor_quota("plain", cpu="10").flavor_quota("tas", cpu="10")
    flavors = (make_flavor("plain").topology(""), make_flavor("tas").topology("default"))
    snapshot = make_snapshot([queue], flavors=flavors)
    rack = make_workload("rack").queue("cq").request("cpu", "1").asks_for_topology()
    assert _flavors_of(run_cycle(snapshot, [rack.obj()])[0]) == {"cpu": "tas"}
    assert _flavors_of(run_cycle(snapshot, [make_workload("any").queue("cq").request("cpu", "1").obj()])[0]) == {
        "cpu": "plain"
    }
    only_plain = make_snapshot([make_cluster_queue("cq").flavor_quota("plain", cpu="10")], flavors=flavors)
    [decision] = run_cycle(only_plain, [rack.obj()])
    assert isinstance(decision, Wait)
    assert decision.reason == "NoMatchingFlavor"
    assert 'Flavor "plain" does not support TopologyAwareScheduling' in decision.message
    # A flavor whose topology is not known (a MultiKueue manager's) takes the request on trust.
    unknown = make_snapshot(
        [make_cluster_queue("cq").flavor_quota("plain", cpu="10")], flavors=(make_flavor("plain").topology(None),)
    )
    assert _flavors_of(run_cycle(unknown, [rack.obj()])[0]) == {"cpu": "plain"}


@pytest.mark.parametrize(
    ("selector", "affinity", "expected"),
    [
        ({}, (), "x86"),
        ({"arch": "arm"}, (), "arm"),
        ({"unrelated": "label"}, (), "x86"),  # keys no flavor sets are left to the node scheduler
        ({}, ((NodeSelectorRequirement("arch", "In", ("arm",)),),), "arm"),
        ({}, ((NodeSelectorRequirement("arch", "NotIn", ("x86",)),),), "arm"),
        (
            {},
            ((NodeSelectorRequirement("zone", "In", ("b",)),), (NodeSelectorRequirement("arch", "In", ("arm",)),)),
            "arm",
        ),
        ({"arch": "riscv"}, (), None),
    ],
)
def test_node_selector_and_required_affinity(
    selector: dict[str, str], affinity: tuple[tuple[NodeSelectorRequirement, ...], ...], expected: str | None
) -> None:
    queue = make_cluster_queue("cq").flavor_quota("x86", cpu="10").flavor_quota("arm", cpu="10")
    flavors = (make_flavor("x86").label("arch", "x86").label("zone", "a"), make_flavor("arm").label("arch", "arm"))
    snapshot = make_snapshot([queue], flavors=flavors)
    builder = make_workload("w").queue("cq").request("cpu", "1").required_affinity(*affinity)
    for key, value in selector.items():
        builder = builder.node_selector(key, value)
    [decision] = run_cycle(snapshot, [builder.obj()])
    if expected is None:
        assert isinstance(decision, Wait)
        assert decision.reason == "NoMatchingFlavor"
        assert "flavor x86 doesn't match node affinity; flavor arm doesn't match node affinity" in decision.message
    else:
        assert _flavors_of(decision) == {"cpu": expected}


def test_resource_groups_pick_flavors_independently_and_pod_sets_add_up() -> None:
    queue = (
        make_cluster_queue("cq")
        .flavor_quota("small", cpu="4", memory="4Gi")
        .flavor_quota("big", cpu="16", memory="16Gi")
        .flavor_quota("gpu-a", {"example.com/gpu": "2"})
        .flavor_quota("gpu-b", {"example.com/gpu": "8"})
    )
    snapshot = make_snapshot([queue])
    workload = (
        make_workload("w")
        .queue("cq")
        .request("cpu", "1")
        .request("memory", "1Gi")
        .count(3)
        .pod_set("workers", 2)
        .request("cpu", "1")
        .request("example.com/gpu", "2")
    )
    outcome = assign_flavors(snapshot, workload.obj(), queue=snapshot.cluster_queues["cq"])
    assert outcome.mode == FIT
    assert outcome.assignment is not None
    first, second = outcome.assignment.pod_set_assignments
    assert dict(first.flavors) == {"cpu": "small", "memory": "small"}
    assert dict(first.resource_usage) == {"cpu": 3000, "memory": 3 * 1024**3 * 1000}
    # 3 cpu already taken from "small" by the first pod set: 2 more do not fit there.
    assert dict(second.flavors) == {"cpu": "big", "example.com/gpu": "gpu-b"}
    assert dict(outcome.assignment.usage) == {
        ("small", "cpu"): 3000,
        ("small", "memory"): 3 * 1024**3 * 1000,
        ("big", "cpu"): 2000,
        ("gpu-b", "example.com/gpu"): 4000,
    }


def test_pods_are_counted_when_the_queue_covers_them() -> None:
    snapshot = make_snapshot([make_cluster_queue("cq").flavor_quota("default", cpu="100", pods="4")])
    queue = snapshot.cluster_queues["cq"]
    fits = assign_flavors(snapshot, make_workload("w").queue("cq").request("cpu", "1").count(4).obj(), queue=queue)
    too_many = assign_flavors(snapshot, make_workload("w").queue("cq").request("cpu", "1").count(5).obj(), queue=queue)
    assert fits.mode == FIT
    assert too_many.mode == NO_FIT
    assert "insufficient quota for pods" in too_many.message


def test_without_any_preemption_policy_a_full_queue_is_no_fit() -> None:
    snapshot = make_snapshot(
        [make_cluster_queue("cq").flavor_quota("default", cpu="4")],
        admitted=(make_workload("old").queue("cq").request("cpu", "4").admitted(),),
    )
    workload = make_workload("w").queue("cq").priority(100).request("cpu", "1").obj()
    assert assign_flavors(snapshot, workload, queue=snapshot.cluster_queues["cq"]).mode == NO_FIT
    with_policy = make_snapshot(
        [make_cluster_queue("cq").preemption(within="LowerPriority").flavor_quota("default", cpu="4")],
        admitted=(make_workload("old").queue("cq").request("cpu", "4").admitted(),),
    )
    assert assign_flavors(with_policy, workload, queue=with_policy.cluster_queues["cq"]).mode == PREEMPT
