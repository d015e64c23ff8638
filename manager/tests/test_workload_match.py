import datetime as dt
from typing import Any

import pytest

from federation.api.labels import MIN_PARALLELISM_ANNOTATION
from federation.conditions import set_condition
from federation.workload_from_job import (
    JobNotQueueable,
    Priority,
    pod_sets_for_job,
    workload_for_job,
)
from federation.workload_match import WorkloadEdit, edit_for_job, pod_sets_match
from manager.tests.builders import JobBuilder, make_job

NOW = dt.datetime(2026, 11, 24, tzinfo=dt.UTC)


def _job() -> JobBuilder:
    return make_job("train").queue("lq").parallelism(4, 4).request("cpu", "2").toleration("gpu", "a100")


def _workload_of(job: dict[str, Any], *conditions: str) -> dict[str, Any]:
    workload = workload_for_job(job, priority=Priority(None, 0))
    workload["metadata"]["resourceVersion"] = "7"
    found: list[dict[str, Any]] = []
    for condition in conditions:
        found, _ = set_condition(found, condition_type=condition, status=True, reason=condition, message="", now=NOW)
    workload["status"] = {"conditions": found}
    return workload


def _edit(job: dict[str, Any], workload: dict[str, Any]) -> WorkloadEdit:
    return edit_for_job(job, workload)


def test_an_unedited_suspended_job_keeps_its_workload() -> None:
    job = _job().obj()
    assert _edit(job, _workload_of(job)) is WorkloadEdit.KEEP
    assert _edit(job, _workload_of(job, "QuotaReserved")) is WorkloadEdit.KEEP


@pytest.mark.parametrize(
    "edited",
    [
        _job().parallelism(2, 2),  # fewer pods
        _job().parallelism(8, 8),  # more pods
        _job().annotation(MIN_PARALLELISM_ANNOTATION, "2"),  # partial admission now allowed
        _job().toleration("zone", "b"),
        _job().request("cpu", "3"),  # where the cluster lets a suspended Job's resources change
        _job().request("memory", "1Gi"),
    ],
    ids=["fewer-pods", "more-pods", "min-count", "toleration", "cpu", "new-resource"],
)
def test_an_edited_suspended_job_updates_a_workload_without_quota_and_replaces_one_with_quota(
    edited: JobBuilder,
) -> None:
    workload = _workload_of(_job().obj())
    assert _edit(edited.obj(), workload) is WorkloadEdit.UPDATE
    reserved = _workload_of(_job().obj(), "QuotaReserved")
    assert _edit(edited.obj(), reserved) is WorkloadEdit.REPLACE


def test_quantities_compare_by_value_not_by_spelling() -> None:
    workload = _workload_of(_job().obj())
    assert _edit(_job().request("cpu", "2000m").obj(), workload) is WorkloadEdit.KEEP


def test_a_finished_or_deleted_workload_is_kept() -> None:
    assert _edit(_job().parallelism(2, 2).obj(), _workload_of(_job().obj(), "Finished")) is WorkloadEdit.KEEP
    deleting = _workload_of(_job().obj(), "QuotaReserved")
    deleting["metadata"]["deletionTimestamp"] = "2026-11-24T00:00:00Z"
    assert _edit(_job().parallelism(2, 2).obj(), deleting) is WorkloadEdit.KEEP


def test_tolerations_are_not_compared_once_admitted() -> None:
    """Admission may add a flavor's tolerations (Kueue ignores them then too); the count still counts."""
    admitted = _workload_of(_job().obj(), "QuotaReserved", "Admitted")
    assert _edit(_job().toleration("zone", "b").obj(), admitted) is WorkloadEdit.KEEP
    assert _edit(_job().parallelism(2, 2).obj(), admitted) is WorkloadEdit.REPLACE


def test_pod_sets_differ_in_number() -> None:
    [pod_set] = pod_sets_for_job(_job().obj())
    assert not pod_sets_match([pod_set], [pod_set, pod_set], admitted=False)
    assert pod_sets_match([pod_set], [pod_set], admitted=False)


def test_a_bad_min_parallelism_is_reported_by_the_pod_sets() -> None:
    with pytest.raises(JobNotQueueable, match="between 1 and 4"):
        pod_sets_for_job(_job().annotation(MIN_PARALLELISM_ANNOTATION, "9").obj())


def test_a_suspended_job_moved_to_another_queue_moves_its_workload_while_it_holds_no_quota() -> None:
    workload = _workload_of(_job().obj())
    assert _edit(_job().queue("other").obj(), workload) is WorkloadEdit.UPDATE_QUEUE
    # with its pod sets edited too, the full update carries the queue as well
    assert _edit(_job().queue("other").parallelism(2, 2).obj(), workload) is WorkloadEdit.UPDATE
    # holding quota, it stays where it was reserved until the quota is released (Kueue: queueName is immutable then)
    assert _edit(_job().queue("other").obj(), _workload_of(_job().obj(), "QuotaReserved")) is WorkloadEdit.KEEP


def _admitted(job: dict[str, Any], *, count: int | None = None) -> dict[str, Any]:
    workload = _workload_of(job, "QuotaReserved", "Admitted")
    assigned = count if count is not None else workload["spec"]["podSets"][0]["count"]
    workload["status"]["admission"] = {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "count": assigned}]}
    return workload


def test_a_running_job_scaled_by_its_user_replaces_its_admitted_workload() -> None:
    workload = _admitted(_job().obj())
    assert _edit(_job().suspended(False).obj(), workload) is WorkloadEdit.KEEP
    assert _edit(_job().parallelism(2, 4).suspended(False).obj(), workload) is WorkloadEdit.RUNNING_REPLACE
    assert _edit(_job().parallelism(8, 8).suspended(False).obj(), workload) is WorkloadEdit.RUNNING_REPLACE


def test_a_partially_admitted_running_job_is_compared_with_its_admitted_count() -> None:
    partial = _job().parallelism(6, 6).annotation(MIN_PARALLELISM_ANNOTATION, "2")
    workload = _admitted(partial.obj(), count=3)
    started = partial.parallelism(3, 3).suspended(False).obj()  # as kfed starts it
    assert _edit(started, workload) is WorkloadEdit.KEEP
    assert _edit(partial.parallelism(5, 5).suspended(False).obj(), workload) is WorkloadEdit.RUNNING_REPLACE


def test_a_running_job_is_not_compared_while_its_workload_is_not_admitted_or_once_it_finished() -> None:
    scaled = _job().parallelism(2, 4).suspended(False).obj()
    assert _edit(scaled, _workload_of(_job().obj(), "QuotaReserved")) is WorkloadEdit.KEEP, "being requeued"
    assert _edit(scaled, _workload_of(_job().obj())) is WorkloadEdit.KEEP
    done = _job().parallelism(2, 4).suspended(False).obj()
    done["status"] = {"conditions": [{"type": "Complete", "status": "True"}]}
    assert _edit(done, _admitted(_job().obj())) is WorkloadEdit.KEEP
