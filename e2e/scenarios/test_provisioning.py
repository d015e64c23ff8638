"""The ProvisioningRequest admission check on the workers (issue 11): the test plays the cluster autoscaler.

A TAS Job behind the check is admitted in two phases: quota first, then, once the request is Provisioned (the test
adds the nodes), the topology on the nodes that exist now; the agent is killed between the phases.

Every worker's ClusterQueue ``e2e-prov`` has a check of controller ``kueue.x-k8s.io/provisioning-request``; the
agent creates an ``autoscaling.x-k8s.io/v1`` ProvisioningRequest per attempt, and the test answers it by writing
``Provisioned`` or ``Failed`` into the request's status, as the autoscaler would.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.queues import FLAVOR, topology_object
from e2e.rig.controllers import ADMISSION_CHECK
from e2e.rig.federation import MANAGER, Federation
from e2e.rig.nodes import RACK_LABEL, NodeShape, node_manifests
from e2e.scenarios.helpers import condition, get, is_true, items, submit, wait_complete, workload_of
from e2e.scenarios.tas_support import bound_nodes, domains, submit_tas
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


def _active(fed: Federation, worker: str) -> str | None:
    found = condition(get(fed, worker, "admissionchecks.kueue.x-k8s.io", CHECK), "Active")
    return None if found is None else str(found.get("status"))


def _copy(fed: Federation, worker: str, name: str) -> dict[str, Any] | None:
    return get(fed, worker, "workloads.kueue.x-k8s.io", name)


def test_a_provisioned_request_admits_the_job_on_its_worker(federation: Federation, provisioned_queue: str) -> None:
    for worker_name in federation.workers:  # the agent keeps the check's Active condition, as Kueue does
        wait_for(
            functools.partial(_active, federation, worker_name),
            until=lambda status: status == "True",
            timeout=30,
            what=f"the check to be Active on {worker_name}",
        )
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
    assert get(federation, worker, "job", "prov-ok") is None, "the Job copy came before the worker admitted it"
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
    assert "count" not in retried["status"].get("requeueState", {}), "Kueue counts only waitForPodsReady requeues"
    evicted = condition(retried, "Evicted")  # True, or already False ("Previously: ...") once re-admitted
    assert evicted is not None
    assert "out of stock in zone a" in evicted["message"]
    events = wait_for(
        lambda: [
            e
            for e in items(federation, worker, "events.events.k8s.io")
            if e.get("reason") == "EvictedDueToAdmissionCheck" and e["regarding"]["name"] == name
        ],
        until=bool,
        timeout=30,
        what="the worker's eviction Event for the retry",
    )
    assert 'AdmissionCheck in Retry state: "e2e-prov"' in events[0]["note"]
    again_worker, second = _request(federation, name, 2)
    assert again_worker == worker, "the retry stays on the worker that holds the copy"
    wait_for(
        lambda: [r for _, r in _requests(federation) if r["metadata"]["name"] == first["metadata"]["name"]],
        until=lambda found: not found,
        timeout=30,
        what="the failed attempt's request to be deleted",
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


TAS_QUEUE = "e2e-prov-tas"
POOL_LABEL = "e2e.kfed.io/pool"


@pytest.fixture(scope="module")
def provisioned_tas_queue(federation: Federation, provisioned_queue: str) -> Iterator[str]:
    """On the first worker only (so the manager dispatches there): a TAS flavor over Topology ``e2e-prov`` whose
    nodes (label ``e2e.kfed.io/pool: provisioned``) do not exist until the test provisions them, behind the check."""
    worker = federation.workers[0]
    flavor: dict[str, Any] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": TAS_QUEUE},
        "spec": {},
    }
    manager_queue = _cluster_queue([ADMISSION_CHECK], "8")
    worker_queue = _cluster_queue([CHECK], "8")
    for queue in (manager_queue, worker_queue):
        queue["metadata"]["name"] = TAS_QUEUE
        queue["spec"]["resourceGroups"][0]["flavors"][0]["name"] = TAS_QUEUE
    local_queue = {**LOCAL_QUEUE, "metadata": {"name": TAS_QUEUE, "namespace": "default"}}
    local_queue["spec"] = {"clusterQueue": TAS_QUEUE}
    topology = {**topology_object("e2e-prov")}
    worker_flavor = {**flavor, "spec": {"nodeLabels": {POOL_LABEL: "provisioned"}, "topologyName": "e2e-prov"}}
    _apply(federation, MANAGER, flavor, manager_queue, local_queue)
    _apply(federation, worker, topology, worker_flavor, worker_queue, local_queue)
    try:
        yield TAS_QUEUE
    finally:
        for cluster in (MANAGER, worker):
            federation.kubectl(cluster, "delete", "localqueue", TAS_QUEUE, "-n", "default", "--wait=false", check=False)
            federation.kubectl(cluster, "delete", "clusterqueue", TAS_QUEUE, "--wait=false", check=False)
            federation.kubectl(cluster, "delete", "resourceflavor", TAS_QUEUE, "--wait=false", check=False)
        federation.kubectl(worker, "delete", "topology", "e2e-prov", "--wait=false", check=False)
        federation.kubectl(worker, "delete", "nodes", "-l", f"{POOL_LABEL}=provisioned", "--wait=false", check=False)


def _provisioned_nodes() -> list[dict[str, Any]]:
    """What the autoscaler brings: 2 racks of 2 hosts with 2 cpu each, labelled for the flavor."""
    nodes = node_manifests("e2eprov", NodeShape(count=4, hosts_per_rack=2, racks_per_block=2, cpu="2"))
    for node in nodes:
        node["metadata"]["labels"][POOL_LABEL] = "provisioned"
    return nodes


def test_a_tas_job_behind_the_check_is_admitted_in_two_phases_across_an_agent_restart(
    federation: Federation, provisioned_tas_queue: str
) -> None:
    worker = federation.workers[0]
    submit_tas(federation, "prov-tas", pods=4, cpu="1", queue=provisioned_tas_queue, required=RACK_LABEL, seconds=1)
    manager_wl = wait_for(
        lambda: workload_of(federation, "prov-tas"), until=bool, timeout=30, what="the Workload of prov-tas"
    )
    assert manager_wl is not None
    name = manager_wl["metadata"]["name"]
    where, request = _request(federation, name, 1)
    assert where == worker
    # Phase 1: quota only; the topology waits for the nodes the request brings.
    copy = _copy(federation, worker, name)
    assert is_true(copy, "QuotaReserved")
    assert not is_true(copy, "Admitted")
    assignment = (copy or {})["status"]["admission"]["podSetAssignments"][0]
    assert assignment.get("delayedTopologyRequest") == "Pending"
    assert "topologyAssignment" not in assignment

    # The agent restarts between the phases; the autoscaler answers meanwhile.
    with federation.stopped_controller(f"kfed-agent-{worker}", kill=True):
        _apply(federation, worker, *_provisioned_nodes())
        _answer(federation, worker, request, "Provisioned", "4 nodes in 2 racks")

    # Phase 2: the topology is computed on the new nodes, in one rack.
    admitted = wait_for(
        lambda: _copy(federation, worker, name),
        until=lambda w: is_true(w, "Admitted"),
        timeout=90,
        what="the copy to be admitted after the second phase",
    )
    assignment = (admitted or {})["status"]["admission"]["podSetAssignments"][0]
    assert assignment["delayedTopologyRequest"] == "Ready"
    assert assignment["topologyAssignment"]["levels"]
    nodes = wait_for(
        lambda: bound_nodes(items(federation, worker, "pods", "-l", "job-name=prov-tas")),
        until=lambda found: len(found) == 4,
        timeout=60,
        what="the 4 pods of prov-tas to be bound",
    )
    assert set(nodes.values()) <= {n["metadata"]["name"] for n in _provisioned_nodes()}, nodes
    assert len(domains(federation, worker, list(nodes.values()), RACK_LABEL)) == 1, nodes
    wait_complete(federation, "prov-tas", timeout=90)
    names = [r["metadata"]["name"] for _, r in _requests(federation) if r["metadata"]["name"].startswith(name)]
    assert names in ([f"{name}-{CHECK}-1"], []), f"one request for the one attempt: {names}"
