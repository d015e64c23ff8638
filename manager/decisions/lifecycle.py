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
from collections.abc import Set as AbstractSet
from typing import Any

from federation.api.labels import MULTIKUEUE_ORIGIN_LABEL, PREBUILT_WORKLOAD_ANNOTATION, PREBUILT_WORKLOAD_LABEL
from federation.conditions import is_true
from federation.protocol import MANAGER_UID_LABEL
from federation.workload_match import pod_sets_match

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


_WAITING_PHASES = (P.PENDING, P.REQUEUED, P.DEACTIVATED)


def runs_unadmitted(workload: Obj, manager_job: Obj) -> bool:
    """The manager Job is not suspended while its Workload holds no quota (waiting, requeued or deactivated): its
    user unsuspended a waiting Job. As in Kueue, it is suspended again (a Job kfed starts was admitted first, and
    kfed stops a withdrawn Job before it releases the quota, so this is never kfed's own write)."""
    if (manager_job.get("spec") or {}).get("suspend", False):
        return False
    return phase_of(workload) in _WAITING_PHASES


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


def copy_belongs(workload: Obj | None, *, worker_names: AbstractSet[str], manager_uid: str | None) -> bool:
    """Whether a copy in a worker that names the manager Workload uid ``manager_uid`` is still wanted there: the
    Workload exists with that uid and the worker holds it, by one of its names ``worker_names`` (the MultiKueueClusters
    that reach it, ``shared_servers``), and it is not being deleted. Any other copy is stale and is deleted (a
    requeued workload's copy left on a worker that was unreachable, a copy of a deleted or re-created Workload, or of
    one a finalizer holds while it is deleted)."""
    meta = (workload or {}).get("metadata") or {}
    if workload is None or meta.get("uid") != manager_uid or meta.get("deletionTimestamp"):
        return False
    return held_worker(workload) in worker_names


def adoptions(
    workload_copy: Obj | None,
    job_copy: Obj | None,
    *,
    workload: Obj | None,
    worker: str,
    origin: str,
) -> list[Obj]:
    """The copies in ``worker`` that a stock Kueue MultiKueue manager made of ``workload`` before kfed-manager took
    over the manager cluster, which kfed-manager takes as its own (it labels them with the Workload's uid,
    ``MANAGER_UID_LABEL``) instead of deleting a Job that runs; empty when there are none.

    Such a copy carries our origin label and no manager-uid label (kfed-manager's copies always carry one), and the
    worker holds ``workload``. The Workload copy asks for the pod sets ``workload`` asks for (Kueue copies them
    verbatim, and carries nothing else that names the Workload it copies): a copy of an earlier Workload of the same
    name that was replaced because its Job changed size or requests is not taken for this one's. Creation times are
    not compared: they come from two clusters' clocks, and a worker clock a second behind made every copy look older
    than its Workload. The Job copy names the Workload as its prebuilt Workload, and goes only with a Workload copy
    that is (or is being made) ours."""
    if workload is None or held_worker(workload) != worker:
        return []
    meta = workload.get("metadata") or {}
    uid, name = meta.get("uid"), meta.get("name")

    def labels_of(copy: Obj) -> Mapping[str, Any]:
        return (copy.get("metadata") or {}).get("labels") or {}

    def unlabelled(copy: Obj | None) -> bool:
        return (
            copy is not None
            and labels_of(copy).get(MULTIKUEUE_ORIGIN_LABEL) == origin
            and (MANAGER_UID_LABEL not in labels_of(copy))
        )

    adopted: list[Obj] = []
    if unlabelled(workload_copy) and pod_sets_match(
        _pod_sets(workload), _pod_sets(workload_copy or {}), admitted=False
    ):
        adopted.append(workload_copy or {})
    ours = bool(adopted) or (workload_copy is not None and labels_of(workload_copy).get(MANAGER_UID_LABEL) == uid)
    if ours and unlabelled(job_copy) and prebuilt_name(job_copy or {}) == name:
        adopted.append(job_copy or {})
    return adopted


def _pod_sets(workload: Obj) -> list[Mapping[str, Any]]:
    return list((workload.get("spec") or {}).get("podSets") or ())


def prebuilt_name(job: Obj) -> str | None:
    """The prebuilt Workload a Job copy names: the annotation (what a stock Kueue manager writes), else the label."""
    meta = job.get("metadata") or {}
    found = (meta.get("annotations") or {}).get(PREBUILT_WORKLOAD_ANNOTATION) or (meta.get("labels") or {}).get(
        PREBUILT_WORKLOAD_LABEL
    )
    return str(found) if found else None
