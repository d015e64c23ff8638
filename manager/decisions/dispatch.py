"""Capacity probing: pick the one worker a workload goes to, from the workers' capacity reports.

A worker is a candidate when it is usable (connected, fresh report) and its LocalQueue of the workload's name
feeds a ClusterQueue whose free quota, less what the manager already sent there and the report does not show
yet (the in-flight ledger), covers every requested resource: a workload only ever goes where it fits. The check
follows the worker's flavor assignment: pod set by pod set, the resources of one resource group (the flavors that
list the same resources) come from one flavor, the first in order with room for them all, one that fits without
borrowing before one that needs to borrow; so a ClusterQueue with the cpu in one flavor and the memory in another,
in one group, takes no workload that needs both, and two pod sets may take two flavors. Candidates
are ranked: fits without borrowing first, then the ``DispatchPolicy`` on the free quota left over (as a share of
nominal, on the tightest resource), then the order of the MultiKueueConfig; workers the workload was withdrawn
from come last. The default, ``Balanced``, spreads small workloads over equally good workers (least allocated:
with best fit alone every workload packs onto the first worker and one worker does all the local admission
while the others idle) and keeps best fit for large ones (a share of a worker's quota of at least
``large_share``), so that large holes stay open for large workloads. A pod set that requires
(or prefers) a topology level must also fit the worker's per-domain TAS summary, so a Job needing one rack goes
only to a worker that may have a rack with room. A pod set goes only to a worker where some flavor of the
ClusterQueue could take it by its nodes (from a report that lists the flavors' node labels and taints): the pod set
tolerates the flavor's taints, and its ``nodeSelector`` and required node affinity allow the flavor's node labels
(as in flavor assignment, only label keys those flavors set are compared). A worker whose flavors rule the pods out
is not sent a copy that its queue would hold back ("untolerated taint", "doesn't match node affinity"), nor is a
pod set asking for a topology sent to a worker whose flavors have none (as Kueue's flavor assignment, from the
flavors' ``topologyName`` a kfed-agent reports; a stock Kueue worker's flavors are taken on trust). When
LimitRanges are involved, each worker is judged by what its own namespace's LimitRanges make the pods ask for, and
one whose LimitRanges refuse them gets no copy (:mod:`manager.decisions.worker_requests`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from federation.admission.flavors import placement_mismatches
from federation.admission.model import PodSet, ResourceFlavorSpec
from federation.limit_ranges import LimitRangeSummary
from federation.podspec import Overheads
from federation.quantity import format_amount
from federation.topology import CapacitySummary, PodSetRequest, summary_fits
from manager.decisions.worker_requests import AsRunThere


class DispatchPolicy(StrEnum):
    """How to choose among the workers that fit equally well as far as borrowing goes."""

    BEST_FIT = "BestFit"
    """The least free quota left over: pack workers one after another."""
    LEAST_ALLOCATED = "LeastAllocated"
    """The most free quota left over: spread workloads over the workers."""
    BALANCED = "Balanced"
    """LeastAllocated, but BestFit for a workload that takes at least ``large_share`` of a candidate's quota."""


DEFAULT_LARGE_SHARE = 0.25


@dataclass(frozen=True, slots=True)
class FlavorRoom:
    """One flavor of a worker ClusterQueue, in milli-units per resource."""

    name: str
    nominal: Mapping[str, int]
    free: Mapping[str, int]
    borrowable: Mapping[str, int] = field(default_factory=dict)
    """How much more could be borrowed from the cohort now (absent: none)."""


@dataclass(frozen=True, slots=True)
class Room:
    """A ClusterQueue's room for one resource: the roomiest flavor's free quota and nominal, and the most any
    flavor could take with borrowing."""

    free: int
    nominal: int
    with_borrowing: int


