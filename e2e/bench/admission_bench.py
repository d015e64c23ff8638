"""Admission-core benchmark: Kueue's scheduler-performance shapes, simulated in memory with a simulated clock.

*baseline*: 5 cohorts x 6 ClusterQueues (nominal 20 cpu, borrowingLimit 100, reclaimWithinCohort Any,
withinClusterQueue LowerPriority); per ClusterQueue 350 small (1 cpu, 200 ms, priority 50, one per 100 ms),
100 medium (5 cpu, 500 ms, priority 100, one per 500 ms) and 50 large (20 cpu, 1 s, priority 200, one per 1.2 s).
*large*: 10 cohorts x 100 ClusterQueues, 50 workloads each in the same proportions.

Workloads arrive, run for their duration once admitted and then release quota; preempted workloads go back to
their queue and run again from the start. Scheduling cycles run back to back, in zero simulated time, until one
makes no progress. Prints decisions per second of wall time, mean simulated time to admission per class, and
ClusterQueue usage.
"""

from __future__ import annotations

import heapq
import time
from collections import defaultdict
from dataclasses import dataclass

from federation.admission.cycle import apply_admission, run_cycle
from federation.admission.decisions import Admit, Preempt
from federation.admission.model import (
    ClusterQueueSpec,
    FlavorQuotas,
    PodSet,
    PreemptionPolicy,
    ResourceFlavorSpec,
    ResourceGroup,
    ResourceQuota,
    Workload,
)
from federation.admission.queues import QueueManager
from federation.admission.snapshot import Snapshot
from federation.quantity import MILLI

FLAVOR = "default"
CPU = (FLAVOR, "cpu")


@dataclass(frozen=True)
class WorkloadClass:
    name: str
    count: int
    cpu: int
    runtime: float
    priority: int
    interval: float


@dataclass(frozen=True)
class Shape:
    name: str
    cohorts: int
    queues_per_cohort: int
    classes: tuple[WorkloadClass, ...]


BASELINE = Shape(
    "baseline",
    5,
    6,
    (
        WorkloadClass("small", 350, 1, 0.2, 50, 0.1),
        WorkloadClass("medium", 100, 5, 0.5, 100, 0.5),
        WorkloadClass("large", 50, 20, 1.0, 200, 1.2),
    ),
)
LARGE = Shape(
    "large",
    10,
    100,
    (
        WorkloadClass("small", 35, 1, 0.2, 50, 0.1),
        WorkloadClass("medium", 10, 5, 0.5, 100, 0.5),
        WorkloadClass("large", 5, 20, 1.0, 200, 1.2),
    ),
)


def _queue(name: str, cohort: str) -> ClusterQueueSpec:
    quota = ResourceQuota("cpu", 20 * MILLI, borrowing_limit=100 * MILLI)
    return ClusterQueueSpec(
        name,
        (ResourceGroup(("cpu",), (FlavorQuotas(FLAVOR, (quota,)),)),),
        cohort=cohort,
        preemption=PreemptionPolicy(within_cluster_queue="LowerPriority", reclaim_within_cohort="Any"),
    )


class _Usage:
    """Time-weighted cpu usage per ClusterQueue."""

    def __init__(self, names: list[str]) -> None:
        self.current = dict.fromkeys(names, 0)
        self.area = dict.fromkeys(names, 0.0)
        self.since = dict.fromkeys(names, 0.0)
        self.peak = dict.fromkeys(names, 0)

    def change(self, name: str, delta: int, now: float) -> None:
        self.area[name] += self.current[name] * (now - self.since[name])
        self.since[name] = now
        self.current[name] += delta
        self.peak[name] = max(self.peak[name], self.current[name])


