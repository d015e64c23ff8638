from __future__ import annotations

from typing import Any

from worker_agent.decisions.unqueued import unqueued_job_message


def job(
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    suspend: bool | None = None,
    managed_by: str | None = None,
    conditions: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if suspend is not None:
        spec["suspend"] = suspend
    if managed_by is not None:
        spec["managedBy"] = managed_by
    meta = {"name": "j", "namespace": "ns", "labels": labels or {}, "annotations": annotations or {}}
    return {"metadata": meta, "spec": spec, "status": {"conditions": conditions or []}}


QUEUED = {"kueue.x-k8s.io/queue-name": "team-a"}


def test_a_suspended_job_queued_on_the_worker_is_told_nothing_will_start_it() -> None:
    message = unqueued_job_message(job(labels=QUEUED, suspend=True))
    assert message is not None
    assert "LocalQueue team-a" in message
    assert "nothing will unsuspend" in message
    assert "manager cluster" in message


def test_an_unsuspended_one_is_told_it_runs_without_quota() -> None:
    for managed_by in (None, "kubernetes.io/job-controller"):
        message = unqueued_job_message(job(labels=QUEUED, suspend=False, managed_by=managed_by))
        assert message is not None
        assert "runs without quota" in message


def test_copies_other_controllers_jobs_ended_jobs_and_unlabelled_jobs_are_not_reported() -> None:
    copy_by_kfed = job(labels={**QUEUED, "kueue.x-k8s.io/prebuilt-workload-name": "job-j-1a2b3"}, suspend=True)
    copy_by_kueue = job(labels=QUEUED, annotations={"kueue.x-k8s.io/prebuilt-workload-name": "job-j-1a2b3"})
    managers_own = job(labels=QUEUED, suspend=True, managed_by="kueue.x-k8s.io/multikueue")
    ended = job(labels=QUEUED, conditions=[{"type": "Complete", "status": "True"}])
    unlabelled = job(suspend=True)
    for other in (copy_by_kfed, copy_by_kueue, managers_own, ended, unlabelled):
        assert unqueued_job_message(other) is None, other
