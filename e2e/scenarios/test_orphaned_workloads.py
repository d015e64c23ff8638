"""A Job deleted without its Workload (``kubectl delete job NAME --cascade=orphan``) leaves the Workload behind with
no owner; as Kueue does (``FinishOrphanedWorkloads``), it is finished at once, reason ``OwnerNotFound``, which
releases its quota: on the manager (and its copies are removed from the worker) and on a worker, for a Job queued
there. Before, the manager deactivated such a Workload for want of an owner, and a worker held its quota for ever.
A Workload whose ownerReference someone takes off while its Job lives is not an orphan: on the manager the Job gets
it back and runs to the end; on a worker the Job runs to the end with it.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from e2e.queues import job_manifest
from e2e.rig.federation import MANAGER, Federation
from e2e.scenarios.helpers import (
    Obj,
    condition,
    get,
    is_true,
    remote_copies,
    submit,
    wait_complete,
    worker_of,
    workload_of,
)
from e2e.waiting import wait_for

pytestmark = pytest.mark.e2e

OWNER_NOT_FOUND = ("OwnerNotFound", "The workload's owner no longer exists")


def _finished_as_orphan(fed: Federation, cluster: str, name: str) -> Obj:
    workload = wait_for(
        lambda: get(fed, cluster, "workloads.kueue.x-k8s.io", name),
        until=lambda w: w is not None and is_true(w, "Finished"),
        timeout=60,
        what=f"the Workload {name} its Job left behind to be finished on {cluster}",
    )
    assert workload is not None
    finished = condition(workload, "Finished")
    assert finished is not None
    assert (finished["reason"], finished["message"]) == OWNER_NOT_FOUND, finished
    assert workload["spec"].get("active") is not False, "finished, not deactivated"
    assert not workload["metadata"].get("ownerReferences")
    return workload


def _running(fed: Federation, job: str) -> Obj:
    """Wait until ``job`` runs on a worker (its live copies there); returns its manager Workload."""
    wait_for(
        lambda: worker_of(fed, job),
        until=lambda w: w is not None and bool(remote_copies(fed, job, live_only=True).get(w)),
        timeout=60,
        what=f"{job} running on a worker",
    )
    workload = workload_of(fed, job)
    assert workload is not None
    return workload


def _queued_on_worker(fed: Federation, worker: str, job_name: str, *, seconds: float) -> Callable[[], list[Obj]]:
    """Create a Job on ``worker`` itself (queued there by its agent) and wait for its Workload to be admitted; returns
    a lookup of the Workloads made for that Job (by its job-uid label)."""
    manifest = job_manifest(job_name, namespace="default", cpu="1", seconds=seconds)
    job = json.loads(fed.kubectl(worker, "create", "-o", "json", "-f", "-", input=json.dumps(manifest)).stdout)
    uid = job["metadata"]["uid"]

    def made_for_it() -> list[Obj]:
        listed = json.loads(fed.kubectl(worker, "get", "workloads.kueue.x-k8s.io", "-o", "json").stdout)["items"]
        return [w for w in listed if (w["metadata"].get("labels") or {}).get("kueue.x-k8s.io/job-uid") == uid]

    wait_for(
        made_for_it,
        until=lambda found: len(found) == 1 and is_true(found[0], "Admitted"),
        timeout=60,
        what=f"the worker-queued Job {job_name}'s Workload to be admitted there",
    )
    return made_for_it


def test_a_running_job_deleted_without_its_workload_on_the_manager_finishes_it_and_removes_the_copies(
    federation: Federation,
) -> None:
    fed = federation
    submit(fed, "orphaning", cpu="1", seconds=120)
    workload = _running(fed, "orphaning")
    name = workload["metadata"]["name"]
    fed.kubectl(MANAGER, "delete", "job", "orphaning", "--cascade=orphan")
    try:
        _finished_as_orphan(fed, MANAGER, name)
        wait_for(
            lambda: remote_copies(fed, "orphaning"),
            until=lambda copies: copies == {},
            timeout=30,
            what="the copies of the orphaned Workload to be removed from its worker",
        )
    finally:
        fed.kubectl(MANAGER, "delete", "workloads.kueue.x-k8s.io", name, "--ignore-not-found", "--wait=false")


def test_a_running_job_whose_deletion_a_finalizer_holds_finishes_its_workload_and_its_copies_go(
    federation: Federation,
) -> None:
    """Someone put a finalizer on a Job, and its user deletes it: the Job stays, being deleted, with its Workload.
    Kueue finishes the Workload of a Job being deleted at once (``OwnerNotFound``); kfed-manager does too and removes
    the copies, so the Job stops running on its worker. Before, it ran on there to its end."""
    fed = federation
    manifest = job_manifest("held-job", namespace="default", cpu="1", seconds=300)
    manifest["metadata"]["finalizers"] = ["example.com/hold"]
    fed.kubectl(MANAGER, "create", "-f", "-", input=json.dumps(manifest))
    try:
        workload = _running(fed, "held-job")
        fed.kubectl(MANAGER, "delete", "job", "held-job", "--wait=false")
        finished = wait_for(
            lambda: get(fed, MANAGER, "workloads.kueue.x-k8s.io", workload["metadata"]["name"]),
            until=lambda w: w is not None and is_true(w, "Finished"),
            timeout=60,
            what="the Workload of the Job being deleted finished",
        )
        found = condition(finished, "Finished")
        assert found is not None
        assert (found["reason"], found["message"]) == OWNER_NOT_FOUND, found
        wait_for(
            lambda: remote_copies(fed, "held-job"),
            until=lambda copies: copies == {},
            timeout=30,
            what="the copies of the Job being deleted removed from its worker",
        )
    finally:
        fed.kubectl(
            MANAGER,
            "patch",
            "job",
            "held-job",
            "--type=json",
            "-p",
            '[{"op":"remove","path":"/metadata/finalizers"}]',
            check=False,
        )


def test_a_job_queued_on_a_worker_deleted_without_its_workload_releases_the_quota_there(
    federation: Federation,
) -> None:
    fed = federation
    worker = fed.workers[0]
    name = _queued_on_worker(fed, worker, "orphaning-here", seconds=120)()[0]["metadata"]["name"]
    fed.kubectl(worker, "delete", "job", "orphaning-here", "--cascade=orphan")
    try:
        _finished_as_orphan(fed, worker, name)
    finally:
        # its pods were orphaned too: no Job completes or removes them now
        fed.kubectl(worker, "delete", "pods", "-l", "batch.kubernetes.io/job-name=orphaning-here", "--wait=false")
        fed.kubectl(worker, "delete", "workloads.kueue.x-k8s.io", name, "--ignore-not-found", "--wait=false")


def test_a_workload_whose_owner_reference_is_taken_off_while_its_job_runs_gets_it_back_and_the_job_completes(
    federation: Federation,
) -> None:
    fed = federation
    submit(fed, "unowned", cpu="1", seconds=8)
    wait_for(lambda: worker_of(fed, "unowned"), until=bool, timeout=60, what="unowned admitted on a worker")
    workload = workload_of(fed, "unowned")
    assert workload is not None
    name = workload["metadata"]["name"]
    owners = workload["metadata"]["ownerReferences"]
    remove = json.dumps([{"op": "remove", "path": "/metadata/ownerReferences"}])
    fed.kubectl(MANAGER, "patch", "workloads.kueue.x-k8s.io", name, "--type=json", "-p", remove)
    given_back = wait_for(
        lambda: get(fed, MANAGER, "workloads.kueue.x-k8s.io", name),
        until=lambda w: w is not None and bool(w["metadata"].get("ownerReferences")),
        timeout=30,
        what="the Job to give its Workload its ownerReference back",
    )
    assert given_back is not None
    assert given_back["metadata"]["ownerReferences"] == owners
    job = wait_complete(fed, "unowned")
    assert job["status"].get("succeeded") == 1
    finished = condition(workload_of(fed, "unowned"), "Finished")
    assert finished is not None
    assert finished["reason"] == "Succeeded", finished


def test_a_worker_queued_jobs_workload_without_its_owner_reference_finishes_with_the_job(
    federation: Federation,
) -> None:
    fed = federation
    worker = fed.workers[0]
    made_for_it = _queued_on_worker(fed, worker, "unowned-here", seconds=8)
    name = made_for_it()[0]["metadata"]["name"]
    remove = json.dumps([{"op": "remove", "path": "/metadata/ownerReferences"}])
    fed.kubectl(worker, "patch", "workloads.kueue.x-k8s.io", name, "--type=json", "-p", remove)
    try:
        finished = wait_for(
            made_for_it,
            until=lambda found: len(found) == 1 and is_true(found[0], "Finished"),
            timeout=60,
            what="the Workload to finish with its Job",
        )
        assert (condition(finished[0], "Finished") or {}).get("reason") == "Succeeded", finished[0]["status"]
    finally:
        fed.kubectl(worker, "delete", "job", "unowned-here", "--ignore-not-found", "--wait=false")
        fed.kubectl(worker, "delete", "workloads.kueue.x-k8s.io", name, "--ignore-not-found", "--wait=false")
