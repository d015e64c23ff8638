"""The agent's TAS admission path in memory: 10,000 and 40,000 raw Nodes, a queue of 1,000 TAS workloads.

What the agent does per pass, without the API: ``TopologyIndex.configure`` builds the flavor's snapshot from raw
Node JSON (as listed by its watch), then every pending workload's admission goes through ``TasPlacer.veto``
(parse the pod set from the raw Workload, place, book the placement, encode the ``topologyAssignment``) --
the same objects the reconciler calls. Workloads are mixed (required rack, preferred block, no annotation =
implicit TAS; 1-64 pods of four shapes). Printed: the time to build the snapshot, p50/p99 per admission, how
many were placed, and the memory the index holds (tracemalloc) once the queue is through.
"""

from __future__ import annotations

import json
import random
import statistics
import time
import tracemalloc
from typing import Any

from federation.admission.decisions import Admit, Assignment, PodSetAssignment
from federation.admission.model import Workload
from worker_agent.decisions.tas_admission import TasPlacer
from worker_agent.decisions.tas_objects import FlavorTopology
from worker_agent.tas_index import TopologyIndex

BLOCK = "cloud.provider.com/topology-block"
RACK = "cloud.provider.com/topology-rack"
HOST = "kubernetes.io/hostname"
SIZES = [(20, 25, 20), (40, 25, 40)]  # 10,000 / 40,000 nodes
WORKLOADS = 1000
SHAPES = [("1", "2Gi"), ("4", "16Gi"), ("8", "64Gi"), ("32", "256Gi")]


def raw_nodes(blocks: int, racks: int, hosts: int) -> list[dict[str, Any]]:
    nodes = []
    for b in range(blocks):
        for r in range(racks):
            for h in range(hosts):
                name = f"node-b{b:02d}-r{r:02d}-h{h:02d}"
                nodes.append(
                    {
                        "metadata": {
                            "name": name,
                            "labels": {"pool": "tas", BLOCK: f"b{b:02d}", RACK: f"b{b:02d}-r{r:02d}", HOST: name},
                        },
                        "spec": {},
                        "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110"}},
                    }
                )
    return nodes


def raw_workload(index: int, rng: random.Random) -> dict[str, Any]:
    cpu, memory = rng.choice(SHAPES)
    mode = rng.choice(["required", "preferred", "implicit"])
    annotations = {}
    if mode == "required":
        annotations["kueue.x-k8s.io/podset-required-topology"] = RACK
    elif mode == "preferred":
        annotations["kueue.x-k8s.io/podset-preferred-topology"] = BLOCK
    count = rng.choice([1, 2, 4, 8, 16, 32, 64])
    template = {
        "metadata": {"annotations": annotations},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]},
    }
    return {
        "metadata": {"namespace": "ns", "name": f"wl-{index}"},
        "spec": {"podSets": [{"name": "main", "count": count, "template": template}]},
    }


def run(size: tuple[int, int, int]) -> dict[str, Any]:
    rng = random.Random(7)
    nodes = raw_nodes(*size)
    flavor = FlavorTopology("tas", "default", {"pool": "tas"}, ())
    tracemalloc.start()
    index = TopologyIndex()
    started = time.perf_counter()
    index.configure([flavor], {"default": (BLOCK, RACK, HOST)}, nodes=nodes, pods=[])
    build = time.perf_counter() - started
    workloads = [raw_workload(i, rng) for i in range(WORKLOADS)]
    raw = {f"ns/wl-{i}": wl for i, wl in enumerate(workloads)}
    placer = TasPlacer(index.flavors, index.snapshots, raw, book=index.assume_now)
    durations = []
    placed = 0
    for i, wl in enumerate(workloads):
        count = wl["spec"]["podSets"][0]["count"]
        admit = Admit(
            workload=Workload(key=f"ns/wl-{i}", cluster_queue="cq", pod_sets=()),
            assignment=Assignment(
                cluster_queue="cq",
                pod_set_assignments=(PodSetAssignment("main", {"cpu": "tas", "memory": "tas"}, {}, count),),
                usage={},
                borrows=False,
            ),
        )
        t0 = time.perf_counter()
        refused = placer.veto(admit)
        durations.append(time.perf_counter() - t0)
        placed += refused is None
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    durations.sort()
    return {
        "nodes": len(nodes),
        "snapshot_build_s": round(build, 3),
        "admission_p50_ms": round(statistics.median(durations) * 1000, 3),
        "admission_p99_ms": round(durations[int(len(durations) * 0.99) - 1] * 1000, 3),
        "placed": placed,
        "workloads": WORKLOADS,
        "index_memory_mib": round(current / (1 << 20), 1),
        "peak_memory_mib": round(peak / (1 << 20), 1),
    }


def main() -> None:
    results = [run(size) for size in SIZES]
    for result in results:
        print(json.dumps(result), flush=True)
