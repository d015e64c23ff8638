"""What the manager writes when it admits a Workload globally: quota reserved, one worker nominated.

One status write does both (DESIGN §4.4): ``status.admission`` and ``QuotaReserved`` reserve the ClusterQueue's
quota, ``status.nominatedClusterNames`` names the single worker the copies go to, and ``status.admissionChecks``
lists, like Kueue, every admission check of the ClusterQueue that applies to the assigned flavors, each
``Pending``: the MultiKueue check until that worker admits the copy, the others until their controllers say
``Ready``. The Workload is not ``Admitted`` yet.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from federation.admission.api_drain import EventSpec, WorkloadUpdate, admission_status, workload_generation
from federation.admission.api_workloads import workload_key
from federation.admission.decisions import Assignment
from federation.api.workload import EVICTED, QUOTA_RESERVED
from federation.conditions import conditions_of, find_condition, format_time, set_condition
from federation.protocol import MULTIKUEUE_CONTROLLER, REASON_QUOTA_RESERVED
from manager.decisions.admission_checks import CHECK_PENDING, dispatched_message, waiting_message

Obj = dict[str, Any]


def multikueue_workers(
    cluster_queue: Mapping[str, Any],
    *,
    admission_checks: Mapping[str, Mapping[str, Any]],
    configs: Mapping[str, Mapping[str, Any]],
) -> tuple[list[str], list[str]] | str:
    """(MultiKueue check names, ordered worker names) for a ClusterQueue, or why it has none to dispatch to."""
    name = cluster_queue["metadata"]["name"]
    strategy = (cluster_queue.get("spec") or {}).get("admissionChecksStrategy") or {}
    refs = [rule["name"] for rule in strategy.get("admissionChecks") or ()]
    checks: list[str] = []
    workers: list[str] = []
    per_flavor = {rule["name"] for rule in strategy.get("admissionChecks") or () if rule.get("onFlavors")}
    for ref in refs:
        check = admission_checks.get(ref)
        if check is None:
            return f"ClusterQueue {name} references AdmissionCheck {ref}, which doesn't exist"
        spec = check.get("spec") or {}
        if spec.get("controllerName") != MULTIKUEUE_CONTROLLER:
            continue
        if ref in per_flavor:  # Kueue: MultiKueueAdmissionCheckAppliedPerFlavor makes the ClusterQueue inactive
            return f"MultiKueue AdmissionCheck {ref} cannot be applied per flavor (onFlavors) in ClusterQueue {name}"
        params = spec.get("parameters") or {}
        config = configs.get(str(params.get("name", "")))
        if params.get("kind") != "MultiKueueConfig" or config is None:
            return f"AdmissionCheck {ref} does not point at an existing MultiKueueConfig"
        checks.append(ref)
        workers += [w for w in (config.get("spec") or {}).get("clusters") or () if w not in workers]
    if not checks:
        return (
            f"ClusterQueue {name} has no AdmissionCheck with controllerName {MULTIKUEUE_CONTROLLER}; "
            "kfed has no worker clusters to dispatch its workloads to"
        )
    return checks, workers


def assigned_flavors(assignment: Assignment) -> set[str]:
    return {flavor for psa in assignment.pod_set_assignments for flavor in psa.flavors.values()}


def workload_checks(cluster_queue: Mapping[str, Any], *, flavors: Collection[str]) -> list[str]:
    """Every admission check of the ClusterQueue that applies to a workload assigned ``flavors``, in the queue's
    order (Kueue: a rule with ``onFlavors`` applies only when one of them is assigned)."""
    strategy = (cluster_queue.get("spec") or {}).get("admissionChecksStrategy") or {}
    return [
        str(rule["name"])
        for rule in strategy.get("admissionChecks") or ()
        if not rule.get("onFlavors") or any(flavor in flavors for flavor in rule["onFlavors"])
    ]


def reservation_update(
    raw: Obj,
    assignment: Assignment,
    *,
    worker: str,
    checks: Sequence[str],
    multikueue_checks: Collection[str],
    now: dt.datetime,
    waited_seconds: float,
) -> WorkloadUpdate:
    """``checks`` are all the workload's checks (see :func:`workload_checks`), ``multikueue_checks`` kfed's own."""
    queue = assignment.cluster_queue
    message = f"Quota reserved in ClusterQueue {queue}"
    generation = workload_generation(raw)
    conditions, _ = set_condition(
        conditions_of(raw),
        condition_type=QUOTA_RESERVED,
        status=True,
        reason=REASON_QUOTA_RESERVED,
        message=message,
        now=now,
        observed_generation=generation,
    )
    if find_condition(raw, EVICTED) is not None:  # requeued earlier: Kueue resets Evicted on a new reservation
        conditions, _ = set_condition(
            conditions,
            condition_type=EVICTED,
            status=False,
            reason=REASON_QUOTA_RESERVED,
            message=message,
            now=now,
            observed_generation=generation,
        )
    others = [check for check in checks if check not in multikueue_checks]
    dispatch = waiting_message(others, worker) if others else dispatched_message(worker)
    stamp = format_time(now)
    status: Obj = {
        "admission": admission_status(assignment),
        "conditions": conditions,
        "nominatedClusterNames": [worker],
        "admissionChecks": [
            {
                "name": check,
                "state": CHECK_PENDING,
                "message": dispatch if check in multikueue_checks else "",
                "lastTransitionTime": stamp,
            }
            for check in checks
        ],
    }
    note = f"{message}, wait time since queued was {waited_seconds:.0f}s; " + (
        dispatch[0].lower() + dispatch[1:] if others else f"dispatched to worker cluster {worker}"
    )
    events = (EventSpec(REASON_QUOTA_RESERVED, note),)
    return WorkloadUpdate(workload_key(raw), raw, status, "reserved", queue, message, events)
