from __future__ import annotations

from federation.admission.cycle import apply_admission, run_cycle
from federation.admission.decisions import Admit, Preempt, Wait
from federation.tests.builders import make_cluster_queue, make_snapshot, make_workload


def test_each_admission_updates_the_snapshot_before_the_next_head() -> None:
    queues = [make_cluster_queue(n).cohort("c").flavor_quota("default", cpu="5") for n in ("a", "b")]
    snapshot = make_snapshot(queues)
    before = snapshot.state()
    heads = [
        make_workload("first").queue("a").request("cpu", "4").created(1).obj(),
        make_workload("second").queue("b").request("cpu", "4").created(2).obj(),
        make_workload("third").queue("b").request("cpu", "3").created(3).obj(),
    ]
    first, second, third = run_cycle(snapshot, heads)
    assert isinstance(first, Admit)
    assert isinstance(second, Admit)
    assert third == Wait(
        heads[2], "WaitingForQuota", "Workload no longer fits after processing another workload", True
    ), "Kueue v0.20's reason"
    assert snapshot.state() == before  # the cycle itself changes nothing
    apply_admission(snapshot, first, now=10.0)
    assert snapshot.usage_of("a") == {("default", "cpu"): 4000}


def test_heads_within_nominal_quota_go_before_borrowers_then_priority() -> None:
    a = make_cluster_queue("a").cohort("c").flavor_quota("default", cpu="2")
    b = make_cluster_queue("b").cohort("c").flavor_quota("default", cpu="4")
    snapshot = make_snapshot([a, b])
    borrower = make_workload("borrower").queue("a").priority(1000).request("cpu", "4").created(0).obj()
    modest = make_workload("modest").queue("b").priority(0).request("cpu", "4").created(5).obj()
    decisions = run_cycle(snapshot, [borrower, modest])
    assert [d.workload.key for d in decisions] == ["modest", "borrower"]
    assert isinstance(decisions[0], Admit)
    assert isinstance(decisions[1], Wait)


def test_capacity_freed_by_preemption_is_reserved_for_the_preemptor() -> None:
    a = make_cluster_queue("a").cohort("c").preemption(reclaim="Any").flavor_quota("default", cpu="10")
    b = make_cluster_queue("b").cohort("c").flavor_quota("default", cpu="10")
    c = make_cluster_queue("c").cohort("c").flavor_quota("default", cpu="0")
    admitted = (
        make_workload("b-own").queue("b").request("cpu", "10").admitted(at=1),
        make_workload("b-borrowed").queue("b").request("cpu", "4").admitted(at=2),
    )
    snapshot = make_snapshot([a, b, c], admitted=admitted)
    reclaimer = make_workload("reclaimer").queue("a").request("cpu", "8").obj()
    opportunist = make_workload("opportunist").queue("c").request("cpu", "5").obj()
    first, second = run_cycle(snapshot, [opportunist, reclaimer])
    assert isinstance(first, Preempt)
    assert first.workload.key == "reclaimer"
    assert [v.key for v in first.victims] == ["b-borrowed"]
    assert isinstance(second, Wait)
    assert second.workload.key == "opportunist"
    assert second.retry_immediately


def test_overlapping_victims_are_claimed_once() -> None:
    queues = [
        make_cluster_queue(n).cohort("c").preemption(reclaim="Any").flavor_quota("default", cpu="4") for n in "ab"
    ]
    lender = make_cluster_queue("lender").cohort("c").flavor_quota("default", cpu="4")
    admitted = (make_workload("hog").queue("lender").request("cpu", "12").admitted(),)
    snapshot = make_snapshot([*queues, lender], admitted=admitted)
    heads = [make_workload(f"w-{n}").queue(n).request("cpu", "2").created(i).obj() for i, n in enumerate("ab")]
    first, second = run_cycle(snapshot, heads)
    assert isinstance(first, Preempt)
    assert second == Wait(
        heads[1], "WaitingForQuota", "Workload has overlapping preemption targets with another workload", True
    )


def test_partial_admission_takes_the_largest_count_that_fits() -> None:
    snapshot = make_snapshot(
        [make_cluster_queue("cq").flavor_quota("default", cpu="10")],
        admitted=(make_workload("old").queue("cq").request("cpu", "3").admitted(),),
    )
    elastic = make_workload("w").queue("cq").request("cpu", "1").count(12).min_count(4).obj()
    [decision] = run_cycle(snapshot, [elastic])
    assert isinstance(decision, Admit)
    assert decision.assignment.pod_set_assignments[0].count == 7
    assert dict(decision.assignment.usage) == {("default", "cpu"): 7000}
    too_big = make_workload("w").queue("cq").request("cpu", "1").count(12).min_count(8).obj()
    [waiting] = run_cycle(snapshot, [too_big])
    assert isinstance(waiting, Wait)
    assert waiting.reason == "ExceedsMaxQuota"  # reported for the full count, as Kueue does


def test_inactive_and_unknown_queues() -> None:
    snapshot = make_snapshot([make_cluster_queue("held").stopped().flavor_quota("default", cpu="10")])
    stopped, unknown = run_cycle(
        snapshot,
        [make_workload("a").queue("held").request("cpu", "1").obj(), make_workload("b").queue("nope").obj()],
    )
    # Kueue v0.20's reasons (UnadmittedWorkloadsObservability, on by default)
    assert stopped == Wait(stopped.workload, "Suspended", "ClusterQueue held is inactive: ClusterQueue is stopped")
    assert unknown == Wait(unknown.workload, "Misconfigured", "ClusterQueue nope doesn't exist")