@dataclass(frozen=True, slots=True)
class WorkerCapacity:
    """What one worker's latest report says (already parsed)."""

    local_queues: Mapping[tuple[str, str], str]
    """(namespace, LocalQueue name) → ClusterQueue name."""
    cluster_queues: Mapping[str, Sequence[FlavorRoom]]
    topologies: Mapping[str, CapacitySummary] = field(default_factory=dict)
    """TAS flavor name → its free capacity per topology domain (blocks, racks)."""
    inactive: Mapping[str, str] = field(default_factory=dict)
    """ClusterQueue → why it admits nothing (the report says it is not active: stopped, a flavor missing, ...)."""
    stopped_local_queues: frozenset[tuple[str, str]] = frozenset()
    """(namespace, LocalQueue name) of the LocalQueues that admit nothing new (``stopPolicy`` set)."""
    unselected_local_queues: frozenset[tuple[str, str]] = frozenset()
    """(namespace, LocalQueue name) of the LocalQueues whose ClusterQueue does not select their namespace
    (``namespaceSelector``): it admits none of their workloads."""
    flavor_nodes: Mapping[str, ResourceFlavorSpec] = field(default_factory=dict)
    """ResourceFlavor → the node labels and taints of its nodes, for the flavors that have any (from a report that
    lists the flavors; empty: none has any, or not known)."""
    limit_ranges: Mapping[tuple[str, str], LimitRangeSummary] = field(default_factory=dict)
    """(namespace, LocalQueue name) → the LimitRanges of that namespace on the worker, for the LocalQueues whose
    namespace has any: a workload whose pods they would refuse is not admitted there."""
    runtime_overheads: Overheads | None = None
    """The worker's RuntimeClasses that have a pod overhead (a pod naming one is charged it there); None when the
    report does not say (an older agent, or probed capacity): the manager's own are assumed."""
    _groups: dict[str, tuple[FlavorGroup, ...]] = field(default_factory=dict, init=False, repr=False, compare=False)
    _simple: dict[str, bool] = field(default_factory=dict, init=False, repr=False, compare=False)
    _rooms: dict[str, dict[str, Room]] = field(default_factory=dict, init=False, repr=False, compare=False)
    """ClusterQueue → resource → :class:`Room`, computed on first use: a report is read once per candidate and
    decision (100 workers x 10,000 decisions in one pass), and it does not change while it is the latest."""

    def rooms(self, cluster_queue: str) -> Mapping[str, Room] | None:
        """Per resource the :class:`Room` of ``cluster_queue``; None when the report does not have it."""
        found = self._rooms.get(cluster_queue)
        if found is None:
            flavors = self.cluster_queues.get(cluster_queue)
            if flavors is None:
                return None
            found = {}
            for resource in {name for flavor in flavors for name in flavor.nominal}:
                free = _room(flavors, resource, borrowing=False)
                borrowing = _room(flavors, resource, borrowing=True)
                assert free is not None
                assert borrowing is not None
                found[resource] = Room(free=free[0], nominal=free[1], with_borrowing=borrowing[0])
            self._rooms[cluster_queue] = found
        return found

    def one_flavor_per_group(self, cluster_queue: str) -> bool:
        """Whether each resource group of ``cluster_queue`` has one flavor (then a workload's totals decide)."""
        found = self._simple.get(cluster_queue)
        if found is None:
            found = self._simple[cluster_queue] = all(len(group.flavors) == 1 for group in self.groups(cluster_queue))
        return found

    def groups(self, cluster_queue: str) -> tuple[FlavorGroup, ...]:
        """The resource groups of ``cluster_queue`` (empty when the report does not have it): its flavors by the
        resources they list (a flavor lists every resource of its group, and no two groups share one), in order."""
        found = self._groups.get(cluster_queue)
        if found is None:
            by_resources: dict[frozenset[str], list[FlavorRoom]] = {}
            for flavor in self.cluster_queues.get(cluster_queue, ()):
                by_resources.setdefault(frozenset(flavor.nominal), []).append(flavor)
            found = tuple(FlavorGroup(resources, tuple(flavors)) for resources, flavors in by_resources.items())
            self._groups[cluster_queue] = found
        return found


@dataclass(frozen=True, slots=True)
class FlavorGroup:
    """One resource group of a worker ClusterQueue: the resources it covers and its flavors, in order."""

    resources: frozenset[str]
    flavors: tuple[FlavorRoom, ...]


