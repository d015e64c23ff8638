"""Jobs that fail on their worker (S1 for failures): the manager Job ends ``Failed`` with the worker's reason,
message and counts, the manager Workload ``Finished`` with reason ``Failed`` (Kueue's), the Job is never sent to
a second worker (a failure is the Job's result, not a reason to requeue), and the copies are removed.

The rig's kwok fails a Job's pods with the exit code its pod template's ``rig.kfed.io/exit-code`` annotation names
(``e2e.rig.kwok_stages``), so the worker's own Job controller applies ``backoffLimit``, ``backoffLimitPerIndex`` and
``podFailurePolicy``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from e2e.queues import job_manifest
from e2e.rig.federation import MANAGER, Federation
from e2e.rig.kwok_stages import EXIT_CODE_ANNOTATION
from e2e.scenarios.helpers import (
    condition,
    created_names_on_workers,
    get,
    is_true,
    items,
    remote_copies,
    workload_of,
)
from e2e.waiting import wait_for

pytestmark = pytest.mark.e2e

Obj = dict[str, Any]


def _submit_failing(fed: Federation, name: str, *, exit_code: int, **spec: Any) -> None:
    manifest = job_manifest(name, namespace="default", cpu="1", seconds=1)
    manifest["spec"].update(spec)
    manifest["spec"]["template"]["metadata"]["annotations"][EXIT_CODE_ANNOTATION] = str(exit_code)
    fed.kubectl(MANAGER, "create", "-f", "-", input=json.dumps(manifest))


def _wait_failed(fed: Federation, name: str) -> Obj:
    job = wait_for(
        lambda: get(fed, MANAGER, "job", name),
        until=lambda j: is_true(j, "Complete") or is_true(j, "Failed"),
        timeout=120,
        what=f"Job {name} to finish on the manager",
    )
    assert job is not None
    assert is_true(job, "Failed"), job.get("status")
    assert not is_true(job, "Complete"), job.get("status")
    return job


def _assert_finished_once(fed: Federation, name: str, job: Obj) -> None:
    """The manager Workload finished as Kueue finishes a failed Job's, the Job went to one worker once, and its
    copies are gone."""
    failed = condition(job, "Failed")
    assert failed is not None
    workload = workload_of(fed, name)
    finished = condition(workload, "Finished")
    assert finished is not None, workload
    assert finished["status"] == "True", workload
    assert finished["reason"] == "Failed", finished
    assert finished["message"] == failed["message"], (finished, failed)
    assert items(fed, MANAGER, "pods", "-l", f"job-name={name}") == [], "the manager cluster must not run pods"
    sent = created_names_on_workers(fed, name)
    assert len(sent) == 1, f"a failed Job is sent to one worker, once: {sent}"
    wait_for(
        lambda: remote_copies(fed, name),
        until=lambda copies: copies == {},
        timeout=30,
        what=f"the copies of {name} to be removed after the final sync",
    )


def test_a_job_past_its_backoff_limit_on_the_worker_fails_on_the_manager_with_the_workers_status(
    federation: Federation,
) -> None:
    _submit_failing(federation, "fails-twice", exit_code=1, backoffLimit=1)
    job = _wait_failed(federation, "fails-twice")
    status = job["status"]
    failed = condition(job, "Failed")
    assert failed is not None, status
    assert failed["reason"] == "BackoffLimitExceeded", status
    assert status.get("failed") == 2, status  # the first pod and its one retry, counted on the worker
    assert not status.get("succeeded"), status
    assert status.get("startTime"), status
    _assert_finished_once(federation, "fails-twice", job)


def test_a_pod_failure_policy_that_fails_the_job_on_the_worker_fails_it_on_the_manager(
    federation: Federation,
) -> None:
    """``FailJob`` on exit code 42: the worker's Job controller fails the Job at the first such pod, with
    ``FailureTarget`` before ``Failed``; both reach the manager Job, which Kubernetes' status validation for Jobs
    managed elsewhere (``spec.managedBy``) accepts only in that order."""
    policy = {"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]}
    _submit_failing(federation, "policy-fails", exit_code=42, backoffLimit=6, podFailurePolicy=policy)
    job = _wait_failed(federation, "policy-fails")
    status = job["status"]
    failed = condition(job, "Failed")
    assert failed is not None, status
    assert failed["reason"] == "PodFailurePolicy", status
    assert "exit code 42" in failed["message"], failed
    target = condition(job, "FailureTarget")
    assert target is not None, status
    assert target["status"] == "True", status
    assert status.get("failed") == 1, status  # FailJob: no retry despite backoffLimit 6
    _assert_finished_once(federation, "policy-fails", job)


def test_an_indexed_job_whose_indexes_fail_on_the_worker_shows_them_failed_on_the_manager(
    federation: Federation,
) -> None:
    """``backoffLimitPerIndex: 0``: each index fails at its first pod; the manager Job shows which
    (``status.failedIndexes``) and fails with the worker's reason."""
    _submit_failing(
        federation,
        "indexes-fail",
        exit_code=3,
        completionMode="Indexed",
        completions=2,
        parallelism=2,
        backoffLimitPerIndex=0,
    )
    job = _wait_failed(federation, "indexes-fail")
    status = job["status"]
    failed = condition(job, "Failed")
    assert failed is not None, status
    assert failed["reason"] == "FailedIndexes", status
    assert status.get("failedIndexes") == "0,1", status
    assert status.get("failed") == 2, status
    _assert_finished_once(federation, "indexes-fail", job)
