"""Small builders shared by the topology tests."""

from __future__ import annotations

from federation.api.labels import HOSTNAME_LABEL
from federation.topology import NodeSpec, Placement, PodSetRequest, Taint, TopologyRequest, TopologySnapshot

BLOCK = "cloud.provider.com/topology-block"
RACK = "cloud.provider.com/topology-rack"
LEVELS = (BLOCK, RACK, HOSTNAME_LABEL)


def node(
    name: str,
    block: str,
    rack: str,
    *,
    cpu: int = 8000,
    pods: int = 110,
    gpu: int = 0,
    taints: tuple[Taint, ...] = (),
    extra_labels: dict[str, str] | None = None,
) -> NodeSpec:
    allocatable = {"cpu": cpu, "memory": 32 << 30, "pods": pods}
    if gpu:
        allocatable["nvidia.com/gpu"] = gpu
    labels = {BLOCK: block, RACK: rack, HOSTNAME_LABEL: name, **(extra_labels or {})}
    return NodeSpec(name=name, labels=labels, allocatable=allocatable, taints=taints)


def grid(blocks: int, racks: int, hosts: int, *, cpu: int = 8000, pods: int = 110) -> list[NodeSpec]:
    return [
        node(f"b{b}-r{r}-h{h}", f"b{b}", f"b{b}-r{r}", cpu=cpu, pods=pods)
        for b in range(blocks)
        for r in range(racks)
        for h in range(hosts)
    ]


def snapshot_of(nodes: list[NodeSpec], levels: tuple[str, ...] = LEVELS) -> TopologySnapshot:
    snapshot = TopologySnapshot(levels)
    for spec in nodes:
        snapshot.upsert_node(spec)
    return snapshot


def request(count: int, cpu: int = 1000, **topology: object) -> PodSetRequest:
    return PodSetRequest(count=count, requests={"cpu": cpu}, topology=TopologyRequest(**topology))  # type: ignore[arg-type]


def racks_of(placement: Placement) -> set[str]:
    return {entry.values[1] for entry in placement.node_pods}


def blocks_of(placement: Placement) -> set[str]:
    return {entry.values[0] for entry in placement.node_pods}