@dataclass(frozen=True, slots=True)
class WorkerState:
    name: str
    usable: bool
    unusable_reason: str = ""
    capacity: WorkerCapacity | None = None
    in_flight: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    """ClusterQueue → requests dispatched there that the report does not reflect yet."""


@dataclass(frozen=True, slots=True)
class Headroom:
    """What one worker can still take, as far as a refusal for want of room goes: its LocalQueues, its room per
    ClusterQueue and resource less what is in flight there, and its topology summaries."""

    local_queues: Mapping[tuple[str, str], str]
    rooms: Mapping[tuple[str, str], tuple[int, int]]
    """(ClusterQueue, resource) → (free, with borrowing), both less the quota in flight there."""
    topologies: Mapping[str, CapacitySummary]
    limit_ranges: Mapping[tuple[str, str], LimitRangeSummary] = field(default_factory=dict)
    runtime_overheads: Overheads | None = None


def headroom(capacity: WorkerCapacity, in_flight: Mapping[str, Mapping[str, int]]) -> Headroom:
    rooms: dict[tuple[str, str], tuple[int, int]] = {}
    for cluster_queue in capacity.cluster_queues:
        if cluster_queue in capacity.inactive:
            continue  # no room at all: its rooms appear once it is active again, which may_fit_more sees
        sent = in_flight.get(cluster_queue) or {}
        for resource, room in (capacity.rooms(cluster_queue) or {}).items():
            taken = sent.get(resource, 0)
            rooms[cluster_queue, resource] = (room.free - taken, room.with_borrowing - taken)
    local_queues = capacity.local_queues
    closed = capacity.stopped_local_queues | capacity.unselected_local_queues
    if closed:  # no room through them: they count as new once they run again (or their namespace is selected)
        local_queues = {k: v for k, v in local_queues.items() if k not in closed}
    return Headroom(
        local_queues=local_queues,
        rooms=rooms,
        topologies=capacity.topologies,
        limit_ranges=capacity.limit_ranges,
        runtime_overheads=capacity.runtime_overheads,
    )


def may_fit_more(before: Headroom, after: Headroom) -> bool:
    """Whether a workload the worker refused for want of room at ``before`` may fit at ``after``: a LocalQueue or
    room it did not have, more room with or without borrowing, or other topology summaries. False for the same
    figures (a report that only repeats them, as a heartbeat does) and for less room (a report that shows the
    admissions the manager already counted in flight)."""
    if after.topologies is not before.topologies and after.topologies != before.topologies:
        return True
    if after.limit_ranges is not before.limit_ranges and after.limit_ranges != before.limit_ranges:
        return True  # a LimitRange changed or went: what it refused may be admitted now
    if after.runtime_overheads != before.runtime_overheads:
        return True  # a RuntimeClass's overhead changed or went: the pods may ask for less there now
    if after.local_queues is not before.local_queues and any(
        before.local_queues.get(key) != cluster_queue for key, cluster_queue in after.local_queues.items()
    ):
        return True
    for key, (free, with_borrowing) in after.rooms.items():
        was = before.rooms.get(key)
        if was is None or free > was[0] or with_borrowing > was[1]:
            return True
    return False


@dataclass(frozen=True, slots=True)
class Dispatch:
    worker: str
    cluster_queue: str
    borrows: bool
    requests: Sequence[tuple[str, int]] = field(default=(), compare=False)
    """What the worker's quota charges for the workload, per resource (its pods as the worker's namespace makes
    them, which may differ from the manager's: :mod:`manager.decisions.worker_requests`)."""


@dataclass(frozen=True, slots=True)
class NoWorker:
    message: str
    """Why the workers cannot take the workload, each reason once with the workers that gave it
    (:func:`refusal_message`); fit for a condition message."""


NAMES_PER_REASON = 3
"""Workers named before a reason in :func:`worker_reasons`; the others that gave it are counted."""
REASONS_SHOWN = 8
"""Distinct reasons :func:`worker_reasons` gives; the workers with other reasons are counted."""
REASON_CHARACTERS = 400
"""The longest one reason may be in :func:`worker_reasons` (a topology refusal names domains)."""


