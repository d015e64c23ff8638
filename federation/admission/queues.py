"""Pending workloads per ClusterQueue: ordering, StrictFIFO vs BestEffortFIFO, and requeue backoff.

Each ClusterQueue orders its pending workloads by priority (highest first), then queue time (oldest first). A
scheduling cycle takes one head per ClusterQueue. What happens to a head that was not admitted depends on the
queueing strategy, as in Kueue:

* ``StrictFIFO``: it goes back to the heap and, being first, stays the head — nothing behind it is considered.
* ``BestEffortFIFO``: if it was found inadmissible it is *parked*, letting the next workload become the head,
  until capacity changes in its cohort tree (``capacity_changed``). If capacity changed while it was being
  scheduled, it goes straight back instead, so a release is never missed.

Heads that lost a race inside a cycle or wait for their victims to leave are always pushed straight back.

Workloads evicted for not becoming ready are requeued with Kueue's backoff: ``base · 2^(n-1)`` seconds (base 60)
plus a small jitter, capped at 3600 s; they are not heads before their ``requeue_at``. Jitter comes from an
injected function so tests and simulations are deterministic.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from federation.admission.model import QueueingStrategy, Workload

__all__ = ["QueueManager", "RequeueBackoff", "RequeueState"]


@dataclass(frozen=True, slots=True)
class RequeueState:
    """Kueue's ``status.requeueState``: how many times a workload was requeued, and when it may return."""

    count: int
    requeue_at: float


@dataclass(frozen=True, slots=True)
class RequeueBackoff:
    """Kueue's requeuing backoff; ``jitter`` returns a number in [0, 1) (default: no jitter)."""

    base_seconds: float = 60.0
    max_seconds: float = 3600.0
    jitter_fraction: float = 0.0001
    jitter: Callable[[], float] = lambda: 0.0

    def delay(self, count: int) -> float:
        """Seconds to wait before the ``count``-th requeue (``count`` ≥ 1)."""
        if count < 1:
            raise ValueError(f"requeue count must be at least 1, got {count}")
        exponent = min(count - 1, 62)
        duration = self.base_seconds * 2.0**exponent
        duration += duration * self.jitter_fraction * self.jitter()
        return min(duration, self.max_seconds)

    def next_state(self, previous: RequeueState | None, now: float) -> RequeueState:
        """The requeue state after one more backoff starting at ``now``."""
        count = 1 if previous is None else previous.count + 1
        return RequeueState(count, now + self.delay(count))


class _ClusterQueuePending:
    __slots__ = ("heap", "members", "parked", "strategy")

    def __init__(self, strategy: QueueingStrategy) -> None:
        self.strategy = strategy
        self.heap: list[tuple[int, float, int, str]] = []
        self.members: dict[str, Workload] = {}
        self.parked: dict[str, Workload] = {}


class QueueManager:
    """Pending workloads of every ClusterQueue; pure bookkeeping, driven by the caller's clock."""

    def __init__(self) -> None:
        self._queues: dict[str, _ClusterQueuePending] = {}
        self._sequence = 0
        self._capacity_epoch: dict[str, int] = {}
        self._popped_at_epoch: dict[str, int] = {}
        self._delayed: list[tuple[float, int, str]] = []
        self._delayed_members: dict[str, Workload] = {}
        self._queue_of: dict[str, str] = {}

    def add_cluster_queue(self, name: str, strategy: QueueingStrategy = "BestEffortFIFO") -> None:
        self._queues.setdefault(name, _ClusterQueuePending(strategy)).strategy = strategy
        self._capacity_epoch.setdefault(name, 0)

    def push(self, workload: Workload, *, requeue_at: float | None = None) -> None:
        """Add or replace a pending workload; with ``requeue_at`` it waits for that time before competing."""
        self.delete(workload.key)
        if requeue_at is not None:
            self._sequence += 1
            self._delayed_members[workload.key] = workload
            heapq.heappush(self._delayed, (requeue_at, self._sequence, workload.key))
            return
        self._push_to_heap(workload)

    def _push_to_heap(self, workload: Workload) -> None:
        pending = self._queues[workload.cluster_queue]
        self._sequence += 1
        self._queue_of[workload.key] = workload.cluster_queue
        pending.members[workload.key] = workload
        heapq.heappush(pending.heap, (-workload.priority, workload.ordering_time, self._sequence, workload.key))

    def delete(self, key: str) -> None:
        """Forget a workload wherever it waits (heap entries are dropped lazily)."""
        self._delayed_members.pop(key, None)
        name = self._queue_of.pop(key, None)
        if name is not None:
            pending = self._queues[name]
            pending.members.pop(key, None)
            pending.parked.pop(key, None)

    def heads(self, now: float) -> list[Workload]:
        """Pop the first workload of every ClusterQueue that has one; the caller must requeue or admit each."""
        self._release_due(now)
        heads: list[Workload] = []
        for name, pending in self._queues.items():
            heap, members = pending.heap, pending.members
            while heap:
                _, _, _, key = heapq.heappop(heap)
                workload = members.pop(key, None)
                if workload is not None:
                    del self._queue_of[key]
                    heads.append(workload)
                    self._popped_at_epoch[key] = self._capacity_epoch[name]
                    break
        return heads

    def _release_due(self, now: float) -> None:
        delayed = self._delayed
        while delayed and delayed[0][0] <= now:
            _, _, key = heapq.heappop(delayed)
            workload = self._delayed_members.pop(key, None)
            if workload is not None:
                self._push_to_heap(workload)

    def requeue(self, workload: Workload, *, inadmissible: bool) -> None:
        """Return a head that was not admitted; inadmissible BestEffortFIFO heads are parked (see module doc)."""
        popped_epoch = self._popped_at_epoch.pop(workload.key, None)
        pending = self._queues[workload.cluster_queue]
        if (
            inadmissible
            and pending.strategy == "BestEffortFIFO"
            and popped_epoch == self._capacity_epoch[workload.cluster_queue]
        ):
            pending.parked[workload.key] = workload
            self._queue_of[workload.key] = workload.cluster_queue
            return
        self._push_to_heap(workload)

    def forget_head(self, key: str) -> None:
        """A popped head was admitted (or deleted): stop tracking it."""
        self._popped_at_epoch.pop(key, None)

    def capacity_changed(self, cluster_queues: Iterable[str]) -> None:
        """Quota was released or changed for these ClusterQueues: parked workloads compete again."""
        for name in cluster_queues:
            self._capacity_epoch[name] += 1
            pending = self._queues[name]
            parked, pending.parked = pending.parked, {}
            for workload in parked.values():
                self._push_to_heap(workload)

    def pending_count(self, cluster_queue: str) -> int:
        """Workloads waiting in the ClusterQueue, parked ones included (delayed ones excluded)."""
        pending = self._queues[cluster_queue]
        return len(pending.members) + len(pending.parked)

    def parked(self, cluster_queue: str) -> tuple[Workload, ...]:
        return tuple(self._queues[cluster_queue].parked.values())
