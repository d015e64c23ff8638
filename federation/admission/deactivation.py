"""A deactivated Workload (``spec.active: false``) is evicted, as Kueue's workload controller does it (pure; the
agent and kfed-manager).

Why this module exists: a user, a script or kfed itself may set ``spec.active: false`` on any Workload, a manager's
or a worker's, with quota or without. Kueue then evicts it (``Evicted=True`` reason ``Deactivated``, message ``The
workload is deactivated``; ``DeactivatedDueTo<cause>`` and ``… due to <message>`` when a ``DeactivationTarget``
condition names why, which then goes) and drops its ``requeueState``; its Job reconciler stops the Job and releases
any quota (``Requeued=False`` reason ``Deactivated``, until the Workload is reactivated:
``federation.admission.requeued``). On a worker, without it the Job kept running and the quota stayed held, and the
manager never learnt anything; with it the end is the one the agent gives every eviction
(``worker_agent.decisions.preemption``), and a MultiKueue manager sees its copy evicted and takes the Workload back.
On the manager, a Workload holding quota is withdrawn from its worker first (``manager.decisions.withdrawal``); one
holding none is marked at once.

A Workload that is finished or already evicted is left alone (the agent's own deactivations, ``JobCopyMissing``,
``OutOfSync`` and a Rejected admission check, evict in the same step).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from federation.admission.eviction_counts import scheduling_stats_after
from federation.api.workload import (
    DEACTIVATED_MESSAGE,
    DEACTIVATION_TARGET,
    EVICTED,
    EVICTED_BY_DEACTIVATION,
    FINISHED,
)
from federation.conditions import conditions_of, find_condition, is_true, set_condition, workload_generation

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class DeactivationEviction:
    """Merge ``status`` into the Workload's status: it is evicted with ``reason`` and ``message``."""

    status: Obj
    reason: str
    message: str


def needs_deactivation_eviction(workload: Mapping[str, Any]) -> bool:
    """``spec.active: false``, neither finished nor evicted (what the passes ask of every workload)."""
    if (workload.get("spec") or {}).get("active", True) is not False:
        return False
    return not is_true(workload, FINISHED) and not is_true(workload, EVICTED)


def deactivation_reason(workload: Mapping[str, Any]) -> tuple[str, str]:
    """(Evicted reason, message) for a deactivated workload: Kueue's ``DeactivatedDueTo<cause>`` when kfed
    deactivated it (a ``DeactivationTarget`` condition names the cause), plain ``Deactivated`` when a user did."""
    target = find_condition(workload, DEACTIVATION_TARGET)
    if target is not None and target.get("status") == "True" and target.get("reason"):
        return (
            f"{EVICTED_BY_DEACTIVATION}DueTo{target['reason']}",
            f"{DEACTIVATED_MESSAGE} due to {target.get('message') or target['reason']}",
        )
    return EVICTED_BY_DEACTIVATION, DEACTIVATED_MESSAGE


def deactivation_eviction(workload: Mapping[str, Any], *, now: dt.datetime) -> DeactivationEviction | None:
    """The eviction of a deactivated workload (see the module docstring), or None when it needs none."""
    if not needs_deactivation_eviction(workload):
        return None
    target = find_condition(workload, DEACTIVATION_TARGET)
    reason, message = deactivation_reason(workload)
    kept: list[Mapping[str, Any]] = list(conditions_of(workload))
    if target is not None:
        kept = [c for c in kept if c.get("type") != DEACTIVATION_TARGET]
    conditions, _ = set_condition(
        kept,
        condition_type=EVICTED,
        status=True,
        reason=reason,
        message=message,
        now=now,
        observed_generation=workload_generation(workload),
    )
    status: Obj = {"conditions": conditions, "schedulingStats": scheduling_stats_after(workload, reason)}
    if (workload.get("status") or {}).get("requeueState") is not None:
        status["requeueState"] = None  # Kueue drops it: a reactivated workload starts its requeue count afresh
    return DeactivationEviction(status, reason, message)


__all__ = ["DeactivationEviction", "deactivation_eviction", "deactivation_reason", "needs_deactivation_eviction"]
