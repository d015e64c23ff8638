from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from federation.tests.api_builders import (
    admitted_status,
    cluster_queue,
    flavor,
    local_queue,
    state,
    two_borrowing_queues,
    workload,
)
from worker_agent.decisions.admission import blocking_veto, plan_admissions

NOW = dt.datetime(2026, 1, 1, 0, 1, tzinfo=dt.UTC)


def plan(workloads: list[dict[str, Any]], **kwargs: object) -> dict[str, tuple[str, dict[str, Any]]]:
    defaults: dict[str, Any] = {
        "flavors": [flavor("rf", nodeLabels={"pool": "a"})],
        "queues": [cluster_queue("cq", {"rf": {"cpu": 4}})],
        "local_queues": [local_queue("ns", "lq", "cq")],
    }
    defaults.update(kwargs)
    veto = defaults.pop("veto", None)
    updates = plan_admissions(state(workloads=workloads, **defaults), now=NOW, veto=veto)
    return {u.key: (u.outcome, u.status) for u in updates}


def reserved(status: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == "QuotaReserved")


def test_admission_is_one_status_with_assignment_and_both_conditions() -> None:
    outcome, status = plan([workload("a", cpu="1500m", count=2)])["ns/a"]
    assert outcome == "admitted"
    assert status["admission"] == {
        "clusterQueue": "cq",
        "podSetAssignments": [{"name": "main", "flavors": {"cpu": "rf"}, "resourceUsage": {"cpu": "3"}, "count": 2}],
    }
    by_type = {c["type"]: c for c in status["conditions"]}
    assert by_type["QuotaReserved"]["reason"] == "QuotaReserved"
    assert by_type["QuotaReserved"]["message"] == "Quota reserved in ClusterQueue cq"
    assert by_type["QuotaReserved"]["lastTransitionTime"] == "2026-01-01T00:01:00Z"
    assert by_type["Admitted"]["status"] == "True"
    assert by_type["Admitted"]["reason"] == "Admitted"


@pytest.mark.parametrize(
    ("sizes", "expected"),
    [
        (["2", "2", "1"], ["admitted", "admitted", "pending"]),
        (["3", "2", "1"], ["admitted", "pending", "admitted"]),  # BestEffortFIFO moves past a head that does not fit
        (["5", "1"], ["pending", "admitted"]),
    ],
)
def test_drains_the_queue_in_creation_order(sizes: list[str], expected: list[str]) -> None:
    wls = [workload(f"w{i}", cpu=cpu, created=f"2026-01-01T00:00:0{i}Z") for i, cpu in enumerate(sizes)]
    outcomes = plan(wls)
    assert [outcomes[f"ns/w{i}"][0] for i in range(len(sizes))] == expected


def test_strict_fifo_stops_at_the_first_workload_that_does_not_fit() -> None:
    wls = [
        workload("w0", cpu="3", created="2026-01-01T00:00:00Z"),
        workload("w1", cpu="2", created="2026-01-01T00:00:01Z"),
        workload("w2", cpu="1", created="2026-01-01T00:00:02Z"),
    ]
    outcomes = plan(wls, queues=[cluster_queue("cq", {"rf": {"cpu": 4}}, queueingStrategy="StrictFIFO")])
    assert outcomes["ns/w0"][0] == "admitted"
    assert outcomes["ns/w1"][0] == "pending"
    assert "ns/w2" not in outcomes  # not considered behind a StrictFIFO head


def test_higher_priority_goes_first() -> None:
    wls = [
        workload("old", cpu="3", priority=0),
        workload("urgent", cpu="3", priority=10, created="2026-01-01T00:00:05Z"),
    ]
    outcomes = plan(wls)
    assert outcomes["ns/urgent"][0] == "admitted"
    assert outcomes["ns/old"][0] == "pending"


def test_quota_held_by_admitted_workloads_counts_and_finished_ones_release_it() -> None:
    holding = workload("holding", cpu="3", status=admitted_status("cq", "rf", "3"))
    done = workload("done", cpu="3", status=admitted_status("cq", "rf", "3", finished=True))
    outcomes = plan([holding, done, workload("new", cpu="2")])
    assert outcomes["ns/new"][0] == "pending"
    assert "insufficient unused quota for cpu in flavor rf, 1 more needed" in reserved(outcomes["ns/new"][1])["message"]
    assert "ns/holding" not in outcomes
    assert "ns/done" not in outcomes


def test_too_big_for_the_quota_is_pending_with_kueue_reason_and_message() -> None:
    outcome, status = plan([workload("big", cpu="8")])["ns/big"]
    condition = reserved(status)
    assert outcome == "pending"
    # Kueue v0.20's reason (UnadmittedWorkloadsObservability, on by default), also the Warning Event's
    assert (condition["status"], condition["reason"]) == ("False", "ExceedsMaxQuota")
    admitted = next(c for c in status["conditions"] if c["type"] == "Admitted")
    assert (admitted["status"], admitted["reason"], admitted["message"]) == (
        "False",
        "NoReservation",
        "The workload has no reservation",
    ), "Kueue v0.20 says it once the workload has a QuotaReserved condition"
    defaults: dict[str, Any] = {
        "flavors": [flavor("rf", nodeLabels={"pool": "a"})],
        "queues": [cluster_queue("cq", {"rf": {"cpu": 4}})],
        "local_queues": [local_queue("ns", "lq", "cq")],
    }
    [update] = plan_admissions(state(workloads=[workload("big", cpu="8")], **defaults), now=NOW)
    assert [(e.reason, e.event_type) for e in update.events] == [("ExceedsMaxQuota", "Warning")]
    assert condition["message"] == (
        "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor rf, "
        "previously considered podsets requests (0) + current podset request (8) > maximum capacity (4)"
    )


