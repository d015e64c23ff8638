"""Preemption on a worker, as Kueue does it there, including the preemption gates of Kueue v0.20 (KEP 8303).

When the shared admission core says a dispatched Workload fits only by evicting others (``Preempt``), the agent
acts like a worker's Kueue:

- **Gated.** A Workload whose ``spec.preemptionGates`` has a gate that ``status.preemptionGates`` does not show
  ``Open`` (a gate only in spec counts as closed) preempts nothing: it stays pending with ``QuotaReserved=False``
  reason ``AdmissionGated`` and ``BlockedOnPreemptionGates=True`` reason ``PreemptionGated``. A stock Kueue v0.20
  MultiKueue manager puts the gate ``kueue.x-k8s.io/multikueue`` on the copies it sends to every candidate worker
  and opens it on one worker at a time, so that only one worker preempts for the same Workload.
- **Evict.** Otherwise each victim gets ``Evicted=True`` reason ``Preempted`` and ``Preempted=True`` with Kueue's
  preemption reason (``InClusterQueue``...); its own blocked condition is unset and its gates closed.
- **Release.** An evicted Workload that still holds quota has its Job suspended; once the Job is suspended with no
  active pod, the quota is released (``QuotaReserved=False``, ``Admitted=False``, no ``status.admission``;
  ``Requeued=True``, or ``False`` for a deactivated Workload as in Kueue), so the preemptor fits at the next pass.
  A MultiKueue manager (kfed's or Kueue's) sees the eviction on its copy and takes the Workload back.

kfed-manager itself never sets gates on its copies: it preempts globally, before it dispatches, and sends each
Workload to exactly one worker, so no two workers can preempt for the same Workload and there is nothing to
orchestrate. The gates matter only when a stock Kueue manager drives kfed-agent.

Pure: plain dicts in, status patches out.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from federation.admission.api_drain import EventSpec, WorkloadUpdate
from federation.admission.api_workloads import workload_key
from federation.admission.check_reset import NO_RESERVATION, checks_reset_on_eviction, released_terms
from federation.admission.decisions import Victim
from federation.admission.eviction_counts import scheduling_stats_after
from federation.admission.execution_time import ACCUMULATED_FIELD, accumulated_on_release, limit_of
from federation.admission.requeued import requeued_on_release
from federation.api.workload import ADMITTED, BLOCKED_ON_PREEMPTION_GATES, QUOTA_RESERVED
from federation.conditions import (
    conditions_of,
    find_condition,
    format_time,
    is_true,
    set_condition,
    workload_generation,
)
from federation.pod_injection import pod_count_patch, requested_count
from worker_agent.decisions.jobs import job_finished

Obj = dict[str, Any]

REASON_PREEMPTION_GATED = "PreemptionGated"
REASON_ADMISSION_GATED = "AdmissionGated"
GATED_MESSAGE = "Workload requires preemption, but it's gated"
REASON_PREEMPTED = "Preempted"


def has_closed_preemption_gate(workload: Mapping[str, Any]) -> bool:
    """Kueue's rule: a gate named in ``spec.preemptionGates`` is closed unless ``status.preemptionGates`` says
    ``Open`` for it (a gate present only in spec is closed, so a Workload can be created gated atomically)."""
    gates = (workload.get("spec") or {}).get("preemptionGates") or ()
    if not gates:
        return False
    positions = {
        str(state.get("name")): state.get("position")
        for state in (workload.get("status") or {}).get("preemptionGates") or ()
    }
    return any(positions.get(str(gate.get("name"))) != "Open" for gate in gates)


def gated_update(raw: Obj, *, now: dt.datetime, cluster_queue: str) -> WorkloadUpdate | None:
    """The preemptor waits for its gate: None when it already says so."""
    generation = workload_generation(raw)
    conditions, reserved_changed = set_condition(
        conditions_of(raw),
        condition_type=QUOTA_RESERVED,
        status=False,
        reason=REASON_ADMISSION_GATED,
        message=GATED_MESSAGE,
        now=now,
        observed_generation=generation,
    )
    conditions, blocked_changed = set_condition(
        conditions,
        condition_type=BLOCKED_ON_PREEMPTION_GATES,
        status=True,
        reason=REASON_PREEMPTION_GATED,
        message=GATED_MESSAGE,
        now=now,
        observed_generation=generation,
    )
    if not (reserved_changed or blocked_changed):
        return None
    events = (EventSpec(REASON_ADMISSION_GATED, GATED_MESSAGE, "Warning"),)
    return WorkloadUpdate(
        workload_key(raw), raw, {"conditions": conditions}, "pending", cluster_queue, GATED_MESSAGE, events
    )


def victim_update(raw: Obj, victim: Victim, *, preemptor: str, now: dt.datetime) -> WorkloadUpdate | None:
    """Evict ``victim`` for ``preemptor``; None when it is already being evicted."""
    if is_true(raw, "Evicted"):
        return None
    generation = workload_generation(raw)
    conditions, _ = set_condition(
        conditions_of(raw),
        condition_type="Evicted",
        status=True,
        reason=REASON_PREEMPTED,
        message=victim.message,
        now=now,
        observed_generation=generation,
    )
    conditions, _ = set_condition(
        conditions,
        condition_type="Preempted",
        status=True,
        reason=victim.reason,
        message=victim.message,
        now=now,
        observed_generation=generation,
    )
    blocked = find_condition(raw, BLOCKED_ON_PREEMPTION_GATES)
    if blocked is not None and blocked.get("status") == "True":
        conditions, _ = set_condition(
            conditions,
            condition_type=BLOCKED_ON_PREEMPTION_GATES,
            status=False,
            reason=REASON_PREEMPTED,
            message=victim.message,
            now=now,
            observed_generation=generation,
        )
    status: Obj = {"conditions": conditions, "schedulingStats": scheduling_stats_after(raw, REASON_PREEMPTED)}
    gates = (raw.get("status") or {}).get("preemptionGates")
    if gates:
        stamp = format_time(now)
        status["preemptionGates"] = [{**gate, "position": "Closed", "lastTransitionTime": stamp} for gate in gates]
    note = f"{victim.message}; preempted by {preemptor}"
    events = (EventSpec(REASON_PREEMPTED, note, "Normal"),)
    return WorkloadUpdate(victim.key, raw, status, "preempted", victim.cluster_queue, victim.message, events)


def evicted_holding_quota(workload: Mapping[str, Any]) -> bool:
    """Evicted, yet still holding its reservation: its Job must stop and its quota be released."""
    return is_true(workload, "Evicted") and is_true(workload, QUOTA_RESERVED)


def suspend_patch(job: Mapping[str, Any], workload: Mapping[str, Any]) -> Obj | None:
    """Suspend the Job of an evicted ``workload`` (None when it is already suspended); a Job partial admission had
    shrunk gets the Workload's pod count back in the same write (Kueue's restore)."""
    spec = job.get("spec") or {}
    if spec.get("suspend") is True:
        return None
    annotations = (job.get("metadata") or {}).get("annotations") or {}
    return {"spec": {"suspend": True, **pod_count_patch(spec, annotations, requested_count(workload))}}


def running_without_reservation(job: Mapping[str, Any], workload: Mapping[str, Any]) -> bool:
    """A started, unfinished Job whose Workload holds no quota here and has not finished (Kueue suspends such a
    Job): e.g. a Job copy kfed-manager created started just as the agent evicted and released its Workload copy."""
    if (job.get("spec") or {}).get("suspend") is True or is_true(workload, QUOTA_RESERVED):
        return False
    return not is_true(workload, "Finished") and job_finished(job) is None


def stopped(job: Mapping[str, Any] | None) -> bool:
    """The Job is gone, or suspended with no active pod left: the evicted Workload's quota can be released."""
    if job is None:
        return True
    return (job.get("spec") or {}).get("suspend") is True and not int((job.get("status") or {}).get("active") or 0)


