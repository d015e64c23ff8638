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
    _entries: dict[str, _Entry] = field(default_factory=dict)

    def record(self, workload: str, *, worker: str, cluster_queue: str, requests: Mapping[str, int]) -> None:
        self._entries[workload] = _Entry(worker=worker, cluster_queue=cluster_queue, requests=dict(requests))

    def reserved(self, workload: str, *, at: dt.datetime) -> None:
        entry = self._entries.get(workload)
        if entry is not None and entry.reserved_at is None:
            entry.reserved_at = at

    def forget(self, workload: str) -> None:
        self._entries.pop(workload, None)

    def report_arrived(self, worker: str, *, observed_at: dt.datetime) -> None:
        """Drop the entries of ``worker`` whose reservation the report (computed at ``observed_at``) includes."""
        done = [
            key
            for key, entry in self._entries.items()
            if entry.worker == worker and entry.reserved_at is not None and observed_at > entry.reserved_at
        ]
        for key in done:
            del self._entries[key]

    def in_flight(self, worker: str) -> dict[str, dict[str, int]]:
        """ClusterQueue → summed requests still in flight to ``worker``."""
        totals: dict[str, dict[str, int]] = {}
        for entry in self._entries.values():
            if entry.worker != worker:
                continue
            queue = totals.setdefault(entry.cluster_queue, {})
            for resource, amount in entry.requests.items():
                queue[resource] = queue.get(resource, 0) + amount
        return totals

    def __contains__(self, workload: object) -> bool:
        return workload in self._entries

    def __len__(self) -> int:
        return len(self._entries)
