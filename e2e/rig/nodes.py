"""The kwok nodes of a worker cluster, labelled with topology levels (block, rack, host)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

BLOCK_LABEL = "cloud.provider.com/topology-block"
RACK_LABEL = "cloud.provider.com/topology-rack"
HOSTNAME_LABEL = "kubernetes.io/hostname"
KWOK_NODE_LABEL = "kfed.io/kwok-node"
"""kwok plays kubelet for nodes with this label set to true (``e2e.rig.node_faults`` drops it for NotReady)."""
KWOK_TYPE_LABEL = "type"
"""Every rig node has ``type: kwok``; ResourceFlavors select nodes by it."""
GPU_RESOURCE = "nvidia.com/gpu"


@dataclass(frozen=True)
class NodeShape:
    """How many nodes a worker has, how they group into racks and blocks, and what each can hold."""

    count: int = 8
    hosts_per_rack: int = 2
    racks_per_block: int = 2
    cpu: str = "8"
    memory: str = "32Gi"
    pods: str = "110"
    gpus: str = "4"


def node_manifests(cluster: str, shape: NodeShape) -> list[dict[str, Any]]:
    """Node objects for ``cluster``: names ``<cluster>-b<block>-r<rack>-h<host>``, globally unique in a rig."""
    nodes: list[dict[str, Any]] = []
    allocatable = {"cpu": shape.cpu, "memory": shape.memory, "pods": shape.pods, GPU_RESOURCE: shape.gpus}
    per_block = shape.hosts_per_rack * shape.racks_per_block
    for index in range(shape.count):
        block, within = divmod(index, per_block)
        rack, host = divmod(within, shape.hosts_per_rack)
        name = f"{cluster}-b{block}-r{rack}-h{host}"
        nodes.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "labels": {
                        KWOK_NODE_LABEL: "true",
                        KWOK_TYPE_LABEL: "kwok",
                        HOSTNAME_LABEL: name,
                        BLOCK_LABEL: f"{cluster}-b{block}",
                        RACK_LABEL: f"{cluster}-b{block}-r{rack}",
                        "kubernetes.io/os": "linux",
                        "kubernetes.io/arch": "amd64",
                    },
                    "annotations": {"node.alpha.kubernetes.io/ttl": "0", "kwok.x-k8s.io/node": "fake"},
                },
                "spec": {},
                "status": {"allocatable": dict(allocatable), "capacity": dict(allocatable)},
            }
        )
    return nodes
