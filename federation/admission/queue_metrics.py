"""Kueue's ClusterQueue and LocalQueue gauges, computed from a quota state (pure: plain data in, samples out).

Both kfed processes export the same gauges Kueue does, from the same :class:`QuotaState` that drives their
admission and their queue status, so a dashboard, the ClusterQueue status and the scheduler never disagree.
Amounts are in Kueue's units (cores, bytes: the core's milli-units divided by 1000).

``pending`` follows Kueue's meaning of ``status``: ``active`` workloads wait for a scheduling attempt,
``inadmissible`` ones were tried and are parked until something changes. Kueue parks a failed workload only in a
``BestEffortFIFO`` queue (a ``StrictFIFO`` head stays in the heap and blocks the rest), and a workload in its
requeuing backoff is parked too; that is what is counted here.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, TypedDict

from federation.admission import model as core
from federation.admission.api_state import QuotaState
from federation.admission.api_workloads import (
    core_workload,
    epoch_seconds,
    reserved_cluster_queue,
    reserved_usage,
    workload_key,
)
from federation.admission.fair_sharing import precise_weighted_share
from federation.admission.snapshot import ClusterQueueNode, CohortNode, QuotaNode
from federation.conditions import find_condition, is_true, parse_time
from federation.protocol import (
    REASON_MISCONFIGURED,
    REASON_SUSPENDED,
    REASON_TOPOLOGY_PLACEMENT_FAILED,
    REASON_WAITING_FOR_PREEMPTED,
)

Sample = tuple[str, tuple[str, ...], float]
"""Metric name, label values in the metric's label order (``federation.obs.metrics.GAUGES``), value."""

ACTIVE = "active"
INADMISSIBLE = "inadmissible"
_MILLI = 1000.0


def _amount(milli: int | None) -> float:
    return math.inf if milli is None else milli / _MILLI


TRIED_REASONS = frozenset(
    (
        "NoMatchingFlavor",
        "WaitingForQuota",
        "ExceedsMaxQuota",
        REASON_MISCONFIGURED,
        REASON_SUSPENDED,
        REASON_TOPOLOGY_PLACEMENT_FAILED,
        REASON_WAITING_FOR_PREEMPTED,
        "Pending",  # Kueue before v0.20 (and kfed before it), on Workloads written then
        "Inadmissible",
    )
)
"""The ``QuotaReserved=False`` reasons of a scheduling verdict (Kueue v0.20's), as opposed to ``PendingEvaluation``
and ``WaitingForPodsReady``, which leave the workload active in its queue."""


def inadmissible_by_condition(state: QuotaState) -> set[str]:
    """Pending workloads a scheduling pass has already tried: their ``QuotaReserved`` is False with one of
    :data:`TRIED_REASONS` (a new or requeued workload has no such verdict yet: ``PendingEvaluation``)."""
    tried: set[str] = set()
    for items in state.pending.values():
        for workload, raw in items:
            condition = find_condition(raw, "QuotaReserved")
            if (
                condition is not None
                and condition.get("status") == "False"
                and condition.get("reason") in TRIED_REASONS
                and not is_true(raw, "Evicted")
            ):
                tried.add(workload.key)
    return tried


def _local_queue_key(raw: Mapping[str, Any]) -> str:
    return f"{raw['metadata']['namespace']}/{(raw.get('spec') or {}).get('queueName', '')}"


