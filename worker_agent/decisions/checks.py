"""Admission checks of a worker's ClusterQueues, as pure decisions (the part of Kueue's workload controller the agent
plays for them).

Why this module exists: with a check in the ClusterQueue (``admissionChecksStrategy``, ``onFlavors`` honoured),
local admission only reserves quota and lists every check as Pending (``status.admissionChecks``); the check's own
controller (e.g. ``worker_agent.provisioning``) moves it on. Then, as Kueue does: all Ready → ``Admitted`` (a TAS
pod set whose topology was delayed gets it first, in a second pass); a check in Retry → evicted, quota released,
checks back to Pending with ``retryCount`` + 1 and requeued after the check's ``requeueAfterSeconds``; a check in
Rejected → ``spec.active: false`` and evicted with Kueue's deactivation reason (the check stays Rejected, so the
manager can say why).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from federation.admission.api_drain import admitted_note
from federation.admission.api_workloads import reserved_cluster_queue
from federation.admission.check_reset import checks_reset_on_eviction, without_reservation
from federation.admission.eviction_counts import scheduling_stats_after
from federation.api.provisioning import PROVISIONING_REQUEST_CONTROLLER_NAME
from federation.api.workload import ADMITTED, EVICTED, QUOTA_RESERVED, REQUEUED
from federation.conditions import (
    conditions_of,
    find_condition,
    format_time,
    is_true,
    parse_time,
    set_condition,
    workload_generation,
)
from federation.protocol import REASON_ADMITTED, REASON_PENDING_EVALUATION

Obj = dict[str, Any]

PENDING, READY, RETRY, REJECTED = "Pending", "Ready", "Retry", "Rejected"
EVICTED_BY_ADMISSION_CHECK = "AdmissionCheck"
DEACTIVATED_BY_ADMISSION_CHECK = "DeactivatedDueToAdmissionCheck"
PENDING_DELAYED_TOPOLOGY = "PendingDelayedTopologyRequests"
DELAYED_PENDING, DELAYED_READY = "Pending", "Ready"


def checks_for(cluster_queue: Mapping[str, Any] | None, flavors: Collection[str]) -> list[str]:
    """The ClusterQueue's admission checks that apply to a workload assigned ``flavors`` (a rule without
    ``onFlavors`` applies to all flavors)."""
    strategy = ((cluster_queue or {}).get("spec") or {}).get("admissionChecksStrategy") or {}
    names: list[str] = []
    for rule in strategy.get("admissionChecks") or ():
        on = rule.get("onFlavors") or ()
        if not on or any(flavor in on for flavor in flavors):
            names.append(str(rule.get("name")))
    return names


def provisioning_checks(names: Iterable[str], admission_checks: Mapping[str, Mapping[str, Any]]) -> list[str]:
    return [
        name
        for name in names
        if ((admission_checks.get(name) or {}).get("spec") or {}).get("controllerName")
        == PROVISIONING_REQUEST_CONTROLLER_NAME
    ]


def autoscaled_flavors(
    cluster_queues: Iterable[Mapping[str, Any]], admission_checks: Mapping[str, Mapping[str, Any]]
) -> set[str]:
    """Flavors that a ProvisioningRequest check covers in some ClusterQueue: their nodes come from the autoscaler
    once a workload asks, so the nodes there are now say nothing about what fits (the capacity report leaves out
    their topology summary and the manager judges them on quota)."""
    found: set[str] = set()
    for queue in cluster_queues:
        spec = queue.get("spec") or {}
        flavors = {str(f.get("name")) for rg in spec.get("resourceGroups") or () for f in rg.get("flavors") or ()}
        for rule in (spec.get("admissionChecksStrategy") or {}).get("admissionChecks") or ():
            if provisioning_checks([str(rule.get("name"))], admission_checks):
                found |= set(rule.get("onFlavors") or ()) or flavors
    return found


def check_states(workload: Mapping[str, Any]) -> list[Obj]:
    return [dict(check) for check in (workload.get("status") or {}).get("admissionChecks") or ()]


def pending_checks(workload: Mapping[str, Any], names: Sequence[str], *, now: dt.datetime) -> list[Obj]:
    """The checks a new reservation lists: each Pending, keeping what an earlier attempt left (``retryCount``,
    ``requeueAfterSeconds``, the reset message)."""
    old = {str(check.get("name")): check for check in check_states(workload)}
    out: list[Obj] = []
    for name in names:
        check = dict(old.get(name) or {"name": name, "message": ""})
        if check.get("state") != PENDING:
            check["state"] = PENDING
            check["lastTransitionTime"] = format_time(now)
        check.setdefault("lastTransitionTime", format_time(now))
        check.pop("podSetUpdates", None)
        out.append(check)
    return out


def delayed_pending(workload: Mapping[str, Any]) -> list[str]:
    """Pod sets whose topology assignment waits for the checks (``delayedTopologyRequest: Pending``)."""
    admission = (workload.get("status") or {}).get("admission") or {}
    return [
        str(psa.get("name"))
        for psa in admission.get("podSetAssignments") or ()
        if psa.get("delayedTopologyRequest") == DELAYED_PENDING and psa.get("topologyAssignment") is None
    ]


def _message_of(checks: Sequence[Mapping[str, Any]], state: str) -> str:
    """Kueue's ``AdmissionCheck(s) in <state> state: "name" (message); ...``."""
    parts = [
        f'"{c.get("name")}" ({c.get("message")})' if c.get("message") else f'"{c.get("name")}"'
        for c in sorted(checks, key=lambda c: str(c.get("name")))
    ]
    noun = "AdmissionChecks" if len(checks) > 1 else "AdmissionCheck"
    return f"{noun} in {state} state: {'; '.join(parts)}"


