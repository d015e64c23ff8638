"""Parked Workloads: pending Workloads that did not fit stay out of later passes until something that could change
the answer happens (Kueue's ``inadmissibleWorkloads`` per ClusterQueue, kept here as plain data).

Without it every scheduling pass tried every pending Workload again: at 100,000 pending, a pass in which nothing
changed took seconds. Kueue moves a head that did not fit to its ClusterQueue's inadmissible list and requeues that
list only on events that can change the answer (``QueueInadmissibleWorkloads``), with a guard for a requeue that
happened while the head was being scheduled (``popCycle``/``queueInadmissibleCycle``). kfed's passes rebuild their
input from the caches, so instead of subscribing to events one by one this module compares *stamps*: for each
ClusterQueue, a comparable value of everything in its cohort tree a verdict depends on. A stamp that differs from
the one the Workload was parked under is the wake-up event, whatever caused it:

* ``QuotaChanged``: a ClusterQueue or Cohort of the tree changed (quota, limits, preemption or queueing policy,
  cohort membership, fair-sharing weight), became active or inactive, or a ResourceFlavor changed;
* ``UsageChanged``: a Workload of the tree released quota (finished, deleted, evicted, partially reclaimed), started
  being evicted, changed priority, or a Workload was admitted there by someone else (preemption may now find a
  victim);
* ``WorkersChanged``: only for a Workload parked because no worker had room (the manager's veto): a worker may have
  more room (its report shows more, or dispatches in flight to it were released), a worker's usability or the
  MultiKueue configuration changed (the caller's stamp);
* ``Expired``: a safety requeue after ``max_park_seconds`` even if nothing is seen to change.

A parked Workload is also tried again when it changes itself (spec or annotations: a new core view), and forgotten
when it is no longer pending (admitted, deleted, blocked, finished). The caller unparks a Workload whose pending
verdict was not written (``unpark``), so its condition is written on the next pass.

Transitions of one Workload (all here, all explicit):

    active --settle(Wait, not retried at once, no admission in its Cohort's tree in a later cycle)--> parked
    parked --wake(stamp differs / expiry)--> active
    parked --filter(Workload changed, or it is no longer first in a StrictFIFO queue it blocked)--> active
    parked --settle(not pending any more) / unpark--> gone

StrictFIFO keeps its meaning: a head that does not fit blocks the queue, so the queue is skipped while that same
Workload is still its first; BestEffortFIFO parks each Workload that does not fit and lets the others go past.
Workloads waiting for their victims (``Preempt``) or retried at once (``retry_immediately``) are never parked.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from federation.admission.decisions import Wait
from federation.admission.model import Workload
from federation.admission.snapshot import ClusterQueueNode, QuotaNode, Snapshot

__all__ = ["Parked", "ParkingLot", "Stamp", "WakeReason", "tree_stamps"]

WakeReason = Literal["QuotaChanged", "UsageChanged", "WorkersChanged", "Expired"]

_MASK = (1 << 64) - 1


@dataclass(frozen=True, slots=True)
class Stamp:
    """What every verdict in a cohort tree depends on: ``quota`` (the structure) and ``usage`` (who holds what)."""

    quota: tuple[object, ...]
    usage: tuple[object, ...]


def _node_quota(node: QuotaNode) -> tuple[object, ...]:
    if isinstance(node, ClusterQueueNode):
        return ("ClusterQueue", node.spec, node.inactive_reason)
    return (
        "Cohort",
        node.name,
        tuple(sorted(node.nominal.items())),
        tuple(sorted(node.borrowing_limit.items())),
        tuple(sorted(node.lending_limit.items())),
        node.fair_sharing_weight,
        getattr(node, "in_cycle", False),
    )


def _queue_usage(node: ClusterQueueNode) -> tuple[object, ...]:
    admitted = 0
    for workload in node.workloads.values():
        item = (workload.key, workload.workload.priority, workload.evicted, tuple(sorted(workload.usage.items())))
        admitted = (admitted + hash(item)) & _MASK
    return (node.name, len(node.workloads), admitted, tuple(sorted(node.usage.items())))


def _tree_nodes(root: QuotaNode) -> Iterator[QuotaNode]:
    yield root
    for child in root.children:
        yield from _tree_nodes(child)


def tree_stamps(snapshot: Snapshot, *, only: Iterable[str] | None = None) -> dict[str, Stamp]:
    """The stamp of every ClusterQueue (shared by the members of a cohort tree); ``only`` limits it to the trees of
    these ClusterQueues. ResourceFlavors are part of every stamp."""
    flavors = tuple(sorted(snapshot.flavors.items()))
    stamps: dict[str, Stamp] = {}
    names = snapshot.cluster_queues if only is None else only
    for name in names:
        node = snapshot.cluster_queues.get(name)
        if node is None or name in stamps:
            continue
        root = snapshot.root_of(node)
        nodes = sorted(_tree_nodes(root), key=lambda n: (isinstance(n, ClusterQueueNode), n.name))
        members = [n for n in nodes if isinstance(n, ClusterQueueNode)]
        stamp = Stamp(
            quota=(flavors, tuple(_node_quota(n) for n in nodes)),
            usage=tuple(_queue_usage(n) for n in members),
        )
        for member in members:
            stamps[member.name] = stamp
    return stamps


@dataclass(frozen=True, slots=True)
class Parked:
    """One parked Workload: its core view and annotations when decided, its verdict, and whether it waits on the
    workers (a vetoed admission) and blocks its StrictFIFO queue."""

    workload: Workload
    raw: Mapping[str, Any]
    annotations: Mapping[str, Any]
    decision: Wait
    vetoed: bool
    blocks_queue: bool
    since: float

    def same(self, workload: Workload, raw: Mapping[str, Any]) -> bool:
        """Whether ``workload`` is still the Workload that was parked (unchanged spec and annotations)."""
        if raw is self.raw and workload is self.workload:
            return True  # the very same objects (a watch cache replaces an object, never changes it)
        if not (self.workload is workload or self.workload == workload):
            return False
        return ((raw.get("metadata") or {}).get("annotations") or {}) == self.annotations


def _same_entries(last: Sequence[object], items: Sequence[object]) -> bool:
    """Whether both sequences hold the very same objects in the same order (identity, at C speed)."""
    return len(last) == len(items) and all(map(operator.is_, last, items))


@dataclass(slots=True)
class _QueueLot:
    stamp: Stamp | None
    entries: dict[str, Parked] = field(default_factory=dict)
    """In parking order (oldest first)."""
    head: str | None = None
    """The StrictFIFO head that blocks the queue, if any."""
    matched: int = -1
    """Parked entries the last ``active`` found still pending and unchanged (-1: not counted)."""
    changes: int = 0
    """Counts every change of ``entries`` and ``head``."""
    last_active: tuple[int, Sequence[tuple[Workload, Mapping[str, Any]]], list[Workload], int] | None = None
    """The last ``active`` without a blocking StrictFIFO head: (``changes`` then, its items, what it yielded, matched).
    The same items (the very same entry objects, as the classification memo hands them out again) under an unchanged
    lot yield the same again, so a pass over 1,000 parked Workloads of a ClusterQueue in which nothing happened does
    not look at each of them."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """A final ``Wait`` of one pass, with what ``settle`` needs to decide whether it parks."""

    workload: Workload
    raw: Mapping[str, Any]
    decision: Wait
    cycle: int
    vetoed: bool
    blocks_queue: bool


class ParkingLot:
    """Parked Workloads per ClusterQueue across scheduling passes (see the module docstring)."""

    def __init__(self, *, max_park_seconds: float = 300.0) -> None:
        self.max_park_seconds = max_park_seconds
        self._queues: dict[str, _QueueLot] = {}
        self._workers: object = None
        self.woken: dict[str, WakeReason] = {}
        """What the last ``wake`` released: workload key → why."""

    # ----- reading ---------------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return sum(len(lot.entries) for lot in self._queues.values())

    def __contains__(self, key: object) -> bool:
        return any(key in lot.entries for lot in self._queues.values())

    def parked(self) -> Iterator[Parked]:
        for lot in self._queues.values():
            yield from lot.entries.values()

    def next_expiry(self) -> float | None:
        """When the oldest parked Workload is requeued by the safety timeout (None when nothing is parked)."""
        oldest = [next(iter(lot.entries.values())).since for lot in self._queues.values() if lot.entries]
        return min(oldest) + self.max_park_seconds if oldest else None

    # ----- transitions -----------------------------------------------------------------------------------------

    def wake(self, *, stamps: Mapping[str, Stamp], workers: object, now: float) -> dict[str, WakeReason]:
        """Release every parked Workload whose tree stamp, worker stamp (vetoed ones) or age says it may fit now."""
        woken: dict[str, WakeReason] = {}
        workers_changed = workers != self._workers
        self._workers = workers
        for name in list(self._queues):
            lot = self._queues[name]
            stamp = stamps.get(name)
            reason: WakeReason | None = None
            if stamp is None or lot.stamp is None or stamp.quota != lot.stamp.quota:
                reason = "QuotaChanged"
            elif stamp.usage != lot.stamp.usage:
                reason = "UsageChanged"
            if reason is not None:
                woken.update(dict.fromkeys(lot.entries, reason))
                del self._queues[name]
                continue
            if workers_changed:
                for key in [key for key, entry in lot.entries.items() if entry.vetoed]:
                    self._release(lot, key)
                    woken[key] = "WorkersChanged"
            while lot.entries:
                key, entry = next(iter(lot.entries.items()))
                if now - entry.since < self.max_park_seconds:
                    break
                self._release(lot, key)
                woken[key] = "Expired"
            if not lot.entries:
                del self._queues[name]
        self.woken = woken
        return woken

    @staticmethod
    def _release(lot: _QueueLot, key: str) -> None:
        lot.changes += 1
        del lot.entries[key]
        if lot.head == key:
            lot.head = None

    def active(
        self, cluster_queue: str, items: Sequence[tuple[Workload, Mapping[str, Any]]], *, strict: bool
    ) -> Iterator[Workload]:
        """The Workloads of a ClusterQueue's ordered pending list that are not parked. A StrictFIFO queue whose
        blocking head is still its first yields nothing; a parked Workload that changed is dropped from the lot."""
        lot = self._queues.get(cluster_queue)
        if lot is None:
            yield from (workload for workload, _ in items)
            return
        lot.matched = -1
        if strict and lot.head is not None:
            entry = lot.entries[lot.head]
            if items and items[0][0].key == lot.head and entry.same(*items[0]):
                return
            self._release(lot, entry.workload.key)
        last = lot.last_active
        if last is not None and last[0] == lot.changes and _same_entries(last[1], items):
            lot.matched = last[3]
            yield from last[2]
            return
        entries, matched, active = lot.entries, 0, []
        for workload, raw in items:
            parked = entries.get(workload.key)
            if parked is None:
                active.append(workload)
                yield workload
            elif not parked.same(workload, raw):
                self._release(lot, workload.key)
                active.append(workload)
                yield workload
            else:
                matched += 1
        lot.matched = matched
        lot.last_active = (lot.changes, items, active, matched)

    def settle(
        self,
        *,
        pending: Mapping[str, Sequence[tuple[Workload, Mapping[str, Any]]]],
        verdicts: Iterable[Verdict],
        admitted_in_cycle: Mapping[str, int],
        stamps: Mapping[str, Stamp],
        now: float,
    ) -> None:
        """After a pass: park its final ``Wait`` verdicts and keep the parked Workloads that are still pending.

        ``admitted_in_cycle`` maps a ClusterQueue of a Cohort to the last cycle of the pass that admitted a Workload
        into its tree: a verdict from that cycle or an earlier one did not see that admission (it may have made a
        ClusterQueue a borrower, or raised its share: new preemption candidates), so it is tried again instead, and
        so are the Workloads parked in that tree before the pass. ``stamps`` are
        the trees as the pass left them, admissions applied."""
        for name in list(self._queues):
            lot = self._queues[name]
            if name in admitted_in_cycle or name not in pending:
                del self._queues[name]
                continue
            if lot.matched != len(lot.entries):  # some parked Workload is no longer pending
                still = {workload.key for workload, _ in pending[name]}
                for key in [key for key in lot.entries if key not in still]:
                    self._release(lot, key)
            lot.matched = -1
            lot.stamp = stamps.get(name)
            if not lot.entries or lot.stamp is None:
                del self._queues[name]
        for verdict in verdicts:
            queue = verdict.workload.cluster_queue
            if verdict.decision.retry_immediately or verdict.cycle <= admitted_in_cycle.get(queue, -1):
                continue
            stamp = stamps.get(queue)
            if stamp is None:
                continue
            lot = self._queues.setdefault(queue, _QueueLot(stamp))
            key = verdict.workload.key
            lot.changes += 1
            lot.entries.pop(key, None)
            lot.entries[key] = Parked(
                workload=verdict.workload,
                raw=verdict.raw,
                annotations=dict((verdict.raw.get("metadata") or {}).get("annotations") or {}),
                decision=verdict.decision,
                vetoed=verdict.vetoed,
                blocks_queue=verdict.blocks_queue,
                since=now,
            )
            if verdict.blocks_queue:
                lot.head = key

    def unpark(self, key: str) -> None:
        """Try this Workload again on the next pass (its verdict was not written)."""
        for name, lot in list(self._queues.items()):
            if key in lot.entries:
                self._release(lot, key)
                if not lot.entries:
                    del self._queues[name]
                return
