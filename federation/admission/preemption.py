"""Preemption: the smallest set of admitted workloads whose eviction lets a preemptor fit.

Candidates come from the preemptor's ClusterQueue (``withinClusterQueue``: ``LowerPriority``, or
``LowerOrNewerEqualPriority`` which also takes equal priorities queued later) and, when it is in a cohort, from
other ClusterQueues of the tree that borrow a resource the preemptor needs (``reclaimWithinCohort``: ``Any`` or
``LowerPriority``). Only workloads using a ``(flavor, resource)`` that needs preemption are candidates.

Candidates are tried in Kueue's order — already evicted first, then other ClusterQueues, then lower priority, then
the most recently admitted — removing them one by one from a what-if snapshot until the preemptor fits; then each
removed workload but the last is put back (newest first) if the preemptor still fits without it, so no victim is
needless. A queue's candidate stops counting once its ClusterQueue no longer borrows what is needed.

Borrowing rules follow Kueue: reclaiming from other queues happens without the preemptor borrowing, unless
``borrowWithinCohort`` allows it (then other queues' victims must be below ``maxPriorityThreshold`` + 1, or below
the preemptor's priority); failing that, only the preemptor's own queue is searched, with borrowing allowed.
Under fair sharing, victims are taken from the queue with the highest share first, and only while Kueue's
strategies allow it: the preemptor's share after admission ≤ the victim queue's share after eviction, or, failing
that, < its share before eviction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from federation.admission.decisions import PreemptionReason, Victim
from federation.admission.fair_sharing import dominant_resource_share, share_with_usage
from federation.admission.model import AdmittedWorkload, FlavorResource, Workload
from federation.admission.snapshot import ClusterQueueNode, QuotaNode, Snapshot

__all__ = [
    "FAIR_SHARING_STRATEGIES",
    "FAIR_SHARING_STRATEGY_LISTS",
    "PreemptionRequest",
    "fair_sharing_strategies",
    "find_victims",
    "workload_fits",
]

FairSharingStrategy = Callable[[int, int, int], bool]
"""``(preemptor share after admission, victim queue share before, victim queue share after) → allowed``."""


def _less_than_or_equal_to_final_share(preemptor_after: int, _victim_before: int, victim_after: int) -> bool:
    return preemptor_after <= victim_after


def _less_than_initial_share(preemptor_after: int, victim_before: int, _victim_after: int) -> bool:
    return preemptor_after < victim_before


FAIR_SHARING_STRATEGIES: tuple[FairSharingStrategy, ...] = (
    _less_than_or_equal_to_final_share,
    _less_than_initial_share,
)
"""Kueue's default ``LessThanOrEqualToFinalShare`` then ``LessThanInitialShare``."""

_STRATEGY_BY_NAME: dict[str, FairSharingStrategy] = {
    "LessThanOrEqualToFinalShare": _less_than_or_equal_to_final_share,
    "LessThanInitialShare": _less_than_initial_share,
}
FAIR_SHARING_STRATEGY_LISTS: tuple[tuple[str, ...], ...] = (
    ("LessThanOrEqualToFinalShare",),
    ("LessThanInitialShare",),
    ("LessThanOrEqualToFinalShare", "LessThanInitialShare"),
)
"""The only ``fairSharing.preemptionStrategies`` lists Kueue's configuration validation accepts."""


def fair_sharing_strategies(names: tuple[str, ...]) -> tuple[FairSharingStrategy, ...]:
    """The strategies Kueue names ``names``; raises ValueError for a list Kueue does not accept."""
    if names not in FAIR_SHARING_STRATEGY_LISTS:
        allowed = " or ".join(",".join(names) for names in FAIR_SHARING_STRATEGY_LISTS)
        raise ValueError(f"{','.join(names) or '(none)'} is not one of Kueue's preemption strategy lists: {allowed}")
    return tuple(_STRATEGY_BY_NAME[name] for name in names)


_REASON_TEXT: dict[PreemptionReason, str] = {  # Kueue's words
    "InClusterQueue": "prioritization in the ClusterQueue",
    "InCohortReclamation": "reclamation within the cohort",
    "InCohortReclaimWhileBorrowing": "reclamation within the cohort while borrowing",
    "InCohortFairSharing": "Fair Sharing within the cohort",
}


@dataclass(frozen=True, slots=True)
class PreemptionRequest:
    """What the preemptor needs: its usage per ``(flavor, resource)`` and which of those need preemption."""

    queue: ClusterQueueNode
    workload: Workload
    usage: Mapping[FlavorResource, int]
    needs_preemption: frozenset[FlavorResource]
    borrows: bool


