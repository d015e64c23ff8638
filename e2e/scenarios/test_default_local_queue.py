"""A Job without the queue-name label, Kueue's way: in a namespace that has a LocalQueue named ``default`` and
matches ``managedJobsNamespaceSelector`` (Kueue's default: all but kube-system and kfed's own namespace), the Job
admission policy gives it that LocalQueue and it runs through the federation like any labelled Job; in a namespace
the selector leaves out it is created untouched.

kfed-manager lists the namespaces in the ``kfed-local-queues`` ConfigMap (key: the bare namespace name), which the
policy reads through ``paramRef``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.queues import CLUSTER_QUEUE, job_manifest
from e2e.rig.federation import MANAGER, Federation
from e2e.scenarios.helpers import get, is_true
from e2e.waiting import wait_for

pytestmark = pytest.mark.e2e

SELECTED = "team-defaulted"
LEFT_OUT = "kube-system"


def _apply(fed: Federation, cluster: str, *objects: dict[str, Any]) -> None:
    fed.kubectl(cluster, "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))


def _default_queue(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": "default", "namespace": namespace},
        "spec": {"clusterQueue": CLUSTER_QUEUE},
    }


@pytest.fixture
def default_queues(federation: Federation) -> Iterator[None]:
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SELECTED}}
    for cluster in (MANAGER, *federation.workers):
        _apply(federation, cluster, namespace, _default_queue(SELECTED))
    _apply(federation, MANAGER, _default_queue(LEFT_OUT))
    try:
        yield
    finally:
        for cluster in (MANAGER, *federation.workers):
            federation.kubectl(cluster, "delete", "namespace", SELECTED, "--wait=false", check=False)
        federation.kubectl(MANAGER, "delete", "job", "left-alone", "-n", LEFT_OUT, check=False)
        federation.kubectl(MANAGER, "delete", "localqueue", "default", "-n", LEFT_OUT, check=False)


def _unlabelled(name: str, namespace: str) -> dict[str, Any]:
    manifest = job_manifest(name, namespace=namespace, cpu="1", seconds=2)
    del manifest["metadata"]["labels"]
    return manifest


def test_a_job_without_queue_name_gets_the_default_local_queue_in_selected_namespaces_only(
    federation: Federation, default_queues: None
) -> None:
    data = wait_for(
        lambda: (get(federation, MANAGER, "configmap", "kfed-local-queues", namespace="kfed-system") or {}).get("data"),
        until=lambda data: (data or {}).get(SELECTED) == "default",
        timeout=30,
        what=f"kfed-manager to list namespace {SELECTED} for LocalQueue defaulting in kfed-local-queues",
    )
    assert LEFT_OUT not in (data or {}), "kube-system is outside Kueue's default managedJobsNamespaceSelector"

    created = json.loads(
        federation.kubectl(
            MANAGER, "create", "-o", "json", "-f", "-", input=json.dumps(_unlabelled("defaulted", SELECTED))
        ).stdout
    )
    assert created["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "default"
    assert created["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"
    assert created["spec"]["suspend"] is True
    job = wait_for(
        lambda: get(federation, MANAGER, "job", "defaulted", namespace=SELECTED),
        until=lambda j: is_true(j, "Complete") or is_true(j, "Failed"),
        timeout=60,
        what=f"the defaulted Job {SELECTED}/defaulted to finish through the federation",
    )
    assert is_true(job, "Complete"), (job or {}).get("status")
    workloads = json.loads(
        federation.kubectl(MANAGER, "get", "workloads.kueue.x-k8s.io", "-n", SELECTED, "-o", "json").stdout
    )["items"]
    [workload] = [w for w in workloads if w["metadata"]["ownerReferences"][0]["name"] == "defaulted"]
    assert workload["spec"]["queueName"] == "default"
    assert workload["status"].get("clusterName") in federation.workers, "it ran on a worker"

    left = json.loads(
        federation.kubectl(
            MANAGER, "create", "-o", "json", "-f", "-", input=json.dumps(_unlabelled("left-alone", LEFT_OUT))
        ).stdout
    )
    assert "kueue.x-k8s.io/queue-name" not in (left["metadata"].get("labels") or {})
    assert "managedBy" not in left["spec"]
    assert left["spec"].get("suspend") in (None, False)
