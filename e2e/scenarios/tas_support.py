"""A federation for topology-aware scenarios, and helpers to submit TAS Jobs and read where their pods run.

The rig: worker-1 has one block of 2 racks of 2 hosts, worker-2 2 blocks of 2 racks of 4 hosts (8 cpu, 110 pods
each). ``tas-queue`` (every cluster) and ``tas-w2`` (manager and worker-2 only, so its Jobs always run there)
both use the workers' TAS flavor over Topology ``default`` (block, rack, host). The agents judge a NotReady node
failed after ``NODE_FAILURE_DELAY`` seconds.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from e2e.queues import TAS_FLAVOR, apply_tas_queues
from e2e.rig.federation import MANAGER, Federation, FederationSpec, running
from e2e.rig.nodes import BLOCK_LABEL, RACK_LABEL, NodeShape
from e2e.scenarios.helpers import DISPATCH_TIMEOUT, get, items
from e2e.toolchain import ensure_built
from e2e.waiting import wait_for

Obj = dict[str, Any]
T = TypeVar("T")

NODE_FAILURE_DELAY = 8.0
W2_QUEUE = "tas-w2"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"


def tas_federation() -> Iterator[Federation]:
    bins = ensure_built()
    spec = FederationSpec(
        workers=2,
        node_shapes={
            "worker-1": NodeShape(count=4, hosts_per_rack=2, racks_per_block=2),
            "worker-2": NodeShape(count=16, hosts_per_rack=4, racks_per_block=2),
        },
        job_seconds=3,
        controllers=True,
        dispatch_timeout=DISPATCH_TIMEOUT,
        agent_args=("--node-failure-delay", str(NODE_FAILURE_DELAY)),
    )
    with tempfile.TemporaryDirectory(prefix="kfed-tas-") as tmp, running(Path(tmp), bins, spec) as fed:
        apply_tas_queues(fed)
        for cluster, cpu in ((MANAGER, "128"), ("worker-2", "128")):
            docs = _w2_queue(cpu=cpu, manager=cluster == MANAGER)
            fed.kubectl(
                cluster, "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": docs})
            )
        yield fed


def _w2_queue(*, cpu: str, manager: bool) -> list[Obj]:
    from e2e.rig.controllers import ADMISSION_CHECK

    spec: Obj = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory"],
                "flavors": [
                    {
                        "name": TAS_FLAVOR,
                        "resources": [{"name": "cpu", "nominalQuota": cpu}, {"name": "memory", "nominalQuota": "1Ti"}],
                    }
                ],
            }
        ],
    }
    if manager:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": ADMISSION_CHECK}]}
    return [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": W2_QUEUE}, "spec": spec},
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": W2_QUEUE, "namespace": "default"},
            "spec": {"clusterQueue": W2_QUEUE},
        },
    ]


def submit_tas(
    fed: Federation,
    name: str,
    *,
    pods: int,
    cpu: str,
    queue: str = W2_QUEUE,
    required: str | None = None,
    preferred: str | None = None,
    seconds: float = 600,
    tolerations: list[Obj] | None = None,
    backoff_limit: int = 50,
    job_annotations: dict[str, str] | None = None,
    runtime_class: str | None = None,
    completions: int | None = None,
) -> None:
    """A TAS Job of ``pods`` pods at once (``completions``: in all, default as many), each done after ``seconds``."""
    annotations = {"pod-complete.stage.kwok.x-k8s.io/delay": f"{seconds:g}s"}
    if required:
        annotations[REQUIRED] = required
    if preferred:
        annotations[PREFERRED] = preferred
    pod_spec: Obj = {
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "main",
                "image": "registry.example/train:1",
                "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}},
            }
        ],
    }
    if tolerations:
        pod_spec["tolerations"] = tolerations
    if runtime_class:
        pod_spec["runtimeClassName"] = runtime_class
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"kueue.x-k8s.io/queue-name": queue},
            "annotations": dict(job_annotations or {}),
        },
        "spec": {
            "parallelism": pods,
            "completions": pods if completions is None else completions,
            "backoffLimit": backoff_limit,
            "template": {"metadata": {"annotations": annotations}, "spec": pod_spec},
        },
    }
    fed.kubectl(MANAGER, "create", "-f", "-", input=json.dumps(job))


def delete_job(fed: Federation, name: str) -> None:
    """Delete the Job and wait until its pods are gone from every worker: a pod still terminating holds its node's
    room, and the next test's placement (or its node-failure repair, which then finds no room in the rack and
    evicts the whole workload) must not depend on how fast the last test's pods went."""
    fed.kubectl(MANAGER, "delete", "job", name, "-n", "default", "--wait=false", "--ignore-not-found")
    wait_for(
        lambda: {worker: len(items(fed, worker, "pods", "-l", f"job-name={name}")) for worker in fed.workers},
        until=lambda left: not any(left.values()),
        timeout=60,
        what=f"the pods of deleted Job {name} gone from the workers",
    )


def live_pods(fed: Federation, worker: str, job: str) -> list[Obj]:
    """The Job's pods on ``worker`` that are not terminal and not being deleted."""
    return [
        pod
        for pod in items(fed, worker, "pods", "-l", f"job-name={job}")
        if pod["status"].get("phase") not in ("Succeeded", "Failed") and not pod["metadata"].get("deletionTimestamp")
    ]


def bound_nodes(pods: list[Obj]) -> dict[str, str]:
    """pod name → node, for bound pods."""
    return {pod["metadata"]["name"]: pod["spec"]["nodeName"] for pod in pods if pod["spec"].get("nodeName")}


def all_running(fed: Federation, worker: str, job: str, count: int) -> dict[str, str] | None:
    """pod → node once exactly ``count`` live pods are bound and running, else None."""
    pods = live_pods(fed, worker, job)
    if len(pods) != count or any(pod["status"].get("phase") != "Running" for pod in pods):
        return None
    nodes = bound_nodes(pods)
    return nodes if len(nodes) == count else None


def node_labels(fed: Federation, worker: str) -> dict[str, dict[str, str]]:
    return {node["metadata"]["name"]: node["metadata"]["labels"] for node in items(fed, worker, "nodes")}


def domains(fed: Federation, worker: str, nodes: list[str], label: str) -> set[str]:
    labels = node_labels(fed, worker)
    return {labels[node][label] for node in nodes if node in labels}


def holds_for(probe: Callable[[], T], *, expected: T, seconds: float, what: str, interval: float = 0.5) -> None:
    """Sample ``probe`` for ``seconds`` and fail at the first sample that differs from ``expected`` (a steady state:
    the opposite of ``wait_for``)."""
    deadline = time.monotonic() + seconds
    while True:
        seen = probe()
        assert seen == expected, f"{what}: saw {seen!r}, expected {expected!r}"
        if time.monotonic() > deadline:
            return
        time.sleep(interval)


def remote_workload(fed: Federation, worker: str, job: str) -> Obj | None:
    """The Workload copy of ``job`` on ``worker`` (through the Job copy's prebuilt-workload label)."""
    job_obj = get(fed, worker, "job", job)
    if job_obj is None:
        return None
    name = job_obj["metadata"].get("labels", {}).get("kueue.x-k8s.io/prebuilt-workload-name")
    return get(fed, worker, "workloads.kueue.x-k8s.io", name) if name else None


__all__ = ["BLOCK_LABEL", "RACK_LABEL"]
