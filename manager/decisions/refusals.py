"""Workers that refused kfed-manager's copy of a Workload, and when they are tried again (pure).

A worker answers a copy's create with 403 Forbidden when the credentials in its MultiKueueCluster's kubeconfig lack
a permission, or when its own admission (a ResourceQuota, a policy or webhook) refuses the object. Neither heals by
retrying at once, and both heal without kfed: someone grants the permission or lifts the quota. Kueue retries the
remote create with backoff; kfed does the same, visibly:

- the worker is written to the Workload's ``kfed.io/refused-by`` annotation and the time it may be tried again to
  ``kfed.io/refused-until`` (one merge patch), and the Workload is withdrawn from it and requeued;
- until that time the worker is excluded for this Workload (it goes to another worker, or waits saying why);
- after it the worker is a candidate again; a new refusal writes a new time, twice as far off as the last, up to
  a maximum (:data:`MAX_REFUSAL_BACKOFF` by default; the count is the Workload's ``AdmissionCheck`` evictions in
  ``status.schedulingStats``, which every refusal adds one to).

Removing a worker from ``kfed.io/refused-by`` by hand allows it at once, as before.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from federation.api.workload import EVICTED_BY_ADMISSION_CHECK
from federation.conditions import format_time, parse_time
from manager.decisions.worker_lists import workers_in

Obj = Mapping[str, Any]

REFUSED_BY_ANNOTATION = "kfed.io/refused-by"
"""Comma-separated worker clusters that refused kfed-manager's copies of this Workload (403 Forbidden); they are not
dispatched to again until :data:`REFUSED_UNTIL_ANNOTATION`."""

REFUSED_UNTIL_ANNOTATION = "kfed.io/refused-until"
"""RFC 3339 time after which the workers in :data:`REFUSED_BY_ANNOTATION` are tried again (absent or unreadable:
they may be tried now)."""

DEFAULT_REFUSAL_BACKOFF = 30.0
"""Seconds a worker is avoided after its first refusal of a Workload (``--refusal-backoff``)."""

MAX_REFUSAL_BACKOFF = 900.0
"""The longest a refusing worker is avoided in one go by default (``--refusal-backoff-max``; Kueue's remote-create
retries grow to about 1000 s)."""


def refused_until(workload: Obj) -> dt.datetime | None:
    """When the listed refusals end (None: no time, or one that cannot be read)."""
    text = ((workload.get("metadata") or {}).get("annotations") or {}).get(REFUSED_UNTIL_ANNOTATION)
    if not text:
        return None
    try:
        return parse_time(str(text))
    except ValueError:
        return None


def refusal_end(workload: Obj, *, now: dt.datetime) -> dt.datetime | None:
    """When the refusals of this Workload that hold at ``now`` end (None: none holds)."""
    if not workers_in(workload, REFUSED_BY_ANNOTATION):
        return None
    until = refused_until(workload)
    return until if until is not None and now < until else None


def refused_workers(workload: Obj, *, now: dt.datetime) -> frozenset[str]:
    """The workers whose refusal of this Workload still holds at ``now``."""
    if refusal_end(workload, now=now) is None:
        return frozenset()
    return workers_in(workload, REFUSED_BY_ANNOTATION)


def refusal_backoff(workload: Obj, *, base: float, cap: float = MAX_REFUSAL_BACKOFF) -> float:
    """Seconds to avoid a worker that refused ``workload`` just now: ``base`` doubled for every ``AdmissionCheck``
    eviction it already had (each earlier refusal was one), at most ``cap``."""
    stats = (workload.get("status") or {}).get("schedulingStats") or {}
    evictions = sum(
        int(entry.get("count") or 0)
        for entry in stats.get("evictions") or ()
        if entry.get("reason") == EVICTED_BY_ADMISSION_CHECK
    )
    return float(min(cap, base * 2 ** min(evictions, 32)))


def refusal_annotations(
    workload: Obj, worker: str, *, now: dt.datetime, base: float, cap: float = MAX_REFUSAL_BACKOFF
) -> dict[str, str]:
    """The annotations (a merge patch) recording that ``worker`` refused ``workload`` at ``now``: the workers whose
    refusal still holds, and ``worker``, avoided until ``now`` plus :func:`refusal_backoff`."""
    workers = sorted(refused_workers(workload, now=now) | {worker})
    until = now + dt.timedelta(seconds=refusal_backoff(workload, base=base, cap=cap))
    return {REFUSED_BY_ANNOTATION: ",".join(workers), REFUSED_UNTIL_ANNOTATION: format_time(until)}


def refused_message(worker: str, refusal: str, *, until: dt.datetime | None) -> str:
    retry = f"it is tried again after {format_time(until)}" if until is not None else "it may be tried again"
    return (
        f'worker cluster "{worker}" refused kfed-manager\'s copy ({refusal}; the Warning Event '
        "RemoteWriteForbidden on this Workload says why: a permission missing from the credentials in its "
        "MultiKueueCluster's kubeconfig, or the worker's admission refusing the copy); the workload is dispatched "
        f"elsewhere, and {retry} ({REFUSED_UNTIL_ANNOTATION}; to allow it at once, remove it from the Workload's "
        f"{REFUSED_BY_ANNOTATION} annotation)"
    )


class RefusalEnds:
    """When the refusals that kept a Workload from every worker end, for the scheduler: a Workload parked because
    no worker would take it wakes only when something it depends on changes, and the end of a refusal is a change
    no watch event announces. :meth:`note` records an end; :meth:`passed` is a count that grows when ends pass (part
    of what the parked Workload was parked under); :meth:`next_end` is when to run a pass for it."""

    def __init__(self) -> None:
        self._pending: set[float] = set()
        self._passed = 0

    def note(self, until: dt.datetime | None) -> None:
        if until is not None:
            self._pending.add(until.timestamp())

    def passed(self, now: float) -> int:
        """How many times ends were seen to pass, up to ``now`` (epoch seconds)."""
        ended = {at for at in self._pending if at <= now}
        if ended:
            self._pending -= ended
            self._passed += 1
        return self._passed

    def next_end(self) -> float | None:
        return min(self._pending, default=None)
