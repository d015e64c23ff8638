"""Benchmark of the topology core: placement, replacement, snapshot memory, assignment and summary sizes.

Topologies of 1,000, 10,000 and 40,000 nodes (blocks x racks x hosts), 1,000 mixed workloads each (required
rack, preferred block, unconstrained; 1-512 pods; four pod shapes) placed in sequence with their usage assumed,
while older workloads finish (a sliding window of nodes/100 workloads), so the per-shape caches see real
incremental updates.
"""

from __future__ import annotations

import json
import random
import statistics
import time
import tracemalloc

from federation.api.labels import HOSTNAME_LABEL
from federation.topology import (
    NodeSpec,
    Placement,
    PodSetRequest,
    Replacement,
    TopologyRequest,
    TopologySnapshot,
    encode_placement,
    place,
    replace_failed_nodes,
    summarize,
)

BLOCK = "cloud.provider.com/topology-block"
RACK = "cloud.provider.com/topology-rack"
LEVELS = (BLOCK, RACK, HOSTNAME_LABEL)
GIB = 1 << 30

SIZES = [(5, 10, 20), (20, 25, 20), (40, 25, 40)]  # 1,000 / 10,000 / 40,000 nodes
WORKLOADS = 1000

SHAPES = [
    {"cpu": 1000, "memory": 2 * GIB},
    {"cpu": 4000, "memory": 16 * GIB},
    {"cpu": 8000, "memory": 64 * GIB, "nvidia.com/gpu": 1},
    {"cpu": 32000, "memory": 256 * GIB, "nvidia.com/gpu": 4},
]


def build_nodes(blocks: int, racks: int, hosts: int) -> list[NodeSpec]:
    allocatable = {"cpu": 64000, "memory": 512 * GIB, "pods": 110, "nvidia.com/gpu": 8}
    specs = []
    for b in range(blocks):
        for r in range(racks):
            for h in range(hosts):
                name = f"node-b{b:02d}-r{r:02d}-h{h:02d}"
                labels = {BLOCK: f"b{b:02d}", RACK: f"b{b:02d}-r{r:02d}", HOSTNAME_LABEL: name}
                specs.append(NodeSpec(name=name, labels=labels, allocatable=allocatable))
    return specs


def workload(rng: random.Random) -> PodSetRequest:
    mode = rng.choice(["required-rack", "preferred-block", "unconstrained"])
    count = max(1, min(512, int(2 ** rng.uniform(0, 9))))
    topology = {
        "required-rack": TopologyRequest(required=RACK),
        "preferred-block": TopologyRequest(preferred=BLOCK),
        "unconstrained": TopologyRequest(unconstrained=True),
    }[mode]
    if mode == "required-rack":
        count = min(count, 64)  # a rack of 20-40 hosts
    return PodSetRequest(count=count, requests=rng.choice(SHAPES), topology=topology)


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def run_size(blocks: int, racks: int, hosts: int) -> None:
    specs = build_nodes(blocks, racks, hosts)
    tracemalloc.start()
    started = time.perf_counter()
    snapshot = TopologySnapshot(LEVELS)
    for spec in specs:
        snapshot.upsert_node(spec)
    build_seconds = time.perf_counter() - started
    memory, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del specs

    rng = random.Random(5)
    place_times: list[float] = []
    replace_times: list[float] = []
    placed = failed = replaced = evicted = 0
    active: list[str] = []
    for index in range(WORKLOADS):
        request = workload(rng)
        started = time.perf_counter()
        result = place(snapshot, request)
        place_times.append(time.perf_counter() - started)
        if not isinstance(result, Placement):
            failed += 1
            continue
        placed += 1
        key = f"wl-{index}"
        snapshot.assume_placement(key, result, request)
        active.append(key)
        if len(active) > max(10, (blocks * racks * hosts) // 100):
            snapshot.forget(active.pop(0))
        if index % 10 == 0 and request.count >= 8:
            used_nodes = sorted(result.pods_per_node())
            broken = rng.sample(used_nodes, min(len(used_nodes), rng.randint(1, 4)))
            started = time.perf_counter()
            repaired = replace_failed_nodes(snapshot, request, encode_placement(result), broken)
            replace_times.append(time.perf_counter() - started)
            if isinstance(repaired, Replacement):
                replaced += 1
                snapshot.assume(key, {})
                snapshot.assume_placement(key, repaired.placement, request)
            else:
                evicted += 1

    started = time.perf_counter()
    summary = summarize(snapshot)
    summary_seconds = time.perf_counter() - started
    summary_bytes = len(json.dumps(summary.to_dict(), separators=(",", ":")))

    nodes = blocks * racks * hosts
    print(f"--- {nodes:,} nodes ({blocks} blocks x {racks} racks x {hosts} hosts)")
    print(f"snapshot build: {build_seconds:.2f} s (under tracemalloc); memory {memory / 2**20:.1f} MiB")
    print(
        f"placement ({WORKLOADS} workloads, {placed} placed, {failed} did not fit): "
        f"p50 {statistics.median(place_times) * 1e3:.2f} ms, p99 {percentile(place_times, 0.99) * 1e3:.2f} ms, "
        f"max {max(place_times) * 1e3:.1f} ms (first use of a shape builds its cache)"
    )
    if replace_times:
        print(
            f"replacement of 1-4 failed nodes ({len(replace_times)} runs, {replaced} repaired, {evicted} impossible): "
            f"p50 {statistics.median(replace_times) * 1e3:.2f} ms, p99 {percentile(replace_times, 0.99) * 1e3:.2f} ms"
        )
    print(
        f"capacity summary: {len(summary.domains)} domains, {summary_bytes / 1024:.0f} KiB JSON, "
        f"built in {summary_seconds * 1e3:.1f} ms"
    )
    if nodes == 40_000:
        whole_nodes = PodSetRequest(count=40_000, requests={"cpu": 64000}, topology=TopologyRequest(unconstrained=True))
        empty = TopologySnapshot(LEVELS)
        for spec in build_nodes(blocks, racks, hosts):
            empty.upsert_node(spec)
        started = time.perf_counter()
        big = place(empty, whole_nodes)
        big_seconds = time.perf_counter() - started
        assert isinstance(big, Placement)
        started = time.perf_counter()
        encoded = json.dumps(encode_placement(big).to_dict(), separators=(",", ":"))
        encode_seconds = time.perf_counter() - started
        print(
            f"40,000-pod assignment: placed in {big_seconds * 1e3:.0f} ms, encoded in {encode_seconds * 1e3:.0f} ms, "
            f"{len(encoded):,} bytes JSON ({len(encoded) / 2**20:.2f} MiB; Kueue's bound 1.5 MB)"
        )


def main() -> None:
    for blocks, racks, hosts in SIZES:
        run_size(blocks, racks, hosts)
