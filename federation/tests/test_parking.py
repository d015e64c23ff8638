"""Parked Workloads: left out of later passes, woken by every event that can change their verdict.

Each pass rebuilds the quota state from raw objects (as the manager does from its caches) and drains it with the
same ``ParkingLot``. "Tried" means the pass produced a decision for the Workload.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from federation.admission import cycle as cycle_module
from federation.admission.api_drain import drain
from federation.admission.decisions import Admit, Decision, Preempt, Wait
from federation.admission.parking import ParkingLot
from federation.tests.api_builders import admitted_status, cluster_queue, flavor, local_queue, state, workload

Obj = dict[str, Any]


def _held(name: str, *, cq: str = "cq", cpu: str = "1", queue: str = "lq", **kw: Any) -> Obj:
    return workload(name, cpu=cpu, queue=queue, status=admitted_status(cq, "default", cpu), **kw)


class World:
    """The raw objects of one cluster; ``run`` is one scheduling pass over them."""

    def __init__(self, *, quota: str = "2", strategy: str = "BestEffortFIFO", **cq: Any) -> None:
        self.flavors: list[Obj] = [flavor("default")]
        self.queues: list[Obj] = [cluster_queue("cq", {"default": {"cpu": quota}}, queueingStrategy=strategy, **cq)]
        self.local_queues: list[Obj] = [local_queue("ns", "lq", "cq")]
        self.cohorts: list[Obj] = []
        self.workloads: dict[str, Obj] = {}
        self.lot = ParkingLot()
        self.now = 1000.0

    def add(self, *objs: Obj) -> None:
        for obj in objs:
            self.workloads[obj["metadata"]["name"]] = obj

    def run(self, *, veto: Any = None, workers: object = None) -> dict[str, Decision]:
        quota = state(
            flavors=self.flavors,
            queues=self.queues,
            local_queues=self.local_queues,
            cohorts=self.cohorts,
            workloads=list(self.workloads.values()),
        )
        decisions = drain(quota, now_seconds=self.now, parking=self.lot, veto=veto, workers=workers)
        return {d.workload.key.split("/")[1]: d for d in decisions}

    def admit(self, decisions: dict[str, Decision]) -> None:
        """Write the admissions of a pass as the manager would (so the next pass sees them held)."""
        for name, decision in decisions.items():
            if isinstance(decision, Admit):
                cpu = self.workloads[name]["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]
                self.workloads[name]["status"] = admitted_status(
                    decision.assignment.cluster_queue, "default", cpu["requests"]["cpu"]
                )


def _parked_world(**kw: Any) -> World:
    """``w`` waits in ``cq`` (quota 2) behind ``a`` and ``b``, which hold 1 cpu each; a second pass leaves it alone."""
    world = World(**kw)
    world.add(_held("a"), _held("b"), workload("w", created="2026-01-01T00:00:05Z"))
    first = world.run()
    assert isinstance(first["w"], Wait)
    assert "w" not in world.run(), "a Workload that did not fit and saw nothing change must not be tried again"
    return world


# ----- nothing changed: no work ---------------------------------------------------------------------------------


def test_a_pass_with_nothing_changed_tries_none_of_the_parked_workloads(monkeypatch: pytest.MonkeyPatch) -> None:
    world = World(quota="10")
    world.queues.append(cluster_queue("other", {"default": {"cpu": "10"}}))
    world.local_queues.append(local_queue("ns", "lq-other", "other"))
    world.add(*(_held(f"h{i}") for i in range(10)), *(_held(f"o{i}", cq="other", queue="lq-other") for i in range(10)))
    world.add(*(workload(f"p{i:03}", created=f"2026-01-01T00:01:{i % 60:02}Z") for i in range(100)))
    world.add(*(workload(f"q{i:03}", queue="lq-other") for i in range(100)))
    first = world.run()
    assert len(first) == 200
    tried: list[str] = []
    assign = cycle_module.__dict__["assign_flavors"]

    def counting(snapshot: Any, wl: Any, **kw: Any) -> Any:
        tried.append(wl.key)
        return assign(snapshot, wl, **kw)

    monkeypatch.setattr(cycle_module, "assign_flavors", counting)
    assert world.run() == {}
    assert tried == [], "the pass re-tried parked Workloads although nothing changed"
    assert len(world.lot) == 200
    # one Workload finishing wakes its own ClusterQueue only, not the other one's 100
    world.workloads["h0"]["status"] = admitted_status("cq", "default", "1", finished=True)
    woken = world.run()
    assert {name[0] for name in woken} == {"p"}
    assert len([d for d in woken.values() if isinstance(d, Admit)]) == 1
    assert not any(key.startswith("ns/q") for key in tried)


# ----- wake-up events -------------------------------------------------------------------------------------------


def test_a_workload_of_its_cluster_queue_finishing_wakes_it() -> None:
    world = _parked_world()
    world.workloads["a"]["status"] = admitted_status("cq", "default", "1", finished=True)
    assert isinstance(world.run()["w"], Admit)


def test_a_workload_of_its_cluster_queue_deleted_wakes_it() -> None:
    world = _parked_world()
    del world.workloads["a"]
    assert isinstance(world.run()["w"], Admit)
    assert world.lot.woken == {"ns/w": "UsageChanged"}


def test_a_workload_of_its_cluster_queue_being_evicted_wakes_it() -> None:
    world = _parked_world()
    world.workloads["a"]["status"]["conditions"].append(
        {"type": "Evicted", "status": "True", "reason": "Preempted", "message": "", "lastTransitionTime": "2026"}
    )
    assert "w" in world.run()


def test_a_workload_releasing_part_of_its_quota_wakes_it() -> None:
    world = _parked_world()
    world.workloads["a"]["status"]["admission"]["podSetAssignments"][0]["resourceUsage"]["cpu"] = "0"
    assert isinstance(world.run()["w"], Admit)


def test_a_workload_admitted_in_its_tree_by_someone_else_wakes_it() -> None:
    world = _parked_world()
    world.add(_held("c"))  # e.g. written by another manager replica: a new preemption candidate
    assert "w" in world.run()


def test_a_held_workload_changing_priority_wakes_it() -> None:
    world = _parked_world()
    world.workloads["a"]["spec"]["priority"] = -5  # now a preemption candidate for a higher-priority Workload
    assert "w" in world.run()


def test_its_cluster_queue_quota_growing_wakes_it() -> None:
    world = _parked_world()
    world.queues[0] = cluster_queue("cq", {"default": {"cpu": "3"}})
    assert isinstance(world.run()["w"], Admit)


def test_its_cluster_queue_policy_changing_wakes_it() -> None:
    world = _parked_world()
    world.queues[0] = cluster_queue("cq", {"default": {"cpu": "2"}}, preemption={"withinClusterQueue": "LowerPriority"})
    assert "w" in world.run()


def test_its_cluster_queue_becoming_active_wakes_it() -> None:
    world = World(stopPolicy="Hold")
    world.add(workload("w"))
    assert isinstance(world.run()["w"], Wait)
    assert world.run() == {}
    world.queues[0] = cluster_queue("cq", {"default": {"cpu": "2"}})
    assert isinstance(world.run()["w"], Admit)


def test_a_workload_of_its_cohort_finishing_wakes_it_and_one_of_another_tree_does_not() -> None:
    world = World(quota="1", cohort="co")
    world.queues.append(cluster_queue("lender", {"default": {"cpu": "1"}}, cohort="co"))
    world.queues.append(cluster_queue("alone", {"default": {"cpu": "1"}}))
    world.local_queues += [local_queue("ns", "lq-lender", "lender"), local_queue("ns", "lq-alone", "alone")]
    world.add(_held("a"), _held("l", cq="lender", queue="lq-lender"), _held("x", cq="alone", queue="lq-alone"))
    world.add(workload("w", created="2026-01-01T00:00:05Z"))
    assert isinstance(world.run()["w"], Wait)
    world.workloads["x"]["status"] = admitted_status("alone", "default", "1", finished=True)
    assert "w" not in world.run(), "a release in another cohort tree cannot make it fit"
    world.workloads["l"]["status"] = admitted_status("lender", "default", "1", finished=True)
    assert isinstance(world.run()["w"], Admit), "the lender's quota is free to borrow now"


def test_its_cohort_gaining_quota_wakes_it() -> None:
    world = _parked_world(cohort="co")
    world.cohorts.append(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Cohort",
            "metadata": {"name": "co"},
            "spec": {
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": "1"}]}],
                    }
                ]
            },
        }
    )
    assert isinstance(world.run()["w"], Admit)


def test_a_resource_flavor_changing_wakes_it() -> None:
    world = _parked_world()
    world.flavors[0] = flavor("default", nodeLabels={"pool": "b"})
    assert "w" in world.run()


def test_the_workload_itself_changing_wakes_it() -> None:
    world = _parked_world()
    changed = copy.deepcopy(world.workloads["w"])
    changed["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "0"
    changed["metadata"]["generation"] = 2
    world.workloads["w"] = changed
    assert isinstance(world.run()["w"], Admit)


def test_the_workload_annotations_changing_wakes_it() -> None:
    world = _parked_world()
    world.workloads["w"]["metadata"]["annotations"] = {"kfed.io/excluded-clusters": "worker-1"}
    assert "w" in world.run()


def test_a_workload_deleted_and_created_again_is_tried() -> None:
    world = _parked_world()
    del world.workloads["w"]
    assert world.run() == {}
    assert len(world.lot) == 0, "a Workload no longer pending is forgotten"
    world.add(workload("w", created="2026-01-01T00:00:05Z"))
    assert "w" in world.run()


def test_a_parked_workload_is_tried_again_after_the_safety_timeout() -> None:
    world = _parked_world()
    world.now += world.lot.max_park_seconds - 1
    assert "w" not in world.run()
    world.now += 1
    assert "w" in world.run()
    assert world.lot.woken == {"ns/w": "Expired"}


def test_the_safety_timeout_wakes_with_reason_expired() -> None:
    world = _parked_world()
    world.now += world.lot.max_park_seconds
    quota = state(
        flavors=world.flavors,
        queues=world.queues,
        local_queues=world.local_queues,
        workloads=[*world.workloads.values()],
    )
    from federation.admission.parking import tree_stamps

    assert world.lot.wake(stamps=tree_stamps(quota.snapshot), workers=None, now=world.now) == {"ns/w": "Expired"}
    assert world.lot.next_expiry() is None


def test_an_unwritten_verdict_is_decided_again() -> None:
    world = _parked_world()
    world.lot.unpark("ns/w")
    assert "w" in world.run()


def test_a_vetoed_workload_wakes_when_the_workers_change_and_a_quota_verdict_does_not() -> None:
    world = World(quota="3")
    world.add(_held("a"), _held("b"), workload("big", cpu="2"), workload("v", created="2026-01-01T00:00:05Z"))

    def no_room(admit: Admit) -> str | None:
        return "no worker has room" if admit.workload.key == "ns/v" else None

    first = world.run(veto=no_room, workers=("worker-1", 1))
    assert isinstance(first["v"], Wait)
    assert first["v"].message == "no worker has room"
    assert isinstance(first["big"], Wait)
    assert world.run(veto=no_room, workers=("worker-1", 1)) == {}
    again = world.run(veto=None, workers=("worker-1", 2))
    assert set(again) == {"v"}, "a worker change wakes the vetoed Workload only"
    assert isinstance(again["v"], Admit)


# ----- what is not parked ---------------------------------------------------------------------------------------


def test_a_verdict_made_before_a_later_admission_in_its_cohort_is_tried_again() -> None:
    world = World(quota="2", cohort="co")
    world.add(workload("big", cpu="3", created="2026-01-01T00:00:00Z"))
    world.add(workload("small", cpu="1", created="2026-01-01T00:00:01Z"))
    first = world.run()
    assert isinstance(first["big"], Wait)
    assert isinstance(first["small"], Admit)
    world.admit(first)
    assert "big" in world.run(), "small's admission came in a later cycle: big did not see it"
    assert world.run() == {}


def test_an_admission_in_a_cluster_queue_without_cohort_leaves_its_parked_workloads_parked() -> None:
    world = World(quota="2")
    world.add(workload("big", cpu="3", created="2026-01-01T00:00:00Z"))
    world.add(workload("small", cpu="1", created="2026-01-01T00:00:01Z"))
    first = world.run()
    assert isinstance(first["big"], Wait)
    world.admit(first)
    assert world.run() == {}, "small only took quota that was free when big was found not to fit"


def test_a_workload_waiting_for_its_victims_is_not_parked() -> None:
    world = World(quota="1", preemption={"withinClusterQueue": "LowerPriority"})
    world.add(_held("low", priority=0), workload("high", priority=10, created="2026-01-01T00:00:05Z"))
    assert isinstance(world.run()["high"], Preempt)
    assert isinstance(world.run()["high"], Preempt)
    assert len(world.lot) == 0


def test_a_strict_fifo_head_that_does_not_fit_blocks_its_queue_until_it_is_no_longer_first() -> None:
    world = World(quota="2", strategy="StrictFIFO")
    world.add(_held("a"), workload("head", cpu="2", created="2026-01-01T00:00:01Z"))
    world.add(workload("behind", cpu="1", created="2026-01-01T00:00:02Z"))
    first = world.run()
    assert set(first) == {"head"}
    assert world.run() == {}
    world.add(workload("later", cpu="1", priority=0, created="2026-01-01T00:00:03Z"))
    assert world.run() == {}, "a newcomer behind the head stays behind it"
    world.add(workload("urgent", cpu="1", priority=5, created="2026-01-01T00:00:04Z"))
    decided = world.run()
    assert isinstance(decided["urgent"], Admit), "a newcomer ahead of the blocking head is its queue's head now"
    world.admit(decided)
    assert set(world.run()) <= {"head"}
    world.workloads["a"]["status"] = admitted_status("cq", "default", "1", finished=True)
    world.workloads["urgent"]["status"] = admitted_status("cq", "default", "1", finished=True)
    assert isinstance(world.run()["head"], Admit)


def test_best_effort_fifo_lets_others_go_past_a_parked_workload() -> None:
    world = World(quota="2")
    world.add(_held("a"), workload("big", cpu="2", created="2026-01-01T00:00:01Z"))
    assert isinstance(world.run()["big"], Wait)
    world.add(workload("small", cpu="1", created="2026-01-01T00:00:02Z"))
    decided = world.run()
    assert set(decided) == {"small"}
    assert isinstance(decided["small"], Admit)


def test_a_parked_workload_is_tried_again_after_a_pass_admitted_into_its_cohort() -> None:
    """An admission raises its queue's share: with fair sharing that queue's Workloads may become preemption
    candidates for a parked one, so the parked Workloads of the tree are tried on the next pass."""
    world = World(quota="2", cohort="co")
    world.add(_held("a"), workload("big", cpu="2", created="2026-01-01T00:00:01Z"))
    assert isinstance(world.run()["big"], Wait)
    world.add(workload("small", cpu="1", created="2026-01-01T00:00:02Z"))
    decided = world.run()
    assert set(decided) == {"small"}
    world.admit(decided)
    assert "big" in world.run()
    assert world.run() == {}


def test_the_same_entries_under_an_unchanged_lot_yield_the_same_and_a_newly_parked_one_is_left_out() -> None:
    """The manager's classification hands out the very same entry objects while nothing changed: ``active`` then
    reuses its last answer, and any change of the lot (a Workload parked or released) makes it look again."""
    from federation.admission.parking import Verdict, tree_stamps

    quota = state(
        flavors=[flavor("default")],
        queues=[cluster_queue("cq", {"default": {"cpu": "1"}})],
        local_queues=[local_queue("ns", "lq", "cq")],
        workloads=[workload("a", created="2026-01-01T00:00:01Z"), workload("b", created="2026-01-01T00:00:02Z")],
    )
    items = quota.pending["cq"]
    (a, raw_a), (b, raw_b) = items
    lot = ParkingLot()

    def park(workload_: Any, raw: Obj) -> None:
        wait = Wait(workload=workload_, reason="WaitingForQuota", message="no room")
        lot.settle(
            pending={"cq": items},
            verdicts=[Verdict(workload_, raw, wait, cycle=1, vetoed=False, blocks_queue=False)],
            admitted_in_cycle={},
            stamps=tree_stamps(quota.snapshot),
            now=0.0,
        )

    park(a, raw_a)
    assert list(lot.active("cq", items, strict=False)) == [b]
    assert list(lot.active("cq", list(items), strict=False)) == [b], "the same entries again"
    park(b, raw_b)
    assert list(lot.active("cq", list(items), strict=False)) == [], "b was parked since"
    lot.unpark(a.key)
    assert list(lot.active("cq", list(items), strict=False)) == [a], "a was released since"
    replaced = [(a, {**raw_a}), (b, raw_b)]
    assert list(lot.active("cq", replaced, strict=False)) == [a], "another entry object is looked at"
