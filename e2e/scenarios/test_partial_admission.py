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
MIN = "kueue.x-k8s.io/job-min-parallelism"
EQUAL = "kueue.x-k8s.io/job-completions-equal-parallelism"


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


@pytest.mark.parametrize(
    ("annotations", "spec", "says"),
    [
        ({MIN: "two"}, {}, 'job-min-parallelism]: Invalid value: "two": must be a whole number from 1 to 4'),
        ({MIN: "5"}, {}, 'Invalid value: "5": must be a whole number from 1 to 4'),
        ({MIN: "1"}, {"parallelism": 1, "completions": 1}, "the Job runs one pod"),
        ({EQUAL: "yes"}, {"completionMode": "Indexed"}, "job-completions-equal-parallelism]: Invalid value"),
        ({EQUAL: "true"}, {}, "true only on an Indexed Job"),
    ],
)
def test_kubectl_refuses_what_kueues_webhook_refuses_in_partial_admission(
    federation: Federation, partial_queue: None, annotations: dict[str, str], spec: dict[str, Any], says: str
) -> None:
    manifest = job_manifest("refused-partial", namespace="default", cpu="1", parallelism=5, seconds=1, queue=QUEUE)
    manifest["metadata"]["annotations"] = annotations
    manifest["spec"].update(spec)
    result = federation.kubectl(MANAGER, "create", "-f", "-", input=json.dumps(manifest), check=False)
    assert result.returncode != 0, f"{annotations} {spec} was accepted"
    assert says in result.stderr, result.stderr
    assert get(federation, MANAGER, "job", "refused-partial") is None


def test_a_running_partially_admitted_jobs_parallelism_cannot_change(
    federation: Federation, partial_queue: None
) -> None:
    manifest = job_manifest("partial-fixed", namespace="default", cpu="1", parallelism=2, seconds=600, queue=QUEUE)
    manifest["metadata"]["annotations"] = {MIN: "1"}
    federation.kubectl(MANAGER, "create", "-f", "-", input=json.dumps(manifest))
    try:
        wait_for(
            lambda: get(federation, MANAGER, "job", "partial-fixed"),
            until=lambda job: job is not None and job["spec"].get("suspend") is False,
            timeout=60,
            what="partial-fixed to start",
        )
        result = federation.kubectl(
            MANAGER, "patch", "job", "partial-fixed", "--type=merge", "-p", '{"spec":{"parallelism":1}}', check=False
        )
        assert result.returncode != 0, "parallelism changed on a running Job open to partial admission"
        assert "cannot change when partial admission is enabled and the job is not suspended" in result.stderr
    finally:
        federation.kubectl(MANAGER, "delete", "job", "partial-fixed", "--wait=false", check=False)