def workload_fits(
    snapshot: Snapshot, usage: Mapping[FlavorResource, int], *, queue: ClusterQueueNode, allow_borrowing: bool
) -> bool:
    """Whether ``usage`` fits in ``queue`` now (within its nominal quota unless borrowing is allowed)."""
    for key, amount in usage.items():
        if not allow_borrowing and snapshot.is_borrowing(queue, key, amount):
            return False
        if amount > snapshot.available(queue, key):
            return False
    return True


def find_victims(
    snapshot: Snapshot,
    request: PreemptionRequest,
    *,
    fair_sharing: bool = False,
    strategies: Sequence[FairSharingStrategy] = FAIR_SHARING_STRATEGIES,
) -> tuple[Victim, ...]:
    """The victims to evict so the preemptor fits, or ``()`` when no allowed set of evictions is enough."""
    candidates = _candidates(snapshot, request)
    if not candidates:
        return ()
    queue = request.queue
    candidates.sort(
        key=lambda c: (
            not c.evicted,
            c.workload.cluster_queue == queue.name,
            c.workload.priority,
            -c.admitted_at,
            c.key,
        )
    )
    if fair_sharing and queue.parent is not None:
        chosen = _fair_preemptions(snapshot, request, candidates=candidates, strategies=strategies)
        return _as_victims(snapshot, chosen, request, fair_sharing=True, borrowing=True)
    own = [c for c in candidates if c.workload.cluster_queue == queue.name]
    if len(own) == len(candidates):
        return _as_victims(
            snapshot, _minimal(snapshot, request, candidates=candidates, allow_borrowing=True), request, borrowing=True
        )
    policy = queue.spec.preemption
    if policy.borrow_within_cohort != "Never":
        threshold = request.workload.priority
        if policy.max_priority_threshold is not None and policy.max_priority_threshold < threshold:
            threshold = policy.max_priority_threshold + 1
        if not _under_nominal(queue, request.needs_preemption):
            candidates = [
                c for c in candidates if c.workload.cluster_queue == queue.name or c.workload.priority < threshold
            ]
        chosen = _minimal(snapshot, request, candidates=candidates, allow_borrowing=True, threshold=threshold)
        return _as_victims(snapshot, chosen, request, borrowing=True)
    if _under_nominal(queue, request.needs_preemption):
        chosen = _minimal(snapshot, request, candidates=candidates, allow_borrowing=False)
        if chosen:
            return _as_victims(snapshot, chosen, request, borrowing=False)
    return _as_victims(
        snapshot, _minimal(snapshot, request, candidates=own, allow_borrowing=True), request, borrowing=True
    )


def _candidates(snapshot: Snapshot, request: PreemptionRequest) -> list[AdmittedWorkload]:
    queue, preemptor, needed = request.queue, request.workload, request.needs_preemption
    policy = queue.spec.preemption
    found: list[AdmittedWorkload] = []
    within = policy.within_cluster_queue
    if within != "Never":
        for admitted in queue.workloads.values():
            other = admitted.workload
            if other.key == preemptor.key or not _uses_any(admitted, needed):
                continue
            if other.priority < preemptor.priority or (
                within == "LowerOrNewerEqualPriority"
                and other.priority == preemptor.priority
                and preemptor.ordering_time < other.ordering_time
            ):
                found.append(admitted)
    reclaim = policy.reclaim_within_cohort
    if queue.parent is not None and reclaim != "Never":
        borrowers: set[ClusterQueueNode] = set()
        for key in needed:
            borrowers.update(snapshot.borrowing_queues(queue, key))
        borrowers.discard(queue)
        for member in borrowers:
            for admitted in member.workloads.values():
                if _uses_any(admitted, needed) and (
                    reclaim == "Any" or admitted.workload.priority < preemptor.priority
                ):
                    found.append(admitted)
    return found


def _uses_any(admitted: AdmittedWorkload, keys: Iterable[FlavorResource]) -> bool:
    usage = admitted.usage
    return any(usage.get(key, 0) > 0 for key in keys)


def _borrows_any(queue: ClusterQueueNode, keys: Iterable[FlavorResource]) -> bool:
    usage, quota = queue.usage, queue.subtree_quota
    return any(usage.get(key, 0) > quota.get(key, 0) for key in keys)


def _under_nominal(queue: ClusterQueueNode, keys: Iterable[FlavorResource]) -> bool:
    return all(queue.usage.get(key, 0) < queue.nominal.get(key, 0) for key in keys)


def _minimal(
    snapshot: Snapshot,
    request: PreemptionRequest,
    *,
    candidates: Sequence[AdmittedWorkload],
    allow_borrowing: bool,
    threshold: int | None = None,
) -> list[AdmittedWorkload]:
    queue = request.queue
    with snapshot.what_if():
        removed: list[AdmittedWorkload] = []
        fits = False
        for candidate in candidates:
            candidate_queue = snapshot.cluster_queues[candidate.workload.cluster_queue]
            reclaiming = candidate_queue is not queue
            if reclaiming and not _borrows_any(candidate_queue, request.needs_preemption):
                continue
            if reclaiming and threshold is not None and candidate.workload.priority >= threshold:
                allow_borrowing = False
            snapshot.remove_workload(candidate.key)
            removed.append(candidate)
            if workload_fits(snapshot, request.usage, queue=queue, allow_borrowing=allow_borrowing):
                fits = True
                break
        if not fits:
            return []
        return _fill_back(snapshot, request, removed, allow_borrowing=allow_borrowing)


