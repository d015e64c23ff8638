"""Partial admission across the federation: a Job with ``kueue.x-k8s.io/job-min-parallelism`` that does not fit the
manager's quota whole runs with the pod count the manager admitted, on the manager and in its worker alike.

The manager's ClusterQueue holds 3 cpu and each worker's 8, so a worker given the Job's full count would run all 5
pods: more than the manager reserved. The copies must carry the manager's count instead."""

from __future__ import annotations

import json
from typing import Any

import pytest

from e2e.queues import job_manifest, named_queue_objects
from e2e.rig.federation import MANAGER, Federation
from e2e.scenarios.helpers import get, is_true, wait_complete, workload_of
from e2e.waiting import wait_for

pytestmark = pytest.mark.e2e

QUEUE = "partial-queue"


@pytest.fixture
def partial_queue(federation: Federation) -> None:
    for cluster in (MANAGER, *federation.workers):
        objects = named_queue_objects(QUEUE, cpu="3" if cluster == MANAGER else "8", manager=cluster == MANAGER)
        federation.kubectl(
            cluster, "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
        )


def _assigned_count(workload: dict[str, Any] | None) -> int | None:
    assignments = (((workload or {}).get("status") or {}).get("admission") or {}).get("podSetAssignments") or ()
    return int(assignments[0]["count"]) if assignments else None


def test_a_partially_admitted_job_runs_the_admitted_count_everywhere(
    federation: Federation, partial_queue: None
) -> None:
    manifest = job_manifest("partial-5", namespace="default", cpu="1", parallelism=5, seconds=10, queue=QUEUE)
    manifest["metadata"]["annotations"] = {
        "kueue.x-k8s.io/job-min-parallelism": "2",
        "kueue.x-k8s.io/job-completions-equal-parallelism": "true",
    }
    manifest["spec"]["completionMode"] = "Indexed"
    federation.kubectl(MANAGER, "create", "-f", "-", input=json.dumps(manifest))

    workload = wait_for(
        lambda: workload_of(federation, "partial-5"),
        until=lambda wl: is_true(wl, "Admitted"),
        timeout=60,
        what="partial-5's Workload to be admitted",
    )
    assert workload is not None
    assert _assigned_count(workload) == 3, workload["status"]["admission"]
    assert workload["spec"]["podSets"][0]["count"] == 5, "the manager Workload keeps what the Job asks for"
    worker = workload["status"]["clusterName"]

    name = workload["metadata"]["name"]
    copy = get(federation, worker, "workloads.kueue.x-k8s.io", name)
    assert copy is not None, f"no Workload copy in {worker}"
    assert copy["spec"]["podSets"][0]["count"] == 3, "the worker is asked for what the manager reserved"
    assert _assigned_count(copy) == 3
    for cluster in (worker, MANAGER):  # the Job copy, then the manager Job: both run the admitted count
        started = wait_for(
            lambda cluster=cluster: get(federation, cluster, "job", "partial-5"),  # type: ignore[misc]
            until=lambda job: job is not None and not job["spec"].get("suspend"),
            timeout=30,
            what=f"partial-5 to start on {cluster}",
        )
        assert started is not None
        assert (started["spec"]["parallelism"], started["spec"]["completions"]) == (3, 3), cluster

    done = wait_complete(federation, "partial-5", timeout=120)
    assert done["status"].get("succeeded") == 3, done["status"]
