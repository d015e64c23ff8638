"""The ``Requeued`` condition of a Workload whose quota was released, as Kueue writes it (pure; manager and agent).

Why this module exists: a user reads ``Requeued`` to know whether an evicted Workload is queued again and why, and
Kueue's tooling (``kueuectl``, dashboards, the queued-wait-time metrics, which start at its transition) relies on
Kueue's reasons. Kueue (v0.19/v0.20, its job reconciler and workload controller) writes it in two steps:

- **On release** (the Job stopped, the reservation released): ``Requeued`` takes the ``Evicted`` reason and
  message, ``True`` for a preemption and the other evictions that simply queue the Workload again, but ``False``
  for a deactivated Workload and for the evictions that come with a requeue backoff: ``PodsReadyTimeout`` and
  ``AdmissionCheck`` (a check in Retry, or MultiKueue taking the Workload back).
- **Later** (the workload controller, on an active, unfinished Workload, also one that already holds quota again):
  ``Requeued=False`` with reason
  ``Deactivated`` (a user set ``spec.active: false``; not Kueue's own ``DeactivatedDueTo…`` deactivations) becomes
  ``True`` reason ``Reactivated`` once ``spec.active`` is true again; ``Requeued=False`` with reason
  ``PodsReadyTimeout`` or ``AdmissionCheck`` becomes ``True`` reason ``BackoffFinished`` once
  ``status.requeueState.requeueAt`` has passed (at once when there is none), and ``requeueAt`` is cleared (the
  count is kept); ``Requeued=False`` with reason ``LocalQueueStopped`` (``ClusterQueueStopped``) becomes ``True``
  reason ``LocalQueueRestarted`` (``ClusterQueueRestarted``) once the Workload's LocalQueue (the ClusterQueue it
  points to) exists with ``stopPolicy`` ``None`` again.

:func:`requeued_on_release` is the first step, :func:`requeued_step` the second; kfed-manager and kfed-agent both
hold Workloads that go through it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from federation.api.workload import (
    EVICTED_BY_ADMISSION_CHECK,
    EVICTED_BY_CLUSTER_QUEUE_STOPPED,
    EVICTED_BY_DEACTIVATION,
    EVICTED_BY_LOCAL_QUEUE_STOPPED,
    EVICTED_BY_PODS_READY_TIMEOUT,
    REQUEUED,
)
from federation.conditions import conditions_of, find_condition, is_true, parse_time, set_condition, workload_generation

Obj = dict[str, Any]

BACKOFF_REASONS = frozenset({EVICTED_BY_PODS_READY_TIMEOUT, EVICTED_BY_ADMISSION_CHECK})
"""Eviction reasons after which Kueue leaves ``Requeued=False`` until the requeue backoff has passed."""
STOP_REASONS = frozenset({EVICTED_BY_CLUSTER_QUEUE_STOPPED, EVICTED_BY_LOCAL_QUEUE_STOPPED})
"""Eviction reasons after which Kueue leaves ``Requeued=False`` until the stopped queue is started again."""
REASON_CLUSTER_QUEUE_RESTARTED = "ClusterQueueRestarted"
MESSAGE_CLUSTER_QUEUE_RESTARTED = "The ClusterQueue was restarted after being stopped"
REASON_LOCAL_QUEUE_RESTARTED = "LocalQueueRestarted"
MESSAGE_LOCAL_QUEUE_RESTARTED = "The LocalQueue was restarted after being stopped"
REASON_REACTIVATED = "Reactivated"
MESSAGE_REACTIVATED = "The workload was reactivated"
REASON_BACKOFF_FINISHED = "BackoffFinished"
MESSAGE_BACKOFF_FINISHED = "The workload backoff was finished"


def active(workload: Mapping[str, Any]) -> bool:
    return (workload.get("spec") or {}).get("active", True) is not False


def requeued_on_release(workload: Mapping[str, Any], *, reason: str) -> bool:
    """The status of ``Requeued`` (its reason is the eviction's) when the quota of ``workload``, evicted with
    ``reason``, is released: False for a deactivated workload, for the evictions with a backoff and for those by a
    stopped queue."""
    return active(workload) and reason not in BACKOFF_REASONS and reason not in STOP_REASONS


def _requeue_at(workload: Mapping[str, Any]) -> dt.datetime | None:
    at = ((workload.get("status") or {}).get("requeueState") or {}).get("requeueAt")
    return parse_time(str(at)) if at else None


@dataclass(frozen=True, slots=True)
class RequeuedStep:
    """``status`` (a status merge patch setting ``Requeued=True`` with ``reason``/``message``), or None while the
    backoff runs until ``wait_until``."""

    status: Obj | None
    reason: str
    message: str
    wait_until: dt.datetime | None = None


def may_take_requeued_step(workload: Mapping[str, Any]) -> bool:
    """Whether :func:`requeued_step` can have a step for the workload (what the passes ask of every workload)."""
    requeued = find_condition(workload, REQUEUED)
    if requeued is None or requeued.get("status") != "False":
        return False
    reason = requeued.get("reason")
    if reason != EVICTED_BY_DEACTIVATION and reason not in BACKOFF_REASONS and reason not in STOP_REASONS:
        return False
    return active(workload) and not is_true(workload, "Finished")


def requeued_reason_of(workload: Mapping[str, Any]) -> str:
    """The reason of the workload's ``Requeued`` condition ("" without one)."""
    return str((find_condition(workload, REQUEUED) or {}).get("reason") or "")


def running(queue: Mapping[str, Any] | None) -> bool:
    """A LocalQueue or ClusterQueue that exists and is not stopped (``stopPolicy`` absent or ``None``)."""
    return queue is not None and ((queue.get("spec") or {}).get("stopPolicy") or "None") == "None"


def queues_of(
    workload: Mapping[str, Any],
    *,
    local_queue: Callable[[str, str], Mapping[str, Any] | None],
    cluster_queue: Callable[[str], Mapping[str, Any] | None],
) -> tuple[Mapping[str, Any] | None, Mapping[str, Any] | None]:
    """The workload's LocalQueue and the ClusterQueue it points to, found with ``local_queue(namespace, name)`` and
    ``cluster_queue(name)`` (a cache's lookups); looked up only for a workload released by a stopped queue, the
    only case :func:`requeued_step` reads them."""
    if requeued_reason_of(workload) not in STOP_REASONS:
        return None, None
    namespace = str((workload.get("metadata") or {}).get("namespace") or "")
    name = str((workload.get("spec") or {}).get("queueName") or "")
    found = local_queue(namespace, name) if name else None
    target = str((found.get("spec") or {}).get("clusterQueue") or "") if found is not None else ""
    return found, cluster_queue(target) if target else None


def requeued_step(
    workload: Mapping[str, Any],
    *,
    now: dt.datetime,
    local_queue: Mapping[str, Any] | None,
    cluster_queue: Mapping[str, Any] | None,
) -> RequeuedStep | None:
    """Kueue's second step for an active, unfinished workload (see the module docstring):
    ``Reactivated``, ``BackoffFinished``, ``LocalQueueRestarted`` or ``ClusterQueueRestarted``, a wait for the
    backoff, or None. ``local_queue`` is the workload's LocalQueue object and ``cluster_queue`` the ClusterQueue it
    points to (None when absent); only the stop reasons read them (a caller may pass None for the others)."""
    if not may_take_requeued_step(workload):
        return None
    reason = requeued_reason_of(workload)
    at = None
    if reason == EVICTED_BY_DEACTIVATION:
        new_reason, message = REASON_REACTIVATED, MESSAGE_REACTIVATED
    elif reason == EVICTED_BY_LOCAL_QUEUE_STOPPED:
        if not running(local_queue):
            return None  # the LocalQueue's watch event brings the workload back when it is started
        new_reason, message = REASON_LOCAL_QUEUE_RESTARTED, MESSAGE_LOCAL_QUEUE_RESTARTED
    elif reason == EVICTED_BY_CLUSTER_QUEUE_STOPPED:
        if not running(cluster_queue):
            return None  # likewise the ClusterQueue's
        new_reason, message = REASON_CLUSTER_QUEUE_RESTARTED, MESSAGE_CLUSTER_QUEUE_RESTARTED
    else:
        at = _requeue_at(workload)
        if at is not None and at > now:
            return RequeuedStep(None, REASON_BACKOFF_FINISHED, MESSAGE_BACKOFF_FINISHED, wait_until=at)
        new_reason, message = REASON_BACKOFF_FINISHED, MESSAGE_BACKOFF_FINISHED
    conditions, _ = set_condition(
        conditions_of(workload),
        condition_type=REQUEUED,
        status=True,
        reason=new_reason,
        message=message,
        now=now,
        observed_generation=workload_generation(workload),
    )
    status: Obj = {"conditions": conditions}
    if at is not None:
        status["requeueState"] = {"requeueAt": None}  # merge patch: the count stays
    return RequeuedStep(status, new_reason, message)


__all__ = [
    "BACKOFF_REASONS",
    "MESSAGE_BACKOFF_FINISHED",
    "MESSAGE_CLUSTER_QUEUE_RESTARTED",
    "MESSAGE_LOCAL_QUEUE_RESTARTED",
    "MESSAGE_REACTIVATED",
    "REASON_BACKOFF_FINISHED",
    "REASON_CLUSTER_QUEUE_RESTARTED",
    "REASON_LOCAL_QUEUE_RESTARTED",
    "REASON_REACTIVATED",
    "STOP_REASONS",
    "RequeuedStep",
    "may_take_requeued_step",
    "queues_of",
    "requeued_on_release",
    "requeued_reason_of",
    "requeued_step",
    "running",
]
