"""What the agent's passes ask of each Workload and Job (``worker_agent.decisions.facts``)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from federation.admission.orphans import left_behind
from federation.tests.api_builders import admitted_status, workload
from worker_agent.decisions.checks import checks_step, may_take_checks_step
from worker_agent.decisions.facts import job_change_matters, job_target, workload_facts
from worker_agent.decisions.job_copies import admitted_since, waits_for_job_copy
from worker_agent.decisions.preemption import evicted_holding_quota

NOW = dt.datetime(2026, 1, 1, 0, 5, tzinfo=dt.UTC)
PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"


def with_conditions(base: dict[str, Any], *extra: tuple[str, str], checks: list[Any] | None = None) -> dict[str, Any]:
    status = dict(base.get("status") or {})
    conditions = [c for c in status.get("conditions") or () if c["type"] not in {t for t, _ in extra}]
    conditions += [
        {"type": t, "status": s, "reason": "R", "message": "", "lastTransitionTime": "2026-01-01T00:00:03Z"}
        for t, s in extra
    ]
    status["conditions"] = conditions
    if checks is not None:
        status["admissionChecks"] = checks
    return {**base, "status": status}


ADMITTED = workload("a", status=admitted_status("cq", "rf", "1"))
COPY = {**ADMITTED, "metadata": {**ADMITTED["metadata"], "labels": {"kfed.io/manager-workload-uid": "m-1"}}}
CHECK = {"name": "prov", "state": "Pending", "lastTransitionTime": "2026-01-01T00:00:02Z", "message": ""}
WORKLOADS = {
    "pending": workload("p"),
    "admitted": ADMITTED,
    "manager copy": COPY,
    "finished copy": with_conditions(COPY, ("Finished", "True")),
    "evicted copy": with_conditions(COPY, ("Evicted", "True")),
    "evicted, released": with_conditions(COPY, ("Evicted", "True"), ("QuotaReserved", "False")),
    "checks pending": with_conditions(ADMITTED, ("Admitted", "False"), checks=[CHECK]),
    "checks ready": with_conditions(ADMITTED, ("Admitted", "False"), checks=[{**CHECK, "state": "Ready"}]),
    "checks retry": with_conditions(ADMITTED, ("Admitted", "False"), checks=[{**CHECK, "state": "Retry"}]),
    "checks rejected": with_conditions(ADMITTED, checks=[{**CHECK, "state": "Rejected"}]),
    "checks, finished": with_conditions(ADMITTED, ("Finished", "True"), checks=[{**CHECK, "state": "Retry"}]),
    "checks, evicted": with_conditions(ADMITTED, ("Evicted", "True"), checks=[{**CHECK, "state": "Rejected"}]),
    "checks, no quota": with_conditions(workload("q"), checks=[{**CHECK, "state": "Retry"}]),
    "left behind": {**ADMITTED, "metadata": {**ADMITTED["metadata"], "labels": {"kueue.x-k8s.io/job-uid": "u-1"}}},
}


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_the_facts_are_what_the_decisions_say(name: str) -> None:
    raw = WORKLOADS[name]
    facts = workload_facts(raw)
    assert facts.evicted_holding_quota == evicted_holding_quota(raw)
    assert facts.left_behind == left_behind(raw) == (name == "left behind")
    assert facts.job_copy_admitted_since == (admitted_since(raw) if waits_for_job_copy(raw) else None)
    if not facts.may_take_checks_step:
        assert checks_step(raw, now=NOW) is None, "passed over, yet it had a step to take"
    assert may_take_checks_step(raw) == (name in {"checks pending", "checks ready", "checks retry", "checks rejected"})


def test_some_facts_are_true() -> None:
    assert workload_facts(WORKLOADS["evicted copy"]).evicted_holding_quota
    assert workload_facts(WORKLOADS["manager copy"]).job_copy_admitted_since is not None
    assert checks_step(WORKLOADS["checks ready"], now=NOW) is not None


def test_a_job_names_its_workload_by_annotation_or_label() -> None:
    meta: dict[str, Any] = {"namespace": "ns", "name": "j"}
    assert job_target({"metadata": meta}) is None
    labelled = {"metadata": {**meta, "labels": {"kueue.x-k8s.io/prebuilt-workload-name": "w"}}}
    assert job_target(labelled) == ("ns", "w")
    annotated = {
        **labelled,
        "metadata": {**labelled["metadata"], "annotations": {"kueue.x-k8s.io/prebuilt-workload-name": "x"}},
    }
    assert job_target(annotated) == ("ns", "x")


RUNNING_JOB: dict[str, Any] = {
    "metadata": {
        "namespace": "ns",
        "name": "j",
        "uid": "u-1",
        "resourceVersion": "5",
        "labels": {"kueue.x-k8s.io/prebuilt-workload-name": "w", "kfed.io/manager-workload-uid": "m-1"},
    },
    "spec": {"suspend": False, "template": {"spec": {"containers": [{"name": "c"}]}}},
    "status": {"active": 1, "ready": 0, "startTime": "2026-01-01T00:00:02Z"},
}


def changed(job: dict[str, Any], **status: Any) -> dict[str, Any]:
    meta = {**job["metadata"], "resourceVersion": str(int(job["metadata"]["resourceVersion"]) + 1)}
    return {**job, "metadata": meta, "status": {**job["status"], **status}}


def test_a_job_status_update_that_changes_nothing_the_passes_read_wakes_nothing() -> None:
    ready = changed(RUNNING_JOB, ready=1)
    assert not job_change_matters("MODIFIED", ready, RUNNING_JOB)
    counted = changed(ready, uncountedTerminatedPods={"succeeded": ["p"]}, terminating=0)
    assert not job_change_matters("MODIFIED", counted, ready)
    pending = {"type": "SuccessCriteriaMet", "status": "False", "reason": "x", "message": ""}
    assert not job_change_matters("MODIFIED", changed(ready, conditions=[pending]), ready)


COMPLETE = {"type": "Complete", "status": "True", "reason": "", "message": "done"}
FAILED = {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": ""}


@pytest.mark.parametrize(
    "what",
    ["added", "deleted", "active", "complete", "failed", "suspended", "template", "renamed workload", "re-created"],
)
def test_a_job_change_the_passes_read_wakes_them(what: str) -> None:
    old = RUNNING_JOB
    new: dict[str, Any] = {
        "added": old,
        "deleted": old,
        "active": changed(old, active=0, succeeded=1),
        "complete": changed(old, conditions=[COMPLETE]),
        "failed": changed(old, conditions=[FAILED]),
        "suspended": {**old, "spec": {**old["spec"], "suspend": True}},
        "template": {**old, "spec": {**old["spec"], "template": {"spec": {"containers": [{"name": "d"}]}}}},
        "renamed workload": {**old, "metadata": {**old["metadata"], "labels": {PREBUILT: "other"}}},
        "re-created": {**old, "metadata": {**old["metadata"], "uid": "u-2"}},
    }[what]
    event_type = {"added": "ADDED", "deleted": "DELETED"}.get(what, "MODIFIED")
    assert job_change_matters(event_type, new, None if what == "added" else old)


def test_an_admitted_workload_with_a_maximum_execution_time_has_a_deadline_until_deactivated_or_finished() -> None:
    """Admitted at 00:00:01 with 30 s and 12 s spent in earlier runs: its budget is spent at 00:00:19."""
    limited = {**ADMITTED, "spec": {**ADMITTED["spec"], "maximumExecutionTimeSeconds": 30}}
    limited["status"] = {**limited["status"], "accumulatedPastExecutionTimeSeconds": 12}
    at = dt.datetime(2026, 1, 1, 0, 0, 19, tzinfo=dt.UTC).timestamp()
    assert workload_facts(limited).execution_deadline == at
    assert workload_facts(ADMITTED).execution_deadline is None, "no limit"
    pending = {**workload("p"), "spec": {**workload("p")["spec"], "maximumExecutionTimeSeconds": 30}}
    assert workload_facts(pending).execution_deadline is None, "the clock runs only while admitted"
    deactivated = {**limited, "spec": {**limited["spec"], "active": False}}
    assert workload_facts(deactivated).execution_deadline is None, "deactivated already: its eviction follows"
    assert workload_facts(with_conditions(limited, ("Finished", "True"))).execution_deadline is None


def test_a_pod_that_succeeds_wakes_the_passes_only_when_it_makes_pods_reclaimable() -> None:
    two_of_three = {**RUNNING_JOB, "spec": {**RUNNING_JOB["spec"], "parallelism": 2, "completions": 4}}
    two_of_three = changed(two_of_three, active=2)
    one_done = changed(two_of_three, succeeded=1)  # 3 left for 2 at a time: none reclaimable yet
    assert not job_change_matters("MODIFIED", one_done, two_of_three)
    three_done = changed(one_done, succeeded=3)  # 1 left: one pod's quota goes back
    assert job_change_matters("MODIFIED", three_done, one_done)
