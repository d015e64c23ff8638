"""The status writes of kfed-agent's run limits (``worker_agent.decisions.run_limits``): which Workloads' readiness it
judges, and Kueue's PodsReady condition and PodsReadyTimeout eviction."""

from __future__ import annotations

import datetime as dt

from federation.admission.pods_ready import WaitForPodsReady, pods_ready_step
from federation.conditions import find_condition
from federation.tests.api_builders import admitted_status, workload
from worker_agent.decisions.facts import job_change_matters, workload_facts
from worker_agent.decisions.run_limits import (
    pods_ready_condition_status,
    pods_ready_eviction_status,
    readiness_judged_here,
    unready_quota_holder,
)

NOW = dt.datetime(2026, 1, 1, 0, 1, tzinfo=dt.UTC)
LOCAL = workload("local", status=admitted_status("cq", "rf", "1"))
POLICY = WaitForPodsReady(timeout=30, backoff_base_seconds=10)


def test_the_readiness_of_a_running_workload_is_judged_here_unless_kfed_manager_judges_it() -> None:
    assert readiness_judged_here(LOCAL)
    assert workload_facts(LOCAL).readiness_judged_here
    origin = {"kueue.x-k8s.io/multikueue-origin": "mgr"}
    ours = {**LOCAL, "metadata": {**LOCAL["metadata"], "labels": {**origin, "kfed.io/manager-workload-uid": "u"}}}
    assert not readiness_judged_here(ours), "kfed-manager's copy: the manager judges it from its Job copy"
    stock = {**LOCAL, "metadata": {**LOCAL["metadata"], "labels": origin}}
    assert readiness_judged_here(stock), "a stock MultiKueue manager's copy: judged here, as Kueue here would"
    assert not readiness_judged_here(workload("pending")), "not admitted"
    assert not readiness_judged_here({**LOCAL, "spec": {**LOCAL["spec"], "active": False}}), "deactivated"
    evicted = {**LOCAL, "status": {**LOCAL["status"], "conditions": [*LOCAL["status"]["conditions"]]}}
    evicted["status"]["conditions"].append({"type": "Evicted", "status": "True", "reason": "Preempted"})
    assert not readiness_judged_here(evicted), "evicted already"


def test_a_timed_out_workload_is_evicted_with_kueues_reason_backoff_and_count() -> None:
    """Admitted at 00:00:01, its pods not ready 30 s later: evicted with PodsReadyTimeout, WaitForStart under it."""
    step = pods_ready_step(LOCAL, remote_job=None, now=NOW, policy=POLICY)
    assert step.evict_message == "Exceeded the PodsReady timeout ns/local"
    status = pods_ready_eviction_status(LOCAL, step, now=NOW)
    evicted = find_condition({"status": status}, "Evicted") or {}
    assert (evicted["status"], evicted["reason"], evicted["message"]) == (
        "True",
        "PodsReadyTimeout",
        "Exceeded the PodsReady timeout ns/local",
    )
    assert status["requeueState"] == {"count": 1, "requeueAt": "2026-01-01T00:01:10Z"}
    counted = {"reason": "PodsReadyTimeout", "underlyingCause": "WaitForStart", "count": 1}
    assert status["schedulingStats"] == {"evictions": [counted]}


def test_the_pods_ready_condition_is_written_as_the_step_says() -> None:
    ready_job = {"status": {"ready": 1}}
    step = pods_ready_step(LOCAL, remote_job=ready_job, now=NOW, policy=POLICY)
    assert step.condition is not None
    status = pods_ready_condition_status(LOCAL, step.condition, now=NOW)
    ready = find_condition({"status": status}, "PodsReady") or {}
    assert (ready["status"], ready["reason"]) == ("True", "Started")
    assert len(status["conditions"]) == len(LOCAL["status"]["conditions"]) + 1, "the others are kept"


def test_ready_pods_wake_the_agent_unless_the_job_is_a_kfed_manager_copy() -> None:
    local = {"metadata": {"uid": "u", "labels": {}}, "spec": {}, "status": {"active": 1}}
    ready = {**local, "status": {"active": 1, "ready": 1}}
    assert job_change_matters("MODIFIED", ready, local), "a local Job's pods became ready: its readiness is judged"
    copy_labels = {"kueue.x-k8s.io/prebuilt-workload-name": "w", "kfed.io/manager-workload-uid": "m"}
    copy = {**local, "metadata": {"uid": "u", "labels": copy_labels}}
    assert not job_change_matters("MODIFIED", {**copy, "status": ready["status"]}, copy), "kfed-manager judges its own"
    stock = {**local, "metadata": {"uid": "u", "labels": {"kueue.x-k8s.io/prebuilt-workload-name": "w"}}}
    assert job_change_matters("MODIFIED", {**stock, "status": ready["status"]}, stock), "a stock manager's copy"


def test_a_workload_holding_quota_without_ready_pods_holds_back_admissions_unless_kfed_manager_judges_it() -> None:
    assert unready_quota_holder(LOCAL)
    assert workload_facts(LOCAL).unready_quota_holder
    ready = {**LOCAL, "status": {**LOCAL["status"], "conditions": [*LOCAL["status"]["conditions"]]}}
    ready["status"]["conditions"].append({"type": "PodsReady", "status": "True", "reason": "Started"})
    assert not unready_quota_holder(ready)
    finished = {**LOCAL, "status": {**LOCAL["status"], "conditions": [*LOCAL["status"]["conditions"]]}}
    finished["status"]["conditions"].append({"type": "Finished", "status": "True", "reason": "Succeeded"})
    assert not unready_quota_holder(finished)
    assert not unready_quota_holder(workload("pending")), "holds no quota"
    labels = {"kueue.x-k8s.io/multikueue-origin": "mgr", "kfed.io/manager-workload-uid": "u"}
    ours = {**LOCAL, "metadata": {**LOCAL["metadata"], "labels": labels}}
    assert not unready_quota_holder(ours), "kfed-manager's copy: the manager holds back with its own blockAdmission"
