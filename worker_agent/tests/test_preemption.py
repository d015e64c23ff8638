"""The agent's local preemption and Kueue v0.20's preemption gates (``worker_agent.decisions.preemption``)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from federation.tests.api_builders import admitted_status, cluster_queue, flavor, local_queue, state, workload
from worker_agent.decisions.admission import plan_admissions
from worker_agent.decisions.preemption import (
    evicted_holding_quota,
    has_closed_preemption_gate,
    release_status,
    stopped,
    suspend_patch,
)

NOW = dt.datetime(2026, 1, 1, 0, 1, tzinfo=dt.UTC)
GATE = "kueue.x-k8s.io/multikueue"
PREEMPTING_QUEUE = cluster_queue("cq", {"rf": {"cpu": 4}}, preemption={"withinClusterQueue": "LowerPriority"})


def gated(obj: dict[str, Any], *, position: str | None) -> dict[str, Any]:
    obj["spec"]["preemptionGates"] = [{"name": GATE}]
    if position is not None:
        states = [{"name": GATE, "position": position, "lastTransitionTime": "2026-01-01T00:00:30Z"}]
        obj.setdefault("status", {})["preemptionGates"] = states
    return obj


def plan(workloads: list[dict[str, Any]]) -> dict[str, tuple[str, dict[str, Any]]]:
    by_key = {f"{w['metadata']['namespace']}/{w['metadata']['name']}": w for w in workloads}
    updates = plan_admissions(
        state(
            workloads=workloads,
            flavors=[flavor("rf")],
            queues=[PREEMPTING_QUEUE],
            local_queues=[local_queue("ns", "lq", "cq")],
        ),
        now=NOW,
        workload_of=by_key.get,
    )
    return {u.key: (u.outcome, u.status) for u in updates}


def conditions(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status["conditions"]}


@pytest.mark.parametrize(
    ("spec_gates", "status_gates", "closed"),
    [
        ([], [], False),
        ([{"name": GATE}], [], True),  # only in spec: closed, so a copy can be created gated
        ([{"name": GATE}], [{"name": GATE, "position": "Closed"}], True),
        ([{"name": GATE}], [{"name": GATE, "position": "Open"}], False),
        ([{"name": GATE}, {"name": "b"}], [{"name": GATE, "position": "Open"}], True),
        ([], [{"name": GATE, "position": "Closed"}], False),  # a state without its gate in spec gates nothing
    ],
)
def test_a_gate_is_closed_unless_its_state_says_open(
    spec_gates: list[dict[str, str]], status_gates: list[dict[str, str]], closed: bool
) -> None:
    obj = {"spec": {"preemptionGates": spec_gates}, "status": {"preemptionGates": status_gates}}
    assert has_closed_preemption_gate(obj) is closed


def test_without_a_gate_the_lower_priority_victim_is_evicted_and_the_preemptor_waits() -> None:
    low = workload("low", cpu="3", priority=0, status=admitted_status("cq", "rf", "3"))
    high = workload("high", cpu="3", priority=100, created="2026-01-01T00:00:05Z")
    outcomes = plan([low, high])
    outcome, status = outcomes["ns/low"]
    assert outcome == "preempted"
    by_type = conditions(status)
    assert (by_type["Evicted"]["status"], by_type["Evicted"]["reason"]) == ("True", "Preempted")
    assert (by_type["Preempted"]["status"], by_type["Preempted"]["reason"]) == ("True", "InClusterQueue")
    assert status["schedulingStats"] == {"evictions": [{"reason": "Preempted", "underlyingCause": "", "count": 1}]}
    outcome, status = outcomes["ns/high"]
    assert outcome == "pending"
    assert "Pending the preemption of 1 workload(s)" in conditions(status)["QuotaReserved"]["message"]


def test_a_closed_gate_preempts_nothing_and_says_why() -> None:
    low = workload("low", cpu="3", priority=0, status=admitted_status("cq", "rf", "3"))
    high = gated(workload("high", cpu="3", priority=100, created="2026-01-01T00:00:05Z"), position=None)
    outcomes = plan([low, high])
    assert "ns/low" not in outcomes
    outcome, status = outcomes["ns/high"]
    assert outcome == "pending"
    by_type = conditions(status)
    assert (by_type["QuotaReserved"]["status"], by_type["QuotaReserved"]["reason"]) == ("False", "AdmissionGated")
    blocked = by_type["BlockedOnPreemptionGates"]
    assert (blocked["status"], blocked["reason"]) == ("True", "PreemptionGated")
    assert blocked["message"] == "Workload requires preemption, but it's gated"
    # Said once: the same verdict on the written status is not written again.
    again = gated(workload("high", cpu="3", priority=100, created="2026-01-01T00:00:05Z", status=status), position=None)
    assert "ns/high" not in plan([low, again])


def test_an_opened_gate_preempts() -> None:
    low = workload("low", cpu="3", priority=0, status=admitted_status("cq", "rf", "3"))
    high = gated(workload("high", cpu="3", priority=100, created="2026-01-01T00:00:05Z"), position="Open")
    outcomes = plan([low, high])
    assert outcomes["ns/low"][0] == "preempted"


def test_a_gated_workload_that_fits_without_preemption_is_admitted_and_its_blocked_condition_ends() -> None:
    blocked_before = {
        "conditions": [
            {
                "type": "BlockedOnPreemptionGates",
                "status": "True",
                "reason": "PreemptionGated",
                "message": "Workload requires preemption, but it's gated",
                "lastTransitionTime": "2026-01-01T00:00:10Z",
            }
        ]
    }
    fits = gated(workload("fits", cpu="1", status=blocked_before), position=None)
    outcome, status = plan([fits])["ns/fits"]
    assert outcome == "admitted"
    blocked = conditions(status)["BlockedOnPreemptionGates"]
    assert (blocked["status"], blocked["reason"]) == ("False", "QuotaReserved")
    assert blocked["message"].startswith("Previously: ")


def test_a_victim_already_evicted_is_not_written_again() -> None:
    low = workload("low", cpu="3", priority=0, status=admitted_status("cq", "rf", "3"))
    first = plan([low, workload("high", cpu="3", priority=100, created="2026-01-01T00:00:05Z")])["ns/low"][1]
    evicted = workload("low", cpu="3", priority=0, status={**low["status"], **first})
    assert evicted_holding_quota(evicted)
    outcomes = plan([evicted, workload("high", cpu="3", priority=100, created="2026-01-01T00:00:05Z")])
    assert "ns/low" not in outcomes
    assert outcomes["ns/high"][0] == "pending"


def test_an_evicted_workload_stops_its_job_then_releases_its_quota() -> None:
    running = {"spec": {"suspend": False}, "status": {"active": 1}}
    asks_six = {"spec": {"podSets": [{"name": "main", "count": 6, "minCount": 2}]}}
    assert suspend_patch(running, asks_six) == {"spec": {"suspend": True}}
    assert not stopped(running)
    terminating = {"spec": {"suspend": True}, "status": {"active": 1}}
    assert suspend_patch(terminating, asks_six) is None
    shrunk = {
        "metadata": {"annotations": {"kueue.x-k8s.io/job-min-parallelism": "2"}},
        "spec": {"suspend": False, "parallelism": 4},
    }
    assert suspend_patch(shrunk, asks_six) == {"spec": {"suspend": True, "parallelism": 6}}, "the count comes back"
    assert not stopped(terminating)
    assert stopped({"spec": {"suspend": True}, "status": {}})
    assert stopped(None)

    low = workload("low", cpu="3", priority=0, status=admitted_status("cq", "rf", "3"))
    eviction = plan([low, workload("high", cpu="3", priority=100, created="2026-01-01T00:00:05Z")])["ns/low"][1]
    evicted = workload("low", cpu="3", status={**low["status"], **eviction})
    released = release_status(evicted, now=NOW)
    assert released["admission"] is None
    by_type = conditions(released)
    assert (by_type["QuotaReserved"]["status"], by_type["QuotaReserved"]["reason"]) == ("False", "PendingEvaluation")
    assert (by_type["Requeued"]["status"], by_type["Requeued"]["reason"]) == ("True", "Preempted")
    assert by_type["Admitted"]["status"] == "False"
    assert not evicted_holding_quota({**evicted, "status": {**evicted["status"], **released}})
    assert "admissionChecks" not in released, "no checks, nothing to reset"
    assert "unhealthyNodes" not in released, "none to clear"
    repaired = {**evicted, "status": {**evicted["status"], "unhealthyNodes": [{"name": "n1"}]}}
    assert release_status(repaired, now=NOW)["unhealthyNodes"] is None, "as Kueue's eviction, they are cleared"
    ready = {"name": "prov", "state": "Ready", "message": "ok", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    checked = {**evicted, "status": {**evicted["status"], "admissionChecks": [ready]}}
    released = release_status(checked, now=NOW)
    # as Kueue's eviction: the check starts over, saying what it was
    assert released["admissionChecks"] == [
        {
            "name": "prov",
            "state": "Pending",
            "message": "Reset to Pending after eviction. Previously: Ready",
            "lastTransitionTime": "2026-01-01T00:01:00Z",
        }
    ]
    assert conditions(released)["Admitted"]["reason"] == "NoReservation"


@pytest.mark.parametrize(
    ("reason", "message"),
    [
        ("Deactivated", "The workload is deactivated"),  # a user set spec.active: false
        ("DeactivatedDueToAdmissionCheck", "The workload is deactivated due to check rejected it"),
    ],
)
def test_a_deactivated_workload_releases_its_quota_without_being_requeued(reason: str, message: str) -> None:
    # Kueue's job reconciler: Requeued takes the Evicted reason and message, and is False unless the workload goes
    # back to its queue; a deactivated one waits for reactivation (Kueue then writes Requeued=True Reactivated).
    held = workload("w", cpu="1", status=admitted_status("cq", "rf", "1"))
    evicted_condition = {
        "type": "Evicted",
        "status": "True",
        "reason": reason,
        "message": message,
        "lastTransitionTime": "2026-01-01T00:00:02Z",
    }
    evicted = {
        **held,
        "spec": {**held["spec"], "active": False},
        "status": {**held["status"], "conditions": [*held["status"]["conditions"], evicted_condition]},
    }
    assert evicted_holding_quota(evicted)
    released = release_status(evicted, now=NOW)
    by_type = conditions(released)
    requeued = by_type["Requeued"]
    assert (requeued["status"], requeued["reason"], requeued["message"]) == ("False", reason, message)
    assert (by_type["QuotaReserved"]["status"], by_type["Admitted"]["status"]) == ("False", "False")
    reserved = by_type["QuotaReserved"]
    assert (reserved["reason"], reserved["message"]) == ("Deactivated", "The workload is deactivated"), "v0.20"
    assert by_type["Evicted"]["status"] == "True"
    assert released["admission"] is None


@pytest.mark.parametrize("reason", ["PodsReadyTimeout", "AdmissionCheck"])
def test_a_workload_evicted_with_a_backoff_is_released_with_requeued_false(reason: str) -> None:
    """Kueue: Requeued=False with the eviction's reason until the backoff ends (then BackoffFinished)."""
    held = workload("w", cpu="1", status=admitted_status("cq", "rf", "1"))
    evicted_condition = {"type": "Evicted", "status": "True", "reason": reason, "message": "m"}
    evicted = {**held, "status": {**held["status"], "conditions": [*held["status"]["conditions"], evicted_condition]}}
    requeued = conditions(release_status(evicted, now=NOW))["Requeued"]
    assert (requeued["status"], requeued["reason"], requeued["message"]) == ("False", reason, "m")


