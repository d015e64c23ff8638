from __future__ import annotations

import datetime as dt
import math
from typing import Any

import pytest

from federation.admission.api_state import QuotaState
from federation.admission.queue_metrics import (
    admitted_for,
    cohort_ancestors,
    eviction_labels,
    eviction_latency,
    finished_samples,
    inadmissible_by_condition,
    pods_ready_to_evicted,
    queue_samples,
    queued_since,
    ready_waits,
    recovery_wait,
    workload_creation_latency,
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


def test_unadmitted_workloads_by_their_admitted_and_quota_reserved_reasons() -> None:
    """Kueue v0.20's kueue_unadmitted_workloads: reason from Admitted=False, underlying_cause from QuotaReserved."""
    held = admitted_status("cq", "f", "1")
    held["conditions"] = held["conditions"][:1]  # quota reserved, not admitted: its check is not Ready yet
    held["admissionChecks"] = [
        {"name": "mk", "state": "Pending", "message": "", "lastTransitionTime": "2026-01-01T00:00:01Z"}
    ]
    st = state(
        flavors=[flavor("f")],
        queues=[cluster_queue("cq", {"f": {"cpu": 10}})],
        local_queues=[local_queue("ns", "lq", "cq")],
        workloads=[
            workload("running", cpu="3", status=admitted_status("cq", "f", "3")),
            workload("too-big", cpu="20", status=_pending_condition("ExceedsMaxQuota")),
            workload("also-too-big", cpu="30", status=_pending_condition("ExceedsMaxQuota")),
            workload("new", cpu="1"),
            workload("dispatching", cpu="1", status=held),
            workload("lost", cpu="1", queue="no-such-queue"),  # its LocalQueue resolves to no ClusterQueue
        ],
    )
    got = _as_dict(queue_samples(st, inadmissible=inadmissible_by_condition(st)))
    unadmitted = {labels: v for (name, labels), v in got.items() if name == "kueue_unadmitted_workloads"}
    assert unadmitted == {
        ("cq", "NoReservation", "ExceedsMaxQuota"): 2,
        ("cq", "NoReservation", "PendingEvaluation"): 1,
        ("cq", "UnsatisfiedAdmissionChecks", ""): 1,
    }
    local = {labels: v for (name, labels), v in got.items() if name == "kueue_local_queue_unadmitted_workloads"}
    assert local == {("lq", "ns", *labels): v for labels, v in unadmitted.items()}
    got = _as_dict(queue_samples(st, inadmissible=set(), admitted={"ns/new"}))
    assert ("kueue_unadmitted_workloads", ("cq", "NoReservation", "PendingEvaluation")) not in got, "admitted now"
    # the last pass's verdict, not written into the state it decided from yet, is the one counted
    got = _as_dict(queue_samples(st, inadmissible=set(), reasons={"ns/new": "WaitingForQuota"}))
    assert got[("kueue_unadmitted_workloads", ("cq", "NoReservation", "WaitingForQuota"))] == 1
    assert ("kueue_unadmitted_workloads", ("cq", "NoReservation", "PendingEvaluation")) not in got


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
    assert got[("kueue_cluster_queue_resource_pending", ("cq", "cpu"))] == 1


def test_hierarchy_info() -> None:
    got = {(n, ls): v for n, ls, v in queue_samples(_state(), inadmissible=set())}
    assert got[("kueue_cluster_queue_info", ("cq", "co", "co"))] == 1


def _cohort_state() -> QuotaState:
    """Cohort ``co``: ``small`` (4 cpu) borrows 2 of ``big``'s 10 to run 6; ``big`` runs 3; 2 pods x 1 cpu wait."""
    return state(
        flavors=[flavor("f")],
        queues=[
            cluster_queue("big", {"f": {"cpu": "10"}}, cohort="co"),
            cluster_queue("small", {"f": {"cpu": "4"}}, cohort="co"),
        ],
        local_queues=[local_queue("ns", "lq", "big"), local_queue("ns", "lq2", "small")],
        workloads=[
            workload("running", cpu="3", status=admitted_status("big", "f", "3")),
            workload("borrower", queue="lq2", cpu="6", status=admitted_status("small", "f", "6")),
            workload("waiting", cpu="1", count=2),
        ],
    )


def test_pending_resources_sum_every_pod_of_the_pending_workloads_per_cluster_queue() -> None:
    got = _as_dict(queue_samples(_cohort_state(), inadmissible=set()))
    assert got[("kueue_cluster_queue_resource_pending", ("big", "cpu"))] == 2
    assert got[("kueue_cluster_queue_resource_pending", ("small", "cpu"))] == 0  # a configured resource: reported at 0
    admitted = _as_dict(queue_samples(_cohort_state(), inadmissible=set(), admitted={"ns/waiting"}))
    assert admitted[("kueue_cluster_queue_resource_pending", ("big", "cpu"))] == 0


def test_cohort_subtree_gauges() -> None:
    got = _as_dict(queue_samples(_cohort_state(), inadmissible=set()))
    assert got[("kueue_cohort_subtree_quota", ("co", "f", "cpu"))] == 14
    assert got[("kueue_cohort_subtree_resource_reservations", ("co", "f", "cpu"))] == 9
    assert got[("kueue_cohort_subtree_admitted_active_workloads", ("co",))] == 2


def test_weighted_shares_only_with_fair_sharing() -> None:
    off = _as_dict(queue_samples(_cohort_state(), inadmissible=set()))
    assert not [key for key in off if key[0].endswith("weighted_share")]
    got = _as_dict(queue_samples(_cohort_state(), inadmissible=set(), fair_sharing=True))
    # small borrows 2 cpu of the 14 its cohort can lend: 2/14 per mille, weight 1, not rounded (Kueue's gauge)
    assert got[("kueue_cluster_queue_weighted_share", ("small", "co"))] == pytest.approx(2000 / 14)
    assert got[("kueue_cluster_queue_weighted_share", ("big", "co"))] == 0
    assert got[("kueue_cohort_weighted_share", ("co",))] == 0  # the top of its tree borrows from nobody


def test_weighted_share_of_a_borrowing_queue_with_weight_zero_is_nan() -> None:
    st = state(
        flavors=[flavor("f")],
        queues=[
            cluster_queue("big", {"f": {"cpu": "10"}}, cohort="co"),
            cluster_queue("small", {"f": {"cpu": "4"}}, cohort="co", fairSharing={"weight": "0"}),
        ],
        local_queues=[local_queue("ns", "lq2", "small")],
        workloads=[workload("borrower", queue="lq2", cpu="6", status=admitted_status("small", "f", "6"))],
    )
    got = _as_dict(queue_samples(st, inadmissible=set(), fair_sharing=True))
    assert math.isnan(got[("kueue_cluster_queue_weighted_share", ("small", "co"))])


def _conditions(*items: tuple[str, str, str]) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "ns", "name": "w", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "status": {
            "conditions": [
                {"type": kind, "status": status, "reason": kind, "message": "", "lastTransitionTime": at}
                for kind, status, at in items
            ]
        },
    }


