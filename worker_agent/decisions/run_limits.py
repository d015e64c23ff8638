"""The status writes that end an admitted Workload's run on this worker for running too long or not starting (pure).

Why this module exists: Kueue limits how a Workload runs once admitted, and kfed-agent applies those limits to the
Workloads on its worker as Kueue there would, but for kfed-manager's copies, which the manager judges:
``maximumExecutionTimeSeconds`` (``federation.admission.execution_time``) and ``waitForPodsReady``
(``federation.admission.pods_ready``). Those modules decide; this one turns a decision into the agent's status
patch. An eviction here is Kueue's: ``Evicted=True`` with its reason, counted in ``schedulingStats``; the job pass
then stops the Job and releases the quota, and the requeue backoff (``requeueState``) keeps the Workload out of the
queue until it ends (``federation.admission.requeued``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from federation.admission.eviction_counts import scheduling_stats_after
from federation.admission.pods_ready import REASON_PODS_READY_TIMEOUT, PodsReadyStep
from federation.api.workload import EVICTED
from federation.conditions import conditions_of, is_true, set_condition, workload_generation
from federation.protocol import MANAGER_UID_LABEL

Obj = Mapping[str, Any]


def readiness_judged_here(workload: Obj) -> bool:
    """Whether the agent judges the Workload's pods' readiness (waitForPodsReady): admitted, running (not finished,
    evicted or deactivated), and not one of kfed-manager's copies (kfed-manager judges those from their Job copy). A
    stock MultiKueue manager's copy is judged here, as Kueue on this worker would judge it."""
    if MANAGER_UID_LABEL in ((workload.get("metadata") or {}).get("labels") or {}):
        return False
    if (workload.get("spec") or {}).get("active") is False:
        return False
    return is_true(workload, "Admitted") and not is_true(workload, "Finished") and not is_true(workload, EVICTED)


def unready_quota_holder(workload: Obj) -> bool:
    """Whether the Workload holds back new admissions here under Kueue's ``blockAdmission``: it holds quota (reserved,
    not finished), its pods' readiness is judged here (not one of kfed-manager's copies, which kfed-manager judges and
    holds back with its own ``blockAdmission``), and it is not ``PodsReady=True``."""
    if MANAGER_UID_LABEL in ((workload.get("metadata") or {}).get("labels") or {}):
        return False
    if not is_true(workload, "QuotaReserved") or is_true(workload, "Finished"):
        return False
    return not is_true(workload, "PodsReady")


def pods_ready_condition_status(workload: Obj, condition: Mapping[str, Any], *, now: dt.datetime) -> dict[str, Any]:
    """The status patch that writes the step's ``PodsReady`` condition."""
    conditions, _ = set_condition(
        conditions_of(workload),
        condition_type="PodsReady",
        status=condition["status"] == "True",
        reason=str(condition["reason"]),
        message=str(condition["message"]),
        now=now,
        observed_generation=workload_generation(workload),
    )
    return {"conditions": conditions}


def pods_ready_eviction_status(workload: Obj, step: PodsReadyStep, *, now: dt.datetime) -> dict[str, Any]:
    """The status patch of a ``PodsReadyTimeout`` eviction: ``Evicted`` with Kueue's message, the requeue backoff,
    and the eviction counted with its underlying cause (``WaitForStart`` or ``WaitForRecovery``)."""
    assert step.evict_message is not None
    conditions, _ = set_condition(
        conditions_of(workload),
        condition_type=EVICTED,
        status=True,
        reason=REASON_PODS_READY_TIMEOUT,
        message=step.evict_message,
        now=now,
        observed_generation=workload_generation(workload),
    )
    status: dict[str, Any] = {
        "conditions": conditions,
        "schedulingStats": scheduling_stats_after(
            workload, REASON_PODS_READY_TIMEOUT, underlying_cause=step.evict_underlying
        ),
    }
    if step.requeue_state is not None:
        status["requeueState"] = dict(step.requeue_state)
    return status


__all__ = [
    "pods_ready_condition_status",
    "pods_ready_eviction_status",
    "readiness_judged_here",
    "unready_quota_holder",
]
