"""Flavor assignment: which ResourceFlavor serves each pod set's resources, and whether it fits, borrows or preempts.

For each pod set and each resource group covering its requests, the group's flavors are tried in the ClusterQueue's
order. A flavor is skipped when its ``nodeTaints`` are not tolerated by the pod template, or when its ``nodeLabels``
contradict the template's ``nodeSelector`` or required node affinity (only label keys some flavor of the group sets
are compared, as Kueue does). Otherwise each requested resource is compared with the quota:

* more than the most the queue could ever get → no fit ("… > maximum capacity (…)");
* more than what is available now → fits only by preemption, if the queue's policy allows any preemption;
* otherwise it fits, borrowing when it takes the queue past its nominal quota.

``flavorFungibility`` decides when to stop: a flavor that fits without borrowing always ends the search; one that
fits by borrowing ends it under ``whenCanBorrow: MayStopSearch``; one that needs preemption ends it under
``whenCanPreempt: MayStopSearch``. If the search does not stop, the best flavor seen wins (fit over preempt, then
no borrowing over borrowing, then the earlier flavor). A ClusterQueue covering ``pods`` is charged one per pod.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from federation.admission.decisions import Assignment, PendingReason, PodSetAssignment
from federation.admission.model import (
    FlavorResource,
    PodSet,
    ResourceFlavorSpec,
    ResourceGroup,
    Workload,
)
from federation.admission.snapshot import ClusterQueueNode, Snapshot
from federation.quantity import MILLI, format_amount

__all__ = ["FIT", "NO_FIT", "PREEMPT", "FlavorAssignment", "assign_flavors"]

NO_FIT, PREEMPT, FIT = 0, 1, 2
"""Assignment modes, ordered so that ``min`` gives the mode of a whole workload."""


@dataclass(frozen=True, slots=True)
class FlavorAssignment:
    """The outcome of flavor assignment for one workload at given pod counts.

    ``needs_preemption`` lists the ``(flavor, resource)`` pairs that only fit by preemption; ``reason`` and
    ``message`` explain a ``NO_FIT`` or ``PREEMPT`` outcome in Kueue's words.
    """

    mode: int
    assignment: Assignment | None
    needs_preemption: frozenset[FlavorResource]
    reason: PendingReason
    message: str


@dataclass(slots=True)
class _Search:
    """What one resource group's flavor search reads, and the explanations it collects."""

    snapshot: Snapshot
    queue: ClusterQueueNode
    pending_usage: Mapping[FlavorResource, int]
    can_preempt: bool
    messages: list[str]
    reasons: set[PendingReason]


@dataclass(slots=True)
class _FlavorChoice:
    mode: int
    borrows: bool
    flavor: str
    needs_preemption: list[FlavorResource]


def assign_flavors(
    snapshot: Snapshot, workload: Workload, *, queue: ClusterQueueNode, counts: Sequence[int] | None = None
) -> FlavorAssignment:
    """Assign flavors to every pod set of ``workload`` (at ``counts`` pods each, default their full counts)."""
    pending_usage: dict[FlavorResource, int] = {}
    pod_set_assignments: list[PodSetAssignment] = []
    mode = FIT
    borrows = False
    needs_preemption: set[FlavorResource] = set()
    preempt_messages: list[str] = []
    can_preempt = _may_preempt(queue)
    for index, pod_set in enumerate(workload.pod_sets):
        count = pod_set.count if counts is None else counts[index]
        requests_by_group: dict[int, dict[str, int]] = {}
        for resource, amount in _pod_set_requests(queue, pod_set, count).items():
            group_index = queue.group_of_resource.get(resource)
            if group_index is None:
                return _no_fit(pod_set, "NoMatchingFlavor", [f"resource {resource} unavailable in ClusterQueue"])
            requests_by_group.setdefault(group_index, {})[resource] = amount
        flavors: dict[str, str] = {}
        usage: dict[str, int] = {}
        for group_index, requests in requests_by_group.items():
            search = _Search(snapshot, queue, pending_usage, can_preempt, [], set())
            choice = _choose_flavor(search, queue.spec.resource_groups[group_index], pod_set=pod_set, requests=requests)
            if choice is None:
                return _no_fit(pod_set, _summarize(search.reasons), search.messages)
            if choice.mode == PREEMPT:
                preempt_messages.extend(
                    f"couldn't assign flavors to pod set {pod_set.name}: {m}" for m in search.messages
                )
            mode = min(mode, choice.mode)
            borrows = borrows or choice.borrows
            needs_preemption.update(choice.needs_preemption)
            for resource, amount in requests.items():
                flavors[resource] = choice.flavor
                usage[resource] = amount
                key = (choice.flavor, resource)
                pending_usage[key] = pending_usage.get(key, 0) + amount
        pod_set_assignments.append(PodSetAssignment(pod_set.name, flavors, usage, count))
    assignment = Assignment(queue.name, tuple(pod_set_assignments), pending_usage, borrows)
    return FlavorAssignment(
        mode, assignment, frozenset(needs_preemption), "WaitingForQuota", "; ".join(preempt_messages)
    )


def _pod_set_requests(queue: ClusterQueueNode, pod_set: PodSet, count: int) -> dict[str, int]:
    requests = {resource: amount * count for resource, amount in pod_set.requests.items() if amount}
    if "pods" in queue.group_of_resource:
        requests["pods"] = count * MILLI
    return requests


def _may_preempt(queue: ClusterQueueNode) -> bool:
    policy = queue.spec.preemption
    if policy.within_cluster_queue != "Never":
        return True
    return queue.parent is not None and (
        policy.reclaim_within_cohort != "Never" or policy.borrow_within_cohort != "Never"
    )


