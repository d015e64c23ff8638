"""Sample Kueue queues for a local federation, as a user would write them (used by the demo and e2e tests).

Two sets: the plain ``user-queue`` below, and a topology-aware ``tas-queue`` (a Topology of block, rack and host
on every worker, and a TAS ResourceFlavor over the kwok nodes) for scenarios of topology-aware scheduling.

Manager: a ResourceFlavor, a ClusterQueue whose admission check is kfed's MultiKueue check (the global quota),
and a LocalQueue. Each worker: the same flavor, a ClusterQueue sized to that worker, and a LocalQueue of the same
name, because a dispatched Workload keeps its ``queueName``.

``multikueue_check_objects`` is the one builder of a MultiKueueConfig with its MultiKueue AdmissionCheck, for the
rig's own check (``e2e.rig.controllers``) and for scenarios that need a check of their own.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from e2e.rig.controllers import ADMISSION_CHECK
from e2e.rig.nodes import BLOCK_LABEL, HOSTNAME_LABEL, KWOK_TYPE_LABEL, RACK_LABEL, NodeShape
from federation.quantity import QuantityFormat, format_quantity, parse_quantity

if TYPE_CHECKING:
    from e2e.rig.federation import Federation

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


def named_queue_objects(
    name: str, *, cpu: str, manager: bool, namespace: str = "default", preemption: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """A ClusterQueue and a LocalQueue both called ``name`` over the sample flavor, for a scenario that needs a
    queue of its own (on the manager with kfed's MultiKueue check); apply it on the manager and on every worker."""
    spec: dict[str, Any] = {"namespaceSelector": {}, "resourceGroups": _quota(cpu, "64Gi")}
    if preemption is not None:
        spec["preemption"] = preemption
    if manager:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": ADMISSION_CHECK}]}
    return [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec},
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterQueue": name},
        },
    ]


def workload_manifest(
    name: str,
    *,
    queue: str,
    namespace: str = "default",
    cpu: str = "1",
    labels: dict[str, str] | None = None,
    owner: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A Workload made by hand in LocalQueue ``queue``: one pod of ``cpu``, with ``labels``, owned (as controller)
    by ``owner`` if given."""
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": namespace,
            **({"labels": dict(labels)} if labels else {}),
            **({"ownerReferences": [{**owner, "controller": True}]} if owner else {}),
        },
        "spec": {
            "queueName": queue,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}],
                        }
                    },
                }
            ],
        },
    }


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


def multikueue_check_objects(
    name: str, clusters: list[str], *, check_name: str | None = None, quota_management: str | None = None
) -> list[dict[str, Any]]:
    """A MultiKueueConfig ``name`` listing ``clusters`` (with ``quotaManagement`` when given) and an AdmissionCheck
    ``check_name`` (default ``name``) with controllerName kueue.x-k8s.io/multikueue whose parameters point at it."""
    config_spec: dict[str, Any] = {"clusters": list(clusters)}
    if quota_management is not None:
        config_spec["quotaManagement"] = quota_management
    return [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "MultiKueueConfig",
            "metadata": {"name": name},
            "spec": config_spec,
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "AdmissionCheck",
            "metadata": {"name": name if check_name is None else check_name},
            "spec": {
                "controllerName": "kueue.x-k8s.io/multikueue",
                "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": name},
            },
        },
    ]


def routed_queue_objects(name: str, workers: list[str], *, cpu: str) -> list[dict[str, Any]]:
    """For the manager: a MultiKueueConfig ``name`` that lists only ``workers``, an AdmissionCheck ``name`` of the
    MultiKueue controller over it, and a ClusterQueue and LocalQueue ``name`` of ``cpu`` behind that check (the
    workers need ``named_queue_objects(name, ...)`` of their own)."""
    queues = named_queue_objects(name, cpu=cpu, manager=False)
    queues[0]["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": name}]}
    return [*multikueue_check_objects(name, workers), *queues]


def worker_quota(shape: NodeShape) -> tuple[str, str]:
    """(cpu, memory) of a worker's ClusterQueue: all of its nodes' allocatable."""
    cpu = parse_quantity(shape.cpu) * shape.count
    memory = parse_quantity(shape.memory) * shape.count
    return format_quantity(cpu), format_quantity(memory, QuantityFormat.BINARY_SI)


def apply_sample_queues(fed: Federation, *, namespace: str = "default") -> None:
    """Sample queues on every cluster: each worker's sized to its nodes, the manager's to their sum."""
    total_cpu = total_memory = 0
    for worker in fed.workers:
        cpu, memory = worker_quota(fed.spec.shape(worker))
        total_cpu += parse_quantity(cpu)
        total_memory += parse_quantity(memory)
        items = queue_objects(namespace=namespace, cpu=cpu, memory=memory, manager=False)
        fed.kubectl(worker, "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    items = queue_objects(
        namespace=namespace,
        cpu=format_quantity(total_cpu),
        memory=format_quantity(total_memory, QuantityFormat.BINARY_SI),
        manager=True,
    )
    fed.kubectl("manager", "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))


TOPOLOGY = "default"
TAS_FLAVOR = "tas-flavor"
TAS_QUEUE = "tas-queue"
TOPOLOGY_LEVELS = (BLOCK_LABEL, RACK_LABEL, HOSTNAME_LABEL)


def topology_object(name: str = TOPOLOGY) -> dict[str, Any]:
    """Kueue's Topology over the rig's node labels: block, rack, host."""
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Topology",
        "metadata": {"name": name},
        "spec": {"levels": [{"nodeLabel": label} for label in TOPOLOGY_LEVELS]},
    }


def tas_queue_objects(*, namespace: str, cpu: str, memory: str, manager: bool) -> list[dict[str, Any]]:
    """A TAS ResourceFlavor (on workers: ``topologyName`` over every kwok node) with its ClusterQueue and LocalQueue,
    all called ``tas-*``; the manager gets the same names without a Topology (it has no nodes) and kfed's check."""
    flavor: dict[str, Any] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": TAS_FLAVOR},
        "spec": {},
    }
    objects: list[dict[str, Any]] = []
    if not manager:
        flavor["spec"] = {"nodeLabels": {KWOK_TYPE_LABEL: "kwok"}, "topologyName": TOPOLOGY}
        objects.append(topology_object())
    cq_spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory"],
                "flavors": [
                    {
                        "name": TAS_FLAVOR,
                        "resources": [
                            {"name": "cpu", "nominalQuota": cpu},
                            {"name": "memory", "nominalQuota": memory},
                        ],
                    }
                ],
            }
        ],
    }
    if manager:
        cq_spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": ADMISSION_CHECK}]}
    objects += [
        flavor,
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": TAS_QUEUE},
            "spec": cq_spec,
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": TAS_QUEUE, "namespace": namespace},
            "spec": {"clusterQueue": TAS_QUEUE},
        },
    ]
    return objects


def apply_tas_queues(fed: Federation, *, namespace: str = "default") -> None:
    """The TAS queues on every cluster: each worker's quota is all of its nodes, the manager's their sum."""
    total_cpu = total_memory = 0
    for worker in fed.workers:
        cpu, memory = worker_quota(fed.spec.shape(worker))
        total_cpu += parse_quantity(cpu)
        total_memory += parse_quantity(memory)
        items = tas_queue_objects(namespace=namespace, cpu=cpu, memory=memory, manager=False)
        fed.kubectl(worker, "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    items = tas_queue_objects(
        namespace=namespace,
        cpu=format_quantity(total_cpu),
        memory=format_quantity(total_memory, QuantityFormat.BINARY_SI),
        manager=True,
    )
    fed.kubectl("manager", "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
