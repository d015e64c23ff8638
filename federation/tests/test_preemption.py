from __future__ import annotations

import pytest

from federation.admission.cycle import CycleConfig, run_cycle
from federation.admission.decisions import Preempt, Wait
from federation.admission.model import AdmittedWorkload
from federation.tests.builders import ClusterQueueBuilder, make_cluster_queue, make_snapshot, make_workload


def _victims(decision: object) -> list[str]:
    if isinstance(decision, Wait):
        return []
    assert isinstance(decision, Preempt), decision
    return [victim.key for victim in decision.victims]


def _usage(admitted: AdmittedWorkload | None) -> int:
    assert admitted is not None
    return admitted.usage[("default", "cpu")]


def _running(
    key: str, queue: str, cpu: str, *, priority: int = 0, at: float = 0.0, evicted: bool = False
) -> AdmittedWorkload:
    return (
        make_workload(key)
        .queue(queue)
        .priority(priority)
        .created(at)
        .request("cpu", cpu)
        .admitted(at=at, evicted=evicted)
    )


@pytest.mark.parametrize(
    ("policy", "running", "incoming_priority", "expected"),
    [
        ("Never", [("low", 0, 1.0)], 10, []),
        ("LowerPriority", [("low", 0, 1.0)], 10, ["low"]),
        ("LowerPriority", [("same", 10, 1.0)], 10, []),
        ("LowerOrNewerEqualPriority", [("same-newer", 10, 5.0)], 10, ["same-newer"]),
        ("LowerOrNewerEqualPriority", [("same-older", 10, 0.5)], 10, []),
        ("LowerOrNewerEqualPriority", [("higher", 20, 5.0)], 10, []),
    ],
)
def test_within_cluster_queue_policies(
    policy: str, running: list[tuple[str, int, float]], incoming_priority: int, expected: list[str]
) -> None:
    queue = make_cluster_queue("cq").preemption(within=policy).flavor_quota("default", cpu="4")
    admitted = tuple(_running(key, "cq", "4", priority=prio, at=at) for key, prio, at in running)
    snapshot = make_snapshot([queue], admitted=admitted)
    incoming = make_workload("w").queue("cq").priority(incoming_priority).created(2.0).request("cpu", "2").obj()
    [decision] = run_cycle(snapshot, [incoming])
    assert _victims(decision) == expected
    if expected:
        assert isinstance(decision, Preempt)
        assert all(v.reason == "InClusterQueue" for v in decision.victims)
        assert decision.message.endswith(f"Pending the preemption of {len(expected)} workload(s)")


def test_victims_are_minimal_and_follow_kueue_order() -> None:
    queue = make_cluster_queue("cq").preemption(within="LowerPriority").flavor_quota("default", cpu="10")
    admitted = (
        _running("prio5-old", "cq", "3", priority=5, at=1.0),
        _running("prio1-old", "cq", "2", priority=1, at=2.0),
        _running("prio1-new", "cq", "2", priority=1, at=3.0),
        _running("prio5-new", "cq", "3", priority=5, at=4.0),
    )
    snapshot = make_snapshot([queue], admitted=admitted)
    # 0 free: needs 4 → lowest priority first, most recently admitted first: prio1-new, prio1-old.
    [decision] = run_cycle(snapshot, [make_workload("w").queue("cq").priority(9).request("cpu", "4").obj()])
    assert _victims(decision) == ["prio1-new", "prio1-old"]
    # needs 3 → both priority-1 workloads are needed (2 + 2); no priority-5 workload is touched.
    [decision] = run_cycle(snapshot, [make_workload("w").queue("cq").priority(9).request("cpu", "3").obj()])
    victims = _victims(decision)
    freed = sum(_usage(snapshot.admitted(key)) for key in victims)
    assert freed >= 3000
    assert victims == ["prio1-new", "prio1-old"]