def queue_samples(
    state: QuotaState,
    *,
    inadmissible: Collection[str],
    admitted: Collection[str] = (),
    reasons: Mapping[str, str] | None = None,
    fair_sharing: bool = False,
) -> list[Sample]:
    """Every ClusterQueue, Cohort and LocalQueue gauge for ``state``.

    ``inadmissible`` holds the keys of pending workloads the last pass tried and could not admit; ``admitted`` the
    keys it admitted (still pending in ``state``, which was built before the pass); ``reasons`` the
    ``QuotaReserved=False`` reason it gave those it kept pending (their conditions in ``state`` predate it). The
    weighted shares are reported only with ``fair_sharing`` on, as Kueue does.
    """
    samples: list[Sample] = []
    add = samples.append
    lq_pending: dict[str, list[int]] = {}
    queue_of_local = {key: info.cluster_queue for key, info in state.local_queues.items()}
    parked_elsewhere: dict[str, int] = {}
    pending_requests: dict[str, dict[str, int]] = {}
    for blocked in state.blocked:  # in backoff, or no ClusterQueue can take it now: parked
        key = _local_queue_key(blocked.raw)
        lq_pending.setdefault(key, [0, 0])[1] += 1
        if key in queue_of_local and not state.local_queues[key].stopped:  # backoff, namespace not selected, ...
            parked_elsewhere[queue_of_local[key]] = parked_elsewhere.get(queue_of_local[key], 0) + 1
            try:
                backing_off = core_workload(
                    blocked.raw,
                    cluster_queue=queue_of_local[key],
                    limits=state.limit_ranges.get(key.split("/", 1)[0]),
                    overheads=state.runtime_overheads,
                )
            except ValueError:  # a malformed workload requests nothing it could be charged for
                continue
            _add_requests(pending_requests.setdefault(queue_of_local[key], {}), backing_off)
    for name, node in state.snapshot.cluster_queues.items():
        strict = node.spec.queueing_strategy == "StrictFIFO"
        counts = [0, parked_elsewhere.get(name, 0)]
        for workload, raw in state.pending.get(name, ()):
            if workload.key in admitted:
                continue
            _add_requests(pending_requests.setdefault(name, {}), workload)
            parked = not strict and workload.key in inadmissible
            counts[parked] += 1
            lq_counts = lq_pending.setdefault(_local_queue_key(raw), [0, 0])
            lq_counts[parked] += 1
        add(("kueue_pending_workloads", (name, ACTIVE), float(counts[0])))
        add(("kueue_pending_workloads", (name, INADMISSIBLE), float(counts[1])))
    for name, node in state.snapshot.cluster_queues.items():
        cohort = node.spec.cohort or ""
        holding = state.reserving.get(name, ())
        admitted_raws = [raw for raw in holding if is_true(raw, "Admitted")]
        add(("kueue_reserving_active_workloads", (name,), float(len(holding))))
        add(("kueue_admitted_active_workloads", (name,), float(len(admitted_raws))))
        status = "active" if node.inactive_reason is None else "terminated" if node.terminating else "pending"
        for value in ("pending", "active", "terminated"):
            add(("kueue_cluster_queue_status", (name, value), 1.0 if value == status else 0.0))
        in_use: dict[tuple[str, str], int] = {}
        for raw in admitted_raws:
            for flavor_resource, amount in reserved_usage(raw).items():
                in_use[flavor_resource] = in_use.get(flavor_resource, 0) + amount
        for group in node.spec.resource_groups:
            for flavor in group.flavors:
                for quota in flavor.resources:
                    labels = (cohort, name, flavor.name, quota.name)
                    fr = (flavor.name, quota.name)
                    add(("kueue_cluster_queue_resource_reservation", labels, _amount(max(0, node.usage.get(fr, 0)))))
                    add(("kueue_cluster_queue_resource_usage", labels, _amount(in_use.get(fr, 0))))
                    add(("kueue_cluster_queue_nominal_quota", labels, _amount(quota.nominal)))
                    add(("kueue_cluster_queue_borrowing_limit", labels, _amount(quota.borrowing_limit)))
                    add(("kueue_cluster_queue_lending_limit", labels, _amount(quota.lending_limit)))
        requested = pending_requests.get(name, {})
        covered = {resource for group in node.spec.resource_groups for resource in group.covered_resources}
        for resource in sorted(covered | set(requested)):
            add(("kueue_cluster_queue_resource_pending", (name, resource), requested.get(resource, 0) / _MILLI))
        if fair_sharing:
            add(("kueue_cluster_queue_weighted_share", (name, cohort), _weighted_share(node, nan_if_infinite=True)))
    samples.extend(_local_queue_samples(state, lq_pending, queue_of_local))
    samples.extend(_unadmitted_samples(state, queue_of_local, admitted=admitted, reasons=reasons or {}))
    samples.extend(_hierarchy_samples(state))
    samples.extend(_cohort_samples(state, fair_sharing=fair_sharing))
    return samples