def refusal_message(refusals: Sequence[tuple[str, str]]) -> str:
    """Why no worker can take a workload, from each worker's (name, reason): see :func:`worker_reasons`."""
    return "no worker can take it: " + worker_reasons(refusals)


def worker_reasons(refusals: Sequence[tuple[str, str]]) -> str:
    """The (worker, reason) pairs for a condition message, in the workers' order: each distinct reason once, after
    the first :data:`NAMES_PER_REASON` workers that gave it and how many more did; the first :data:`REASONS_SHOWN`
    reasons, then how many workers gave others. Its length is bounded whatever the number of workers: one line per
    worker took 7 KB for 100 workers in every pending Workload's status, and a condition's message may hold at most
    32,768 characters (about 470 workers)."""
    by_reason: dict[str, list[str]] = {}
    for worker, reason in refusals:
        by_reason.setdefault(reason, []).append(worker)
    groups = list(by_reason.items())
    parts = []
    for reason, names in groups[:REASONS_SHOWN]:
        named = ", ".join(names[:NAMES_PER_REASON])
        if len(names) > NAMES_PER_REASON:
            named += f" and {len(names) - NAMES_PER_REASON} more"
        text = reason if len(reason) <= REASON_CHARACTERS else reason[: REASON_CHARACTERS - 3] + "..."
        parts.append(f"{named}: {text}")
    others = sum(len(names) for _, names in groups[REASONS_SHOWN:])
    if others:
        parts.append(f"{others} more {'worker' if others == 1 else 'workers'} for other reasons")
    return "; ".join(parts)


def _room(flavors: Sequence[FlavorRoom], resource: str, *, borrowing: bool) -> tuple[int, int] | None:
    """(most room in any flavor, that flavor's nominal) for ``resource``; None if no flavor covers it."""
    best: tuple[int, int] | None = None
    for flavor in flavors:
        if resource not in flavor.nominal:
            continue
        room = flavor.free.get(resource, 0) + (flavor.borrowable.get(resource, 0) if borrowing else 0)
        if best is None or room > best[0]:
            best = (room, flavor.nominal[resource])
    return best


def _topology_refusal(flavors: Sequence[FlavorRoom], worker: WorkerCapacity, pod_sets: Sequence[PodSetRequest]) -> str:
    """Why no TAS flavor of the ClusterQueue can hold the pod sets that ask for a topology ("" when one may).

    Only pod sets with a required or preferred level are checked, and only against flavors the worker reported a
    summary for (a worker without summaries is judged on quota alone). The summary never refuses what the
    worker's placement would accept (``federation.topology.summary``)."""
    asking = [ps for ps in pod_sets if ps.topology.required or ps.topology.preferred]
    summaries = [(f.name, worker.topologies[f.name]) for f in flavors if f.name in worker.topologies]
    if not asking or not summaries:
        return ""
    reasons = []
    for name, summary in summaries:
        verdicts = [summary_fits(summary, pod_set) for pod_set in asking]
        refused = [verdict.message for verdict in verdicts if not verdict.fits]
        if not refused:
            return ""
        reasons.append(f"ResourceFlavor {name}: {refused[0]}")
    return "topology: " + "; ".join(reasons)


def _placeable(
    capacity: WorkerCapacity, cluster_queue: str, pod_sets: Sequence[PodSet]
) -> dict[str, frozenset[str]] | str:
    """Pod set name → the flavors of the worker's ``cluster_queue`` that can take it by their node taints and labels;
    or why one pod set has none."""
    groups = [
        {room.name: capacity.flavor_nodes.get(room.name) or ResourceFlavorSpec(room.name) for room in group.flavors}
        for group in capacity.groups(cluster_queue)
    ]
    found = {}
    for pod_set in pod_sets:
        mismatches = {}
        for flavors in groups:  # as in flavor assignment, the label keys compared are those of the group's flavors
            mismatches.update(placement_mismatches(flavors, pod_set))
        if mismatches and all(mismatches.values()):
            return f"ClusterQueue {cluster_queue}: pod set {pod_set.name}: {next(iter(mismatches.values()))}"
        found[pod_set.name] = frozenset(name for name, mismatch in mismatches.items() if not mismatch)
    return found


