"""What the manager writes when it admits a Workload globally: quota reserved, one worker nominated.

One status write does both (DESIGN §4.4): ``status.admission`` and ``QuotaReserved`` reserve the ClusterQueue's
quota, ``status.nominatedClusterNames`` names the single worker the copies go to, and ``status.admissionChecks``
lists, like Kueue, every admission check of the ClusterQueue that applies to the assigned flavors, each
``Pending``: the MultiKueue check until that worker admits the copy, the others until their controllers say
``Ready``. The Workload is not ``Admitted`` yet.

A pod set assigned a TAS flavor (one with ``topologyName`` on the manager, or one the chosen worker reports a
topology for in its ClusterCapacity) gets ``delayedTopologyRequest: Pending``, as Kueue's manager does for MultiKueue
(the topology is always assigned on the worker); :func:`topology_ready` turns it ``Ready`` once the worker's copy
carries that pod set's ``topologyAssignment`` (Kueue M20). The assignment itself stays on the worker, as in Kueue.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from federation.admission.api_drain import (
    EventSpec,
    WorkloadUpdate,
    admission_status,
    reserved_conditions,
    reserved_message,
)
from federation.admission.api_workloads import workload_key
from federation.admission.decisions import Assignment
from federation.conditions import format_time
from federation.protocol import MULTIKUEUE_CONTROLLER, REASON_QUOTA_RESERVED
from manager.decisions.admission_checks import (
    CHECK_PENDING,
    dispatched_message,
    waiting_message,
)

Obj = dict[str, Any]
DELAYED_PENDING = "Pending"
DELAYED_READY = "Ready"


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
    for ref in refs:
        check = admission_checks.get(ref)
        if check is None:
            return f"ClusterQueue {name} references AdmissionCheck {ref}, which doesn't exist"
        spec = check.get("spec") or {}
        if spec.get("controllerName") != MULTIKUEUE_CONTROLLER:
            continue
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


def tas_flavor_names(
    manager_flavors: Iterable[Mapping[str, Any]], worker_topologies: Collection[str] = ()
) -> frozenset[str]:
    """Flavors whose pod sets get their topology on the worker: TAS on the manager or on the chosen worker."""
    names = {
        str((flavor.get("metadata") or {}).get("name", ""))
        for flavor in manager_flavors
        if (flavor.get("spec") or {}).get("topologyName")
    }
    return frozenset(names | set(worker_topologies))


def delayed_topology(admission: Obj, tas_flavors: Collection[str]) -> Obj:
    """``admission`` with ``delayedTopologyRequest: Pending`` on each pod set assigned one of ``tas_flavors``."""
    assignments = []
    for psa in admission.get("podSetAssignments") or ():
        tas = any(flavor in tas_flavors for flavor in (psa.get("flavors") or {}).values())
        assignments.append({**psa, "delayedTopologyRequest": DELAYED_PENDING} if tas else psa)
    return {**admission, "podSetAssignments": assignments}


def topology_ready(manager_workload: Obj, remote_workload: Obj | None) -> Obj | None:
    """The manager's ``status.admission`` with ``Pending`` turned ``Ready`` for each pod set the worker's copy has a
    ``topologyAssignment`` for (Kueue's MultiKueue rule), or None when nothing changes."""
    admission = (manager_workload.get("status") or {}).get("admission") or {}
    remote = ((remote_workload or {}).get("status") or {}).get("admission") or {}
    assigned = {psa.get("name") for psa in remote.get("podSetAssignments") or () if psa.get("topologyAssignment")}
    changed = False
    assignments = []
    for psa in admission.get("podSetAssignments") or ():
        ready = psa.get("delayedTopologyRequest") == DELAYED_PENDING and psa.get("name") in assigned
        changed = changed or ready
        assignments.append({**psa, "delayedTopologyRequest": DELAYED_READY} if ready else psa)
    return {**admission, "podSetAssignments": assignments} if changed else None


def reservation_update(
    raw: Obj,
    assignment: Assignment,
    *,
    worker: str,
    checks: Sequence[str],
    multikueue_checks: Collection[str],
    now: dt.datetime,
    waited_seconds: float,
    tas_flavors: Collection[str] = (),
) -> WorkloadUpdate:
    """``checks`` are all the workload's checks (see :func:`workload_checks`), ``multikueue_checks`` kfed's own."""
    queue = assignment.cluster_queue
    message = reserved_message(queue)
    conditions = reserved_conditions(raw, cluster_queue=queue, now=now)
    others = [check for check in checks if check not in multikueue_checks]
    dispatch = waiting_message(others, worker) if others else dispatched_message(worker)
    stamp = format_time(now)
    status: Obj = {
        "admission": delayed_topology(admission_status(assignment), tas_flavors),
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
