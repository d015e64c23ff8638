"""The Workload's lifecycle on the manager: its phases and the transitions between them, as data (pure).

The remote sync (what to do next, and which worker holds the workload), its garbage collection (which copies
belong where) and ``kubectl kfed`` (what to show) ask here. The scheduler keeps reading the quota state shared with
the agent (``federation.admission.api_workloads``); :data:`TRANSITIONS` states the allowed moves, and the unit
tests walk the eviction path through it. The phase is derived from Kueue's own API — the
``QuotaReserved``, ``Admitted``, ``Evicted``, ``Requeued`` and ``Finished`` conditions, ``spec.active``,
``status.nominatedClusterNames`` / ``status.clusterName`` — plus, where the caller has them, the manager Job and
the remote copies, so nothing is remembered outside the API.

Forward: pending → reserved (quota reserved, worker nominated) → dispatched (copies in the worker) → admitted
(on the worker) → running → finished. Backwards: any dispatched phase → evicting (``Evicted=True`` while the
reservation is still held: the copies are being withdrawn) → requeued (reservation released, queued again).
Sideways: deactivated (``spec.active: false``) and back to pending.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

from federation.conditions import is_true

Obj = Mapping[str, Any]


class Phase(enum.Enum):
    PENDING = "Pending"
    RESERVED = "Reserved"
    DISPATCHED = "Dispatched"
    ADMITTED = "Admitted"
    RUNNING = "Running"
    EVICTING = "Evicting"
    REQUEUED = "Requeued"
    FINISHED = "Finished"
    DEACTIVATED = "Deactivated"


P = Phase
_DISPATCHED_PHASES = (P.RESERVED, P.DISPATCHED, P.ADMITTED, P.RUNNING)

TRANSITIONS: Mapping[Phase, frozenset[Phase]] = {
    P.PENDING: frozenset({P.RESERVED, P.DEACTIVATED, P.FINISHED}),
    P.REQUEUED: frozenset({P.RESERVED, P.DEACTIVATED, P.FINISHED, P.PENDING}),
    P.DEACTIVATED: frozenset({P.PENDING, P.REQUEUED, P.FINISHED}),
    P.RESERVED: frozenset({P.DISPATCHED, P.ADMITTED, P.RUNNING, P.FINISHED, P.EVICTING}),
    P.DISPATCHED: frozenset({P.ADMITTED, P.RUNNING, P.FINISHED, P.EVICTING}),
    P.ADMITTED: frozenset({P.RUNNING, P.FINISHED, P.EVICTING}),
    P.RUNNING: frozenset({P.FINISHED, P.EVICTING}),
    P.EVICTING: frozenset({P.REQUEUED, P.DEACTIVATED, P.FINISHED}),  # deactivated: a Rejected admission check
    P.FINISHED: frozenset(),
}
"""Which phases each phase may move to in one observed step. Two reads of the API may miss the phases passed in
between (a Job that finishes before the manager saw it run), so the table lists those skips too."""


def may_follow(old: Phase, new: Phase) -> bool:
    """True when an observation of ``new`` after ``old`` is a legal move (or no move)."""
    return new is old or new in TRANSITIONS[old]


def _job_started(job: Obj | None) -> bool:
    status = (job or {}).get("status") or {}
    return bool(status.get("startTime") or status.get("active") or status.get("succeeded") or status.get("failed"))


def phase_of(
    workload: Obj,
    *,
    manager_job: Obj | None = None,
    remote_workload: Obj | None = None,
    copies_known: bool = False,
) -> Phase:
    """The workload's phase. ``copies_known``: the caller looked at the nominated worker, and ``remote_workload``
    is our copy there (None when absent); otherwise a reserved workload counts as dispatched only once admitted."""
    if is_true(workload, "Finished"):
        return P.FINISHED
    reserved = is_true(workload, "QuotaReserved")
    if not reserved:
        if (workload.get("spec") or {}).get("active") is False:
            return P.DEACTIVATED
        if is_true(workload, "Requeued") or is_true(workload, "Evicted"):
            return P.REQUEUED
        return P.PENDING
    if is_true(workload, "Evicted"):
        return P.EVICTING
    if is_true(workload, "Admitted"):
        return P.RUNNING if _job_started(manager_job) else P.ADMITTED
    if copies_known and remote_workload is not None:
        return P.DISPATCHED
    return P.RESERVED


def holds_worker(phase: Phase) -> bool:
    """Phases in which the workload may have copies in its worker (so it must not go to another one)."""
    return phase in _DISPATCHED_PHASES or phase is P.EVICTING


def held_worker(workload: Obj) -> str | None:
    """The worker that holds the workload (its copies may be there), or None.

    ``status.clusterName`` once admitted, before that the single nominated worker — while the quota reservation
    is held (a finished workload keeps its worker until its copies are cleaned up)."""
    if not (is_true(workload, "QuotaReserved") or is_true(workload, "Finished")):
        return None
    status = workload.get("status") or {}
    names = list(status.get("nominatedClusterNames") or [])
    cluster = status.get("clusterName")
    return str(cluster) if cluster else (str(names[0]) if len(names) == 1 else None)


def copy_belongs(workload: Obj | None, *, worker: str, manager_uid: str | None) -> bool:
    """Whether a copy in ``worker`` that names the manager Workload uid ``manager_uid`` is still wanted there: the
    Workload exists with that uid and ``worker`` holds it. Any other copy is stale and is deleted (a requeued
    workload's copy left on a worker that was unreachable, a copy of a deleted or re-created Workload)."""
    if workload is None or (workload.get("metadata") or {}).get("uid") != manager_uid:
        return False
    return held_worker(workload) == worker