@dataclass(frozen=True, slots=True)
class _Fit:
    """How a worker ClusterQueue takes a workload: whether it borrows, the free share of nominal left on its tightest
    (flavor, resource), and the largest share of a flavor's nominal the workload takes."""

    borrows: bool
    tightest: float
    share: float


def _assign(
    groups: Sequence[FlavorGroup],
    pod_sets: Sequence[tuple[str, Sequence[tuple[str, int]]]],
    *,
    cluster_queue: str,
    in_flight: Mapping[str, int],
    placeable: Mapping[str, frozenset[str]],
) -> _Fit | str:
    """Each pod set's resources of each group from one flavor, the first with room for them all (the room less the
    quota in flight, and less what earlier pod sets took there), one that fits without borrowing before one that
    needs it; or why some pod set fits no flavor."""
    taken: dict[tuple[str, str], int] = {}
    borrows = False
    for pod_set, usage in pod_sets:
        allowed = placeable.get(pod_set)
        for group in groups:
            needed = [(resource, amount) for resource, amount in usage if resource in group.resources]
            if not needed:
                continue
            flavors = [f for f in group.flavors if allowed is None or f.name in allowed]
            chosen = _first_fit(flavors, needed, taken, in_flight, borrowing=False)
            if chosen is None:
                chosen = _first_fit(flavors, needed, taken, in_flight, borrowing=True)
                if chosen is None:
                    return _no_flavor(flavors, needed, taken, in_flight, cluster_queue=cluster_queue, pod_set=pod_set)
                borrows = True
            for resource, amount in needed:
                taken[chosen.name, resource] = taken.get((chosen.name, resource), 0) + amount
    tightest, share = 1.0, 0.0
    rooms = {flavor.name: flavor for group in groups for flavor in group.flavors}
    for (name, resource), amount in taken.items():
        nominal = rooms[name].nominal.get(resource, 0)
        if nominal <= 0:
            tightest, share = 0.0, 1.0
            continue
        left = rooms[name].free.get(resource, 0) - in_flight.get(resource, 0) - amount
        tightest = min(tightest, max(left / nominal, 0.0))
        share = max(share, amount / nominal)
    return _Fit(borrows=borrows, tightest=tightest, share=share)


def _free(flavor: FlavorRoom, resource: str, taken: Mapping[tuple[str, str], int], in_flight: Mapping[str, int]) -> int:
    return flavor.free.get(resource, 0) - in_flight.get(resource, 0) - taken.get((flavor.name, resource), 0)


def _first_fit(
    flavors: Sequence[FlavorRoom],
    needed: Sequence[tuple[str, int]],
    taken: Mapping[tuple[str, str], int],
    in_flight: Mapping[str, int],
    *,
    borrowing: bool,
) -> FlavorRoom | None:
    for flavor in flavors:
        if all(
            _free(flavor, resource, taken, in_flight) + (flavor.borrowable.get(resource, 0) if borrowing else 0)
            >= amount
            for resource, amount in needed
        ):
            return flavor
    return None


def insufficient(resource: str, cluster_queue: str, requested: int, free: int, *, nominal: int) -> str:
    """A worker ClusterQueue has too little of ``resource`` now (milli-units); one whose nominal quota is below the
    request says so, since it takes the workload only by borrowing, never on its own quota."""
    message = (
        f"insufficient {resource} in ClusterQueue {cluster_queue}: "
        f"requested {format_amount(resource, requested)}, free {format_amount(resource, max(free, 0))}"
    )
    if requested > nominal:
        message += f", more than its nominal quota of {format_amount(resource, nominal)}"
    return message