def test_an_unchanged_verdict_is_not_written_again() -> None:
    first = plan([workload("big", cpu="8")])["ns/big"][1]
    again = workload("big", cpu="8", status=first)
    assert plan([again]) == {}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"local_queues": []}, "LocalQueue lq doesn't exist"),
        ({"local_queues": [local_queue("ns", "lq", "gone")]}, "ClusterQueue gone doesn't exist"),
        (
            {"queues": [cluster_queue("cq", {"rf": {"cpu": 4}}, selector={"matchLabels": {"team": "x"}})]},
            "workload namespace doesn't match ClusterQueue selector",
        ),
        ({"flavors": []}, "ClusterQueue cq is inactive: references missing ResourceFlavor(s): rf"),
        (
            {"queues": [cluster_queue("cq", {"rf": {"cpu": 4}}, stopPolicy="Hold")]},
            "ClusterQueue cq is inactive: ClusterQueue is stopped",
        ),
    ],
)
def test_unreachable_queues_are_inadmissible_with_a_clear_message(overrides: dict[str, Any], message: str) -> None:
    outcome, status = plan([workload("w")], **overrides)["ns/w"]
    condition = reserved(status)
    assert outcome == "pending"
    # Kueue v0.20: Misconfigured for a queue that does not exist or a namespace its ClusterQueue does not select,
    # Suspended for an inactive one
    reason = "Suspended" if " is inactive" in message else "Misconfigured"
    assert (condition["reason"], condition["message"]) == (reason, message)


def test_a_null_namespace_selector_selects_nothing_like_kueue() -> None:
    queue = cluster_queue("cq", {"rf": {"cpu": 4}})
    queue["spec"].pop("namespaceSelector")
    outcome, _ = plan([workload("w")], queues=[queue])["ns/w"]
    assert outcome == "pending"


def test_inactive_workloads_are_left_alone() -> None:
    wl = workload("w")
    wl["spec"]["active"] = False
    assert plan([wl]) == {}


def test_borrowing_from_the_cohort() -> None:
    queues = [
        cluster_queue("cq", {"rf": {"cpu": 2}}, cohort="co"),
        cluster_queue("other", {"rf": {"cpu": 4}}, cohort="co"),
    ]
    outcome, status = plan([workload("w", cpu="5")], queues=queues)["ns/w"]
    assert outcome == "admitted"
    assert status["admission"]["podSetAssignments"][0]["resourceUsage"] == {"cpu": "5"}


def test_resources_the_queue_does_not_cover_cannot_be_admitted() -> None:
    wl = workload("w")
    wl["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "1"
    outcome, status = plan([wl])["ns/w"]
    assert outcome == "pending"
    assert "resource nvidia.com/gpu unavailable in ClusterQueue" in reserved(status)["message"]


def test_block_admission_admits_one_per_pass_and_none_while_a_holder_is_not_ready() -> None:
    """Kueue's blockAdmission on the worker: one admission per pass, the others wait with Kueue's reason and
    message; nothing is admitted while a Workload holding quota has no ready pods."""
    wls = [workload(f"w{i}", cpu="1", created=f"2026-01-01T00:00:0{i}Z") for i in range(3)]
    planned = plan(wls, veto=blocking_veto([]))
    assert [planned[f"ns/w{i}"][0] for i in range(3)] == ["admitted", "pending", "pending"]
    waiting = reserved(planned["ns/w1"][1])
    assert waiting["reason"] == "WaitingForPodsReady"
    assert waiting["message"] == "waiting for all admitted workloads to be in PodsReady condition"
    holder = workload("running", cpu="1", status=admitted_status("cq", "rf", "1"))
    blocked = plan([holder, *wls], veto=blocking_veto([holder]))
    assert [blocked[f"ns/w{i}"][0] for i in range(3)] == ["pending"] * 3


def test_block_admission_counts_only_what_the_next_veto_let_through() -> None:
    wls = [workload(f"w{i}", cpu="1", created=f"2026-01-01T00:00:0{i}Z") for i in range(2)]
    refuse_first = blocking_veto([], lambda admit: "no rack fits" if admit.workload.key == "ns/w0" else None)
    planned = plan(wls, veto=refuse_first)
    assert planned["ns/w0"][0] == "pending"
    assert reserved(planned["ns/w0"][1])["message"] == "no rack fits"
    assert planned["ns/w1"][0] == "admitted", "the refused one did not use up the pass's one admission"


def test_with_fair_sharing_the_worker_admits_the_queue_with_the_lower_share_first() -> None:
    """A worker whose Kueue configuration turns fair sharing on keeps it under kfed-agent."""
    from federation.admission.cycle import CycleConfig

    def admitted(config: CycleConfig) -> list[str]:
        quota = two_borrowing_queues()
        return [u.key for u in plan_admissions(quota, now=NOW, config=config) if u.outcome == "admitted"]

    assert admitted(CycleConfig()) == ["ns/a-next"], "without fair sharing the older head goes first"
    assert admitted(CycleConfig(fair_sharing=True)) == ["ns/b-next"], "b's share after admission is the lower"