def test_ready_waits_from_creation_or_requeue_and_from_admission() -> None:
    now = dt.datetime(2026, 1, 1, 0, 1, 0, tzinfo=dt.UTC)
    admitted = ("Admitted", "True", "2026-01-01T00:00:20Z")
    assert ready_waits(_conditions(admitted), now=now) == (60.0, 40.0)
    requeued = ("Requeued", "True", "2026-01-01T00:00:10Z")
    assert ready_waits(_conditions(requeued, admitted), now=now) == (50.0, 40.0)
    assert ready_waits(_conditions(("Admitted", "False", "2026-01-01T00:00:20Z")), now=now) is None
    ready = _conditions(admitted, ("PodsReady", "True", "2026-01-01T00:01:00Z"))
    assert ready_waits(ready, now=now) == (60.0, 40.0)
    recovered = _conditions(admitted, ("PodsReady", "True", "2026-01-01T00:01:00Z"))
    recovered["status"]["conditions"][-1]["reason"] = "Recovered"
    assert ready_waits(recovered, now=now) is None, "not again after a recovery (Kueue v0.20)"


def test_recovery_wait_from_wait_for_recovery_to_recovered_only() -> None:
    now = dt.datetime(2026, 1, 1, 0, 1, 0, tzinfo=dt.UTC)
    admitted = ("Admitted", "True", "2026-01-01T00:00:20Z")

    def with_ready(status: str, reason: str, at: str) -> dict[str, Any]:
        raw = _conditions(admitted, ("PodsReady", status, at))
        raw["status"]["conditions"][-1]["reason"] = reason
        return raw

    waiting = with_ready("False", "WaitForRecovery", "2026-01-01T00:00:45Z")
    recovered = with_ready("True", "Recovered", "2026-01-01T00:01:00Z")
    assert recovery_wait(waiting, recovered, now=now) == 15.0
    started = with_ready("True", "Started", "2026-01-01T00:01:00Z")
    assert recovery_wait(with_ready("False", "WaitForStart", "2026-01-01T00:00:30Z"), started, now=now) is None
    assert recovery_wait(waiting, waiting, now=now) is None, "still waiting"
    assert recovery_wait(recovered, recovered, now=now) is None, "recorded once, at the change"
    assert recovery_wait(_conditions(admitted), recovered, now=now) is None


def test_pods_ready_to_evicted_only_for_ready_pods() -> None:
    now = dt.datetime(2026, 1, 1, 0, 1, 0, tzinfo=dt.UTC)
    assert pods_ready_to_evicted(_conditions(("PodsReady", "True", "2026-01-01T00:00:45Z")), now=now) == 15.0
    assert pods_ready_to_evicted(_conditions(("PodsReady", "False", "2026-01-01T00:00:45Z")), now=now) is None
    assert pods_ready_to_evicted(_conditions(), now=now) is None


