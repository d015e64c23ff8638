"""Jobs created on a worker cluster itself, queued there by its kfed-agent as Kueue on that worker would (a real local
federation): admission, edits, priority, the maximum execution time, preemption, and a Workload deleted under a
running Job."""

from __future__ import annotations

import json
from typing import Any

import pytest

from e2e.queues import CLUSTER_QUEUE, LOCAL_QUEUE, job_manifest
from e2e.rig.federation import Federation
from e2e.scenarios.helpers import condition, get, is_true, items
from e2e.waiting import wait_for

Obj = dict[str, Any]

pytestmark = pytest.mark.e2e


def _owned_workloads(federation: Federation, cluster: str, job: Obj) -> list[Obj]:
    uid = job["metadata"]["uid"]
    return [
        w
        for w in items(federation, cluster, "workloads")
        if any(o.get("uid") == uid for o in w["metadata"].get("ownerReferences") or ())
    ]


def test_a_job_queued_on_a_worker_itself_is_queued_admitted_and_run_there(federation: Federation) -> None:
    """As Kueue on that worker would: a Job someone creates on a worker with a queue-name label is created suspended
    (the agent chart's MutatingAdmissionPolicy), gets a Workload of Kueue's name owned by it, is admitted against the
    worker's ClusterQueue and started with Kueue's pod labels, and its Workload finishes with it. One naming a
    WorkloadPriorityClass that does not exist is told why (a Warning Event) and queued once the class exists."""
    worker = federation.workers[0]
    manifest = job_manifest("queued-on-worker", namespace="default", cpu="1", seconds=1)
    out = federation.kubectl(worker, "create", "-o", "json", "-f", "-", input=json.dumps(manifest)).stdout
    created = json.loads(out)
    assert created["spec"]["suspend"] is True, "created suspended, to wait for its admission"
    late = job_manifest("queued-on-worker-late", namespace="default", cpu="1", seconds=1)
    late["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "kfed-test-worker-high"
    late_job = json.loads(federation.kubectl(worker, "create", "-o", "json", "-f", "-", input=json.dumps(late)).stdout)
    priority_class = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": "kfed-test-worker-high"},
        "value": 500,
    }
    try:
        finished = wait_for(
            lambda: _owned_workloads(federation, worker, created),
            until=lambda found: len(found) == 1 and is_true(found[0], "Finished"),
            timeout=60,
            what="the worker-queued Job's Workload to be admitted there and finish with the Job",
        )
        workload = finished[0]
        assert workload["spec"]["queueName"] == LOCAL_QUEUE
        assert (condition(workload, "Finished") or {}).get("reason") == "Succeeded"
        assert workload["status"]["admission"]["clusterQueue"] == CLUSTER_QUEUE
        job = get(federation, worker, "job", "queued-on-worker")
        assert job is not None
        assert is_true(job, "Complete"), job.get("status")
        pod_labels = job["spec"]["template"]["metadata"]["labels"]
        assert pod_labels.get("kueue.x-k8s.io/cluster-queue-name") == CLUSTER_QUEUE, pod_labels

        selector = (
            "involvedObject.kind=Job,involvedObject.name=queued-on-worker-late,reason=WorkloadPriorityClassNotFound"
        )
        events = wait_for(
            lambda: items(federation, worker, "events", "--field-selector", selector),
            until=bool,
            timeout=30,
            what="the worker's agent saying why the Job has no Workload",
        )
        assert events[0]["type"] == "Warning"
        assert events[0]["message"] == 'WorkloadPriorityClass "kfed-test-worker-high" not found', events
        assert _owned_workloads(federation, worker, late_job) == []
        federation.kubectl(worker, "apply", "-f", "-", input=json.dumps(priority_class))
        done = wait_for(
            lambda: _owned_workloads(federation, worker, late_job),
            until=lambda found: len(found) == 1 and is_true(found[0], "Finished"),
            timeout=60,
            what="the Job queued once its WorkloadPriorityClass exists",
        )
        assert done[0]["spec"]["priority"] == 500

        # too big for the worker's ClusterQueue: it waits; cut down while it waits, its Workload follows and it runs
        big = job_manifest("queued-on-worker-big", namespace="default", cpu="1", parallelism=500, seconds=1)
        del big["spec"]["completions"]
        big_job = json.loads(
            federation.kubectl(worker, "create", "-o", "json", "-f", "-", input=json.dumps(big)).stdout
        )
        waiting = wait_for(
            lambda: _owned_workloads(federation, worker, big_job),
            until=lambda found: len(found) == 1 and condition(found[0], "QuotaReserved") is not None,
            timeout=30,
            what="the big worker-queued Job's Workload to wait for quota",
        )
        assert not is_true(waiting[0], "QuotaReserved"), waiting[0].get("status")
        federation.kubectl(
            worker, "patch", "job", "queued-on-worker-big", "--type=merge", "-p", '{"spec":{"parallelism":2}}'
        )
        ran = wait_for(
            lambda: _owned_workloads(federation, worker, big_job),
            until=lambda found: len(found) == 1 and is_true(found[0], "Finished"),
            timeout=60,
            what="the cut-down Job's Workload to follow the edit, be admitted and finish",
        )
        assert ran[0]["spec"]["podSets"][0]["count"] == 2
    finally:
        for name in ("queued-on-worker", "queued-on-worker-late", "queued-on-worker-big"):
            federation.kubectl(worker, "delete", "job", name, "-n", "default", "--wait=false", check=False)
        federation.kubectl(
            worker, "delete", "workloadpriorityclass", "kfed-test-worker-high", "--wait=false", check=False
        )


