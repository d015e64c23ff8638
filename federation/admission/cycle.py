"""One scheduling cycle: queue heads + snapshot → a decision for every head (Kueue's scheduler pipeline).

1. **Nominate.** Each head gets a flavor assignment against the snapshot as it was at the start of the cycle; one
   that fits only by preemption gets its victims; one that does not fit whole is retried at reduced pod counts when
   its pod sets allow it (``minCount``).
2. **Order.** Heads that fit without borrowing go first, then higher priority, then older. With fair sharing, heads
   are ordered by their queue's share *after* admission, compared along the cohort tree (a tournament), then
   priority and age; shares are recomputed as admissions change them.
3. **Admit.** Heads are processed in that order against a what-if copy of the snapshot that is updated after each
   one: an admitted head adds its usage, and a head that preempts *reserves* its usage, so no other head in the
   cohort can take the capacity its victims free in the same cycle. A head whose victims overlap those of an
   earlier head, or that no longer fits after earlier heads, waits and is retried at once.

The snapshot is left exactly as it was; the caller applies the ``Admit`` decisions (``apply_admission``) and the
evictions once they happen.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from federation.admission.decisions import Admit, Assignment, Decision, Preempt, Victim, Wait
from federation.admission.fair_sharing import share_path
from federation.admission.flavors import FIT, NO_FIT, PREEMPT, FlavorAssignment, assign_flavors
from federation.admission.model import AdmittedWorkload, Workload
from federation.admission.partial import largest_fitting_counts, may_shrink
from federation.admission.preemption import (
    FAIR_SHARING_STRATEGIES,
    FairSharingStrategy,
    PreemptionRequest,
    find_victims,
)
from federation.admission.snapshot import ClusterQueueNode, Snapshot

__all__ = ["DEFAULT_CYCLE_CONFIG", "CycleConfig", "apply_admission", "run_cycle"]


@dataclass(frozen=True, slots=True)
class CycleConfig:
    """Scheduler-wide switches: fair sharing (and its preemption strategies) and partial admission."""

    fair_sharing: bool = False
    fair_sharing_strategies: tuple[FairSharingStrategy, ...] = FAIR_SHARING_STRATEGIES
    partial_admission: bool = True


DEFAULT_CYCLE_CONFIG = CycleConfig()
"""Kueue's defaults: no fair sharing, partial admission on."""


@dataclass(slots=True)
class _Entry:
    workload: Workload
    queue: ClusterQueueNode
    outcome: FlavorAssignment
    victims: tuple[Victim, ...] = ()
    order: tuple[object, ...] = field(default=())


def run_cycle(
    snapshot: Snapshot, heads: Iterable[Workload], *, config: CycleConfig = DEFAULT_CYCLE_CONFIG
) -> list[Decision]:
    """Decide for every head, in the order they were processed; the snapshot is left unchanged."""
    decisions: list[Decision] = []
    entries: list[_Entry] = []
    for workload in heads:
        queue = snapshot.cluster_queues.get(workload.cluster_queue)
        if queue is None:
            decisions.append(Wait(workload, "Misconfigured", f"ClusterQueue {workload.cluster_queue} doesn't exist"))
        elif queue.inactive_reason is not None:
            message = f"ClusterQueue {queue.name} is inactive: {queue.inactive_reason}"
            decisions.append(Wait(workload, "Suspended", message))
        elif snapshot.admitted(workload.key) is not None:
            decisions.append(Wait(workload, "PendingEvaluation", f"workload {workload.key} already holds quota"))
        else:
            entries.append(_nominate(snapshot, workload, queue=queue, config=config))
    with snapshot.what_if():
        preempted: set[str] = set()
        for entry in _ordered(snapshot, entries, config):
            decisions.append(_process(snapshot, entry, preempted=preempted))
    return decisions


def apply_admission(snapshot: Snapshot, decision: Admit, *, now: float) -> AdmittedWorkload:
    """Record an ``Admit`` decision in the snapshot (quota reserved at ``now``)."""
    admitted = AdmittedWorkload(decision.workload, decision.assignment.usage, now)
    snapshot.add_workload(admitted)
    return admitted