@dataclass(frozen=True, slots=True)
class ChecksStep:
    """What the workload's check states ask for. ``kind``: ``admit``, ``place`` (all Ready but a TAS pod set waits
    for its topology: the caller places it and calls :func:`admitted_status`), ``evict`` (Retry), ``deactivate``
    (Rejected)."""

    kind: str
    status: Obj
    message: str
    event_reason: str
    event_type: str = "Normal"


def _released(workload: Mapping[str, Any], *, reason: str, message: str, now: dt.datetime) -> Obj:
    generation = workload_generation(workload)
    conditions, _ = set_condition(
        conditions_of(workload),
        condition_type=EVICTED,
        status=True,
        reason=reason,
        message=message,
        now=now,
        observed_generation=generation,
    )
    conditions, _ = set_condition(
        conditions,
        condition_type=QUOTA_RESERVED,
        status=False,
        reason=reason,
        message=message,
        now=now,
        observed_generation=generation,
    )
    conditions, _ = set_condition(  # Kueue: False for both (deactivated; a backoff), see federation.admission.requeued
        conditions,
        condition_type=REQUEUED,
        status=False,
        reason=reason,
        message=message,
        now=now,
        observed_generation=generation,
    )
    if find_condition(workload, ADMITTED) is not None:
        conditions = without_reservation(conditions, now=now, observed_generation=generation)
    return {"conditions": conditions, "admission": None, "schedulingStats": scheduling_stats_after(workload, reason)}


def retry_at(checks: Sequence[Mapping[str, Any]]) -> dt.datetime | None:
    """Kueue's ``GetMaxRetryTime``: the latest ``lastTransitionTime + requeueAfterSeconds`` of the Retry checks."""
    latest: dt.datetime | None = None
    for check in checks:
        seconds = check.get("requeueAfterSeconds")
        stamp = check.get("lastTransitionTime")
        if check.get("state") != RETRY or seconds is None or not stamp:
            continue
        at = parse_time(str(stamp)) + dt.timedelta(seconds=int(seconds))
        latest = at if latest is None or at > latest else latest
    return latest


def may_take_checks_step(workload: Mapping[str, Any]) -> bool:
    """Whether :func:`checks_step` can have a step for the workload at all: it holds quota, is neither finished nor
    evicted, and lists admission checks (what the agent's passes ask of every workload, once per object)."""
    if not (workload.get("status") or {}).get("admissionChecks"):
        return False
    return is_true(workload, QUOTA_RESERVED) and not is_true(workload, "Finished") and not is_true(workload, EVICTED)


def checks_step(workload: Mapping[str, Any], *, now: dt.datetime) -> ChecksStep | None:
    """The next step for a quota-holding, unfinished workload with admission checks; None while a check is
    Pending (its controller acts) or when it is admitted already."""
    if not may_take_checks_step(workload):
        return None
    checks = check_states(workload)
    rejected = [c for c in checks if c.get("state") == REJECTED]
    retry = [c for c in checks if c.get("state") == RETRY]
    if rejected:
        message = _message_of(rejected, REJECTED)
        status = _released(
            workload,
            reason=DEACTIVATED_BY_ADMISSION_CHECK,
            message=f"The workload is deactivated due to {message}",
            now=now,
        )
        return ChecksStep(
            "deactivate", status, f"Deactivated due to {message}", "AdmissionCheckRejected", event_type="Warning"
        )
    if retry:
        message = f"Evicted due to {_message_of(retry, RETRY)}"
        status = _released(workload, reason=EVICTED_BY_ADMISSION_CHECK, message=message, now=now)
        status["admissionChecks"] = checks_reset_on_eviction(checks, now=now)
        # As Kueue: the retry time the checks ask for, unless a later one is set already; the count of requeues is
        # waitForPodsReady's and stays as it is
        requeue = (workload.get("status") or {}).get("requeueState") or {}
        at = retry_at(checks)
        current = requeue.get("requeueAt")
        if at is not None and at > now and (not current or parse_time(str(current)) < at):
            status["requeueState"] = {**requeue, "requeueAt": format_time(at)}
        return ChecksStep("evict", status, message, f"EvictedDueTo{EVICTED_BY_ADMISSION_CHECK}")
    if any(c.get("state") != READY for c in checks) or is_true(workload, ADMITTED):
        return None
    if delayed_pending(workload):
        return ChecksStep("place", {}, "", "")
    return ChecksStep(
        "admit", admitted_status(workload, now=now), admitted_event_note(workload, now=now), REASON_ADMITTED
    )


