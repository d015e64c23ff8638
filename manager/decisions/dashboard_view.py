"""The dashboard's JSON (pure): the federation as one read-only snapshot for the page kfed-manager serves.

Workers with their connection and capacity per flavor (summed over the worker's ClusterQueues from its capacity
report), the manager's ClusterQueues with reservation against nominal quota and borrowing limit, pending and
running Workloads with where each runs, and the latest evictions. Nothing secret goes in: names, counts, quantities,
conditions' reasons and messages — what ``kubectl get`` on these objects already shows a reader of the cluster.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from federation.conditions import find_condition, is_true, parse_time
from federation.protocol import PODS_UNSCHEDULABLE_CONDITION
from federation.quantity import parse_quantity
from manager.decisions.lifecycle import phase_of

Obj = Mapping[str, Any]
MAX_WORKLOADS = 200
MAX_EVICTIONS = 20


@dataclass(frozen=True, slots=True)
class WorkerInput:
    name: str
    connected: bool
    problem: str
    """Why it cannot take workloads now ("" when it can)."""
    report: Obj | None
    """The worker's ClusterCapacity object, as its cache holds it."""


def _amount(quantity: object) -> float:
    try:
        return parse_quantity(str(quantity)) / 1000.0
    except (ValueError, TypeError):
        return 0.0


def _worker(worker: WorkerInput, now: dt.datetime) -> dict[str, Any]:
    status = (worker.report or {}).get("status") or {}
    flavors: dict[str, dict[str, dict[str, float]]] = {}
    for queue in status.get("clusterQueues") or ():
        for flavor in queue.get("flavors") or ():
            per = flavors.setdefault(str(flavor["name"]), {})
            for resource in flavor.get("resources") or ():
                entry = per.setdefault(str(resource["name"]), {"nominal": 0.0, "usage": 0.0})
                entry["nominal"] += _amount(resource.get("nominal", 0))
                entry["usage"] += _amount(resource.get("usage", 0))
    observed = status.get("observedTime")
    return {
        "name": worker.name,
        "connected": worker.connected,
        "problem": worker.problem,
        "reportAgeSeconds": round((now - parse_time(str(observed))).total_seconds(), 1) if observed else None,
        "flavors": [
            {"name": name, "resources": [{"name": r, **values} for r, values in sorted(resources.items())]}
            for name, resources in sorted(flavors.items())
        ],
    }


def _cluster_queue(queue: Obj) -> dict[str, Any]:
    spec, status = queue.get("spec") or {}, queue.get("status") or {}
    reserved = {
        (str(fl["name"]), str(r["name"])): _amount(r.get("total", 0))
        for fl in status.get("flavorsReservation") or ()
        for r in fl.get("resources") or ()
    }
    resources = []
    for group in spec.get("resourceGroups") or ():
        for flavor in group.get("flavors") or ():
            for r in flavor.get("resources") or ():
                key = (str(flavor["name"]), str(r["name"]))
                limit = r.get("borrowingLimit")
                resources.append(
                    {
                        "flavor": key[0],
                        "resource": key[1],
                        "usage": reserved.get(key, 0.0),
                        "nominal": _amount(r.get("nominalQuota", 0)),
                        "borrowingLimit": _amount(limit) if limit is not None else None,
                    }
                )
    active = find_condition(queue, "Active")
    return {
        "name": queue["metadata"]["name"],
        "cohort": spec.get("cohortName") or "",
        "active": (active or {}).get("status", "Unknown"),
        "pending": int(status.get("pendingWorkloads") or 0),
        "reserving": int(status.get("reservingWorkloads") or 0),
        "admitted": int(status.get("admittedWorkloads") or 0),
        "resources": resources,
    }


def _message(workload: Obj, phase: str) -> str:
    if phase in ("Pending", "Requeued"):
        return str((find_condition(workload, "QuotaReserved") or {}).get("message") or "")
    unplaced = find_condition(workload, PODS_UNSCHEDULABLE_CONDITION)
    if phase in ("Admitted", "Running") and unplaced is not None and unplaced.get("status") == "True":
        return str(unplaced.get("message") or "")
    return ""


def _workload(workload: Obj, now: dt.datetime) -> dict[str, Any]:
    meta, status = workload["metadata"], workload.get("status") or {}
    phase = phase_of(workload).value
    created = meta.get("creationTimestamp")
    return {
        "namespace": meta.get("namespace", ""),
        "name": meta["name"],
        "queue": (workload.get("spec") or {}).get("queueName", ""),
        "clusterQueue": (status.get("admission") or {}).get("clusterQueue", ""),
        "state": phase,
        "worker": status.get("clusterName") or ",".join(status.get("nominatedClusterNames") or []),
        "message": _message(workload, phase),
        "ageSeconds": round((now - parse_time(str(created))).total_seconds()) if created else None,
    }


def _evictions(workloads: Iterable[Obj]) -> list[dict[str, Any]]:
    out = []
    for workload in workloads:
        for kind in ("Evicted", "Requeued"):
            condition = find_condition(workload, kind)
            if condition is None or not condition.get("lastTransitionTime"):
                continue
            if kind == "Requeued" and condition.get("status") != "True":
                continue
            if kind == "Evicted" and condition.get("status") != "True" and not is_true(workload, "Requeued"):
                continue
            out.append(
                {
                    "namespace": workload["metadata"].get("namespace", ""),
                    "name": workload["metadata"]["name"],
                    "reason": str(condition.get("reason") or ""),
                    "message": str(condition.get("message") or ""),
                    "time": str(condition["lastTransitionTime"]),
                }
            )
            break
    out.sort(key=lambda e: e["time"], reverse=True)
    return out[:MAX_EVICTIONS]


def dashboard_state(
    *,
    workers: Sequence[WorkerInput],
    cluster_queues: Iterable[Obj],
    workloads: Iterable[Obj],
    now: dt.datetime,
    leader: bool = True,
) -> dict[str, Any]:
    every = list(workloads)
    pending: list[Obj] = []
    running: list[Obj] = []
    for workload in every:
        if is_true(workload, "Finished"):
            continue
        (running if is_true(workload, "QuotaReserved") else pending).append(workload)

    def newest_first(items: list[Obj]) -> list[dict[str, Any]]:
        items.sort(key=lambda w: str(w["metadata"].get("creationTimestamp") or ""), reverse=True)
        return [_workload(w, now) for w in items[:MAX_WORKLOADS]]

    return {
        "generatedAt": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "leader": leader,
        "workers": [_worker(w, now) for w in sorted(workers, key=lambda w: w.name)],
        "clusterQueues": [_cluster_queue(q) for q in sorted(cluster_queues, key=lambda q: q["metadata"]["name"])],
        "pending": newest_first(pending),
        "running": newest_first(running),
        "counts": {"pending": len(pending), "running": len(running), "workloads": len(every)},
        "evictions": _evictions(every),
    }
