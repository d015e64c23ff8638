"""The ProvisioningRequest admission check on the workers (issue 11): the test plays the cluster autoscaler.

Every worker's ClusterQueue ``e2e-prov`` has a check of controller ``kueue.x-k8s.io/provisioning-request``; the
agent creates an ``autoscaling.x-k8s.io/v1`` ProvisioningRequest per attempt, and the test answers it by writing
``Provisioned`` or ``Failed`` into the request's status, as the autoscaler would.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.queues import FLAVOR
from e2e.rig.controllers import ADMISSION_CHECK
from e2e.rig.federation import MANAGER, Federation
from e2e.scenarios.helpers import condition, get, is_true, items, submit, wait_complete, workload_of
from e2e.waiting import wait_for

pytestmark = pytest.mark.e2e

CHECK = "e2e-prov"
QUEUE = "e2e-prov"
CLASS = "check-capacity.autoscaling.x-k8s.io"


def _apply(fed: Federation, cluster: str, *objects: dict[str, Any]) -> None:
    fed.kubectl(cluster, "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))


def _cluster_queue(checks: list[str], cpu: str) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": QUEUE},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory"],
                    "flavors": [
                        {
                            "name": FLAVOR,
                            "resources": [
                                {"name": "cpu", "nominalQuota": cpu},
                                {"name": "memory", "nominalQuota": "64Gi"},
                            ],
                        }
                    ],
                }
            ],
            "admissionChecksStrategy": {"admissionChecks": [{"name": name} for name in checks]},
        },
    }


LOCAL_QUEUE = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "LocalQueue",
    "metadata": {"name": QUEUE, "namespace": "default"},
    "spec": {"clusterQueue": QUEUE},
}


@pytest.fixture(scope="module")
def provisioned_queue(federation: Federation) -> Iterator[str]:
    """Manager: ClusterQueue ``e2e-prov`` with kfed's MultiKueue check; workers: the same name behind the
    ProvisioningRequest check (one retry, backoff 1 s then 2 s)."""
    check = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "AdmissionCheck",
        "metadata": {"name": CHECK},
        "spec": {
            "controllerName": "kueue.x-k8s.io/provisioning-request",
            "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": CHECK},
        },
    }
    config = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ProvisioningRequestConfig",
        "metadata": {"name": CHECK},
        "spec": {
            "provisioningClassName": CLASS,
            "parameters": {"ValidUntilSeconds": "60"},
            "retryStrategy": {"backoffLimitCount": 1, "backoffBaseSeconds": 1, "backoffMaxSeconds": 2},
        },
    }
    _apply(federation, MANAGER, _cluster_queue([ADMISSION_CHECK], "8"), LOCAL_QUEUE)
    for worker in federation.workers:
        _apply(federation, worker, check, config, _cluster_queue([CHECK], "8"), LOCAL_QUEUE)
    try:
        yield QUEUE
    finally:
        for cluster in (MANAGER, *federation.workers):
            federation.kubectl(cluster, "delete", "localqueue", QUEUE, "-n", "default", "--wait=false", check=False)
            federation.kubectl(cluster, "delete", "clusterqueue", QUEUE, "--wait=false", check=False)
        for worker in federation.workers:
            federation.kubectl(worker, "delete", "admissioncheck", CHECK, "--wait=false", check=False)
            federation.kubectl(worker, "delete", "provisioningrequestconfig", CHECK, "--wait=false", check=False)


def _requests(fed: Federation) -> list[tuple[str, dict[str, Any]]]:
    return [
        (worker, r) for worker in fed.workers for r in items(fed, worker, "provisioningrequests.autoscaling.x-k8s.io")
    ]


def _request(fed: Federation, workload: str, attempt: int) -> tuple[str, dict[str, Any]]:
    name = f"{workload}-{CHECK}-{attempt}"
    found = wait_for(
        lambda: [(w, r) for w, r in _requests(fed) if r["metadata"]["name"] == name],
        until=bool,
        timeout=60,
        what=f"ProvisioningRequest {name} on a worker",
    )
    return found[0]


def _answer(fed: Federation, worker: str, request: dict[str, Any], condition_type: str, message: str) -> None:
    """What the autoscaler writes: the condition, True, with its reason and message."""
    status = {
        "conditions": [
            {
                "type": condition_type,
                "status": "True",
                "reason": condition_type,
                "message": message,
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ]
    }
    fed.kubectl(
        worker,
        "patch",
        "provisioningrequests.autoscaling.x-k8s.io",
        request["metadata"]["name"],
        "-n",
        "default",
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": status}),
    )


def _checks(workload: dict[str, Any] | None) -> list[dict[str, Any]]:
    return list(((workload or {}).get("status") or {}).get("admissionChecks") or ())


def _copy(fed: Federation, worker: str, name: str) -> dict[str, Any] | None:
    return get(fed, worker, "workloads.kueue.x-k8s.io", name)


def test_a_provisioned_request_admits_the_job_on_its_worker(federation: Federation, provisioned_queue: str) -> None:
    submit(federation, "prov-ok", cpu="1", seconds=1, queue=provisioned_queue)
    manager_wl = wait_for(
        lambda: workload_of(federation, "prov-ok"), until=bool, timeout=30, what="the Workload of prov-ok"
    )
    assert manager_wl is not None
    name = manager_wl["metadata"]["name"]
    worker, request = _request(federation, name, 1)
    assert request["spec"]["provisioningClassName"] == CLASS
    assert request["spec"]["parameters"] == {"ValidUntilSeconds": "60"}
    template = request["spec"]["podSets"][0]["podTemplateRef"]["name"]
    assert template == f"ppt-{name}-{CHECK}-1-main"
    assert get(federation, worker, "podtemplates", template) is not None
    copy = _copy(federation, worker, name)
    assert is_true(copy, "QuotaReserved")
    assert not is_true(copy, "Admitted"), "admitted before its capacity was provisioned"
    assert (get(federation, worker, "job", "prov-ok") or {})["spec"]["suspend"] is True
    shown = wait_for(
        lambda: workload_of(federation, "prov-ok"),
        until=lambda w: any(f'"{worker}"' in c.get("message", "") for c in _checks(w)),
        timeout=30,
        what="the manager to show the worker's check",
    )
    message = next(c["message"] for c in _checks(shown) if c["name"] == ADMISSION_CHECK)
    assert message.startswith(f'admission checks on "{worker}": {CHECK} Pending'), message
    assert not is_true(shown, "Admitted")

    _answer(federation, worker, request, "Provisioned", "capacity is there")
    wait_complete(federation, "prov-ok", timeout=90)
    copy = _copy(federation, worker, name) or {}
    done = workload_of(federation, "prov-ok")
    assert is_true(done, "Admitted")
    job = get(federation, worker, "job", "prov-ok")
    if job is not None:  # the pods consume the booked capacity (Kueue's podSetUpdates)
        annotations = job["spec"]["template"]["metadata"].get("annotations") or {}
        assert annotations.get("autoscaling.x-k8s.io/consume-provisioning-request") == f"{name}-{CHECK}-1"


def test_a_failed_request_retries_with_backoff_then_rejects_on_the_manager(
    federation: Federation, provisioned_queue: str
) -> None:
    submit(federation, "prov-fail", cpu="1", seconds=1, queue=provisioned_queue)
    manager_wl = wait_for(
        lambda: workload_of(federation, "prov-fail"), until=bool, timeout=30, what="the Workload of prov-fail"
    )
    assert manager_wl is not None
    name = manager_wl["metadata"]["name"]
    worker, first = _request(federation, name, 1)
    _answer(federation, worker, first, "Failed", "out of stock in zone a")
    # The worker evicts its copy and requeues it after the backoff; the manager keeps it there (no re-dispatch).
    retried = wait_for(
        lambda: _copy(federation, worker, name),
        until=lambda w: any(c.get("retryCount") == 1 for c in _checks(w)),
        timeout=30,
        what="the copy's check to count one retry",
    )
    assert retried is not None
    assert retried["status"]["requeueState"]["count"] == 1
    evicted = condition(retried, "Evicted")
    assert evicted is not None
    assert evicted["reason"] == "AdmissionCheck"
    assert "out of stock in zone a" in evicted["message"]
    again_worker, second = _request(federation, name, 2)
    assert again_worker == worker, "the retry stays on the worker that holds the copy"
    assert not any(r["metadata"]["name"] == first["metadata"]["name"] for _, r in _requests(federation)), (
        "the failed attempt's request is deleted"
    )
    _answer(federation, worker, second, "Failed", "out of stock in zone b")

    rejected = wait_for(
        lambda: workload_of(federation, "prov-fail"),
        until=lambda w: (w or {}).get("spec", {}).get("active") is False and not is_true(w, "QuotaReserved"),
        timeout=60,
        what="prov-fail to be deactivated on the manager",
    )
    assert rejected is not None
    evicted = condition(rejected, "Evicted")
    assert evicted is not None
    assert evicted["reason"] == "DeactivatedDueToAdmissionCheck"
    assert CHECK in evicted["message"]
    assert f'"{worker}"' in evicted["message"]
    events = wait_for(
        lambda: [
            e
            for e in items(federation, MANAGER, "events.events.k8s.io")
            if e.get("reason") == "AdmissionCheckRejected" and e["regarding"]["name"] == name
        ],
        until=bool,
        timeout=30,
        what="an AdmissionCheckRejected event on the manager Workload",
    )
    assert "out of stock in zone b" in events[0]["note"]
    assert (get(federation, MANAGER, "job", "prov-fail") or {})["spec"]["suspend"] is True
