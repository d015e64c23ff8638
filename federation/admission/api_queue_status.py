"""ClusterQueue, LocalQueue and Cohort status the way Kueue reports it: workload counts, flavor reservation and usage,
Active, fair sharing.

``reserving`` counts and ``flavorsReservation`` cover every workload holding quota; ``admitted`` counts and
``flavorsUsage`` only those that are also ``Admitted``. On a worker (no admission checks) the two are equal; on
the manager a workload is admitted once its worker admits the copy. Both kfed processes write the status only
when it differs from what the ClusterQueue already shows.

Both also keep Kueue's ``kueue.x-k8s.io/resource-in-use`` finalizer on every ClusterQueue, so that deleting one
while workloads hold its quota leaves it ``Active=False`` with reason ``Terminating`` until the last of them
finishes, instead of pulling the quota from under running Jobs (:func:`finalizer_changes`). Kueue keeps the same
finalizer on every ResourceFlavor and AdmissionCheck, so that one a ClusterQueue still names stays (Terminating)
when deleted, and its ClusterQueues keep admitting, until no ClusterQueue names it (:func:`in_use_changes`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Iterable, Mapping
from typing import Any, Literal

from federation.admission.api_state import QuotaState
from federation.admission.api_workloads import reserved_usage
from federation.admission.fair_sharing import dominant_resource_share
from federation.admission.snapshot import STOPPED, TERMINATING, Cause, ClusterQueueNode, causes_message
from federation.conditions import conditions_of, is_true, set_condition
from federation.quantity import format_amount

Obj = dict[str, Any]

ACTIVE = "Active"
RESOURCE_IN_USE_FINALIZER = "kueue.x-k8s.io/resource-in-use"
"""Kueue's finalizer on ClusterQueues, ResourceFlavors and AdmissionChecks that are in use."""

FinalizerAction = Literal["add", "keep", "remove"]


def _flavor_usage(
    node: ClusterQueueNode, usage: Mapping[tuple[str, str], int], *, with_borrowed: bool = True
) -> list[Obj]:
    """``flavorsReservation``/``flavorsUsage`` as Kueue writes them: each of the ClusterQueue's flavors in its order,
    their resources by name, and (for a ClusterQueue; a LocalQueue shows only totals) what is borrowed, which is
    nothing for a ClusterQueue outside any cohort (it has no one to borrow from)."""
    in_cohort = bool(node.spec.cohort)
    usages: list[Obj] = []
    for group in node.spec.resource_groups:
        for flavor in group.flavors:
            resources = []
            for quota in sorted(flavor.resources, key=lambda q: q.name):
                used = max(0, usage.get((flavor.name, quota.name), 0))
                resource: Obj = {"name": quota.name, "total": format_amount(quota.name, used)}
                if with_borrowed:
                    borrowed = max(0, used - quota.nominal) if in_cohort else 0
                    resource["borrowed"] = format_amount(quota.name, borrowed)
                resources.append(resource)
            usages.append({"name": flavor.name, "resources": resources})
    return usages


def _summed_usage(
    workloads: Iterable[Mapping[str, Any]],
) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str], int]]:
    """(flavor, resource) → the quota the ``workloads`` hold together: all of them, and those also ``Admitted``
    (each workload's reservation is read once)."""
    reserved: dict[tuple[str, str], int] = {}
    admitted: dict[tuple[str, str], int] = {}
    for workload in workloads:
        totals = (reserved, admitted) if is_true(workload, "Admitted") else (reserved,)
        for key, amount in reserved_usage(workload).items():
            for total in totals:
                total[key] = total.get(key, 0) + amount
    return reserved, admitted


def _active(node: ClusterQueueNode) -> tuple[str, str, str]:
    """(status, reason, message) of the queue's ``Active`` condition, as Kueue words it: every cause in its
    message, the first one's reason."""
    if node.terminating:
        return "False", TERMINATING, "Can't admit new workloads; clusterQueue is terminating"
    causes: list[Cause] = [
        (STOPPED, "is stopped") if reason == STOPPED else (reason, m) for reason, m in node.own_causes
    ]
    causes += node.check_causes
    if not causes:
        return "True", "Ready", "Can admit new workloads"
    return "False", causes[0][0], f"Can't admit new workloads: {causes_message(causes)}."