def test_needless_victims_are_put_back() -> None:
    queue = make_cluster_queue("cq").preemption(within="LowerPriority").flavor_quota("default", cpu="10")
    admitted = (
        _running("tiny", "cq", "1", priority=0, at=5.0),
        _running("large", "cq", "9", priority=1, at=1.0),
    )
    snapshot = make_snapshot([queue], admitted=admitted)
    # order tries tiny (lowest priority) then large; large alone suffices, so tiny is spared.
    [decision] = run_cycle(snapshot, [make_workload("w").queue("cq").priority(9).request("cpu", "9").obj()])
    assert _victims(decision) == ["large"]


def test_already_evicted_workloads_go_first() -> None:
    queue = make_cluster_queue("cq").preemption(within="LowerPriority").flavor_quota("default", cpu="4")
    admitted = (
        _running("low", "cq", "2", priority=0, at=1.0),
        _running("evicted", "cq", "2", priority=5, at=0.5, evicted=True),
    )
    snapshot = make_snapshot([queue], admitted=admitted)
    [decision] = run_cycle(snapshot, [make_workload("w").queue("cq").priority(9).request("cpu", "2").obj()])
    assert _victims(decision) == ["evicted"]


def _cohort_pair(
    reclaim: str, *, borrow: str = "Never", threshold: int | None = None
) -> tuple[ClusterQueueBuilder, ClusterQueueBuilder]:
    a = (
        make_cluster_queue("a")
        .cohort("c")
        .preemption(within="LowerPriority", reclaim=reclaim, borrow=borrow, threshold=threshold)
        .flavor_quota("default", cpu="10")
    )
    b = make_cluster_queue("b").cohort("c").flavor_quota("default", cpu="10")
    return a, b


@pytest.mark.parametrize(
    ("reclaim", "borrower_priority", "expected", "reason"),
    [
        ("Never", 0, [], None),
        ("Any", 100, ["b-borrowing"], "InCohortReclamation"),
        ("LowerPriority", 100, [], None),
        ("LowerPriority", 0, ["b-borrowing"], "InCohortReclamation"),
    ],
)
def test_reclaim_within_cohort(reclaim: str, borrower_priority: int, expected: list[str], reason: str | None) -> None:
    a, b = _cohort_pair(reclaim)
    admitted = (
        _running("b-own", "b", "10", priority=borrower_priority, at=1.0),
        _running("b-borrowing", "b", "6", priority=borrower_priority, at=2.0),
    )
    snapshot = make_snapshot([a, b], admitted=admitted)
    [decision] = run_cycle(snapshot, [make_workload("w").queue("a").priority(10).request("cpu", "8").obj()])
    assert _victims(decision) == expected
    if reason is not None:
        assert isinstance(decision, Preempt)
        assert {v.reason for v in decision.victims} == {reason}
        assert {v.cluster_queue for v in decision.victims} == {"b"}


def test_queues_that_do_not_borrow_are_not_reclaimed_from() -> None:
    a, b = _cohort_pair("Any")
    snapshot = make_snapshot(
        [a, b], admitted=(_running("a-own", "a", "10", at=1.0), _running("b-own", "b", "10", at=1.0))
    )
    # a would have to borrow from b, which uses only its own quota: reclaiming is not possible.
    [decision] = run_cycle(snapshot, [make_workload("w").queue("a").priority(10).request("cpu", "2").obj()])
    assert _victims(decision) == ["a-own"]
    assert decision.victims[0].reason == "InClusterQueue"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("borrow", "threshold", "victim_priority", "expected", "reason"),
    [
        ("Never", None, 0, [], None),
        ("LowerPriority", None, 0, ["b-borrowing"], "InCohortReclaimWhileBorrowing"),
        ("LowerPriority", None, 10, [], None),
        ("LowerPriority", 5, 5, ["b-borrowing"], "InCohortReclaimWhileBorrowing"),
        ("LowerPriority", 5, 6, [], None),
    ],
)
def test_borrow_within_cohort(
    borrow: str, threshold: int | None, victim_priority: int, expected: list[str], reason: str | None
) -> None:
    a, b = _cohort_pair("LowerPriority", borrow=borrow, threshold=threshold)
    lender = make_cluster_queue("lender").cohort("c").flavor_quota("default", cpu="10")
    admitted = (
        _running("a-own", "a", "10", priority=100, at=1.0),
        _running("b-own", "b", "4", priority=100, at=1.0),
        _running("b-borrowing", "b", "16", priority=victim_priority, at=2.0),
    )
    snapshot = make_snapshot([a, b, lender], admitted=admitted)
    # a is at its nominal quota, so the newcomer can only run by borrowing while reclaiming from b.
    [decision] = run_cycle(snapshot, [make_workload("w").queue("a").priority(10).request("cpu", "6").obj()])
    assert _victims(decision) == expected
    if reason is not None:
        assert {v.reason for v in decision.victims} == {reason}  # type: ignore[union-attr]


