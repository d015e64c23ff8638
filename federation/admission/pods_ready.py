"""Kueue's waitForPodsReady: an admitted workload whose pods do not become ready in time is evicted and requeued
with backoff, and deactivated after too many requeues (pure; manager and agent).

kfed-manager decides for the manager's Workloads, because the requeue and its backoff belong to the global queue: the
worker only runs the copy, and its readiness is read from the Job copy on the worker. kfed-agent decides, the same way,
for the other Workloads on its worker (those of Jobs queued there, a stock MultiKueue manager's copies), from their Job,
as Kueue on that worker would (kfed-manager's copies are the manager's to judge). A Job's pods are ready when
``ready + succeeded`` reach the pod sets' count, as Kueue's batch/v1 Job integration counts it. The clock starts when
the workload was ``Admitted``; a workload whose pods were ready once and then are not gets ``recovery_timeout`` from
that moment (none: it is never evicted for that). Eviction uses Kueue's reason ``PodsReadyTimeout`` and message,
``status.requeueState`` counts the requeues and says when the workload may compete again: ``base · 2^(count-1)``
seconds, capped at ``max``. One requeue past ``backoff_limit_count`` deactivates the workload instead
(``DeactivationTarget`` reason ``RequeuingLimitExceeded``), as Kueue does. Off unless configured, like Kueue.

With ``block_admission`` (:func:`admission_blocked`), nothing new is admitted, in any ClusterQueue, while a workload
holding quota is not ``PodsReady=True``: Jobs start one at a time, so two large ones cannot each hold half of the
capacity while neither can start.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from federation.conditions import find_condition, format_time, is_true, observing_generation, parse_time

Obj = Mapping[str, Any]

REASON_PODS_READY_TIMEOUT = "PodsReadyTimeout"
REASON_REQUEUING_LIMIT_EXCEEDED = "RequeuingLimitExceeded"
REQUEUING_LIMIT_MESSAGE = "exceeding the maximum number of re-queuing retries"
WAIT_FOR_START = "WaitForStart"
REASON_WAITING_FOR_PODS_READY = "WaitingForPodsReady"
"""Kueue's ``QuotaReserved=False`` reason while blockAdmission holds a workload back."""
BLOCK_ADMISSION_MESSAGE = "waiting for all admitted workloads to be in PodsReady condition"
WAIT_FOR_RECOVERY = "WaitForRecovery"


BACKOFF_BASE_SECONDS = 60.0
BACKOFF_MAX_SECONDS = 3600.0


@dataclass(frozen=True, slots=True)
class WaitForPodsReady:
    """Kueue's ``waitForPodsReady`` settings, with its defaults."""

    timeout: float = 300.0
    recovery_timeout: float | None = None
    backoff_limit_count: int | None = None
    """Requeues allowed before the workload is deactivated (None: requeued forever)."""
    backoff_base_seconds: float = BACKOFF_BASE_SECONDS
    backoff_max_seconds: float = BACKOFF_MAX_SECONDS
    block_admission: bool = False
    """Admit nothing while a workload holding quota is not ``PodsReady=True`` (Kueue's ``blockAdmission``)."""


@dataclass(frozen=True, slots=True)
class PodsReadyStep:
    """What the manager does about one admitted workload's readiness now (every field may be empty)."""

    condition: dict[str, Any] | None = None
    """A ``PodsReady`` condition to write (it changed)."""
    evict_message: str | None = None
    """Evict with reason ``PodsReadyTimeout`` and this message; ``requeue_state`` goes with it."""
    evict_underlying: str = ""
    """Kueue's underlying cause of that eviction: ``WaitForStart`` or ``WaitForRecovery``, the wait that timed out."""
    requeue_state: dict[str, Any] | None = None
    deactivate: bool = False
    """The requeuing limit is exceeded: deactivate (``DeactivationTarget`` then ``spec.active: false``)."""
    recheck_after: float | None = None


def admission_blocked(holding: Iterable[Obj], *, admitted_in_pass: int) -> str | None:
    """Kueue's blockAdmission: why a new admission must wait (Kueue's message), or None.

    ``holding`` are the workloads holding quota (their ``PodsReady`` condition is read); ``admitted_in_pass``
    counts admissions already made in this scheduling pass, which are not ready yet either.
    """
    if admitted_in_pass > 0 or any(not is_true(workload, "PodsReady") for workload in holding):
        return BLOCK_ADMISSION_MESSAGE
    return None


def pod_count(workload: Obj) -> int:
    return sum(int(pod_set.get("count", 1)) for pod_set in (workload.get("spec") or {}).get("podSets") or ())


def ready_pod_count(job: Obj | None) -> int:
    """``ready + succeeded``, where succeeded includes the pods the Job controller has seen succeed but not counted yet
    (``uncountedTerminatedPods``): between the two status writes of a finishing Job its last pods are in neither
    ``ready`` nor ``succeeded``, and reading only those flapped ``PodsReady`` to WaitForRecovery and back."""
    status = (job or {}).get("status") or {}
    uncounted = len((status.get("uncountedTerminatedPods") or {}).get("succeeded") or ())
    return int(status.get("ready") or 0) + int(status.get("succeeded") or 0) + uncounted