def queue_status_patches(
    state: QuotaState,
    raw_queues: Mapping[str, Mapping[str, Any]],
    *,
    pending: Mapping[str, int],
    now: dt.datetime,
    fair_sharing: bool = False,
) -> dict[str, Obj]:
    """ClusterQueue name → ``status`` to merge, for every queue whose status would change.

    With ``fair_sharing`` (Kueue's ``fairSharing`` configuration) the status also carries Kueue's
    ``fairSharing.weightedShare``, the queue's weighted dominant-resource share; without it the field is removed.
    """
    patches: dict[str, Obj] = {}
    for name, node in state.snapshot.cluster_queues.items():
        raw = raw_queues.get(name)
        if raw is None:
            continue
        holding = state.reserving.get(name, ())
        admitted = [workload for workload in holding if is_true(workload, "Admitted")]
        _, admitted_usage = _summed_usage(admitted)
        status, reason, message = _active(node)
        generation = (raw.get("metadata") or {}).get("generation")
        conditions, _ = set_condition(
            conditions_of(raw),
            condition_type=ACTIVE,
            status=status == "True",
            reason=reason,
            message=message,
            now=now,
            observed_generation=generation if isinstance(generation, int) else None,
        )
        desired: Obj = {
            "pendingWorkloads": pending.get(name, 0),
            "reservingWorkloads": len(holding),
            "admittedWorkloads": len(admitted),
            "flavorsReservation": _flavor_usage(node, node.usage),
            "flavorsUsage": _flavor_usage(node, admitted_usage),
            "conditions": conditions,
        }
        current = raw.get("status") or {}
        if fair_sharing:
            desired["fairSharing"] = {"weightedShare": dominant_resource_share(node)}
        elif current.get("fairSharing") is not None:
            desired["fairSharing"] = None
        if any(current.get(field) != value for field, value in desired.items()):
            patches[name] = desired
    return patches


def cohort_status_patches(
    state: QuotaState, raw_cohorts: Mapping[str, Mapping[str, Any]], *, fair_sharing: bool
) -> dict[str, Obj]:
    """Cohort name → ``status`` to merge, for every Cohort object whose status would change: as Kueue writes it,
    ``fairSharing.weightedShare`` (the cohort's weighted dominant-resource share, 0 at the top of a tree) with fair
    sharing on, and nothing without it. A Cohort in a cycle of parents is left as it is (its tree is disabled)."""
    patches: dict[str, Obj] = {}
    for name, raw in raw_cohorts.items():
        node = state.snapshot.cohorts.get(name)
        if node is None or node.in_cycle:
            continue
        desired = {"weightedShare": dominant_resource_share(node)} if fair_sharing else None
        if (raw.get("status") or {}).get("fairSharing") != desired:
            patches[name] = {"fairSharing": desired}
    return patches