def _add_requests(total: dict[str, int], workload: core.Workload) -> None:
    """Add a pending workload's whole request (every pod of every pod set, milli-units) to ``total``."""
    for pod_set in workload.pod_sets:
        for resource, amount in pod_set.requests.items():
            total[resource] = total.get(resource, 0) + amount * pod_set.count


def _weighted_share(node: QuotaNode, *, nan_if_infinite: bool) -> float:
    """Kueue's weighted share gauge: the dominant-resource share kfed orders by, before it is rounded up (per mille
    of the lendable quota borrowed, divided by the weight; 0 when not borrowing). Borrowing with weight 0 is
    infinite: Kueue reports NaN for a ClusterQueue and +Inf for a Cohort."""
    share = precise_weighted_share(node)
    if share == math.inf and nan_if_infinite:
        return math.nan
    return share


def _queues_under(node: QuotaNode, seen: set[str]) -> Iterable[ClusterQueueNode]:
    if isinstance(node, ClusterQueueNode):
        yield node
        return
    if node.name in seen:  # a cycle: Kueue reports nothing for such a tree
        return
    seen.add(node.name)
    for child in node.children:
        yield from _queues_under(child, seen)


def _cohort_samples(state: QuotaState, *, fair_sharing: bool) -> Iterable[Sample]:
    """Kueue's ``kueue_cohort_subtree_*`` gauges (quota and reservations only where above zero, as Kueue clears
    them at zero) and, with fair sharing, ``kueue_cohort_weighted_share``."""
    for name, cohort in state.snapshot.cohorts.items():
        if isinstance(cohort, CohortNode) and cohort.in_cycle:
            continue
        queues = list(_queues_under(cohort, set()))
        reserved: dict[tuple[str, str], int] = {}
        admitted = 0
        for queue in queues:
            for key, amount in queue.usage.items():
                reserved[key] = reserved.get(key, 0) + amount
            admitted += sum(1 for raw in state.reserving.get(queue.name, ()) if is_true(raw, "Admitted"))
        for (flavor, resource), amount in sorted(cohort.subtree_quota.items()):
            if amount > 0:
                yield ("kueue_cohort_subtree_quota", (name, flavor, resource), amount / _MILLI)
        for (flavor, resource), amount in sorted(reserved.items()):
            if amount > 0:
                yield ("kueue_cohort_subtree_resource_reservations", (name, flavor, resource), amount / _MILLI)
        yield ("kueue_cohort_subtree_admitted_active_workloads", (name,), float(admitted))
        if fair_sharing:
            yield ("kueue_cohort_weighted_share", (name,), _weighted_share(cohort, nan_if_infinite=False))


def _hierarchy_samples(state: QuotaState) -> Iterable[Sample]:
    """Kueue's ``kueue_cluster_queue_info`` and ``kueue_cohort_info``: value 1, the tree in the labels."""

    def chain(cohort: str | None) -> tuple[str, str]:
        if not cohort:
            return "", ""
        root, seen = cohort, {cohort}
        node = state.snapshot.cohorts.get(cohort)
        while node is not None and node.parent_name and node.parent_name not in seen:
            root = node.parent_name
            seen.add(root)
            node = state.snapshot.cohorts.get(root)
        return cohort, root

    for name, queue in state.snapshot.cluster_queues.items():
        yield ("kueue_cluster_queue_info", (name, *chain(queue.spec.cohort)), 1.0)
    for name, cohort in state.snapshot.cohorts.items():
        parent, root = chain(cohort.parent_name)
        yield ("kueue_cohort_info", (name, parent, root or name), 1.0)


