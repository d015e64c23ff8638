"""Property tests of the admission core's invariants over random quota trees and workload streams."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from federation.admission.cycle import CycleConfig, apply_admission, run_cycle
from federation.admission.decisions import Admit, Preempt, Wait
from federation.admission.preemption import workload_fits
from federation.admission.queues import QueueManager
from federation.admission.snapshot import QuotaNode, Snapshot
from federation.tests.builders import ClusterQueueBuilder, make_cluster_queue, make_cohort, make_snapshot, make_workload

CPU = ("default", "cpu")
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def quota_trees(draw: st.DrawFn) -> Snapshot:
    """A root cohort, maybe a nested cohort, and 2 to 4 ClusterQueues with random cpu limits."""
    nested = draw(st.booleans())
    cohorts = [make_cohort("root").flavor_quota("default", cpu=str(draw(st.integers(0, 12))))]
    if nested:
        limit = draw(st.one_of(st.none(), st.integers(0, 6)))
        lend = draw(st.one_of(st.none(), st.integers(0, 6)))
        cohorts.append(
            make_cohort("inner")
            .parent("root")
            .flavor_quota(
                "default", cpu=("2", None if limit is None else str(limit), None if lend is None else str(lend))
            )
        )
    queues: list[ClusterQueueBuilder] = []
    for index in range(draw(st.integers(2, 4))):
        nominal = draw(st.integers(0, 10))
        borrowing = draw(st.one_of(st.none(), st.integers(0, 3), st.integers(0, 10)))
        lending = draw(st.one_of(st.none(), st.integers(0, nominal)))
        queue = make_cluster_queue(f"cq{index}").cohort("inner" if nested and index % 2 else "root")
        queue = queue.preemption(
            within=draw(st.sampled_from(["Never", "LowerPriority", "LowerOrNewerEqualPriority"])),
            reclaim=draw(st.sampled_from(["Never", "LowerPriority", "Any"])),
            borrow=draw(st.sampled_from(["Never", "LowerPriority"])),
        )
        if draw(st.booleans()):
            queue = queue.strict_fifo()
        queues.append(
            queue.flavor_quota(
                "default",
                cpu=(
                    str(nominal),
                    None if borrowing is None else str(borrowing),
                    None if lending is None else str(lending),
                ),
            )
        )
    return make_snapshot(queues, cohorts=tuple(cohorts))


def _check_limits(snapshot: Snapshot) -> None:
    for queue in snapshot.cluster_queues.values():
        used = queue.usage.get(CPU, 0)
        limit = queue.borrowing_limit.get(CPU)
        if limit is not None:
            assert used <= queue.nominal.get(CPU, 0) + limit, f"{queue.name} over nominal + borrowingLimit"
        assert used <= snapshot.potential_available(queue, CPU), f"{queue.name} over its maximum"
    for cohort in snapshot.cohorts.values():
        assert cohort.usage.get(CPU, 0) <= cohort.subtree_quota.get(CPU, 0) + cohort.borrowing_limit.get(CPU, 0) + (
            snapshot.potential_available(cohort, CPU) if cohort.parent else 0
        )
    root = snapshot.cohorts["root"]
    assert root.usage.get(CPU, 0) <= root.subtree_quota.get(CPU, 0), "cohort lent more than it holds"
    _check_lending(snapshot)


def _check_lending(snapshot: Snapshot) -> None:
    """Quota a node keeps (nominal - lendingLimit) is never used by anyone else."""

    def own_usage(node: QuotaNode) -> int:
        return node.usage.get(CPU, 0)

    def check(node: QuotaNode) -> None:
        # what children charged upward never exceeds what they lend
        for child in node.children:
            charged = max(0, own_usage(child) - child.guaranteed.get(CPU, 0))
            lent = child.subtree_quota.get(CPU, 0) - child.guaranteed.get(CPU, 0)
            limit = child.borrowing_limit.get(CPU)
            if limit is not None:
                assert charged <= lent + limit
            check(child)

    check(snapshot.cohorts["root"])


def _consistent(snapshot: Snapshot) -> None:
    def check(node: QuotaNode) -> int:
        if not node.children:
            return own_usage(node)
        total = sum(max(0, check(child) - child.guaranteed.get(CPU, 0)) for child in node.children)
        assert own_usage(node) == total, f"{node.name} usage out of sync"
        return total

    def own_usage(node: QuotaNode) -> int:
        return node.usage.get(CPU, 0)

    check(snapshot.cohorts["root"])


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree=quota_trees(), data=st.data())
def test_admission_never_exceeds_limits(tree: Snapshot, data: st.DataObject) -> None:
    snapshot = tree
    names = sorted(snapshot.cluster_queues)
    manager = QueueManager()
    for name in names:
        manager.add_cluster_queue(name, snapshot.cluster_queues[name].spec.queueing_strategy)
    fair = data.draw(st.booleans())
    for step in range(data.draw(st.integers(1, 12))):
        for index in range(data.draw(st.integers(0, 4))):
            queue = data.draw(st.sampled_from(names))
            cpu = data.draw(st.integers(1, 8))
            workload = make_workload(f"w{step}-{index}").queue(queue).priority(data.draw(st.integers(0, 3)))
            manager.push(workload.created(step).request("cpu", str(cpu)).obj())
        admitted = list(snapshot.admitted_workloads())
        finish_one = data.draw(st.booleans())
        if admitted and finish_one:
            finished = data.draw(st.sampled_from(admitted))
            snapshot.remove_workload(finished.key)
            manager.capacity_changed(names)
        decisions = run_cycle(snapshot, manager.heads(now=step), config=CycleConfig(fair_sharing=fair))
        for decision in decisions:
            if isinstance(decision, Admit):
                apply_admission(snapshot, decision, now=step)
                manager.forget_head(decision.workload.key)
            else:
                if isinstance(decision, Preempt):
                    for victim in decision.victims:
                        manager.push(snapshot.remove_workload(victim.key).workload)  # victims queue again
                    manager.capacity_changed(names)
                manager.requeue(
                    decision.workload, inadmissible=isinstance(decision, Wait) and not decision.retry_immediately
                )
            _check_limits(snapshot)
            _consistent(snapshot)


@FAST
@given(data=st.data())
def test_strict_fifo_never_admits_behind_a_blocked_head(data: st.DataObject) -> None:
    queue = make_cluster_queue("cq").strict_fifo().flavor_quota("default", cpu="8")
    snapshot = make_snapshot([queue])
    manager = QueueManager()
    manager.add_cluster_queue("cq", "StrictFIFO")
    pending: dict[str, tuple[int, float]] = {}
    for step in range(data.draw(st.integers(1, 15))):
        for index in range(data.draw(st.integers(0, 3))):
            priority, cpu = data.draw(st.integers(0, 2)), data.draw(st.integers(1, 8))
            workload = make_workload(f"w{step}-{index}").queue("cq").priority(priority).created(step)
            manager.push(workload.request("cpu", str(cpu)).obj())
            pending[f"w{step}-{index}"] = (priority, float(step))
        admitted = list(snapshot.admitted_workloads())
        finish_one = data.draw(st.booleans())
        if admitted and finish_one:
            snapshot.remove_workload(data.draw(st.sampled_from(admitted)).key)
        for decision in run_cycle(snapshot, manager.heads(now=step)):
            key = decision.workload.key
            if isinstance(decision, Admit):
                mine = pending.pop(key)
                for other_priority, other_time in pending.values():
                    # everything still waiting is behind the admitted workload
                    assert (-other_priority, other_time) >= (-mine[0], mine[1])
                apply_admission(snapshot, decision, now=step)
            else:
                manager.requeue(decision.workload, inadmissible=True)


@FAST
@given(data=st.data())
def test_preemption_frees_enough_and_no_victim_is_needless(data: st.DataObject) -> None:
    within = data.draw(st.sampled_from(["LowerPriority", "LowerOrNewerEqualPriority"]))
    queue = make_cluster_queue("cq").preemption(within=within).flavor_quota("default", cpu="16", memory="16")
    snapshot = make_snapshot([queue])
    for index in range(data.draw(st.integers(1, 8))):
        cpu, memory = data.draw(st.integers(0, 4)), data.draw(st.integers(0, 4))
        workload = make_workload(f"r{index}").queue("cq").priority(data.draw(st.integers(0, 5))).created(index)
        workload = workload.request("cpu", str(cpu)).request("memory", str(memory))
        candidate = workload.admitted(at=data.draw(st.integers(0, 20)))
        fits = all(
            snapshot.available(snapshot.cluster_queues["cq"], key) >= amount for key, amount in candidate.usage.items()
        )
        if fits:
            snapshot.add_workload(candidate)
    preemptor = (
        make_workload("p")
        .queue("cq")
        .priority(data.draw(st.integers(0, 6)))
        .created(data.draw(st.integers(0, 9)))
        .request("cpu", str(data.draw(st.integers(1, 16))))
        .request("memory", str(data.draw(st.integers(1, 16))))
        .obj()
    )
    before = snapshot.state()
    [decision] = run_cycle(snapshot, [preemptor])
    assert snapshot.state() == before
    if not isinstance(decision, Preempt):
        return
    node = snapshot.cluster_queues["cq"]
    usage = decision.assignment.usage
    evicted = []
    for victim in decision.victims:
        admitted = snapshot.admitted(victim.key)
        assert admitted is not None
        assert admitted.workload.priority <= preemptor.priority
        evicted.append(admitted)
    with snapshot.what_if():
        for gone in evicted:
            snapshot.remove_workload(gone.key)
        assert workload_fits(snapshot, usage, queue=node, allow_borrowing=True)
        for gone in evicted:
            with snapshot.what_if():
                snapshot.add_workload(gone)
                assert not workload_fits(snapshot, usage, queue=node, allow_borrowing=True), gone.key


@FAST
@given(tree=quota_trees(), data=st.data())
def test_undoing_a_what_if_restores_the_snapshot_exactly(tree: Snapshot, data: st.DataObject) -> None:
    snapshot = tree
    names = sorted(snapshot.cluster_queues)
    for index in range(data.draw(st.integers(0, 5))):
        workload = make_workload(f"base{index}").queue(data.draw(st.sampled_from(names)))
        snapshot.add_workload(workload.request("cpu", str(data.draw(st.integers(0, 6)))).admitted())
    before = snapshot.state()
    with snapshot.what_if():
        for index in range(data.draw(st.integers(1, 10))):
            admitted = list(snapshot.admitted_workloads())
            remove_one = data.draw(st.booleans())
            if admitted and remove_one:
                snapshot.remove_workload(data.draw(st.sampled_from(admitted)).key)
            elif data.draw(st.booleans()):
                queue = snapshot.cluster_queues[data.draw(st.sampled_from(names))]
                snapshot.add_usage(queue, {CPU: data.draw(st.integers(-3000, 9000)), ("spare", "gpu"): 1})
            else:
                workload = make_workload(f"new{index}").queue(data.draw(st.sampled_from(names)))
                snapshot.add_workload(workload.request("cpu", str(data.draw(st.integers(0, 6)))).admitted())
    assert snapshot.state() == before
    _consistent(snapshot)