def _no_flavor(
    flavors: Sequence[FlavorRoom],
    needed: Sequence[tuple[str, int]],
    taken: Mapping[tuple[str, str], int],
    in_flight: Mapping[str, int],
    *,
    cluster_queue: str,
    pod_set: str,
) -> str:
    """Why no flavor has room for a pod set's resources of one group: the first resource no flavor has room for
    (with the roomiest flavor's free quota), or, when each has some flavor with room, that no one flavor has it for
    all of them."""
    if not flavors:
        names = ", ".join(resource for resource, _ in needed)
        return f"ClusterQueue {cluster_queue}: pod set {pod_set}: no flavor with its {names} can take it by its nodes"
    for resource, amount in needed:
        frees = [_free(flavor, resource, taken, in_flight) for flavor in flavors]
        roomiest = max(frees, default=0)
        if not any(
            free + flavor.borrowable.get(resource, 0) >= amount for free, flavor in zip(frees, flavors, strict=True)
        ):
            # one flavor: the whole workload's request and the flavor's room before it, as one pod set reads
            already = taken.get((flavors[0].name, resource), 0) if len(flavors) == 1 else 0
            nominal = max(flavor.nominal.get(resource, 0) for flavor in flavors)
            return insufficient(resource, cluster_queue, amount + already, roomiest + already, nominal=nominal)
    wanted = ", ".join(f"{format_amount(resource, amount)} {resource}" for resource, amount in needed)
    short = "; ".join(
        f"{flavor.name} has "
        + ", ".join(f"{format_amount(r, max(_free(flavor, r, taken, in_flight), 0))} {r}" for r, _ in needed)
        for flavor in flavors
    )
    return f"ClusterQueue {cluster_queue}: no one flavor has room for pod set {pod_set}'s {wanted} together ({short})"


def _evaluate(
    worker: WorkerState,
    *,
    namespace: str,
    queue_name: str,
    requests: Sequence[tuple[str, int]],
    usage: Sequence[tuple[str, Sequence[tuple[str, int]]]],
    pod_sets: Sequence[PodSetRequest] = (),
    placement: Sequence[PodSet] = (),
    as_run_there: AsRunThere | None = None,
) -> tuple[tuple[int, float, float], Dispatch] | str:
    """(borrows, free share left on the tightest resource, largest share of nominal requested) and the dispatch;
    or why the worker cannot take the workload. ``requests`` sorted by resource; ``usage`` per pod set its name and
    its requests (all its pods, sorted by resource, none zero); ``pod_sets`` only those that ask for a topology;
    ``placement`` every pod set, with its node selector, affinity and tolerations; ``as_run_there`` the requests and
    usage as the worker namespace's LimitRanges and the worker's RuntimeClass overheads make the pods, or why they
    refuse them."""
    if not worker.usable:
        return worker.unusable_reason or "not usable"
    if worker.capacity is None:
        return "no capacity report yet"
    cluster_queue = worker.capacity.local_queues.get((namespace, queue_name))
    if cluster_queue is None:
        return f"no LocalQueue {namespace}/{queue_name}"
    if (namespace, queue_name) in worker.capacity.stopped_local_queues:
        return f"LocalQueue {namespace}/{queue_name} is stopped"
    if (namespace, queue_name) in worker.capacity.unselected_local_queues:
        return f"ClusterQueue {cluster_queue} does not select namespace {namespace} (its namespaceSelector)"
    if as_run_there is None:
        return _fit(
            worker.name,
            worker.capacity,
            worker.in_flight,
            cluster_queue,
            requests=requests,
            usage=usage,
            pod_sets=pod_sets,
            placement=placement,
        )
    limits = worker.capacity.limit_ranges.get((namespace, queue_name))
    there = as_run_there(limits, worker.capacity.runtime_overheads)
    if isinstance(there, str):
        return f"namespace {namespace}: {there}"
    if there.topology is not None:
        pod_sets = [ps for ps in there.topology if ps.topology.required or ps.topology.preferred]
    fit = _fit(
        worker.name,
        worker.capacity,
        worker.in_flight,
        cluster_queue,
        requests=there.requests,
        usage=there.usage,
        pod_sets=pod_sets,
        placement=placement,
    )
    if isinstance(fit, str) and there.requests != tuple((r, a) for r, a in requests if a > 0):
        return f"{fit} ({there.basis})"  # the worker was judged by other requests than the workload's own: say which
    return fit


