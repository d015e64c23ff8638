"""Workloads Kueue left on a cluster that switched to kfed, one cluster at a time (a real local federation).

Kueue creates the Workloads of its Jobs with its ``kueue.x-k8s.io/resource-in-use`` finalizer and lifts it once the
Workload finished or is being deleted; kfed creates its own without it. Here a Workload is given the finalizer while
its Job runs, as Kueue had made it before the switch, and kfed must lift it as Kueue would, so deleting the Job or
the Workload never leaves a Workload ``Terminating`` for ever: on the manager once the Job finished, on a worker once
someone deletes the Workload of a running Job queued there (which is then stopped and queued anew).
"""

from __future__ import annotations

import json

import pytest

from e2e.queues import job_manifest, workload_manifest
from e2e.rig.federation import MANAGER, Federation
from e2e.scenarios.helpers import Obj, condition, get, is_true, items, submit, wait_complete, workload_of
from e2e.waiting import wait_for

pytestmark = pytest.mark.e2e

FINALIZER = "kueue.x-k8s.io/resource-in-use"
AS_KUEUE_MADE_IT = json.dumps([{"op": "add", "path": "/metadata/finalizers", "value": [FINALIZER]}])


def _give_kueues_finalizer(fed: Federation, cluster: str, workload: Obj) -> None:
    name = workload["metadata"]["name"]
    fed.kubectl(cluster, "patch", "workload", name, "-n", "default", "--type=json", "-p", AS_KUEUE_MADE_IT)


def test_a_manager_workload_kueue_made_loses_its_finalizer_once_finished_and_goes_with_its_job(
    federation: Federation,
) -> None:
    submit(federation, "kueue-made", cpu="1", seconds=6)
    try:
        running = wait_for(
            lambda: workload_of(federation, "kueue-made"),
            until=lambda wl: is_true(wl, "Admitted"),
            timeout=60,
            what="the manager Workload admitted",
        )
        assert running is not None
        _give_kueues_finalizer(federation, MANAGER, running)
        wait_complete(federation, "kueue-made")
        finished = wait_for(
            lambda: workload_of(federation, "kueue-made"),
            until=lambda wl: is_true(wl, "Finished") and FINALIZER not in (wl or {})["metadata"].get("finalizers", ()),
            timeout=30,
            what="Kueue's finalizer lifted from the finished Workload",
        )
        assert finished is not None
        federation.kubectl(MANAGER, "delete", "job", "kueue-made", "-n", "default", "--wait=false")
        wait_for(
            lambda: get(federation, MANAGER, "workload", finished["metadata"]["name"]),
            until=lambda wl: wl is None,
            timeout=30,
            what="the Workload gone with its Job",
        )
    finally:
        federation.kubectl(MANAGER, "delete", "job", "kueue-made", "-n", "default", "--wait=false", check=False)


def test_a_worker_workload_kueue_made_deleted_under_its_running_job_goes_and_the_job_is_queued_anew(
    federation: Federation,
) -> None:
    worker = federation.workers[0]
    manifest = job_manifest("kueue-made-local", namespace="default", cpu="1", seconds=600)
    job = json.loads(federation.kubectl(worker, "create", "-o", "json", "-f", "-", input=json.dumps(manifest)).stdout)
    uid = job["metadata"]["uid"]

    def owned() -> list[Obj]:
        return [
            w
            for w in items(federation, worker, "workloads")
            if any(o.get("uid") == uid for o in w["metadata"].get("ownerReferences") or ())
        ]

    try:
        first = wait_for(
            owned,
            until=lambda found: len(found) == 1 and is_true(found[0], "Admitted"),
            timeout=60,
            what="the worker-queued Job's Workload admitted",
        )[0]
        _give_kueues_finalizer(federation, worker, first)
        federation.kubectl(worker, "delete", "workload", first["metadata"]["name"], "-n", "default", "--wait=false")
        second = wait_for(
            owned,
            until=lambda found: len(found) == 1 and found[0]["metadata"]["uid"] != first["metadata"]["uid"],
            timeout=60,
            what="the deleted Workload gone (its finalizer lifted) and a new one made for the Job",
        )[0]
        assert not second["metadata"].get("deletionTimestamp")
        queued = wait_for(
            owned,
            until=lambda found: len(found) == 1 and is_true(found[0], "Admitted"),
            timeout=60,
            what="the new Workload admitted",
        )[0]
        assert (condition(queued, "QuotaReserved") or {}).get("reason") == "QuotaReserved"
    finally:
        federation.kubectl(worker, "delete", "job", "kueue-made-local", "-n", "default", "--wait=false", check=False)


def test_a_workload_another_controller_admits_on_a_worker_is_named_in_a_warning(federation: Federation) -> None:
    """Kueue left running on a worker next to kfed-agent: each Workload it admits from then on gets a Warning Event
    ``AdmittedByAnotherController`` naming its field manager (Kueue's scheduler applies ``status.admission`` as
    ``kueue-admission``), so the operator learns that two admission controllers share the cluster's quota. Here
    kubectl applies the admission as Kueue's scheduler does, to a Workload no kfed-agent queue takes."""
    worker, name = "worker-1", "admitted-by-kueue"
    workload = workload_manifest(name, queue="kueue-only-queue")
    admission = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "default"},
        "status": {
            "admission": {
                "clusterQueue": "kueue-only",
                "podSetAssignments": [
                    {"name": "main", "count": 1, "flavors": {"cpu": "default-flavor"}, "resourceUsage": {"cpu": "1"}}
                ],
            }
        },
    }
    federation.kubectl(worker, "create", "-f", "-", input=json.dumps(workload))
    try:
        federation.kubectl(
            worker,
            "apply",
            "--server-side",
            "--field-manager=kueue-admission",
            "--subresource=status",
            "-f",
            "-",
            input=json.dumps(admission),
        )
        event = wait_for(
            lambda: [
                e
                for e in items(federation, worker, "events", "--field-selector", f"involvedObject.name={name}")
                if e.get("reason") == "AdmittedByAnotherController"
            ],
            until=bool,
            timeout=30,
            what="a Warning Event AdmittedByAnotherController on the Workload",
        )
        assert event[0]["type"] == "Warning"
        assert "field manager kueue-admission" in event[0]["message"], event[0]
        assert "uninstall it" in event[0]["message"]
    finally:
        federation.kubectl(worker, "delete", "workload", name, "-n", "default", "--ignore-not-found", "--wait=false")
