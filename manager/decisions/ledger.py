"""The in-flight ledger: quota the manager sent to a worker that the worker's report does not show yet.

Without it, two workloads dispatched between two reports would both see the same free quota and overbook the
worker. An entry counts against its worker's ClusterQueue from dispatch until the worker publishes a report
computed after the copy reserved quota there (both timestamps come from the agent's clock), or the copy is gone.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(slots=True)
class _Entry:
    worker: str
    cluster_queue: str
    requests: Mapping[str, int]
    reserved_at: dt.datetime | None = None
    """When the worker's copy got QuotaReserved (agent clock); None while not yet admitted there."""


@dataclass
class InFlightLedger:
    """Entries by workload key, with running totals per worker and ClusterQueue: a scheduling pass asks for a
    worker's totals once per candidate worker and decision, so summing the entries each time made a pass
    quadratic in the workloads in flight (47 ms per decision with 10,000 in flight to 100 workers)."""

    _entries: dict[str, _Entry] = field(default_factory=dict)
    _totals: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    """worker → ClusterQueue → resource → summed requests of its entries."""

    def _add(self, entry: _Entry, sign: int) -> None:
        queue = self._totals.setdefault(entry.worker, {}).setdefault(entry.cluster_queue, {})
        for resource, amount in entry.requests.items():
            left = queue.get(resource, 0) + sign * amount
            if left:
                queue[resource] = left
            else:
                queue.pop(resource, None)
        if not queue:
            del self._totals[entry.worker][entry.cluster_queue]

    def record(self, workload: str, *, worker: str, cluster_queue: str, requests: Mapping[str, int]) -> None:
        self.forget(workload)
        entry = _Entry(worker=worker, cluster_queue=cluster_queue, requests=dict(requests))
        self._entries[workload] = entry
        self._add(entry, 1)

    def reserved(self, workload: str, *, at: dt.datetime) -> None:
        entry = self._entries.get(workload)
        if entry is not None and entry.reserved_at is None:
            entry.reserved_at = at

    def forget(self, workload: str) -> None:
        entry = self._entries.pop(workload, None)
        if entry is not None:
            self._add(entry, -1)

    def report_arrived(self, worker: str, *, observed_at: dt.datetime) -> None:
        """Drop the entries of ``worker`` whose reservation the report (computed at ``observed_at``) includes."""
        done = [
            key
            for key, entry in self._entries.items()
            if entry.worker == worker and entry.reserved_at is not None and observed_at > entry.reserved_at
        ]
        for key in done:
            self.forget(key)

    def in_flight(self, worker: str) -> Mapping[str, Mapping[str, int]]:
        """ClusterQueue → summed requests still in flight to ``worker``: a live view that follows every later
        change (a scheduling pass builds each worker's state once and its decisions see each other's)."""
        return self._totals.setdefault(worker, {})

    def __contains__(self, workload: object) -> bool:
        return workload in self._entries

    def __len__(self) -> int:
        return len(self._entries)