def admitted_event_note(workload: Mapping[str, Any], *, now: dt.datetime) -> str:
    """Kueue's ``Admitted`` Event once the last check is Ready: the wait since the quota was reserved (v0.20)."""
    reserved_at = str((find_condition(workload, QUOTA_RESERVED) or {}).get("lastTransitionTime") or "")
    waited = (now - parse_time(reserved_at)).total_seconds() if reserved_at else 0.0
    return admitted_note(reserved_cluster_queue(workload) or "", reserved_seconds=waited)


def admitted_status(
    workload: Mapping[str, Any], *, now: dt.datetime, topology: Mapping[str, Mapping[str, Any]] | None = None
) -> Obj:
    """``Admitted=True`` once every check is Ready; ``topology`` (pod set → its assignment) completes the delayed
    topology requests in the same write."""
    conditions, _ = set_condition(
        conditions_of(workload),
        condition_type=ADMITTED,
        status=True,
        reason=REASON_ADMITTED,
        message="The workload is admitted",
        now=now,
        observed_generation=workload_generation(workload),
    )
    status: Obj = {"conditions": conditions}
    if topology:
        admission = dict((workload.get("status") or {}).get("admission") or {})
        items = []
        for psa in admission.get("podSetAssignments") or ():
            item = dict(psa)
            placed = topology.get(str(psa.get("name")))
            if placed is not None:
                item["topologyAssignment"] = dict(placed)
                item["delayedTopologyRequest"] = DELAYED_READY
            items.append(item)
        admission["podSetAssignments"] = items
        status["admission"] = admission
    return status


def second_pass_failed(workload: Mapping[str, Any], reason: str, *, now: dt.datetime) -> Obj | None:
    """``Admitted=False`` (Kueue's ``PendingDelayedTopologyRequests``) saying why the delayed topology does not fit
    the nodes there are now; None when it says so already. The reservation is kept and the placement is tried
    again on every change of nodes or pods."""
    conditions, changed = set_condition(
        conditions_of(workload),
        condition_type=ADMITTED,
        status=False,
        reason=PENDING_DELAYED_TOPOLOGY,
        message=f"There are pending delayed topology requests: {reason}",
        now=now,
        observed_generation=workload_generation(workload),
    )
    return {"conditions": conditions} if changed else None


REQUEUE_BACKOFF_BASE_SECONDS = 60
REQUEUE_BACKOFF_MAX_SECONDS = 3600


def second_pass_problem(
    workload: Mapping[str, Any], *, cluster_queues: Collection[str], tas_flavors: Mapping[str, bool]
) -> str | None:
    """Why a workload waiting for its delayed topology can no longer be placed at all (an invalid entry: its
    ClusterQueue, its TAS flavor or that flavor's Topology vanished), or None. ``tas_flavors``: TAS flavor → whether
    its Topology exists."""
    admission = (workload.get("status") or {}).get("admission") or {}
    queue = str(admission.get("clusterQueue") or "")
    if queue not in cluster_queues:
        return f"ClusterQueue {queue} doesn't exist"
    for psa in admission.get("podSetAssignments") or ():
        if psa.get("delayedTopologyRequest") != DELAYED_PENDING or psa.get("topologyAssignment") is not None:
            continue
        flavors = [str(f) for f in (psa.get("flavors") or {}).values()]
        tas = [f for f in flavors if f in tas_flavors]
        if not tas:
            names = ", ".join(sorted(set(flavors)))
            return f"ResourceFlavor {names} of pod set {psa.get('name')} doesn't exist or has no topologyName"
        if not tas_flavors[tas[0]]:
            return f"the Topology of ResourceFlavor {tas[0]} doesn't exist"
    return None


def requeue_invalid(workload: Mapping[str, Any], problem: str, *, now: dt.datetime) -> Obj:
    """Release the reservation of an invalid entry and requeue it after a backoff (Kueue's 60 s * 2^(n-1), capped
    at an hour), instead of trying it again in every pass; its checks start over when it reserves quota again."""
    message = f"Requeued: {problem}"
    generation = workload_generation(workload)
    conditions, _ = set_condition(
        conditions_of(workload),
        condition_type=QUOTA_RESERVED,
        status=False,
        reason=REASON_PENDING_EVALUATION,
        message=message,
        now=now,
        observed_generation=generation,
    )
    requeue = dict((workload.get("status") or {}).get("requeueState") or {})
    count = int(requeue.get("count") or 0) + 1
    wait = min(REQUEUE_BACKOFF_BASE_SECONDS * 2 ** (count - 1), REQUEUE_BACKOFF_MAX_SECONDS)
    return {
        "conditions": conditions,
        "admission": None,
        "admissionChecks": checks_reset_on_eviction(check_states(workload), now=now),
        "requeueState": {"count": count, "requeueAt": format_time(now + dt.timedelta(seconds=wait))},
    }