def release_status(workload: Obj, *, now: dt.datetime) -> Obj:
    """Release an evicted Workload's quota and queue it again (Kueue's end of an eviction on a worker).

    ``Requeued`` takes the ``Evicted`` reason and message, as Kueue's job reconciler does; it is ``False`` for a
    deactivated Workload (``spec.active: false``: the agent's own ``JobCopyMissing`` eviction, a Rejected check, or
    a user), which is not queued again until it is reactivated, and after the evictions that come with a backoff
    (``federation.admission.requeued``). Its admission checks are reset to ``Pending``, as Kueue's eviction resets
    them (``federation.admission.check_reset``), and ``unhealthyNodes`` is cleared. The admitted time counts against
    ``maximumExecutionTimeSeconds`` (``accumulatedPastExecutionTimeSeconds``); a deactivated Workload starts afresh
    once reactivated."""
    evicted = find_condition(workload, "Evicted") or {}
    reason = str(evicted.get("reason") or REASON_PREEMPTED)
    message = str(evicted.get("message") or "")
    generation = workload_generation(workload)
    conditions: list[Obj] = [dict(c) for c in conditions_of(workload)]
    requeued = requeued_on_release(workload, reason=reason)
    changes = [
        (QUOTA_RESERVED, False, *released_terms(workload, message)),  # Kueue v0.20's (before: Pending)
        ("Requeued", requeued, reason, message),
    ]
    if find_condition(workload, ADMITTED) is not None:
        changes.append((ADMITTED, False, *NO_RESERVATION))
    for condition_type, status, why, text in changes:
        conditions, _ = set_condition(
            conditions,
            condition_type=condition_type,
            status=status,
            reason=why,
            message=text,
            now=now,
            observed_generation=generation,
        )
    patch: Obj = {"conditions": conditions, "admission": None}
    checks = (workload.get("status") or {}).get("admissionChecks") or []
    reset = checks_reset_on_eviction(checks, now=now)
    if reset != checks:  # as Kueue's eviction: every check not Pending starts over (a Retry one counts a retry)
        patch["admissionChecks"] = reset
    if (workload.get("status") or {}).get("unhealthyNodes"):  # Kueue's eviction clears them too
        patch["unhealthyNodes"] = None
    if (workload.get("spec") or {}).get("active") is False:
        if (workload.get("status") or {}).get(ACCUMULATED_FIELD) is not None:
            patch[ACCUMULATED_FIELD] = None
    elif limit_of(workload) is not None and (used := accumulated_on_release(workload, now=now)) is not None:
        patch[ACCUMULATED_FIELD] = used
    return patch