def unadmitted_labels(raw: Mapping[str, Any], *, decided: str | None = None) -> tuple[str, str]:
    """Kueue v0.20's ``(reason, underlying_cause)`` of ``kueue_unadmitted_workloads`` for a workload not admitted:
    the ``Admitted=False`` reason Kueue's SyncAdmittedCondition gives it (``NoReservation`` without quota,
    ``UnsatisfiedAdmissionChecks`` while its checks are not all Ready, ``PendingDelayedTopologyRequests`` while a
    topology waits for them), and its ``QuotaReserved=False`` reason ("" with quota reserved, ``PendingEvaluation``
    before any verdict; ``decided``, a verdict not written into ``raw`` yet, wins)."""
    reserved = find_condition(raw, "QuotaReserved")
    if decided is not None and not (reserved is not None and reserved.get("status") == "True"):
        return "NoReservation", decided
    if reserved is None:
        return "NoReservation", "PendingEvaluation"
    if reserved.get("status") != "True":
        return "NoReservation", str(reserved.get("reason") or "")
    status = raw.get("status") or {}
    if any(check.get("state") != "Ready" for check in status.get("admissionChecks") or ()):
        return "UnsatisfiedAdmissionChecks", ""
    assignments = (status.get("admission") or {}).get("podSetAssignments") or ()
    if any(item.get("delayedTopologyRequest") == "Pending" for item in assignments):
        return "PendingDelayedTopologyRequests", ""
    return "UnsatisfiedAdmissionChecks", ""


def _unadmitted_samples(
    state: QuotaState, queue_of_local: Mapping[str, str], *, admitted: Collection[str], reasons: Mapping[str, str]
) -> Iterable[Sample]:
    """``kueue_unadmitted_workloads`` and ``kueue_local_queue_unadmitted_workloads`` (Kueue v0.20): every workload
    pending, parked or holding quota without being admitted, counted by :func:`unadmitted_labels`; only the
    combinations that have one (Kueue deletes a series whose count drops to 0). A workload whose LocalQueue does not
    resolve to a ClusterQueue counts in neither, as in Kueue."""
    unadmitted: list[tuple[str, Mapping[str, Any]]] = []
    for name, items in state.pending.items():
        unadmitted.extend((name, raw) for workload, raw in items if workload.key not in admitted)
    for blocked in state.blocked:
        unadmitted.append((queue_of_local.get(_local_queue_key(blocked.raw), ""), blocked.raw))
    for name, holding in state.reserving.items():
        unadmitted.extend((name, raw) for raw in holding if not is_true(raw, "Admitted"))
    per_queue: dict[tuple[str, str, str], int] = {}
    per_local: dict[tuple[str, str, str, str, str], int] = {}
    for cluster_queue, raw in unadmitted:
        if not cluster_queue:
            continue
        reason, cause = unadmitted_labels(raw, decided=reasons.get(workload_key(raw)))
        per_queue[(cluster_queue, reason, cause)] = per_queue.get((cluster_queue, reason, cause), 0) + 1
        key = _local_queue_key(raw)
        if key in state.local_queues:
            namespace, name = key.split("/", 1)
            labels = (name, namespace, cluster_queue, reason, cause)
            per_local[labels] = per_local.get(labels, 0) + 1
    for queue_labels, count in sorted(per_queue.items()):
        yield ("kueue_unadmitted_workloads", queue_labels, float(count))
    for local_labels, count in sorted(per_local.items()):
        yield ("kueue_local_queue_unadmitted_workloads", local_labels, float(count))


