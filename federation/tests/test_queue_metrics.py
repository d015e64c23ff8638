from __future__ import annotations

import math

from federation.admission.queue_metrics import (
    eviction_labels,
    inadmissible_by_condition,
    queue_samples,
    queued_since,
)
from federation.tests.api_builders import admitted_status, cluster_queue, flavor, local_queue, state, workload


def _pending_condition(reason: str = "Pending") -> dict[str, object]:
    return {
        "conditions": [
            {"type": "QuotaReserved", "status": "False", "reason": reason, "message": "doesn't fit"},
        ]
    }


def _state(strategy: str = "BestEffortFIFO"):  # type: ignore[no-untyped-def]
    return state(
        flavors=[flavor("f")],
        queues=[
            cluster_queue(
                "cq",
                {"f": {"cpu": {"nominalQuota": "10", "borrowingLimit": "2"}}},
                cohort="co",
                queueingStrategy=strategy,
            )
        ],
        local_queues=[local_queue("ns", "lq", "cq")],
        workloads=[
            workload("running", cpu="3", status=admitted_status("cq", "f", "3")),
            workload("tried", cpu="20", status=_pending_condition()),
            workload("new", cpu="1"),
        ],
    )


def _as_dict(samples: list[tuple[str, tuple[str, ...], float]]) -> dict[tuple[str, tuple[str, ...]], float]:
    out = {}
    for name, labels, value in samples:
        assert (name, labels) not in out, f"duplicate series {name}{labels}"
        out[(name, labels)] = value
    return out


def test_best_effort_fifo_pending_split_and_quota_gauges() -> None:
    st = _state()
    tried = inadmissible_by_condition(st)
    assert tried == {"ns/tried"}
    got = _as_dict(queue_samples(st, inadmissible=tried))
    assert got[("kueue_pending_workloads", ("cq", "active"))] == 1
    assert got[("kueue_pending_workloads", ("cq", "inadmissible"))] == 1
    assert got[("kueue_local_queue_pending_workloads", ("lq", "ns", "inadmissible"))] == 1
    assert got[("kueue_reserving_active_workloads", ("cq",))] == 1
    assert got[("kueue_admitted_active_workloads", ("cq",))] == 1
    labels = ("co", "cq", "f", "cpu")
    assert got[("kueue_cluster_queue_nominal_quota", labels)] == 10
    assert got[("kueue_cluster_queue_borrowing_limit", labels)] == 2
    assert math.isinf(got[("kueue_cluster_queue_lending_limit", labels)])
    assert got[("kueue_cluster_queue_resource_reservation", labels)] == 3
    assert got[("kueue_cluster_queue_resource_usage", labels)] == 3
    assert got[("kueue_cluster_queue_status", ("cq", "active"))] == 1
    assert got[("kueue_cluster_queue_status", ("cq", "pending"))] == 0
    assert got[("kueue_local_queue_status", ("lq", "ns", "True"))] == 1
    assert got[("kueue_local_queue_resource_usage", ("lq", "ns", "f", "cpu"))] == 3


def test_strict_fifo_keeps_every_pending_workload_active() -> None:
    st = _state("StrictFIFO")
    got = _as_dict(queue_samples(st, inadmissible=inadmissible_by_condition(st)))
    assert got[("kueue_pending_workloads", ("cq", "active"))] == 2
    assert got[("kueue_pending_workloads", ("cq", "inadmissible"))] == 0


def test_workloads_the_pass_admitted_are_not_pending() -> None:
    st = _state()
    got = _as_dict(queue_samples(st, inadmissible={"ns/tried"}, admitted={"ns/new"}))
    assert got[("kueue_pending_workloads", ("cq", "active"))] == 0


def test_eviction_labels_split_kueue_deactivation_causes() -> None:
    assert eviction_labels("Preempted") == ("Preempted", "")
    assert eviction_labels("DeactivatedDueToRequeuingLimitExceeded") == ("Deactivated", "RequeuingLimitExceeded")
    assert eviction_labels("Deactivated") == ("Deactivated", "")


def test_wait_starts_at_the_last_requeue() -> None:
    wl = workload("w", created="2026-01-01T00:00:00Z")
    assert queued_since(wl) == "2026-01-01T00:00:00Z"
    wl["status"] = {
        "conditions": [
            {"type": "Requeued", "status": "True", "reason": "X", "lastTransitionTime": "2026-01-01T01:00:00Z"}
        ]
    }
    assert queued_since(wl) == "2026-01-01T01:00:00Z"


def test_a_workload_in_its_requeue_backoff_is_parked_in_its_cluster_queue() -> None:
    waiting = workload("backoff", cpu="1")
    waiting["status"] = {"requeueState": {"count": 1, "requeueAt": "2030-01-01T00:00:00Z"}}
    st = state(
        flavors=[flavor("f")],
        queues=[cluster_queue("cq", {"f": {"cpu": "10"}})],
        local_queues=[local_queue("ns", "lq", "cq")],
        workloads=[waiting],
        now_seconds=1_800_000_000.0,
    )
    got = {(n, ls): v for n, ls, v in queue_samples(st, inadmissible=set())}
    assert got[("kueue_pending_workloads", ("cq", "inadmissible"))] == 1
    assert got[("kueue_pending_workloads", ("cq", "active"))] == 0
    assert got[("kueue_local_queue_pending_workloads", ("lq", "ns", "inadmissible"))] == 1


def test_hierarchy_info() -> None:
    got = {(n, ls): v for n, ls, v in queue_samples(_state(), inadmissible=set())}
    assert got[("kueue_cluster_queue_info", ("cq", "co", "co"))] == 1