def pods_ready(remote_job: Obj | None, count: int) -> bool:
    """``ready + succeeded >= count`` (:func:`ready_pod_count`), or the Job has succeeded."""
    if ready_pod_count(remote_job) >= count:
        return True
    status = (remote_job or {}).get("status") or {}
    return any(
        c.get("type") in ("SuccessCriteriaMet", "Complete") and c.get("status") == "True"
        for c in status.get("conditions") or ()
    )


def requeue_state_after(workload: Obj, *, now: dt.datetime, policy: WaitForPodsReady, jitter: float = 0.0) -> Obj:
    """``status.requeueState`` after one more requeue: the count, and ``requeueAt`` after Kueue's backoff."""
    count = int(((workload.get("status") or {}).get("requeueState") or {}).get("count") or 0) + 1
    delay = min(policy.backoff_base_seconds * 2 ** (count - 1), policy.backoff_max_seconds) * (1 + jitter)
    return {"count": count, "requeueAt": format_time(now + dt.timedelta(seconds=delay))}


def _condition(status: bool, reason: str, message: str, now: dt.datetime, workload: Obj) -> dict[str, Any]:
    return observing_generation(
        workload,
        {
            "type": "PodsReady",
            "status": "True" if status else "False",
            "reason": reason,
            "message": message,
            "lastTransitionTime": format_time(now),
        },
    )


def waiting_for_start(workload: Obj, *, now: dt.datetime) -> dict[str, Any]:
    """The ``PodsReady`` condition of a workload just admitted (written with its ``Admitted`` condition)."""
    return _condition(False, WAIT_FOR_START, "Not all pods are ready or succeeded", now, workload)


def pods_ready_step(
    workload: Obj, *, remote_job: Obj | None, now: dt.datetime, policy: WaitForPodsReady, jitter: float = 0.0
) -> PodsReadyStep:
    """The readiness step for a workload the manager holds as admitted on a worker (see the module docstring)."""
    spec = workload.get("spec") or {}
    if (
        not is_true(workload, "Admitted")
        or is_true(workload, "Finished")
        or is_true(workload, "Evicted")
        or spec.get("active") is False
    ):
        return PodsReadyStep()
    current = find_condition(workload, "PodsReady")
    if pods_ready(remote_job, pod_count(workload)):
        if current is not None and current.get("status") == "True":
            return PodsReadyStep()
        recovered = current is not None and current.get("reason") == WAIT_FOR_RECOVERY
        return PodsReadyStep(
            condition=_condition(
                True, "Recovered" if recovered else "Started", "All pods reached readiness", now, workload
            )
        )
    if current is not None and current.get("status") == "True":
        recovering = _condition(
            False, WAIT_FOR_RECOVERY, "At least one pod is not ready, waiting for recovery", now, workload
        )
        return PodsReadyStep(condition=recovering, recheck_after=policy.recovery_timeout)
    if current is not None and current.get("reason") == WAIT_FOR_RECOVERY:
        if policy.recovery_timeout is None:
            return PodsReadyStep()
        since, timeout = str(current.get("lastTransitionTime") or ""), policy.recovery_timeout
        waited = WAIT_FOR_RECOVERY
    else:
        since, timeout = (
            str((find_condition(workload, "Admitted") or {}).get("lastTransitionTime") or ""),
            policy.timeout,
        )
        waited = WAIT_FOR_START
    if not since:
        return PodsReadyStep()
    left = (parse_time(since) + dt.timedelta(seconds=timeout) - now).total_seconds()
    if left > 0:
        return PodsReadyStep(recheck_after=left)
    count = int(((workload.get("status") or {}).get("requeueState") or {}).get("count") or 0)
    if policy.backoff_limit_count is not None and count + 1 > policy.backoff_limit_count:
        return PodsReadyStep(deactivate=True)
    meta = workload.get("metadata") or {}
    return PodsReadyStep(
        evict_message=f"Exceeded the PodsReady timeout {meta.get('namespace')}/{meta.get('name')}",
        evict_underlying=waited,
        requeue_state=dict(requeue_state_after(workload, now=now, policy=policy, jitter=jitter)),
    )


def deactivation_target(workload: Obj, *, now: dt.datetime) -> dict[str, Any]:
    """Kueue's ``DeactivationTarget`` condition for a workload past its requeuing limit."""
    return observing_generation(
        workload,
        {
            "type": "DeactivationTarget",
            "status": "True",
            "reason": REASON_REQUEUING_LIMIT_EXCEEDED,
            "message": REQUEUING_LIMIT_MESSAGE,
            "lastTransitionTime": format_time(now),
        },
    )