def local_queue_status_patches(
    state: QuotaState,
    raw_local_queues: Mapping[str, Mapping[str, Any]],
    *,
    pending: Mapping[str, int],
    now: dt.datetime,
) -> dict[str, Obj]:
    """``namespace/name`` of a LocalQueue → ``status`` to merge (counts, flavor reservation and usage, Active), for
    those that would change.

    ``pending`` counts pending workloads per LocalQueue key, including those that cannot reach a ClusterQueue.
    """
    holding: dict[str, list[Mapping[str, Any]]] = {}
    for workloads in state.reserving.values():
        for workload in workloads:
            key = f"{workload['metadata']['namespace']}/{workload['spec'].get('queueName', '')}"
            holding.setdefault(key, []).append(workload)
    patches: dict[str, Obj] = {}
    for key, raw in raw_local_queues.items():
        info = state.local_queues.get(key)
        queue = state.queues.get(info.cluster_queue) if info is not None else None
        node = state.snapshot.cluster_queues.get(info.cluster_queue) if info is not None else None
        if info is not None and info.stopped:
            active = (False, "Stopped", "LocalQueue is stopped")
        elif queue is None:
            active = (False, "ClusterQueueDoesNotExist", "Can't submit new workloads to clusterQueue")
        elif node is None or node.inactive_reason is not None:
            active = (False, "ClusterQueueIsInactive", "Can't submit new workloads to clusterQueue")
        else:
            active = (True, "Ready", "Can submit new workloads to localQueue")
        generation = (raw.get("metadata") or {}).get("generation")
        conditions, _ = set_condition(
            conditions_of(raw),
            condition_type=ACTIVE,
            status=active[0],
            reason=active[1],
            message=active[2],
            now=now,
            observed_generation=generation if isinstance(generation, int) else None,
        )
        reserving = holding.get(key, [])
        reserved_total, admitted_total = _summed_usage(reserving)
        desired: Obj = {
            # Kueue counts nothing pending in a stopped LocalQueue (its workloads are out of the queues)
            "pendingWorkloads": 0 if info is not None and info.stopped else pending.get(key, 0),
            "reservingWorkloads": len(reserving),
            "admittedWorkloads": sum(1 for workload in reserving if is_true(workload, "Admitted")),
            # as Kueue: the ClusterQueue's flavors, what this LocalQueue's workloads hold of each; none without one
            "flavorsReservation": None if node is None else _flavor_usage(node, reserved_total, with_borrowed=False),
            "flavorsUsage": None if node is None else _flavor_usage(node, admitted_total, with_borrowed=False),
            "conditions": conditions,
        }
        current = raw.get("status") or {}
        if any(current.get(field) != value for field, value in desired.items()):
            patches[key] = desired
    return patches


def pending_by_cluster_queue(state: QuotaState, admitted: set[str]) -> dict[str, int]:
    """Pending workloads per ClusterQueue after a pass that admitted the workload keys in ``admitted``. As Kueue
    counts them (its queue's heap and its inadmissible list), this includes the workloads of its running LocalQueues
    that cannot reach the admission core now: in requeue backoff, their namespace not selected, refused by a
    LimitRange, the ClusterQueue inactive (``kueue_pending_workloads`` counts them as inadmissible alike)."""
    counts = {
        name: sum(1 for workload, _ in items if workload.key not in admitted) for name, items in state.pending.items()
    }
    for blocked in state.blocked:
        local_queue = state.local_queues.get(_local_queue_key(blocked.raw))
        if local_queue is not None and not local_queue.stopped and local_queue.cluster_queue in state.queues:
            counts[local_queue.cluster_queue] = counts.get(local_queue.cluster_queue, 0) + 1
    return counts


def pending_by_local_queue(
    state: QuotaState,
    admitted: set[str],
    *,
    memo: dict[str, tuple[list[Any], dict[str, int]]] | None = None,
    admitted_in: set[str] | None = None,
) -> dict[str, int]:
    """Pending workloads per LocalQueue (``namespace/name``), counting those no ClusterQueue can take yet.

    ``memo`` (kept by the caller) reuses a ClusterQueue's counts while its pending list holds the very same entries
    (compared at C speed): counting 100,000 pending Workloads one by one on every status write was most of a pass.
    ``admitted_in`` names the ClusterQueues of the ``admitted`` keys, when known (only their lists are searched)."""
    counts: dict[str, int] = {}
    seen: dict[str, tuple[list[Any], dict[str, int]]] = {}
    for name, items in state.pending.items():
        last = memo.get(name) if memo is not None else None
        if last is not None and last[0] == items:
            per_queue = last[1]
        else:
            per_queue = {}
            for _, raw in items:
                key = _local_queue_key(raw)
                per_queue[key] = per_queue.get(key, 0) + 1
        seen[name] = (items, per_queue)
        for key, count in per_queue.items():
            counts[key] = counts.get(key, 0) + count
    if memo is not None:
        memo.clear()
        memo.update(seen)
    if admitted:
        searched = state.pending if admitted_in is None else {n: state.pending.get(n, []) for n in admitted_in}
        for items in searched.values():
            for workload, raw in items:
                if workload.key in admitted:
                    counts[_local_queue_key(raw)] -= 1
    for blocked in state.blocked:
        key = _local_queue_key(blocked.raw)
        counts[key] = counts.get(key, 0) + 1
    return {key: count for key, count in counts.items() if count}