def run(shape: Shape) -> None:
    names = [f"cq-{c}-{q}" for c in range(shape.cohorts) for q in range(shape.queues_per_cohort)]
    specs = [_queue(name, name.rsplit("-", 1)[0].replace("cq-", "cohort-")) for name in names]
    snapshot = Snapshot(cluster_queues=specs, flavors=[ResourceFlavorSpec(FLAVOR)])
    queues = QueueManager()
    for name in names:
        queues.add_cluster_queue(name)
    tree_of = {name: [member.name for member in snapshot.tree_members(snapshot.cluster_queues[name])] for name in names}

    events: list[tuple[float, int, int, str]] = []  # (time, kind 0=finish 1=arrival, sequence, key)
    arrivals: dict[str, tuple[Workload, WorkloadClass]] = {}
    sequence = 0
    for name in names:
        for workload_class in shape.classes:
            for index in range(workload_class.count):
                at = round(index * workload_class.interval, 6)
                key = f"{name}/{workload_class.name}-{index}"
                pod_set = PodSet("main", 1, {"cpu": workload_class.cpu * MILLI})
                workload = Workload(key, name, (pod_set,), priority=workload_class.priority, creation_time=at)
                arrivals[key] = (workload, workload_class)
                sequence += 1
                events.append((at, 1, sequence, key))
    heapq.heapify(events)

    running_until: dict[str, float] = {}
    admitted_at: dict[str, float] = {}
    usage = _Usage(names)
    decisions = cycles = preemptions = 0
    started = time.perf_counter()
    now = 0.0
    while events:
        now = events[0][0]
        released: set[str] = set()
        while events and events[0][0] == now:
            _, kind, _, key = heapq.heappop(events)
            workload, workload_class = arrivals[key]
            if kind == 1:
                queues.push(workload)
            elif running_until.get(key) == now:
                del running_until[key]
                snapshot.remove_workload(key)
                usage.change(workload.cluster_queue, -workload_class.cpu, now)
                released.update(tree_of[workload.cluster_queue])
        if released:
            queues.capacity_changed(released)
        progress = True
        while progress:
            progress = False
            heads = queues.heads(now)
            if not heads:
                break
            cycles += 1
            for decision in run_cycle(snapshot, heads):
                decisions += 1
                workload = decision.workload
                if isinstance(decision, Admit):
                    progress = True
                    apply_admission(snapshot, decision, now=now)
                    queues.forget_head(workload.key)
                    workload_class = arrivals[workload.key][1]
                    running_until[workload.key] = now + workload_class.runtime
                    admitted_at[workload.key] = now
                    usage.change(workload.cluster_queue, workload_class.cpu, now)
                    sequence += 1
                    heapq.heappush(events, (now + workload_class.runtime, 0, sequence, workload.key))
                    continue
                if isinstance(decision, Preempt):
                    progress = True
                    freed: set[str] = set()
                    for victim in decision.victims:
                        preemptions += 1
                        evicted = snapshot.remove_workload(victim.key)
                        del running_until[victim.key]
                        usage.change(victim.cluster_queue, -arrivals[victim.key][1].cpu, now)
                        queues.push(evicted.workload)
                        freed.update(tree_of[victim.cluster_queue])
                    queues.requeue(workload, inadmissible=False)
                    queues.capacity_changed(freed)
                    continue
                if not decision.retry_immediately:
                    progress = True  # parked: the next cycle sees the workload behind it
                queues.requeue(workload, inadmissible=not decision.retry_immediately)
    wall = time.perf_counter() - started
    for name in names:
        usage.change(name, 0, now)
    _report(
        shape,
        wall=wall,
        now=now,
        counters=(decisions, cycles, preemptions),
        admitted_at=admitted_at,
        arrivals=arrivals,
        usage=usage,
    )


def _report(
    shape: Shape,
    *,
    wall: float,
    now: float,
    counters: tuple[int, int, int],
    admitted_at: dict[str, float],
    arrivals: dict[str, tuple[Workload, WorkloadClass]],
    usage: _Usage,
) -> None:
    decisions, cycles, preemptions = counters
    waits: dict[str, list[float]] = defaultdict(list)
    for key, at in admitted_at.items():
        workload, workload_class = arrivals[key]
        waits[workload_class.name].append(at - workload.creation_time)
    print(
        f"--- {shape.name}: {shape.cohorts} cohorts x {shape.queues_per_cohort} ClusterQueues, "
        f"{len(arrivals)} workloads"
    )
    print(
        f"  wall {wall:.2f} s, simulated {now:.1f} s, {cycles} cycles, {decisions} decisions "
        f"({decisions / wall:,.0f} decisions/s), {len(admitted_at)} admitted, {preemptions} preemptions"
    )
    for workload_class in shape.classes:
        samples = waits[workload_class.name]
        mean = sum(samples) / len(samples) if samples else float("nan")
        print(f"  {workload_class.name:>6}: mean time to admission {mean:7.2f} s (simulated) over {len(samples)}")
    mean_usage = [usage.area[name] / now for name in usage.area] if now > 0 else [0.0]
    print(
        f"  ClusterQueue cpu usage: mean {sum(mean_usage) / len(mean_usage):.1f} of nominal 20 "
        f"(min {min(mean_usage):.1f}, max {max(mean_usage):.1f}), peak {max(usage.peak.values())}"
    )


def main() -> None:
    for shape in (BASELINE, LARGE):
        run(shape)


if __name__ == "__main__":
    main()