def _fit(
    worker: str,
    capacity: WorkerCapacity,
    in_flight: Mapping[str, Mapping[str, int]],
    cluster_queue: str,
    *,
    requests: Sequence[tuple[str, int]],
    usage: Sequence[tuple[str, Sequence[tuple[str, int]]]],
    pod_sets: Sequence[PodSetRequest],
    placement: Sequence[PodSet],
) -> tuple[tuple[int, float, float], Dispatch] | str:
    """:func:`_evaluate` for ``worker`` once its LocalQueue feeds ``cluster_queue`` and takes the namespace: whether
    that ClusterQueue's flavors (``capacity``, less the quota ``in_flight`` there) have room for ``requests``
    (``usage`` per pod set) and its TAS summaries for ``pod_sets``, with nodes that allow ``placement``."""
    inactive = capacity.inactive.get(cluster_queue)
    if inactive is not None:
        return f"ClusterQueue {cluster_queue} is inactive: {inactive}"
    rooms = capacity.rooms(cluster_queue)
    if rooms is None:
        # its report (or, for a stock Kueue worker, its ClusterQueue list) has every ClusterQueue there
        return f"its LocalQueue feeds ClusterQueue {cluster_queue}, which does not exist there"
    placeable: Mapping[str, frozenset[str]] = {}
    if placement and capacity.flavor_nodes:
        allowed = _placeable(capacity, cluster_queue, placement)
        if isinstance(allowed, str):
            return allowed
        placeable = allowed
    sent_here = in_flight.get(cluster_queue) or {}
    tightest = 1.0
    share = 0.0
    borrows = False
    if placeable or not capacity.one_flavor_per_group(cluster_queue):
        for resource, amount in requests:
            if amount > 0 and resource not in rooms:
                return f"ClusterQueue {cluster_queue} has no quota for {resource}"
        fit = _assign(
            capacity.groups(cluster_queue),
            usage,
            cluster_queue=cluster_queue,
            in_flight=sent_here,
            placeable=placeable,
        )
        if isinstance(fit, str):
            return fit
        borrows, tightest, share = fit.borrows, fit.tightest, fit.share
    else:
        # One flavor per group (the common case, and the hot path: a decision looks at every worker): every pod set
        # takes that flavor, so the workload's total per resource against its room decides.
        for resource, amount in requests:
            if amount <= 0:
                continue
            found = rooms.get(resource)
            if found is None:
                return f"ClusterQueue {cluster_queue} has no quota for {resource}"
            sent = sent_here.get(resource, 0)
            room = found.free - sent
            if room < amount:
                if found.with_borrowing - sent < amount:
                    return insufficient(resource, cluster_queue, amount, room, nominal=found.nominal)
                borrows = True
            nominal = found.nominal
            if nominal > 0:
                left_over = (room - amount) / nominal
                if left_over < tightest:
                    tightest = max(left_over, 0.0)
                share = max(share, amount / nominal)
            else:
                tightest = 0.0
                share = 1.0
    if pod_sets:
        flavors = capacity.cluster_queues[cluster_queue]
        refusal = _topology_refusal(flavors, capacity, pod_sets)
        if refusal:
            return refusal
    return (int(borrows), tightest, share), Dispatch(
        worker=worker, cluster_queue=cluster_queue, borrows=borrows, requests=requests
    )


def refusal_key(
    *,
    namespace: str,
    queue_name: str,
    requests: Mapping[str, int],
    pod_sets: Sequence[PodSetRequest] = (),
    placement: Sequence[PodSet] = (),
    pod_set_usage: Sequence[tuple[str, Mapping[str, int]]] = (),
    pod_templates: object = None,
) -> tuple[object, ...]:
    """What :func:`choose_worker`'s answer "no worker can take it" depends on besides the workers: two workloads with
    the same key are refused by the same workers for the same reasons (``avoid``, the policy and ``large_share`` only
    rank the workers that fit). Workers' room only shrinks while a pass decides (each dispatch adds to the quota in
    flight), so a refusal holds for every later workload of the same key in that pass. ``pod_templates``: what a
    worker's LimitRanges judge besides the requests (the pod templates' resources), when the workers are judged by
    them (None otherwise)."""
    return (
        namespace,
        queue_name,
        tuple(sorted((resource, amount) for resource, amount in requests.items() if amount > 0)),
        tuple(
            (
                ps.count,
                tuple(sorted(ps.requests.items())),
                ps.topology,
                tuple(sorted(ps.node_selector.items())),
                ps.tolerations,
            )
            for ps in pod_sets
            if ps.topology.required or ps.topology.preferred
        ),
        tuple(
            (tuple(sorted(ps.node_selector.items())), ps.required_affinity, ps.tolerations, ps.topology_request)
            for ps in placement
        ),
        _usage(requests, pod_set_usage) if len(pod_set_usage) > 1 else (),
        pod_templates,
    )