def _local_queue_samples(
    state: QuotaState, pending: Mapping[str, list[int]], queue_of_local: Mapping[str, str]
) -> Iterable[Sample]:
    holding: dict[str, list[Mapping[str, Any]]] = {}
    for reserving in state.reserving.values():
        for held in reserving:
            holding.setdefault(_local_queue_key(held), []).append(held)
    for key, info in state.local_queues.items():
        namespace, name = key.split("/", 1)
        counts = pending.get(key, [0, 0])
        yield ("kueue_local_queue_pending_workloads", (name, namespace, ACTIVE), float(counts[0]))
        yield ("kueue_local_queue_pending_workloads", (name, namespace, INADMISSIBLE), float(counts[1]))
        raws = holding.get(key, [])
        admitted = [raw for raw in raws if is_true(raw, "Admitted")]
        yield ("kueue_local_queue_reserving_active_workloads", (name, namespace), float(len(raws)))
        yield ("kueue_local_queue_admitted_active_workloads", (name, namespace), float(len(admitted)))
        node = state.snapshot.cluster_queues.get(queue_of_local[key])
        active = "True" if not info.stopped and node is not None and node.inactive_reason is None else "False"
        for value in ("True", "False", "Unknown"):
            yield ("kueue_local_queue_status", (name, namespace, value), 1.0 if value == active else 0.0)
        reserved: dict[tuple[str, str], int] = {}
        used: dict[tuple[str, str], int] = {}
        for raw in raws:
            usage = reserved_usage(raw)
            for fr, amount in usage.items():
                reserved[fr] = reserved.get(fr, 0) + amount
                if is_true(raw, "Admitted"):
                    used[fr] = used.get(fr, 0) + amount
        if node is not None:  # every flavor/resource of its ClusterQueue, zero included, as Kueue reports them
            for group in node.spec.resource_groups:
                for flavor in group.flavors:
                    for quota in flavor.resources:
                        reserved.setdefault((flavor.name, quota.name), 0)
        for (flavor_name, resource), amount in sorted(reserved.items()):
            labels = (name, namespace, flavor_name, resource)
            yield ("kueue_local_queue_resource_reservation", labels, _amount(amount))
            yield ("kueue_local_queue_resource_usage", labels, _amount(used.get((flavor_name, resource), 0)))


def workload_labels(raw: Mapping[str, Any]) -> tuple[str, str, str]:
    """``(namespace, LocalQueue name, priority class)`` of a Workload, for the per-LocalQueue counters."""
    spec = raw.get("spec") or {}
    return (
        str(raw["metadata"].get("namespace", "")),
        str(spec.get("queueName") or ""),
        str(spec.get("priorityClassName") or ""),
    )


def eviction_labels(cause: str, underlying_cause: str = "") -> tuple[str, str]:
    """Kueue's ``(reason, underlying_cause)`` metric labels for an ``Evicted`` condition reason: a deactivation
    Kueue decided (``DeactivatedDueTo<cause>``) counts as ``Deactivated`` with that cause underneath; for the other
    reasons ``underlying_cause`` names it (``PodsReadyTimeout``'s ``WaitForStart``), else it is empty."""
    prefix = "DeactivatedDueTo"
    if cause.startswith(prefix) and len(cause) > len(prefix):
        return "Deactivated", cause[len(prefix) :]
    return cause, underlying_cause


def queued_since(raw: Mapping[str, Any]) -> str:
    """When the workload was created or last requeued (Kueue's start of every wait-time histogram): the
    ``Requeued`` condition's transition time when it is True, else the creation time (RFC 3339 text)."""
    requeued = find_condition(raw, "Requeued")
    if requeued is not None and requeued.get("status") == "True" and requeued.get("lastTransitionTime"):
        return str(requeued["lastTransitionTime"])
    return str(raw["metadata"].get("creationTimestamp") or "")


def queued_wait_seconds(raw: Mapping[str, Any], *, now_seconds: float) -> float:
    """Seconds since :func:`queued_since` (Kueue's ``QueuedWaitTime``, in its QuotaReserved Event); 0 without a
    readable time."""
    since = epoch_seconds(queued_since(raw))
    return 0.0 if since is None else max(0.0, now_seconds - since)


