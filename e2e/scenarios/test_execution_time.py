"""Kueue's ``kueue.x-k8s.io/max-exec-time-seconds`` on a real local federation, and the Job labels kubectl refuses
(SCENARIOS.md I1, C2): a Job admitted for longer than its limit is deactivated and stopped, not run again; one
inside it completes; a bad queue name or limit is refused when the Job is created."""

from __future__ import annotations

import json
from typing import Any

import pytest

from e2e.queues import job_manifest
from e2e.rig.federation import MANAGER, Federation
from e2e.scenarios.helpers import condition, get, is_true, items, submit, wait_complete, workload_of
from e2e.waiting import wait_for

pytestmark = pytest.mark.e2e

LIMIT_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
QUEUE = "kueue.x-k8s.io/queue-name"


def _create(fed: Federation, name: str, *, labels: dict[str, str], seconds: float, check: bool = True) -> str:
    manifest = job_manifest(name, namespace="default", cpu="1", seconds=seconds)
    manifest["metadata"]["labels"].update(labels)
    result = fed.kubectl(MANAGER, "create", "-f", "-", input=json.dumps(manifest), check=check)
    return result.stderr if result.returncode else ""


def _cond(obj: dict[str, Any] | None, kind: str) -> dict[str, Any]:
    return dict(condition(obj, kind) or {})


def _admitted_with_limit(fed: Federation, name: str, limit: int) -> dict[str, Any]:
    """Submit a Job whose pod runs 600 s, labelled with ``limit``; returns its Workload once Admitted."""
    _create(fed, name, labels={LIMIT_LABEL: str(limit)}, seconds=600)
    admitted = wait_for(
        lambda: workload_of(fed, name),
        until=lambda wl: is_true(wl, "Admitted"),
        timeout=60,
        what=f"the {name} Workload Admitted",
    )
    assert admitted is not None
    assert admitted["spec"]["maximumExecutionTimeSeconds"] == limit
    return admitted


def test_a_job_past_its_maximum_execution_time_is_deactivated_stopped_and_not_run_again(
    federation: Federation,
) -> None:
    admitted = _admitted_with_limit(federation, "capped", 4)
    worker = admitted["status"]["clusterName"]
    copy = get(federation, worker, "workloads.kueue.x-k8s.io", admitted["metadata"]["name"])
    assert copy is not None
    assert "maximumExecutionTimeSeconds" not in copy["spec"], "the manager keeps the clock"

    reason = "DeactivatedDueToMaximumExecutionTimeExceeded"
    workload = wait_for(
        lambda: workload_of(federation, "capped"),
        until=lambda wl: _cond(wl, "Requeued").get("reason") == reason and not is_true(wl, "QuotaReserved"),
        timeout=60,
        what="the capped Workload deactivated, evicted and its quota released",
    )
    assert workload is not None
    assert workload["spec"]["active"] is False
    evicted = _cond(workload, "Evicted")
    assert (evicted.get("status"), evicted.get("reason")) == ("True", reason)
    assert evicted["message"] == "The workload is deactivated due to exceeding the maximum execution time"
    assert _cond(workload, "Requeued").get("status") == "False", "a deactivated Workload is not queued again"
    assert not _cond(workload, "DeactivationTarget"), "the marker goes once the deactivation is done"
    assert workload["status"]["schedulingStats"]["evictions"] == [
        {"reason": "Deactivated", "underlyingCause": "MaximumExecutionTimeExceeded", "count": 1}
    ]
    events = _time_limit_events(federation, workload)
    assert [(e["type"], e.get("message") or e.get("note")) for e in events] == [
        ("Warning", "The maximum execution time (4s) exceeded")
    ]
    job = wait_for(
        lambda: get(federation, MANAGER, "job", "capped"),
        until=lambda j: j is not None and bool(j["spec"].get("suspend")),
        timeout=30,
        what="the manager Job suspended",
    )
    assert job is not None
    assert not is_true(job, "Complete")
    assert not is_true(job, "Failed")
    wait_for(
        lambda: [w for w in federation.workers if get(federation, w, "job", "capped") is not None],
        until=lambda left: not left,
        timeout=30,
        what="the Job copy removed from its worker",
    )
    federation.kubectl(MANAGER, "delete", "job", "capped", "--wait=false")


def test_a_job_inside_its_maximum_execution_time_completes(federation: Federation) -> None:
    _create(federation, "in-time", labels={LIMIT_LABEL: "300"}, seconds=2)
    wait_complete(federation, "in-time")
    workload = workload_of(federation, "in-time")
    assert workload is not None
    assert workload["spec"]["maximumExecutionTimeSeconds"] == 300
    assert is_true(workload, "Finished")