def test_a_started_job_whose_workload_holds_no_quota_is_suspended() -> None:
    from worker_agent.decisions.preemption import running_without_reservation

    def job(*, suspend: bool, finished: bool = False) -> dict[str, Any]:
        conditions = [{"type": "Complete", "status": "True"}] if finished else []
        return {"spec": {"suspend": suspend}, "status": {"conditions": conditions}}

    pending = workload("w")
    reserved = workload("w", status=admitted_status("cq", "rf", "1"))
    finished_wl = workload("w", status={"conditions": [{"type": "Finished", "status": "True"}]})
    assert running_without_reservation(job(suspend=False), pending)
    assert not running_without_reservation(job(suspend=True), pending)
    assert not running_without_reservation(job(suspend=False), reserved)
    assert not running_without_reservation(job(suspend=False, finished=True), pending)
    assert not running_without_reservation(job(suspend=False), finished_wl)


def test_a_release_counts_the_admitted_time_against_the_maximum_execution_time_and_a_deactivation_resets_it() -> None:
    """Admitted at 00:00:01 and released at 00:01:00 with 5 s from an earlier run: 64 s used; a deactivated Workload
    (its budget spent, say) starts afresh once reactivated; one without a limit gets no count."""
    low = workload("low", cpu="3", priority=0, status=admitted_status("cq", "rf", "3"))
    eviction = plan([low, workload("high", cpu="3", priority=100, created="2026-01-01T00:00:05Z")])["ns/low"][1]
    evicted = workload("low", cpu="3", status={**low["status"], **eviction, "accumulatedPastExecutionTimeSeconds": 5})
    capped = {**evicted, "spec": {**evicted["spec"], "maximumExecutionTimeSeconds": 600}}
    assert release_status(capped, now=NOW)["accumulatedPastExecutionTimeSeconds"] == 64
    deactivated = {**capped, "spec": {**capped["spec"], "active": False}}
    assert release_status(deactivated, now=NOW)["accumulatedPastExecutionTimeSeconds"] is None
    assert "accumulatedPastExecutionTimeSeconds" not in release_status(evicted, now=NOW)