def _since(raw: Mapping[str, Any], condition_type: str, now: dt.datetime) -> float | None:
    condition = find_condition(raw, condition_type)
    if condition is None or condition.get("status") != "True" or not condition.get("lastTransitionTime"):
        return None
    return max(0.0, (now - parse_time(str(condition["lastTransitionTime"]))).total_seconds())


def ready_waits(raw: Mapping[str, Any], *, now: dt.datetime) -> tuple[float, float] | None:
    """Kueue's samples when a workload's ``PodsReady`` turns True at ``now``: seconds since it was created or
    requeued (``kueue_ready_wait_time_seconds``) and since it was admitted
    (``kueue_admitted_until_ready_wait_time_seconds``); None when it is not admitted, or when its pods are ready
    again after a recovery (reason ``Recovered``), which Kueue v0.20 no longer records (#14626)."""
    if (find_condition(raw, "PodsReady") or {}).get("reason") == "Recovered":
        return None
    admitted = _since(raw, "Admitted", now)
    queued = queued_since(raw)
    if admitted is None or not queued:
        return None
    return max(0.0, (now - parse_time(queued)).total_seconds()), admitted


def recovery_wait(before: Mapping[str, Any], after: Mapping[str, Any], *, now: dt.datetime) -> float | None:
    """Kueue v0.20's ``kueue_workload_recovery_wait_time_seconds`` sample (#14766) when a workload's ``PodsReady``
    turns True at ``now`` with reason ``Recovered`` (``after``): seconds since it turned False with reason
    ``WaitForRecovery`` (``before``); None for any other change."""
    waiting, ready = find_condition(before, "PodsReady") or {}, find_condition(after, "PodsReady") or {}
    if ready.get("status") != "True" or ready.get("reason") != "Recovered":
        return None
    if waiting.get("status") != "False" or waiting.get("reason") != "WaitForRecovery":
        return None
    since = str(waiting.get("lastTransitionTime") or "")
    return max(0.0, (now - parse_time(since)).total_seconds()) if since else None


class ReadinessSamples(TypedDict):
    """What a change of a workload's ``PodsReady`` records (``federation.obs.metrics.Metrics.pods_ready``)."""

    cluster_queue: str
    namespace: str
    local_queue: str
    priority_class: str
    waits: tuple[float, float] | None
    recovered: float | None


def readiness_samples(
    before: Mapping[str, Any], after: Mapping[str, Any], *, now: dt.datetime
) -> ReadinessSamples | None:
    """Kueue's samples when a write at ``now`` changed a workload's ``PodsReady`` from ``before``'s to ``after``'s:
    :func:`ready_waits` the first time it turns True, :func:`recovery_wait` when it turns True again; None when
    neither applies."""
    if not is_true(after, "PodsReady") or is_true(before, "PodsReady"):
        return None
    waits, recovered = ready_waits(after, now=now), recovery_wait(before, after, now=now)
    if waits is None and recovered is None:
        return None
    namespace, local_queue, priority_class = workload_labels(after)
    return ReadinessSamples(
        cluster_queue=reserved_cluster_queue(after) or "",
        namespace=namespace,
        local_queue=local_queue,
        priority_class=priority_class,
        waits=waits,
        recovered=recovered,
    )


def pods_ready_to_evicted(raw: Mapping[str, Any], *, now: dt.datetime) -> float | None:
    """Kueue's ``kueue_pods_ready_to_evicted_time_seconds`` sample for a workload evicted at ``now``: seconds since
    its ``PodsReady`` turned True; None when its pods are not ready (Kueue records nothing then)."""
    return _since(raw, "PodsReady", now)