def _local_queue_key(raw: Mapping[str, Any]) -> str:
    return f"{raw['metadata']['namespace']}/{(raw.get('spec') or {}).get('queueName', '')}"


def finalizer_action(cluster_queue: Mapping[str, Any], *, holding: int) -> FinalizerAction | None:
    """Kueue's rule for the resource-in-use finalizer of a ClusterQueue that ``holding`` unfinished workloads hold
    quota in: added to every live ClusterQueue; on deletion kept while any workload holds quota there, then
    removed so the deletion completes. None when the finalizer is absent and not wanted (deleted before it
    was added)."""
    meta = cluster_queue.get("metadata") or {}
    present = RESOURCE_IN_USE_FINALIZER in (meta.get("finalizers") or ())
    if not meta.get("deletionTimestamp"):
        return "keep" if present else "add"
    if not present:
        return None
    return "keep" if holding else "remove"


def _changed_finalizers(raw: Mapping[str, Any], action: FinalizerAction | None) -> list[str] | None:
    current = list((raw.get("metadata") or {}).get("finalizers") or ())
    if action == "add":
        return [*current, RESOURCE_IN_USE_FINALIZER]
    if action == "remove":
        return [f for f in current if f != RESOURCE_IN_USE_FINALIZER]
    return None


def cluster_queue_references(raw_queues: Iterable[Mapping[str, Any]]) -> tuple[set[str], set[str]]:
    """The ResourceFlavors and the AdmissionChecks that ClusterQueues name (also ClusterQueues being deleted, as
    Kueue counts them): in ``spec.resourceGroups`` and ``spec.admissionChecksStrategy``."""
    flavors: set[str] = set()
    checks: set[str] = set()
    for raw in raw_queues:
        spec = raw.get("spec") or {}
        for group in spec.get("resourceGroups") or ():
            flavors.update(str(f.get("name")) for f in group.get("flavors") or () if f.get("name"))
        strategy = spec.get("admissionChecksStrategy") or {}
        checks.update(str(c.get("name")) for c in strategy.get("admissionChecks") or () if c.get("name"))
    return flavors, checks


def in_use_changes(objects: Mapping[str, Mapping[str, Any]], in_use: Collection[str]) -> dict[str, list[str]]:
    """ResourceFlavor or AdmissionCheck name → its new ``metadata.finalizers``, for each whose finalizers must
    change: Kueue's resource-in-use finalizer on every live one; on a deleted one, kept while a ClusterQueue names
    it (``in_use``: :func:`cluster_queue_references`), then removed so the deletion completes."""
    changes: dict[str, list[str]] = {}
    for name, raw in objects.items():
        changed = _changed_finalizers(raw, finalizer_action(raw, holding=1 if name in in_use else 0))
        if changed is not None:
            changes[name] = changed
    return changes


def finalizer_changes(state: QuotaState, raw_queues: Mapping[str, Mapping[str, Any]]) -> dict[str, list[str]]:
    """ClusterQueue name → its new ``metadata.finalizers``, for every queue whose finalizers must change.

    A queue the admission core could not read (malformed) keeps whatever it has: its holders are unknown."""
    changes: dict[str, list[str]] = {}
    for name, raw in raw_queues.items():
        info = state.queues.get(name)
        if info is None or info.spec is None:
            continue
        changed = _changed_finalizers(raw, finalizer_action(raw, holding=len(state.reserving.get(name, ()))))
        if changed is not None:
            changes[name] = changed
    return changes