def test_workload_creation_latency_from_the_jobs_creation_and_only_at_generation_1() -> None:
    job = {"metadata": {"generation": 1, "creationTimestamp": "2026-01-01T00:00:00Z"}}
    created = {"metadata": {"creationTimestamp": "2026-01-01T00:00:02Z"}}
    assert workload_creation_latency(job, created) == 2.0
    assert workload_creation_latency({"metadata": {**job["metadata"], "generation": 2}}, created) is None
    assert workload_creation_latency(job, {"metadata": {}}) is None


def test_eviction_latency_from_the_evicted_transition_to_the_release() -> None:
    now = dt.datetime(2026, 1, 1, 0, 1, 0, tzinfo=dt.UTC)
    before = _conditions(("QuotaReserved", "True", "2026-01-01T00:00:00Z"), ("Evicted", "True", "2026-01-01T00:00:48Z"))
    before["status"]["admission"] = {"clusterQueue": "cq"}
    after = _conditions(("QuotaReserved", "False", "2026-01-01T00:01:00Z"), ("Evicted", "True", "2026-01-01T00:00:48Z"))
    assert eviction_latency(before, after, now=now) == ("cq", "Evicted", 12.0)
    not_held = _conditions(("QuotaReserved", "False", "2026-01-01T00:00:00Z"))
    assert eviction_latency(not_held, after, now=now) is None
    assert eviction_latency(before, _conditions(), now=now) is None


def test_finished_workloads_per_cluster_queue_through_the_local_queue_and_per_local_queue() -> None:
    done = workload("done", status=admitted_status("cq", "f", "1", finished=True))
    other = workload("other", namespace="ns2", status=admitted_status("cq", "f", "1", finished=True))
    running = workload("running", status=admitted_status("cq", "f", "1"))
    got = _as_dict(
        finished_samples(
            [done, other, running],
            local_queues=[local_queue("ns", "lq", "cq"), local_queue("ns", "idle", "cq2")],
            cluster_queues=["cq", "cq2", "cq3"],
        )
    )
    assert got == {  # "other" names a LocalQueue that does not exist: Kueue files it nowhere
        ("kueue_finished_workloads", ("cq",)): 1,
        ("kueue_finished_workloads", ("cq2",)): 0,
        ("kueue_finished_workloads", ("cq3",)): 0,
        ("kueue_local_queue_finished_workloads", ("lq", "ns")): 1,
        ("kueue_local_queue_finished_workloads", ("idle", "ns")): 0,
    }


def test_cohort_ancestors_nearest_first_to_an_implicit_top_and_never_around_a_cycle() -> None:
    cohorts = {
        "team": {"spec": {"parentName": "org"}},
        "org": {"spec": {"parentName": "company"}},  # "company" has no Cohort object: Kueue's implicit cohort
        "a": {"spec": {"parentName": "b"}},
        "b": {"spec": {"parentName": "a"}},
    }
    assert cohort_ancestors({"spec": {"cohortName": "team"}}, cohorts.get) == ["team", "org", "company"]
    assert cohort_ancestors({"spec": {"cohortName": "a"}}, cohorts.get) == ["a", "b"]
    assert cohort_ancestors({"spec": {}}, cohorts.get) == []
    assert cohort_ancestors(None, cohorts.get) == []


def test_admitted_for_counts_from_the_admitted_transition() -> None:
    now = dt.datetime(2026, 1, 1, 0, 1, 0, tzinfo=dt.UTC)
    assert admitted_for(_conditions(("Admitted", "True", "2026-01-01T00:00:57Z")), now=now) == 3.0
    assert admitted_for(_conditions(("Admitted", "False", "2026-01-01T00:00:57Z")), now=now) is None


def test_an_underlying_cause_is_named_for_reasons_other_than_kueues_deactivations() -> None:
    assert eviction_labels("PodsReadyTimeout", "WaitForRecovery") == ("PodsReadyTimeout", "WaitForRecovery")
    assert eviction_labels("DeactivatedDueToRequeuingLimitExceeded", "x") == ("Deactivated", "RequeuingLimitExceeded")


def test_the_queued_wait_counts_from_the_last_requeue_as_kueues_queued_wait_time() -> None:
    from federation.admission.queue_metrics import queued_wait_seconds

    created = {"metadata": {"creationTimestamp": "2026-01-01T00:00:00Z"}, "status": {}}
    requeued = {
        "metadata": {"creationTimestamp": "2026-01-01T00:00:00Z"},
        "status": {
            "conditions": [{"type": "Requeued", "status": "True", "lastTransitionTime": "2026-01-01T00:01:00Z"}]
        },
    }
    now = 1767225690.0  # 2026-01-01T00:01:30Z
    assert queued_wait_seconds(created, now_seconds=now) == 90.0
    assert queued_wait_seconds(requeued, now_seconds=now) == 30.0
    assert queued_wait_seconds({"metadata": {}}, now_seconds=now) == 0.0