def workload_creation_latency(job: Mapping[str, Any], workload: Mapping[str, Any]) -> float | None:
    """Kueue's ``kueue_workload_creation_latency_seconds`` sample: from the Job's creation to its Workload's (both
    as the apiserver stamped them); None for a Job past generation 1, which Kueue does not record."""
    job_meta, workload_meta = job.get("metadata") or {}, workload.get("metadata") or {}
    if int(job_meta.get("generation") or 1) > 1:
        return None
    if not job_meta.get("creationTimestamp") or not workload_meta.get("creationTimestamp"):
        return None
    created = parse_time(str(workload_meta["creationTimestamp"]))
    return max(0.0, (created - parse_time(str(job_meta["creationTimestamp"]))).total_seconds())


def eviction_latency(
    before: Mapping[str, Any], after: Mapping[str, Any], *, now: dt.datetime
) -> tuple[str, str, float] | None:
    """Kueue's ``kueue_workload_eviction_latency_seconds`` sample when an evicted workload's quota is released (it
    goes from reserved or admitted back to pending): ``(cluster_queue, reason, seconds)`` from the ``Evicted``
    condition of the workload ``after`` the release, the ClusterQueue from its admission ``before``; None when it
    held no quota or is not evicted."""
    if not is_true(before, "QuotaReserved"):
        return None
    queue = str(((before.get("status") or {}).get("admission") or {}).get("clusterQueue") or "")
    evicted = find_condition(after, "Evicted")
    if not queue or evicted is None or evicted.get("status") != "True" or not evicted.get("lastTransitionTime"):
        return None
    seconds = (now - parse_time(str(evicted["lastTransitionTime"]))).total_seconds()
    return queue, str(evicted.get("reason") or ""), max(0.0, seconds)


def finished_samples(
    workloads: Iterable[Mapping[str, Any]],
    *,
    local_queues: Iterable[Mapping[str, Any]],
    cluster_queues: Iterable[str],
) -> list[Sample]:
    """Kueue's ``kueue_finished_workloads`` and ``kueue_local_queue_finished_workloads``: the ``Finished`` Workloads
    that still exist, per ClusterQueue (through their LocalQueue, as Kueue's queue manager files them) and per
    LocalQueue; every queue is reported, at 0 when none."""
    queue_of: dict[str, str] = {}
    per_local: dict[str, int] = {}
    for local in local_queues:
        meta = local.get("metadata") or {}
        key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        queue_of[key] = str((local.get("spec") or {}).get("clusterQueue") or "")
        per_local[key] = 0
    per_cluster = dict.fromkeys(cluster_queues, 0)
    for raw in workloads:
        if not is_true(raw, "Finished"):
            continue
        key = _local_queue_key(raw)
        if key in per_local:
            per_local[key] += 1
            if queue_of[key] in per_cluster:
                per_cluster[queue_of[key]] += 1
    samples: list[Sample] = [("kueue_finished_workloads", (name,), float(n)) for name, n in per_cluster.items()]
    for key, n in per_local.items():
        namespace, name = key.split("/", 1)
        samples.append(("kueue_local_queue_finished_workloads", (name, namespace), float(n)))
    return samples


def cohort_ancestors(
    cluster_queue: Mapping[str, Any] | None, cohort_of: Callable[[str], Mapping[str, Any] | None]
) -> list[str]:
    """The cohorts above a ClusterQueue, nearest first (``spec.cohortName``, then each Cohort's
    ``spec.parentName``), for Kueue's ``kueue_cohort_subtree_admitted_workloads_total``; a Cohort named but not
    created ends the chain (Kueue's implicit cohort), and so does a cycle."""
    chain: list[str] = []
    name = str(((cluster_queue or {}).get("spec") or {}).get("cohortName") or "")
    while name and name not in chain:
        chain.append(name)
        cohort = cohort_of(name)
        name = str(((cohort or {}).get("spec") or {}).get("parentName") or "")
    return chain


def admitted_for(raw: Mapping[str, Any], *, now: dt.datetime) -> float | None:
    """Seconds since the workload's ``Admitted`` turned True (None when it is not admitted): Kueue's
    ``kueue_pod_scheduling_gate_removal_seconds`` sample when a gate of one of its pods is removed at ``now``."""
    return _since(raw, "Admitted", now)