def _nominate(snapshot: Snapshot, workload: Workload, *, queue: ClusterQueueNode, config: CycleConfig) -> _Entry:
    outcome = assign_flavors(snapshot, workload, queue=queue)
    entry = _attempt(snapshot, outcome, queue=queue, workload=workload, config=config)
    if entry is not None:
        return entry
    if config.partial_admission and may_shrink(workload.pod_sets):

        def attempt(counts: tuple[int, ...]) -> _Entry | None:
            outcome = assign_flavors(snapshot, workload, queue=queue, counts=counts)
            return _attempt(snapshot, outcome, queue=queue, workload=workload, config=config)

        smaller = largest_fitting_counts(workload.pod_sets, attempt)
        if smaller is not None:
            return smaller
    return _Entry(workload, queue, outcome)


def _attempt(
    snapshot: Snapshot, outcome: FlavorAssignment, *, queue: ClusterQueueNode, workload: Workload, config: CycleConfig
) -> _Entry | None:
    """An entry if the outcome fits or finds victims, else ``None``."""
    if outcome.mode == FIT:
        return _Entry(workload, queue, outcome)
    if outcome.mode == PREEMPT and outcome.assignment is not None:
        request = PreemptionRequest(
            queue, workload, outcome.assignment.usage, outcome.needs_preemption, outcome.assignment.borrows
        )
        victims = find_victims(
            snapshot, request, fair_sharing=config.fair_sharing, strategies=config.fair_sharing_strategies
        )
        if victims:
            return _Entry(workload, queue, outcome, victims)
    return None


def _ordered(snapshot: Snapshot, entries: Sequence[_Entry], config: CycleConfig) -> Iterable[_Entry]:
    if not config.fair_sharing:
        return sorted(
            entries,
            key=lambda e: (_borrows(e), -e.workload.priority, e.workload.ordering_time, e.workload.key),
        )
    return _fair_order(snapshot, entries)


def _borrows(entry: _Entry) -> bool:
    assignment = entry.outcome.assignment
    return assignment is not None and assignment.borrows


def _fair_order(snapshot: Snapshot, entries: Sequence[_Entry]) -> Iterable[_Entry]:
    """Lowest share after admission first; keys are recomputed lazily when their cohort tree changed."""
    tree_version: dict[int, int] = {}

    def key_of(entry: _Entry) -> tuple[object, ...]:
        assignment = entry.outcome.assignment
        if assignment is None or entry.outcome.mode == NO_FIT:
            path: tuple[tuple[int, str], ...] = ()
        else:
            with snapshot.what_if():
                snapshot.add_usage(entry.queue, assignment.usage)
                path = share_path(entry.queue)
        return (path, -entry.workload.priority, entry.workload.ordering_time, entry.workload.key)

    heap: list[tuple[tuple[object, ...], int, int, int]] = []
    for index, entry in enumerate(entries):
        root = id(snapshot.root_of(entry.queue))
        heap.append((key_of(entry), tree_version.get(root, 0), root, index))
    heapq.heapify(heap)
    while heap:
        _, version, root, index = heapq.heappop(heap)
        if version != tree_version.get(root, 0):
            heapq.heappush(heap, (key_of(entries[index]), tree_version.get(root, 0), root, index))
            continue
        yield entries[index]
        tree_version[root] = version + 1


def _process(snapshot: Snapshot, entry: _Entry, *, preempted: set[str]) -> Decision:
    outcome, workload, queue = entry.outcome, entry.workload, entry.queue
    assignment = outcome.assignment
    if assignment is None or outcome.mode == NO_FIT or (outcome.mode == PREEMPT and not entry.victims):
        return Wait(workload, outcome.reason, outcome.message or "insufficient quota")
    victim_keys = {victim.key for victim in entry.victims}
    if victim_keys & preempted:
        return Wait(
            workload, "WaitingForQuota", "Workload has overlapping preemption targets with another workload", True
        )
    if not _fits_without(snapshot, assignment, queue=queue, gone=preempted | victim_keys):
        return Wait(workload, "WaitingForQuota", "Workload no longer fits after processing another workload", True)
    preempted |= victim_keys
    snapshot.add_usage(queue, assignment.usage)
    if entry.victims:
        message = f"{outcome.message}. Pending the preemption of {len(entry.victims)} workload(s)"
        return Preempt(workload, assignment, entry.victims, message)
    return Admit(workload, assignment)


def _fits_without(snapshot: Snapshot, assignment: Assignment, *, queue: ClusterQueueNode, gone: set[str]) -> bool:
    with snapshot.what_if():
        for key in gone:
            if snapshot.admitted(key) is not None:
                snapshot.remove_workload(key)
        return all(amount <= snapshot.available(queue, key) for key, amount in assignment.usage.items())