def _choose_flavor(
    search: _Search, group: ResourceGroup, *, pod_set: PodSet, requests: Mapping[str, int]
) -> _FlavorChoice | None:
    snapshot, messages, reasons = search.snapshot, search.messages, search.reasons
    fungibility = search.queue.spec.flavor_fungibility
    constrained = bool(pod_set.node_selector or pod_set.required_affinity)
    label_keys = _group_label_keys(snapshot, group) if constrained else frozenset()
    best: _FlavorChoice | None = None
    for flavor_quotas in group.flavors:
        flavor_name = flavor_quotas.name
        flavor = snapshot.flavors.get(flavor_name)
        if flavor is None:
            messages.append(f"flavor {flavor_name} not found")
            reasons.add("NoMatchingFlavor")
            continue
        mismatch = _flavor_mismatch(flavor, pod_set, label_keys=label_keys, constrained=constrained)
        if mismatch:
            messages.append(mismatch)
            reasons.add("NoMatchingFlavor")
            continue
        choice = _fit_in_flavor(search, flavor_name, requests)
        if choice is None:
            continue
        if choice.mode == FIT and not choice.borrows:
            return choice
        if choice.mode == FIT and fungibility.when_can_borrow == "MayStopSearch":
            return choice
        if choice.mode == PREEMPT and fungibility.when_can_preempt == "MayStopSearch":
            return choice
        if best is None or (choice.mode, not choice.borrows) > (best.mode, not best.borrows):
            best = choice
    return best


def _fit_in_flavor(search: _Search, flavor_name: str, requests: Mapping[str, int]) -> _FlavorChoice | None:
    snapshot, queue, pending_usage = search.snapshot, search.queue, search.pending_usage
    messages, reasons = search.messages, search.reasons
    choice = _FlavorChoice(FIT, False, flavor_name, [])
    for resource, amount in requests.items():
        key = (flavor_name, resource)
        wanted = amount + pending_usage.get(key, 0)
        most = snapshot.potential_available(queue, key)
        if wanted > most:
            messages.append(
                f"insufficient quota for {resource} in flavor {flavor_name}, previously considered podsets requests "
                f"({format_amount(resource, wanted - amount)}) + current podset request "
                f"({format_amount(resource, amount)}) > maximum capacity ({format_amount(resource, most)})"
            )
            reasons.add("ExceedsMaxQuota")
            return None
        available = snapshot.available(queue, key)
        if wanted > available:
            messages.append(
                f"insufficient unused quota for {resource} in flavor {flavor_name}, "
                f"{format_amount(resource, wanted - available)} more needed"
            )
            reasons.add("WaitingForQuota")
            if not search.can_preempt:
                return None
            choice.mode = PREEMPT
            choice.needs_preemption.append(key)
        if snapshot.is_borrowing(queue, key, wanted):
            choice.borrows = True
    return choice


def _group_label_keys(snapshot: Snapshot, group: ResourceGroup) -> frozenset[str]:
    keys: set[str] = set()
    for flavor_quotas in group.flavors:
        flavor = snapshot.flavors.get(flavor_quotas.name)
        if flavor is not None:
            keys.update(flavor.node_labels)
    return frozenset(keys)


def placement_mismatches(flavors: Mapping[str, ResourceFlavorSpec], pod_set: PodSet) -> dict[str, str]:
    """Per flavor of ``flavors`` (the flavors of one ClusterQueue, by name), why it cannot take ``pod_set`` by its
    nodes ("" when it can): the pod set asks for a topology and the flavor has none, its node taints are not
    tolerated, or its node labels contradict the pod set's ``nodeSelector`` or required node affinity (only label
    keys some of these flavors set are compared, as in flavor assignment)."""
    constrained = bool(pod_set.node_selector or pod_set.required_affinity)
    label_keys = (
        frozenset(key for flavor in flavors.values() for key in flavor.node_labels) if constrained else frozenset()
    )
    return {
        name: _flavor_mismatch(flavor, pod_set, label_keys=label_keys, constrained=constrained)
        for name, flavor in flavors.items()
    }


def _flavor_mismatch(
    flavor: ResourceFlavorSpec, pod_set: PodSet, *, label_keys: frozenset[str], constrained: bool
) -> str:
    """Why the pod set cannot run on the flavor's nodes, or an empty string when it can."""
    if pod_set.topology_request and flavor.topology_name == "":
        return f'Flavor "{flavor.name}" does not support TopologyAwareScheduling'  # Kueue's words
    for taint in flavor.node_taints:
        if taint.effect in ("NoSchedule", "NoExecute") and not any(t.tolerates(taint) for t in pod_set.tolerations):
            return f"untolerated taint {taint} in flavor {flavor.name}"
    if not constrained:
        return ""
    labels = flavor.node_labels
    for key, value in pod_set.node_selector.items():
        if key in label_keys and labels.get(key) != value:
            return f"flavor {flavor.name} doesn't match node affinity"
    if pod_set.required_affinity and not any(
        all(requirement.matches(labels) for requirement in term if requirement.key in label_keys)
        for term in pod_set.required_affinity
    ):
        return f"flavor {flavor.name} doesn't match node affinity"
    return ""


def _summarize(reasons: set[PendingReason]) -> PendingReason:
    ordered: tuple[PendingReason, ...] = ("WaitingForQuota", "ExceedsMaxQuota")
    for reason in ordered:
        if reason in reasons:
            return reason
    return "NoMatchingFlavor"


def _no_fit(pod_set: PodSet, reason: PendingReason, messages: list[str]) -> FlavorAssignment:
    detail = "; ".join(messages) or "no flavors in the ClusterQueue's resource group"
    return FlavorAssignment(
        NO_FIT, None, frozenset(), reason, f"couldn't assign flavors to pod set {pod_set.name}: {detail}"
    )
