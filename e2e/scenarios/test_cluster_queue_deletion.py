"""Deleting a ClusterQueue that admitted workloads hold (issue 8, item 7c): Kueue's resource-in-use finalizer keeps
it, ``Active=False`` with reason ``Terminating``, until the last of them finishes; then it is gone."""

from __future__ import annotations

import functools
import json
import time
from typing import Any

import pytest

from e2e.queues import CLUSTER_QUEUE, FLAVOR
from e2e.rig.controllers import ADMISSION_CHECK
from e2e.rig.federation import MANAGER, Federation
from e2e.scenarios.helpers import condition, get, is_true, submit, workload_of
from e2e.waiting import wait_for

pytestmark = pytest.mark.e2e

FINALIZER = "kueue.x-k8s.io/resource-in-use"
DOOMED = "e2e-doomed"


def _apply(fed: Federation, cluster: str, *objects: dict[str, Any]) -> None:
    fed.kubectl(cluster, "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))


def _local_queue(cluster_queue: str) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": DOOMED, "namespace": "default"},
        "spec": {"clusterQueue": cluster_queue},
    }


def _cluster_queue(fed: Federation, cluster: str, name: str) -> dict[str, Any] | None:
    result = fed.kubectl(cluster, "get", "clusterqueue", name, "-o", "json", check=False)
    return json.loads(result.stdout) if result.returncode == 0 else None


def _finalizers(obj: dict[str, Any] | None) -> list[str]:
    return list(((obj or {}).get("metadata") or {}).get("finalizers") or ())


def test_a_cluster_queue_with_an_admitted_workload_is_kept_until_the_workload_finishes(federation: Federation) -> None:
    doomed = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": DOOMED},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory"],
                    "flavors": [
                        {
                            "name": FLAVOR,
                            "resources": [
                                {"name": "cpu", "nominalQuota": "4"},
                                {"name": "memory", "nominalQuota": "32Gi"},
                            ],
                        }
                    ],
                }
            ],
            "admissionChecksStrategy": {"admissionChecks": [{"name": ADMISSION_CHECK}]},
        },
    }
    _apply(federation, MANAGER, doomed, _local_queue(DOOMED))
    for worker in federation.workers:
        _apply(federation, worker, _local_queue(CLUSTER_QUEUE))
    try:
        wait_for(
            lambda: _finalizers(_cluster_queue(federation, MANAGER, DOOMED)),
            until=lambda found: FINALIZER in found,
            timeout=30,
            what=f"kfed-manager to add {FINALIZER} to ClusterQueue {DOOMED}",
        )
        for worker in federation.workers:
            wait_for(
                lambda worker=worker: _finalizers(_cluster_queue(federation, worker, CLUSTER_QUEUE)),  # type: ignore[misc]
                until=lambda found: FINALIZER in found,
                timeout=30,
                what=f"kfed-agent to add {FINALIZER} to ClusterQueue {CLUSTER_QUEUE} on {worker}",
            )

        submit(federation, "cq-doomed", cpu="1", seconds=15, queue=DOOMED)
        wait_for(
            lambda: workload_of(federation, "cq-doomed"),
            until=lambda w: is_true(w, "Admitted"),
            timeout=60,
            what="cq-doomed to be admitted",
        )
        federation.kubectl(MANAGER, "delete", "clusterqueue", DOOMED, "--wait=false")
        terminating = wait_for(
            lambda: _cluster_queue(federation, MANAGER, DOOMED),
            until=lambda q: (condition(q, "Active") or {}).get("reason") == "Terminating",
            timeout=30,
            what=f"ClusterQueue {DOOMED} to say it is terminating",
        )
        assert terminating is not None, "the ClusterQueue was deleted while its workload still runs"
        assert terminating["metadata"].get("deletionTimestamp")
        active = condition(terminating, "Active")
        assert active is not None
        assert active["status"] == "False"
        assert active["message"] == "Can't admit new workloads; clusterQueue is terminating"
        assert terminating["status"]["reservingWorkloads"] == 1

        # It stays while the workload runs (sampled over a bounded window).
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            job = get(federation, MANAGER, "job", "cq-doomed")
            if is_true(job, "Complete"):
                break
            assert _cluster_queue(federation, MANAGER, DOOMED) is not None, "deleted before the workload finished"
            time.sleep(0.5)

        job = wait_for(
            lambda: get(federation, MANAGER, "job", "cq-doomed"),
            until=lambda j: is_true(j, "Complete") or is_true(j, "Failed"),
            timeout=90,
            what="cq-doomed to finish",
        )
        assert is_true(job, "Complete"), (job or {}).get("status")
        wait_for(
            lambda: _cluster_queue(federation, MANAGER, DOOMED),
            until=lambda q: q is None,
            timeout=30,
            what=f"ClusterQueue {DOOMED} to be gone once its workload finished",
        )
    finally:
        for cluster in (MANAGER, *federation.workers):
            federation.kubectl(cluster, "delete", "localqueue", DOOMED, "-n", "default", "--wait=false", check=False)
        federation.kubectl(MANAGER, "delete", "job", "cq-doomed", "--wait=false", check=False)
        federation.kubectl(MANAGER, "delete", "clusterqueue", DOOMED, "--wait=false", check=False)


