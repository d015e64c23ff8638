"""Kueue's maximum execution time: a Workload admitted for longer than its ``spec.maximumExecutionTimeSeconds`` is
deactivated (pure).

A user caps how long a Job may run with the label ``kueue.x-k8s.io/max-exec-time-seconds``; the Job's Workload carries
it as ``maximumExecutionTimeSeconds`` (``federation.workload_from_job``). The clock runs while the Workload is
``Admitted``: from that condition's ``lastTransitionTime``, plus ``status.accumulatedPastExecutionTimeSeconds``, the
admitted time of its earlier runs (a Workload preempted or taken back from a lost worker keeps what it used). When
the budget is spent, the Workload gets Kueue's ``DeactivationTarget`` condition (reason
``MaximumExecutionTimeExceeded``, message ``exceeding the maximum execution time``), a Warning Event of that reason,
and ``spec.active: false``; the usual deactivation follows (``federation.admission.deactivation``): evicted with
``DeactivatedDueToMaximumExecutionTimeExceeded``, withdrawn from its worker, the Job suspended, and not queued again
until someone reactivates it. A reactivated Workload starts with a whole budget again.

kfed-manager keeps this clock for the manager's Workloads, and kfed-agent for the Workloads on its worker that carry
the field: those of Jobs queued on the worker itself, or a copy a stock MultiKueue manager sent with it, as Kueue on
that worker would. kfed-manager's own copies carry neither the label nor the field
(``manager.decisions.remote_copies``): a worker counting from its own admission would evict its copy first, and the
manager would take that for a worker's eviction and dispatch the Workload again.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from federation.api.workload import DEACTIVATION_TARGET
from federation.conditions import conditions_of, find_condition, format_time, is_true, observing_generation, parse_time

Obj = Mapping[str, Any]

REASON_EXCEEDED = "MaximumExecutionTimeExceeded"
EXCEEDED_MESSAGE = "exceeding the maximum execution time"
ACCUMULATED_FIELD = "accumulatedPastExecutionTimeSeconds"


def limit_of(workload: Obj) -> int | None:
    """The Workload's ``spec.maximumExecutionTimeSeconds``, or None."""
    limit = (workload.get("spec") or {}).get("maximumExecutionTimeSeconds")
    return None if limit is None else int(limit)


def _admitted_since(workload: Obj) -> dt.datetime | None:
    if not is_true(workload, "Admitted"):
        return None
    stamp = (find_condition(workload, "Admitted") or {}).get("lastTransitionTime")
    return parse_time(stamp) if stamp else None


def accumulated(workload: Obj) -> int:
    """Seconds the Workload was admitted before its current admission."""
    return int((workload.get("status") or {}).get(ACCUMULATED_FIELD) or 0)


def execution_time_left(workload: Obj, *, now: dt.datetime) -> float | None:
    """Seconds of its budget the admitted Workload has left (0 or less: spent); None when it has no limit, is not
    admitted, or is finished."""
    limit = limit_of(workload)
    since = _admitted_since(workload)
    if limit is None or since is None or is_true(workload, "Finished"):
        return None
    return limit - accumulated(workload) - (now - since).total_seconds()


def execution_deadline(workload: Obj) -> float | None:
    """When (epoch seconds) the admitted Workload's budget is spent; None when it has no limit, is not admitted, is
    finished, or is deactivated already (its eviction follows)."""
    limit = limit_of(workload)
    since = _admitted_since(workload)
    if limit is None or since is None or is_true(workload, "Finished"):
        return None
    if (workload.get("spec") or {}).get("active") is False:
        return None
    return since.timestamp() + limit - accumulated(workload)


def accumulated_on_release(workload: Obj, *, now: dt.datetime) -> int | None:
    """``accumulatedPastExecutionTimeSeconds`` once an admitted Workload's admission ends now: what it had plus the
    whole seconds of this admission, as Kueue counts it. None when it is not admitted (nothing to add)."""
    since = _admitted_since(workload)
    if since is None:
        return None
    return accumulated(workload) + max(0, int((now - since).total_seconds()))


def total_execution_time(workload: Obj) -> float | None:
    """Seconds a finished Workload ran admitted in all, its earlier admissions included, as Kueue v0.20 measures it
    for ``kueue_execution_time_seconds``: from ``Admitted`` to ``Finished`` (both ``True``, by their
    ``lastTransitionTime``) plus ``accumulatedPastExecutionTimeSeconds``. None unless it is both."""
    admitted, finished = find_condition(workload, "Admitted"), find_condition(workload, "Finished")
    if not admitted or not finished or admitted.get("status") != "True" or finished.get("status") != "True":
        return None
    since, until = admitted.get("lastTransitionTime"), finished.get("lastTransitionTime")
    if not since or not until:
        return None
    return max(0.0, accumulated(workload) + (parse_time(until) - parse_time(since)).total_seconds())


def exceeded_status(workload: Obj, *, now: dt.datetime) -> dict[str, Any]:
    """The status patch that marks the Workload for deactivation: Kueue's ``DeactivationTarget``."""
    target = observing_generation(
        workload,
        {
            "type": DEACTIVATION_TARGET,
            "status": "True",
            "reason": REASON_EXCEEDED,
            "message": EXCEEDED_MESSAGE,
            "lastTransitionTime": format_time(now),
        },
    )
    kept = [c for c in conditions_of(workload) if c.get("type") != DEACTIVATION_TARGET]
    return {"conditions": [*kept, target]}


def exceeded_note(limit: int) -> str:
    """The Warning Event's message (Kueue's)."""
    return f"The maximum execution time ({limit}s) exceeded"