def _usage(
    requests: Mapping[str, int], pod_set_usage: Sequence[tuple[str, Mapping[str, int]]]
) -> tuple[tuple[str, tuple[tuple[str, int], ...]], ...]:
    """Per pod set its name and its positive requests, sorted; one pod set with ``requests`` when none is given."""
    if not pod_set_usage:
        return (("", tuple(sorted((r, a) for r, a in requests.items() if a > 0))),)
    return tuple((name, tuple(sorted((r, a) for r, a in usage.items() if a > 0))) for name, usage in pod_set_usage)


def choose_worker(
    *,
    namespace: str,
    queue_name: str,
    requests: Mapping[str, int],
    workers: Sequence[WorkerState],
    avoid: Collection[str] = (),
    policy: DispatchPolicy = DispatchPolicy.BALANCED,
    large_share: float = DEFAULT_LARGE_SHARE,
    pod_sets: Sequence[PodSetRequest] = (),
    placement: Sequence[PodSet] = (),
    pod_set_usage: Sequence[tuple[str, Mapping[str, int]]] = (),
    as_run_there: AsRunThere | None = None,
) -> Dispatch | NoWorker:
    """The best worker for a workload needing ``requests`` (milli-units, all pod sets) via LocalQueue ``queue_name``.

    Workers in ``avoid`` (the workload was withdrawn from them) are chosen only when no other worker fits.
    ``pod_sets`` (topology requests, per pod) let a worker's TAS summary refuse a workload no domain can hold;
    ``placement`` (every pod set, with its node selector, affinity and tolerations) lets a worker whose flavors'
    node taints or labels rule out a pod set refuse it; ``pod_set_usage`` (each pod set's name and requests, all its
    pods) lets each take its own flavor, as the worker's flavor assignment does (without it, the workload is one pod
    set of ``requests``); ``as_run_there`` (the requests as a worker namespace's LimitRanges and the worker's
    RuntimeClass overheads make the pods, or why they refuse them) has each worker judged by its own, when a
    LimitRange is involved on either side or a worker's overheads for the pods' RuntimeClass differ from the
    manager's: what the worker's quota would charge, not what the manager's does.
    """
    fitting: list[tuple[int, int, float, float, Dispatch]] = []
    reasons: list[tuple[str, str]] = []
    ordered = sorted(requests.items())
    asking = [ps for ps in pod_sets if ps.topology.required or ps.topology.preferred]
    usage = _usage(requests, pod_set_usage)
    for order, worker in enumerate(workers):
        result = _evaluate(
            worker,
            namespace=namespace,
            queue_name=queue_name,
            requests=ordered,
            usage=usage,
            pod_sets=asking,
            placement=placement,
            as_run_there=as_run_there,
        )
        if isinstance(result, str):
            reasons.append((worker.name, result))
            continue
        (borrow_rank, left_over, share), dispatch = result
        fitting.append((int(worker.name in avoid) * 2 + borrow_rank, order, left_over, share, dispatch))
    if fitting:
        pack = policy is DispatchPolicy.BEST_FIT or (
            policy is DispatchPolicy.BALANCED and max(f[3] for f in fitting) >= large_share
        )
        sign = 1.0 if pack else -1.0
        return min(fitting, key=lambda f: (f[0], sign * f[2], f[1]))[4]
    if not workers:
        return NoWorker("no worker clusters are configured in the MultiKueueConfig")
    return NoWorker(refusal_message(reasons))