def _has_finalizer(obj: dict[str, Any] | None) -> bool:
    return FINALIZER in ((obj or {}).get("metadata") or {}).get("finalizers", [])


@pytest.mark.parametrize("cluster", [MANAGER, "worker-1"])
def test_a_flavor_or_check_a_cluster_queue_names_is_kept_until_no_queue_names_it(
    federation: Federation, cluster: str
) -> None:
    """Kueue's resource-in-use finalizer on ResourceFlavors and AdmissionChecks, kept by kfed-manager on the manager
    and by kfed-agent on a worker: deleting one that a ClusterQueue names leaves it Terminating until the queue no
    longer names it; one no queue names goes at once."""
    names = {"resourceflavor": "e2e-kept-flavor", "admissioncheck": "e2e-kept-check"}
    flavor_in_queue = {"name": names["resourceflavor"], "resources": [{"name": "cpu", "nominalQuota": "1"}]}
    queue: dict[str, Any] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": DOOMED},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [flavor_in_queue]}],
            "admissionChecksStrategy": {"admissionChecks": [{"name": names["admissioncheck"]}]},
        },
    }

    def objects(suffix: str) -> list[dict[str, Any]]:
        return [
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ResourceFlavor",
                "metadata": {"name": names["resourceflavor"] + suffix},
            },
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "AdmissionCheck",
                "metadata": {"name": names["admissioncheck"] + suffix},
                "spec": {"controllerName": "example.com/e2e-check"},
            },
        ]

    def wait_finalized(suffix: str) -> None:
        for kind, name in names.items():
            wait_for(
                functools.partial(get, federation, cluster, kind, name + suffix, namespace=""),
                until=_has_finalizer,
                timeout=30,
                what=f"Kueue's resource-in-use finalizer on {kind} {name + suffix} on {cluster}",
            )

    _apply(federation, cluster, *objects(""), queue)
    try:
        wait_finalized("")
        for kind, name in names.items():
            federation.kubectl(cluster, "delete", kind, name, "--wait=false")
        # Witnesses no queue names, created after the deletions: once kfed has given them the finalizer, it has
        # seen the deletions (one watch per kind keeps their order) and decided to keep the named ones.
        _apply(federation, cluster, *objects("-witness"))
        wait_finalized("-witness")
        for kind, name in names.items():
            kept = get(federation, cluster, kind, name, namespace="")
            assert kept is not None, f"{kind} {name} is gone while ClusterQueue {DOOMED} names it"
            assert kept["metadata"].get("deletionTimestamp"), kept
            assert _has_finalizer(kept), kept
            federation.kubectl(cluster, "delete", kind, name + "-witness", "--wait=false")
        federation.kubectl(cluster, "delete", "clusterqueue", DOOMED, "--wait=false")
        for kind, name in names.items():
            for gone in (name, name + "-witness"):
                wait_for(
                    functools.partial(get, federation, cluster, kind, gone, namespace=""),
                    until=lambda obj: obj is None,
                    timeout=30,
                    what=f"{kind} {gone} gone once no ClusterQueue names it",
                )
    finally:
        federation.kubectl(cluster, "delete", "clusterqueue", DOOMED, "--ignore-not-found", "--wait=false", check=False)
        for kind, name in names.items():
            for leftover in (name, name + "-witness"):
                federation.kubectl(cluster, "delete", kind, leftover, "--ignore-not-found", "--wait=false", check=False)