@pytest.mark.parametrize(
    ("labels", "says"),
    [
        ({"kueue.x-k8s.io/queue-name": "Team_A"}, "not a valid LocalQueue name"),
        ({LIMIT_LABEL: "ten"}, "must be a whole number of seconds greater than 0"),
        ({LIMIT_LABEL: "0"}, "must be a whole number of seconds greater than 0"),
    ],
)
def test_kubectl_refuses_a_bad_queue_name_or_limit(federation: Federation, labels: dict[str, str], says: str) -> None:
    error = _create(federation, "refused-label", labels=labels, check=False, seconds=1)
    assert says in error, error
    assert get(federation, MANAGER, "job", "refused-label") is None


def test_a_running_jobs_queue_and_limit_cannot_change(federation: Federation) -> None:
    submit(federation, "relabel", cpu="1", seconds=600)
    try:
        wait_for(
            lambda: get(federation, MANAGER, "job", "relabel"),
            until=lambda j: j is not None and j["spec"].get("suspend") is False,
            timeout=60,
            what="the relabel Job started",
        )
        for label, says in (
            ("kueue.x-k8s.io/queue-name=elsewhere", "queue-name]: field is immutable"),
            (f"{LIMIT_LABEL}=60", "max-exec-time-seconds]: field is immutable"),
            ("kueue.x-k8s.io/priority-class=high", "cannot be added to a non-suspended workload"),
        ):
            result = federation.kubectl(MANAGER, "label", "job", "relabel", label, "--overwrite", check=False)
            assert result.returncode != 0, f"{label} was accepted on a running Job"
            assert says in result.stderr, result.stderr
    finally:
        federation.kubectl(MANAGER, "delete", "job", "relabel", "--wait=false", check=False)


def test_a_jobs_workload_priority_class_cannot_be_removed(federation: Federation) -> None:
    """Kueue's webhook rule, kept by the policy: the label may change, not go (the Job here waits: its queue does not
    exist)."""
    _create(federation, "keeps-class", labels={"kueue.x-k8s.io/priority-class": "any", QUEUE: "nowhere"}, seconds=1)
    try:
        result = federation.kubectl(
            MANAGER, "label", "job", "keeps-class", "kueue.x-k8s.io/priority-class-", check=False
        )
        assert result.returncode != 0, "the label was removed"
        assert "WorkloadPriorityClass cannot be removed from a workload" in result.stderr, result.stderr
        federation.kubectl(MANAGER, "label", "job", "keeps-class", "kueue.x-k8s.io/priority-class=other", "--overwrite")
    finally:
        federation.kubectl(MANAGER, "delete", "job", "keeps-class", "--wait=false", check=False)


def test_the_clock_runs_out_on_time_while_the_worker_cannot_be_reached(federation: Federation) -> None:
    """The manager keeps the clock, so a frozen worker does not stretch the limit: the Workload is deactivated when its
    time is spent (before the worker-lost timeout would requeue it), and once the worker answers its copies go."""
    admitted = _admitted_with_limit(federation, "capped-away", 12)
    worker = admitted["status"]["clusterName"]
    with federation.paused(worker):
        deactivated = wait_for(
            lambda: workload_of(federation, "capped-away"),
            until=lambda wl: wl is not None and wl["spec"].get("active") is False,
            timeout=40,
            what="the Workload deactivated while its worker is frozen",
        )
        assert deactivated is not None
        events = _time_limit_events(federation, deactivated)
        assert len(events) == 1, "deactivated for its time limit, not requeued by the worker-lost timeout first"
    released = wait_for(
        lambda: workload_of(federation, "capped-away"),
        until=lambda wl: not is_true(wl, "QuotaReserved") and _cond(wl, "Requeued").get("status") == "False",
        timeout=60,
        what="the quota released, the Workload not queued again",
    )
    assert released is not None
    wait_for(
        lambda: [w for w in federation.workers if get(federation, w, "job", "capped-away") is not None],
        until=lambda left: not left,
        timeout=60,
        what="the Job copy removed once its worker answers",
    )
    federation.kubectl(MANAGER, "delete", "job", "capped-away", "--wait=false")


def _time_limit_events(federation: Federation, workload: dict[str, Any]) -> list[dict[str, Any]]:
    """The MaximumExecutionTimeExceeded Events on ``workload``, once there is one (Events are sent off the reconcile
    path, so they may trail the status that records the deactivation)."""
    selector = f"involvedObject.name={workload['metadata']['name']},reason=MaximumExecutionTimeExceeded"
    return wait_for(
        lambda: items(federation, MANAGER, "events", "--field-selector", selector),
        until=bool,
        timeout=30,
        what=f"a MaximumExecutionTimeExceeded Event on {workload['metadata']['name']}",
    )
