"""Sample Kueue queues for a local federation, as a user would write them (used by the demo and e2e tests).

Manager: a ResourceFlavor, a ClusterQueue whose admission check is kfed's MultiKueue check (the global quota),
and a LocalQueue. Each worker: the same flavor, a ClusterQueue sized to that worker, and a LocalQueue of the same
name, because a dispatched Workload keeps its ``queueName``.
"""

from __future__ import annotations

from typing import Any

from e2e.rig.controllers import ADMISSION_CHECK

FLAVOR = "default-flavor"
CLUSTER_QUEUE = "cluster-queue"
LOCAL_QUEUE = "user-queue"


def _quota(cpu: str, memory: str) -> list[dict[str, Any]]:
    return [
        {
            "coveredResources": ["cpu", "memory"],
            "flavors": [
                {
                    "name": FLAVOR,
                    "resources": [{"name": "cpu", "nominalQuota": cpu}, {"name": "memory", "nominalQuota": memory}],
                }
            ],
        }
    ]


def queue_objects(*, namespace: str, cpu: str, memory: str, manager: bool) -> list[dict[str, Any]]:
    cq_spec: dict[str, Any] = {"namespaceSelector": {}, "resourceGroups": _quota(cpu, memory)}
    if manager:
        cq_spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": ADMISSION_CHECK}]}
    return [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": FLAVOR}},
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": CLUSTER_QUEUE},
            "spec": cq_spec,
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": LOCAL_QUEUE, "namespace": namespace},
            "spec": {"clusterQueue": CLUSTER_QUEUE},
        },
    ]


def job_manifest(
    name: str,
    *,
    namespace: str,
    cpu: str,
    parallelism: int = 1,
    seconds: float = 5,
    queue: str = LOCAL_QUEUE,
    memory: str = "1Gi",
) -> dict[str, Any]:
    """A plain batch/v1 Job for kfed: the queue-name label is all a user adds."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": queue}},
        "spec": {
            "parallelism": parallelism,
            "completions": parallelism,
            "template": {
                "metadata": {"annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": f"{seconds}s"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.example/train:1",
                            "resources": {"requests": {"cpu": cpu, "memory": memory}},
                        }
                    ],
                },
            },
        },
    }