def _fill_back(
    snapshot: Snapshot, request: PreemptionRequest, removed: list[AdmittedWorkload], *, allow_borrowing: bool
) -> list[AdmittedWorkload]:
    """Put back every victim (newest removal first, the last one excepted) the preemptor can do without."""
    victims = [removed[-1]]
    for candidate in reversed(removed[:-1]):
        snapshot.add_workload(candidate)
        if workload_fits(snapshot, request.usage, queue=request.queue, allow_borrowing=allow_borrowing):
            continue
        snapshot.remove_workload(candidate.key)
        victims.append(candidate)
    victims.reverse()
    return victims


def _fair_preemptions(
    snapshot: Snapshot,
    request: PreemptionRequest,
    *,
    candidates: Sequence[AdmittedWorkload],
    strategies: Sequence[FairSharingStrategy],
) -> list[AdmittedWorkload]:
    queue = request.queue
    for strategy in strategies:
        with snapshot.what_if():
            by_queue: dict[str, list[AdmittedWorkload]] = {}
            for candidate in candidates:
                by_queue.setdefault(candidate.workload.cluster_queue, []).append(candidate)
            removed: list[AdmittedWorkload] = []
            fits = False
            while by_queue and not fits:
                name = max(by_queue, key=lambda n: (dominant_resource_share(snapshot.cluster_queues[n]), n))
                pending = by_queue[name]
                candidate = pending.pop(0)
                if not pending:
                    del by_queue[name]
                candidate_queue = snapshot.cluster_queues[name]
                if candidate_queue is not queue:
                    if not _borrows_any(candidate_queue, request.needs_preemption):
                        by_queue.pop(name, None)
                        continue
                    preemptor_after = share_with_usage(snapshot, queue, request.usage)
                    victim_before = dominant_resource_share(candidate_queue)
                    with snapshot.what_if():
                        snapshot.remove_workload(candidate.key)
                        victim_after = dominant_resource_share(candidate_queue)
                    if not strategy(preemptor_after, victim_before, victim_after):
                        by_queue.pop(name, None)
                        continue
                snapshot.remove_workload(candidate.key)
                removed.append(candidate)
                fits = workload_fits(snapshot, request.usage, queue=queue, allow_borrowing=True)
            if fits:
                return _fill_back(snapshot, request, removed, allow_borrowing=True)
    return []


def _as_victims(
    snapshot: Snapshot,
    chosen: Sequence[AdmittedWorkload],
    request: PreemptionRequest,
    *,
    borrowing: bool,
    fair_sharing: bool = False,
) -> tuple[Victim, ...]:
    victims: list[Victim] = []
    for admitted in chosen:
        reason: PreemptionReason
        if admitted.workload.cluster_queue == request.queue.name:
            reason = "InClusterQueue"
        elif fair_sharing:
            reason = "InCohortFairSharing"
        elif borrowing and request.borrows:
            reason = "InCohortReclaimWhileBorrowing"
        else:
            reason = "InCohortReclamation"
        victim_queue = snapshot.cluster_queues.get(admitted.workload.cluster_queue)
        message = preemption_message(
            request.workload,
            reason,
            preemptor_path=queue_path(request.queue),
            preemptee_path=queue_path(victim_queue) if victim_queue is not None else "",
        )
        victims.append(Victim(admitted.key, admitted.workload.cluster_queue, reason, message))
    return tuple(victims)


def preemption_message(
    preemptor: Workload, reason: PreemptionReason, *, preemptor_path: str, preemptee_path: str
) -> str:
    """Kueue's message on a preempted workload's ``Evicted`` and ``Preempted`` conditions."""
    return (
        f"Preempted to accommodate a workload (UID: {preemptor.uid or 'UNKNOWN'}, "
        f"JobUID: {preemptor.job_uid or 'UNKNOWN'}) due to {_REASON_TEXT[reason]}; "
        f"preemptor path: {preemptor_path or 'UNKNOWN'}; preemptee path: {preemptee_path or 'UNKNOWN'}"
    )


def queue_path(queue: QuotaNode) -> str:
    """``/root-cohort/…/cluster-queue``: the ClusterQueue and its cohorts from the top, as Kueue names it."""
    names: list[str] = []
    node: QuotaNode | None = queue
    while node is not None:
        names.append(node.name)
        node = node.parent
    return "/" + "/".join(reversed(names))
