"""Jobs queued on the worker cluster itself (``worker_agent.decisions.local_jobs``)."""

from __future__ import annotations

from typing import Any

from federation.workload_from_job import Priority, workload_name_for_job
from worker_agent.decisions.facts import job_change_matters, job_target
from worker_agent.decisions.local_jobs import (
    WithoutWorkload,
    local_queue_name,
    local_workload,
    local_workload_key,
    needs_local_workload,
    owner_going,
    without_workload,
)

QUEUE = "kueue.x-k8s.io/queue-name"
PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"


def job(
    *, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None, **spec: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "namespace": "team-a",
            "name": "train",
            "uid": "u-1",
            "labels": {QUEUE: "lq", **(labels or {})},
            **({"annotations": annotations} if annotations else {}),
        },
        "spec": {
            "parallelism": 2,
            "suspend": True,
            "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}},
            **spec,
        },
    }


def test_a_job_queued_on_the_worker_itself_belongs_to_a_workload_of_kueues_name() -> None:
    local = job()
    assert local_queue_name(local) == "lq"
    assert local_workload_key(local) == ("team-a", workload_name_for_job("train", "u-1"))
    assert job_target(local) == local_workload_key(local), "the agent's passes find its Workload by that name"
    assert needs_local_workload(local)
    assert local_queue_name(job(managedBy="kubernetes.io/job-controller")) == "lq"


def test_a_managers_copy_another_controllers_job_or_an_unqueued_job_is_not_queued_here() -> None:
    assert local_queue_name(job(labels={PREBUILT: "w"})) is None, "kfed-manager's copy"
    assert local_queue_name(job(annotations={PREBUILT: "w"})) is None, "a stock Kueue manager's copy"
    assert job_target(job(annotations={PREBUILT: "w"})) == ("team-a", "w")
    assert local_queue_name(job(managedBy="kueue.x-k8s.io/multikueue")) is None, "a manager's own Job"
    plain = job()
    del plain["metadata"]["labels"][QUEUE]
    assert local_queue_name(plain) is None
    assert job_target(plain) is None
    no_uid = job()
    del no_uid["metadata"]["uid"]
    assert local_workload_key(no_uid) is None, "named once the apiserver gave it a uid"


def test_an_ended_job_needs_no_workload() -> None:
    ended = job(suspend=False)
    ended["status"] = {"conditions": [{"type": "Complete", "status": "True"}]}
    assert local_queue_name(ended) == "lq"
    assert not needs_local_workload(ended)


def test_a_job_being_deleted_gets_no_workload_and_its_workload_is_finished_as_orphaned() -> None:
    going = job()
    going["metadata"]["deletionTimestamp"] = "2026-12-07T06:00:00Z"
    going["metadata"]["finalizers"] = ["example.com/hold"]
    assert not needs_local_workload(going), "a finalizer holds it: no Workload is made for it"
    workload: dict[str, Any] = {"metadata": {"namespace": "team-a", "name": "w"}, "status": {}}
    assert owner_going(going, workload)
    assert not owner_going(job(), workload), "its Job lives"
    finished = {**workload, "status": {"conditions": [{"type": "Finished", "status": "True"}]}}
    assert not owner_going(going, finished), "already finished"
    deleted = {"metadata": {**workload["metadata"], "deletionTimestamp": "2026-12-07T06:00:01Z"}}
    assert not owner_going(going, deleted), "it goes with its Job"
    copy = job(labels={PREBUILT: "w"})
    copy["metadata"]["deletionTimestamp"] = "2026-12-07T06:00:00Z"
    assert not owner_going(copy, workload), "a manager's copy: the manager withdraws it"


def test_its_workload_is_owned_by_the_job_and_asks_for_its_pods_in_its_queue() -> None:
    made = local_workload(job(), priority=Priority("high", 1000))
    assert isinstance(made, dict)
    assert made["metadata"]["name"] == workload_name_for_job("train", "u-1")
    assert made["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    assert made["spec"]["queueName"] == "lq"
    assert made["spec"]["priority"] == 1000
    assert made["spec"]["priorityClassRef"]["name"] == "high"
    assert made["spec"]["podSets"][0]["count"] == 2


def test_a_job_that_cannot_have_a_workload_is_told_why() -> None:
    bad = job(annotations={"kueue.x-k8s.io/job-min-parallelism": "5"})
    said = local_workload(bad, priority=Priority(None, 0))
    assert said == "kueue.x-k8s.io/job-min-parallelism=5 must be between 1 and 2"


def test_a_change_of_a_jobs_labels_matters_to_the_passes() -> None:
    before = job()
    after = job(labels={"kueue.x-k8s.io/priority-class": "high"})
    assert job_change_matters("MODIFIED", after, before)
    assert not job_change_matters("MODIFIED", job(), before)


def test_a_job_running_without_a_workload_is_stopped_first_and_queued_once_its_pods_are_gone() -> None:
    running = job(suspend=False)
    running["status"] = {"active": 2}
    assert without_workload(running) is WithoutWorkload.STOP
    stopping = job(suspend=True)
    stopping["status"] = {"active": 1}
    assert without_workload(stopping) is WithoutWorkload.WAIT
    stopped = job(suspend=True)
    stopped["status"] = {"active": 0, "failed": 1}
    assert without_workload(stopped) is WithoutWorkload.QUEUE
    assert without_workload(job(suspend=True)) is WithoutWorkload.QUEUE
    unsuspended_without_pods = job(suspend=False)
    assert without_workload(unsuspended_without_pods) is WithoutWorkload.STOP