def test_a_worker_queued_jobs_new_priority_class_label_reprioritizes_its_workload(federation: Federation) -> None:
    """As Kueue on that worker would: relabelling a running worker-queued Job with another
    ``kueue.x-k8s.io/priority-class`` gives its Workload that class's priority; a class that does not exist is told
    (a Warning Event) and the Workload keeps its priority."""
    worker = federation.workers[0]
    classes = [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": name},
            "value": value,
        }
        for name, value in (("kfed-test-before", 100), ("kfed-test-reprioritized", 700))
    ]
    federation.kubectl(
        worker, "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": classes})
    )
    manifest = job_manifest("reprioritized", namespace="default", cpu="1", seconds=600)
    manifest["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "kfed-test-before"
    created = json.loads(
        federation.kubectl(worker, "create", "-o", "json", "-f", "-", input=json.dumps(manifest)).stdout
    )
    label = "kueue.x-k8s.io/priority-class"
    try:
        [admitted] = wait_for(
            lambda: _owned_workloads(federation, worker, created),
            until=lambda found: len(found) == 1 and is_true(found[0], "Admitted"),
            timeout=30,
            what="the worker-queued Job admitted",
        )
        assert admitted["spec"]["priority"] == 100
        federation.kubectl(worker, "label", "job", "reprioritized", f"{label}=kfed-test-reprioritized", "--overwrite")
        [workload] = wait_for(
            lambda: _owned_workloads(federation, worker, created),
            until=lambda found: len(found) == 1 and found[0]["spec"].get("priority") == 700,
            timeout=30,
            what="the relabelled Job's Workload taking the new class's priority",
        )
        assert workload["spec"]["priorityClassRef"]["name"] == "kfed-test-reprioritized"
        assert is_true(workload, "Admitted"), "still admitted: only its priority changed"
        federation.kubectl(worker, "label", "job", "reprioritized", f"{label}=kfed-test-no-such-class", "--overwrite")
        selector = "involvedObject.kind=Job,involvedObject.name=reprioritized,reason=WorkloadPriorityClassNotFound"
        events = wait_for(
            lambda: items(federation, worker, "events", "--field-selector", selector),
            until=bool,
            timeout=30,
            what="the agent saying why the priority was not changed",
        )
        assert "kfed-test-no-such-class" in events[0]["message"], events
        [kept] = _owned_workloads(federation, worker, created)
        assert kept["spec"]["priority"] == 700
    finally:
        federation.kubectl(worker, "delete", "job", "reprioritized", "-n", "default", "--wait=false", check=False)
        for name in ("kfed-test-before", "kfed-test-reprioritized"):
            federation.kubectl(worker, "delete", "workloadpriorityclass", name, "--wait=false", check=False)


def test_a_worker_queued_job_past_its_maximum_execution_time_is_deactivated_and_stopped(federation: Federation) -> None:
    """As Kueue on that worker would: a Job queued on a worker with ``kueue.x-k8s.io/max-exec-time-seconds: 3`` runs,
    and 3 s after its admission its Workload is deactivated (``MaximumExecutionTimeExceeded`` Warning Event), evicted
    with ``DeactivatedDueToMaximumExecutionTimeExceeded`` (counted in ``schedulingStats``), its quota released and
    not queued again, and the Job suspended (before, it ran on past its limit)."""
    worker = federation.workers[0]
    manifest = job_manifest("capped-on-worker", namespace="default", cpu="1", seconds=600)
    manifest["metadata"]["labels"]["kueue.x-k8s.io/max-exec-time-seconds"] = "3"
    created = json.loads(
        federation.kubectl(worker, "create", "-o", "json", "-f", "-", input=json.dumps(manifest)).stdout
    )
    reason = "DeactivatedDueToMaximumExecutionTimeExceeded"
    try:
        [workload] = wait_for(
            lambda: _owned_workloads(federation, worker, created),
            until=lambda found: (
                len(found) == 1
                and (condition(found[0], "Requeued") or {}).get("reason") == reason
                and not is_true(found[0], "QuotaReserved")
            ),
            timeout=60,
            what="the capped worker-queued Job's Workload deactivated, evicted and its quota released",
        )
        assert workload["spec"]["active"] is False
        assert workload["spec"]["maximumExecutionTimeSeconds"] == 3
        evicted = condition(workload, "Evicted") or {}
        assert (evicted.get("status"), evicted.get("reason")) == ("True", reason)
        assert evicted["message"] == "The workload is deactivated due to exceeding the maximum execution time"
        assert (condition(workload, "Requeued") or {}).get("status") == "False", "not queued again"
        assert workload["status"]["schedulingStats"]["evictions"] == [
            {"reason": "Deactivated", "underlyingCause": "MaximumExecutionTimeExceeded", "count": 1}
        ]
        selector = f"involvedObject.name={workload['metadata']['name']},reason=MaximumExecutionTimeExceeded"
        events = items(federation, worker, "events", "--field-selector", selector)
        assert [(e["type"], e["message"]) for e in events] == [("Warning", "The maximum execution time (3s) exceeded")]
        job = wait_for(
            lambda: get(federation, worker, "job", "capped-on-worker"),
            until=lambda j: (
                j is not None and bool(j["spec"].get("suspend")) and not (j.get("status") or {}).get("active")
            ),
            timeout=30,
            what="the capped Job suspended, its pods gone",
        )
        assert job is not None
    finally:
        federation.kubectl(worker, "delete", "job", "capped-on-worker", "-n", "default", "--wait=false", check=False)


def test_a_worker_queued_job_is_preempted_by_a_higher_priority_one_and_runs_again_after(federation: Federation) -> None:
    """Kueue's preemption within a worker ClusterQueue, for Jobs queued on that worker: a higher-priority Job that
    does not fit evicts the running lower-priority one (Event Preempted), whose Job is stopped; once the higher one
    finished, the lower one is admitted again and runs."""
    worker = federation.workers[0]
    docs = [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": "local-prio"},
            "spec": {
                "namespaceSelector": {},
                "preemption": {"withinClusterQueue": "LowerPriority"},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory"],
                        "flavors": [
                            {
                                "name": "default-flavor",
                                "resources": [
                                    {"name": "cpu", "nominalQuota": "8"},
                                    {"name": "memory", "nominalQuota": "16Gi"},
                                ],
                            }
                        ],
                    }
                ],
            },
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "local-prio", "namespace": "default"},
            "spec": {"clusterQueue": "local-prio"},
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": "kfed-test-local-high"},
            "value": 1000,
        },
    ]
    federation.kubectl(
        worker, "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": docs})
    )
    low = job_manifest("local-low", namespace="default", cpu="8", seconds=600, queue="local-prio")
    high = job_manifest("local-high", namespace="default", cpu="8", seconds=1, queue="local-prio")
    high["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "kfed-test-local-high"
    try:
        low_job = json.loads(
            federation.kubectl(worker, "create", "-o", "json", "-f", "-", input=json.dumps(low)).stdout
        )
        wait_for(
            lambda: get(federation, worker, "job", "local-low"),
            until=lambda j: int(((j or {}).get("status") or {}).get("active", 0)) > 0,
            timeout=30,
            what="the low-priority worker-queued Job running",
        )
        high_job = json.loads(
            federation.kubectl(worker, "create", "-o", "json", "-f", "-", input=json.dumps(high)).stdout
        )
        done = wait_for(
            lambda: _owned_workloads(federation, worker, high_job),
            until=lambda found: len(found) == 1 and is_true(found[0], "Finished"),
            timeout=60,
            what="the high-priority worker-queued Job admitted by preemption and finished",
        )
        assert done[0]["status"]["admission"]["clusterQueue"] == "local-prio"
        [low_workload] = _owned_workloads(federation, worker, low_job)
        preempted = items(
            federation,
            worker,
            "events",
            "--field-selector",
            f"reason=Preempted,involvedObject.name={low_workload['metadata']['name']}",
        )
        assert preempted, "a Preempted Event on the lower-priority Workload"
        again, _ = wait_for(
            lambda: (_owned_workloads(federation, worker, low_job), get(federation, worker, "job", "local-low")),
            until=lambda pair: (
                len(pair[0]) == 1
                and is_true(pair[0][0], "QuotaReserved")
                and int(((pair[1] or {}).get("status") or {}).get("active", 0)) > 0
            ),
            timeout=60,
            what="the preempted Job admitted again and running once the higher one finished",
        )
        assert again[0]["status"]["schedulingStats"]["evictions"] == [
            {"reason": "Preempted", "underlyingCause": "", "count": 1}
        ], "the eviction is counted on the worker's Workload, which is the one its users read"
    finally:
        for name in ("local-low", "local-high"):
            federation.kubectl(
                worker, "delete", "job", name, "-n", "default", "--wait=true", "--timeout=60s", check=False
            )
        federation.kubectl(worker, "delete", "localqueue", "local-prio", "-n", "default", "--wait=false", check=False)
        federation.kubectl(worker, "delete", "clusterqueue", "local-prio", "--wait=false", check=False)
        federation.kubectl(
            worker, "delete", "workloadpriorityclass", "kfed-test-local-high", "--wait=false", check=False
        )


def _admitted(federation: Federation, worker: str, created: Obj) -> Obj:
    """Wait until the Job queued on ``worker`` (``created``) has one Workload there, admitted; returns it."""
    return wait_for(
        lambda: _owned_workloads(federation, worker, created),
        until=lambda found: len(found) == 1 and is_true(found[0], "Admitted"),
        timeout=60,
        what="the worker-queued Job's Workload admitted",
    )[0]


def _readmitted(federation: Federation, worker: str, created: Obj, first: Obj, *, what: str) -> Obj:
    """Wait until the Job queued on ``worker`` (``created``) has one Workload there, another than ``first``, admitted;
    returns it."""
    return wait_for(
        lambda: _owned_workloads(federation, worker, created),
        until=lambda found: (
            len(found) == 1
            and found[0]["metadata"]["uid"] != first["metadata"]["uid"]
            and is_true(found[0], "Admitted")
        ),
        timeout=60,
        what=what,
    )[0]


def _stopped_events(federation: Federation, worker: str, job: str, *, what: str) -> list[Obj]:
    """Wait for the ``Stopped`` Events of Job ``job`` on ``worker``; returns them."""
    selector = f"involvedObject.kind=Job,involvedObject.name={job},reason=Stopped"
    return wait_for(
        lambda: items(federation, worker, "events", "--field-selector", selector), until=bool, timeout=30, what=what
    )


def test_a_worker_queued_job_its_user_starts_before_admission_is_stopped_with_kueues_event(
    federation: Federation,
) -> None:
    """As Kueue does: a Job waiting for quota that someone unsuspends is suspended again, with a Normal Event
    ``Stopped`` "Not admitted by cluster queue", and keeps waiting in its queue."""
    worker = federation.workers[0]
    manifest = job_manifest("started-early", namespace="default", cpu="1000", seconds=1)  # more than the quota
    created = json.loads(
        federation.kubectl(worker, "create", "-o", "json", "-f", "-", input=json.dumps(manifest)).stdout
    )
    try:
        wait_for(
            lambda: _owned_workloads(federation, worker, created),
            until=lambda found: len(found) == 1 and condition(found[0], "QuotaReserved") is not None,
            timeout=30,
            what="the worker-queued Job's Workload waiting for quota",
        )
        federation.kubectl(worker, "patch", "job", "started-early", "--type=merge", "-p", '{"spec":{"suspend":false}}')
        stopped = _stopped_events(federation, worker, "started-early", what="the agent stopping the unadmitted Job")
        assert [(e["type"], e["message"]) for e in stopped] == [("Normal", "Not admitted by cluster queue")], stopped
        wait_for(
            lambda: get(federation, worker, "job", "started-early"),
            until=lambda j: (j or {}).get("spec", {}).get("suspend") is True,
            timeout=30,
            what="the Job suspended again",
        )
        (workload,) = _owned_workloads(federation, worker, created)
        assert not is_true(workload, "QuotaReserved"), workload.get("status")
    finally:
        federation.kubectl(worker, "delete", "job", "started-early", "-n", "default", "--wait=false", check=False)


def test_a_worker_queued_job_whose_workload_is_deleted_is_stopped_and_queued_anew(federation: Federation) -> None:
    """As Kueue's Job integration does: a running Job whose Workload someone deleted is suspended first (Event
    ``Stopped``), and gets a new Workload once its pods are gone, which is admitted afresh before the Job runs again;
    it never runs on quota no Workload holds."""
    worker = federation.workers[0]
    manifest = job_manifest("lost-workload", namespace="default", cpu="1", seconds=600)
    created = json.loads(
        federation.kubectl(worker, "create", "-o", "json", "-f", "-", input=json.dumps(manifest)).stdout
    )
    try:
        first = _admitted(federation, worker, created)
        wait_for(
            lambda: get(federation, worker, "job", "lost-workload"),
            until=lambda j: int(((j or {}).get("status") or {}).get("active", 0)) > 0,
            timeout=30,
            what="the worker-queued Job running",
        )
        federation.kubectl(worker, "delete", "workload", first["metadata"]["name"], "-n", "default")
        stopped = _stopped_events(
            federation, worker, "lost-workload", what="the agent stopping the Job that lost its Workload"
        )
        assert stopped[0]["message"] == "Missing Workload; unable to restore pod templates", stopped
        second = _readmitted(federation, worker, created, first, what="a new Workload for the Job, admitted afresh")
        assert (condition(second, "QuotaReserved") or {}).get("reason") == "QuotaReserved", second.get("status")
        job = wait_for(
            lambda: get(federation, worker, "job", "lost-workload"),
            until=lambda j: (
                (j or {}).get("spec", {}).get("suspend") is False
                and int(((j or {}).get("status") or {}).get("active", 0)) > 0
            ),
            timeout=30,
            what="the Job running again under its new Workload",
        )
        assert job is not None
        assert int(job["status"].get("failed") or 0) == 0, "stopping it is not a failure of the Job"
    finally:
        federation.kubectl(worker, "delete", "job", "lost-workload", "-n", "default", "--wait=false", check=False)


def test_a_worker_queued_jobs_workload_a_finalizer_holds_while_deleted_stops_the_job_until_it_goes(
    federation: Federation,
) -> None:
    """As Kueue does for a Workload being deleted: a running Job queued on a worker whose Workload someone deleted,
    a finalizer holding it, is stopped (``Stopped``, "Workload is deleted"), gets no second Workload while the first
    stays, and runs again under a new one once it goes. Before, it ran on under the Workload being deleted."""
    worker = federation.workers[0]
    manifest = job_manifest("held-local", namespace="default", cpu="1", seconds=600)
    created = json.loads(
        federation.kubectl(worker, "create", "-o", "json", "-f", "-", input=json.dumps(manifest)).stdout
    )
    name = ""
    try:
        first = _admitted(federation, worker, created)
        name = first["metadata"]["name"]
        hold = '{"metadata":{"finalizers":["example.com/hold"]}}'
        federation.kubectl(worker, "patch", "workload", name, "-n", "default", "--type=merge", "-p", hold)
        federation.kubectl(worker, "delete", "workload", name, "-n", "default", "--wait=false")
        stopped = _stopped_events(
            federation, worker, "held-local", what="the agent stopping the Job whose Workload is being deleted"
        )
        assert stopped[0]["message"] == "Workload is deleted", stopped
        job = get(federation, worker, "job", "held-local")
        assert job is not None
        assert job["spec"]["suspend"] is True
        assert [w["metadata"]["uid"] for w in _owned_workloads(federation, worker, created)] == [
            first["metadata"]["uid"]
        ], "no second Workload while the first stays"
    finally:
        if name:
            unhold = '[{"op":"remove","path":"/metadata/finalizers"}]'
            federation.kubectl(
                worker, "patch", "workload", name, "-n", "default", "--type=json", "-p", unhold, check=False
            )
    try:
        _readmitted(
            federation, worker, created, first, what="a new Workload for the Job once the old one went, admitted afresh"
        )
    finally:
        federation.kubectl(worker, "delete", "job", "held-local", "-n", "default", "--wait=false", check=False)


def test_a_worker_queued_job_deleted_while_a_finalizer_holds_it_releases_its_quota_at_once(
    federation: Federation,
) -> None:
    """As Kueue does for a Job being deleted: a running Job queued on a worker, deleted while a finalizer holds it,
    has its Workload finished as orphaned (``OwnerNotFound``, Kueue's message) at once, which releases its quota,
    and gets no new Workload. Before, its quota stayed held until someone took the finalizer off."""
    worker = federation.workers[0]
    manifest = job_manifest("held-job", namespace="default", cpu="1", seconds=600)
    manifest["metadata"]["finalizers"] = ["example.com/hold"]
    created = json.loads(
        federation.kubectl(worker, "create", "-o", "json", "-f", "-", input=json.dumps(manifest)).stdout
    )
    try:
        first = _admitted(federation, worker, created)
        federation.kubectl(worker, "delete", "job", "held-job", "-n", "default", "--wait=false")
        finished = wait_for(
            lambda: _owned_workloads(federation, worker, created),
            until=lambda found: len(found) == 1 and is_true(found[0], "Finished"),
            timeout=30,
            what="the Workload of the Job being deleted finished as orphaned",
        )[0]
        assert finished["metadata"]["uid"] == first["metadata"]["uid"], "no second Workload for a Job being deleted"
        done = condition(finished, "Finished") or {}
        assert (done.get("reason"), done.get("message")) == ("OwnerNotFound", "The workload's owner no longer exists")
        job = get(federation, worker, "job", "held-job")
        assert job is not None
        assert job["metadata"].get("deletionTimestamp"), "the finalizer still holds the Job"
    finally:
        unhold = '[{"op":"remove","path":"/metadata/finalizers"}]'
        federation.kubectl(
            worker, "patch", "job", "held-job", "-n", "default", "--type=json", "-p", unhold, check=False
        )
        federation.kubectl(worker, "delete", "job", "held-job", "-n", "default", "--wait=false", check=False)
