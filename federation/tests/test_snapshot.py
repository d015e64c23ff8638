from __future__ import annotations

import pytest

from federation.admission.snapshot import Snapshot
from federation.tests.builders import make_cluster_queue, make_cohort, make_workload

CPU = ("default", "cpu")


def _snapshot(*queues: object, cohorts: tuple[object, ...] = (), admitted: tuple[object, ...] = ()) -> Snapshot:
    return Snapshot(
        cluster_queues=[q.obj() for q in queues],  # type: ignore[attr-defined]
        cohorts=[c.obj() for c in cohorts],  # type: ignore[attr-defined]
        admitted=[a.admitted(at=i) for i, a in enumerate(admitted)],  # type: ignore[attr-defined]
    )


def test_lone_queue_gets_exactly_its_nominal_quota() -> None:
    snapshot = _snapshot(
        make_cluster_queue("a").flavor_quota("default", cpu="10"),
        admitted=(make_workload("w").queue("a").request("cpu", "4"),),
    )
    queue = snapshot.cluster_queues["a"]
    assert snapshot.available(queue, CPU) == 6000
    assert snapshot.potential_available(queue, CPU) == 10_000
    assert not snapshot.is_borrowing(queue, CPU)
    assert snapshot.is_borrowing(queue, CPU, 7000)


@pytest.mark.parametrize(
    ("a_quota", "b_quota", "a_use", "b_use", "a_available", "a_most", "b_available", "b_most"),
    [
        # plain cohort: everything unused is borrowable
        ("10", "10", "0", "0", 20_000, 20_000, 20_000, 20_000),
        ("10", "10", "4", "12", 4_000, 20_000, 4_000, 20_000),
        # borrowingLimit caps the borrower at nominal + limit
        (("10", "5"), "10", "0", "0", 15_000, 15_000, 20_000, 20_000),
        (("10", "5"), "10", "12", "0", 3_000, 15_000, 8_000, 20_000),
        # lendingLimit keeps nominal - limit for the lender alone
        (("10", None, "4"), "10", "0", "0", 20_000, 20_000, 14_000, 14_000),
        (("10", None, "4"), "10", "8", "0", 12_000, 20_000, 12_000, 14_000),
        (("10", None, "4"), "10", "0", "13", 7_000, 20_000, 1_000, 14_000),
        (("10", None, "0"), "10", "0", "0", 20_000, 20_000, 10_000, 10_000),
    ],
)
def test_borrowing_and_lending_limits(
    a_quota: object,
    b_quota: object,
    a_use: str,
    b_use: str,
    a_available: int,
    a_most: int,
    b_available: int,
    b_most: int,
) -> None:
    snapshot = _snapshot(
        make_cluster_queue("a").cohort("c").flavor_quota("default", cpu=a_quota),  # type: ignore[arg-type]
        make_cluster_queue("b").cohort("c").flavor_quota("default", cpu=b_quota),  # type: ignore[arg-type]
        admitted=(
            make_workload("wa").queue("a").request("cpu", a_use),
            make_workload("wb").queue("b").request("cpu", b_use),
        ),
    )
    a, b = snapshot.cluster_queues["a"], snapshot.cluster_queues["b"]
    assert (snapshot.available(a, CPU), snapshot.potential_available(a, CPU)) == (a_available, a_most)
    assert (snapshot.available(b, CPU), snapshot.potential_available(b, CPU)) == (b_available, b_most)


def test_nested_cohorts_apply_limits_relative_to_the_parent() -> None:
    snapshot = _snapshot(
        make_cluster_queue("x").cohort("child").flavor_quota("default", cpu="5"),
        make_cluster_queue("y").cohort("root").flavor_quota("default", cpu="5"),
        cohorts=(
            make_cohort("root").flavor_quota("default", cpu="10"),
            make_cohort("child").parent("root").flavor_quota("default", cpu=("0", "3")),
        ),
    )
    x, y = snapshot.cluster_queues["x"], snapshot.cluster_queues["y"]
    assert snapshot.cohorts["root"].subtree_quota[CPU] == 20_000
    assert snapshot.potential_available(x, CPU) == 8_000  # child cohort may borrow only 3 beyond its 5
    assert snapshot.potential_available(y, CPU) == 20_000
    snapshot.add_workload(make_workload("big").queue("y").request("cpu", "14").admitted())
    assert snapshot.available(x, CPU) == 6_000
    assert snapshot.cohorts["root"].usage[CPU] == 14_000


def test_usage_past_guaranteed_quota_is_charged_to_the_cohort_and_released() -> None:
    snapshot = _snapshot(
        make_cluster_queue("a").cohort("c").flavor_quota("default", cpu=("10", None, "4")),
        make_cluster_queue("b").cohort("c").flavor_quota("default", cpu="10"),
    )
    a = snapshot.cluster_queues["a"]
    snapshot.add_workload(make_workload("w1").queue("a").request("cpu", "5").admitted())
    assert snapshot.cohorts["c"].usage.get(CPU, 0) == 0  # within the 6 a keeps for itself
    snapshot.add_workload(make_workload("w2").queue("a").request("cpu", "3").admitted())
    assert snapshot.cohorts["c"].usage[CPU] == 2_000
    snapshot.remove_workload("w1")
    assert snapshot.cohorts["c"].usage[CPU] == 0
    assert a.usage[CPU] == 3_000


def test_what_if_restores_everything_and_nests() -> None:
    snapshot = _snapshot(
        make_cluster_queue("a").cohort("c").flavor_quota("default", cpu="10"),
        make_cluster_queue("b").cohort("c").flavor_quota("default", cpu="10"),
        admitted=(make_workload("w").queue("a").request("cpu", "12"),),
    )
    before = snapshot.state()
    with snapshot.what_if():
        snapshot.remove_workload("w")
        with snapshot.what_if():
            snapshot.add_workload(make_workload("v").queue("b").request("cpu", "3").admitted())
            snapshot.add_usage(snapshot.cluster_queues["b"], {("other", "gpu"): 1})
        assert snapshot.admitted("v") is None
        assert snapshot.admitted("w") is None
    assert snapshot.state() == before
    assert snapshot.admitted("w") is not None


def test_double_admission_is_refused() -> None:
    snapshot = _snapshot(make_cluster_queue("a").flavor_quota("default", cpu="10"))
    snapshot.add_workload(make_workload("w").queue("a").request("cpu", "1").admitted())
    with pytest.raises(ValueError, match="already admitted"):
        snapshot.add_workload(make_workload("w").queue("a").request("cpu", "1").admitted())


def test_a_cohort_cycle_disables_its_queues() -> None:
    snapshot = _snapshot(
        make_cluster_queue("a").cohort("c1").flavor_quota("default", cpu="10"),
        make_cluster_queue("b").cohort("other").flavor_quota("default", cpu="10"),
        make_cluster_queue("d").cohort("under").flavor_quota("default", cpu="10"),
        cohorts=(make_cohort("c1").parent("c2"), make_cohort("c2").parent("c1"), make_cohort("under").parent("c2")),
    )
    # Kueue v0.20's reason and words, naming the queue's own Cohort
    assert snapshot.cluster_queues["a"].own_causes == [("CohortCycleDetected", 'Cohort "c1" has a cycle in hierarchy')]
    assert snapshot.cluster_queues["d"].own_causes == [
        ("CohortCycleDetected", 'Cohort "under" has a cycle in hierarchy')
    ]
    assert snapshot.cluster_queues["b"].inactive_reason is None