def test_fair_sharing_takes_from_the_queue_with_the_highest_share() -> None:
    queues = [
        make_cluster_queue(name).cohort("c").preemption(reclaim="Any").flavor_quota("default", cpu="10")
        for name in ("a", "b", "d")
    ]
    admitted = (
        _running("b-1", "b", "10", at=1.0),
        _running("b-2", "b", "4", at=2.0),
        _running("d-1", "d", "10", at=1.0),
        _running("d-2", "d", "6", at=2.0),
    )
    snapshot = make_snapshot(queues, admitted=admitted)
    incoming = make_workload("w").queue("a").request("cpu", "4").obj()
    [decision] = run_cycle(snapshot, [incoming], config=CycleConfig(fair_sharing=True))
    assert isinstance(decision, Preempt)
    assert _victims(decision) == ["d-2"]  # d borrows 6, b only 4
    assert decision.victims[0].reason == "InCohortFairSharing"
    # Without fair sharing Kueue's classic order (lower priority, then newest admitted) has no preference
    # between queues; the same cycle still needs only one victim.
    [classic] = run_cycle(snapshot, [incoming])
    assert len(_victims(classic)) == 1


def test_fair_sharing_does_not_preempt_a_queue_that_would_end_below_the_preemptor() -> None:
    queues = [
        make_cluster_queue(name).cohort("c").preemption(reclaim="Any").flavor_quota("default", cpu="10")
        for name in ("a", "b")
    ]
    admitted = (
        _running("a-1", "a", "13", at=1.0),
        _running("b-1", "b", "5", at=1.0),
        _running("b-2", "b", "2", at=2.0),
    )
    snapshot = make_snapshot(queues, admitted=admitted)
    # a already borrows 3; taking 4 more would leave a with share 7/20 above b's 0: not fair.
    [decision] = run_cycle(
        snapshot, [make_workload("w").queue("a").request("cpu", "4").obj()], config=CycleConfig(fair_sharing=True)
    )
    assert isinstance(decision, Wait)


def test_a_victim_is_told_in_kueues_words_who_preempts_it_and_from_where() -> None:
    import dataclasses

    a, b = _cohort_pair("Any")
    admitted = (_running("b-own", "b", "10", at=1.0), _running("b-borrowing", "b", "6", at=2.0))
    snapshot = make_snapshot([a, b], admitted=admitted)
    preemptor = dataclasses.replace(
        make_workload("w").queue("a").priority(10).request("cpu", "8").obj(), uid="u-1", job_uid="j-1"
    )
    [decision] = run_cycle(snapshot, [preemptor])
    assert isinstance(decision, Preempt)
    assert [v.message for v in decision.victims] == [
        "Preempted to accommodate a workload (UID: u-1, JobUID: j-1) due to reclamation within the cohort; "
        "preemptor path: /c/a; preemptee path: /c/b"
    ]
