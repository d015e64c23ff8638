"""The quota tree — ClusterQueues under hierarchical Cohorts — with usage, and cheap what-if changes.

Accounting follows Kueue's hierarchical model. Every node (ClusterQueue or Cohort) has, per ``(flavor, resource)``:

* ``subtree_quota``: a ClusterQueue's ``nominalQuota``; a Cohort's own ``resourceGroups`` quota plus what each
  child lends it (the child's subtree quota minus its *guaranteed* part);
* ``guaranteed``: ``subtree_quota - lendingLimit`` (never negative) when a lending limit is set, else zero — the part
  a node keeps for itself;
* ``usage``: a ClusterQueue's admitted usage; a Cohort's sum of what its children use beyond their guaranteed part.

A node may use its unused guaranteed quota plus what its parent has available, the latter capped by the node's
``borrowingLimit`` (so a ClusterQueue tops out at nominal + borrowingLimit). Without a cohort a ClusterQueue is its
own root and gets exactly its nominal quota.

What-ifs (the scheduler tries admissions and preemptions, then undoes them) record every mutation in an undo log
while ``what_if()`` is active; leaving the block replays the log backwards, restoring the snapshot exactly without
copying it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, cast

from federation.admission.model import (
    AdmittedWorkload,
    ClusterQueueSpec,
    CohortSpec,
    FlavorResource,
    ResourceFlavorSpec,
    ResourceGroup,
)

__all__ = ["ClusterQueueNode", "CohortNode", "QuotaNode", "Snapshot", "causes_message"]

Cause = tuple[str, str]
"""Why a ClusterQueue admits nothing: (Kueue's ``Active`` reason, what is wrong)."""
STOPPED, FLAVOR_NOT_FOUND, COHORT_CYCLE, TERMINATING = "Stopped", "FlavorNotFound", "CohortCycleDetected", "Terminating"
"""Kueue's ``Active`` reasons for a ClusterQueue's own causes (``CohortCycleDetected`` is Kueue v0.20's)."""
_OWN_CAUSE_ORDER = {STOPPED: 0, FLAVOR_NOT_FOUND: 1, COHORT_CYCLE: 2}
"""Kueue's order of a ClusterQueue's causes in its ``Active`` message (a Cohort cycle last)."""


def causes_message(causes: Iterable[Cause]) -> str:
    """The causes' messages as one, Kueue's way (joined by ", ")."""
    return ", ".join(message for _, message in causes)


_USAGE, _WORKLOAD_ADDED, _WORKLOAD_REMOVED = 0, 1, 2


class QuotaNode:
    """Quota and usage of one node of the cohort tree (see the module docstring for the meaning of each map)."""

    __slots__ = (
        "borrowing_limit",
        "children",
        "fair_sharing_weight",
        "guaranteed",
        "lending_limit",
        "name",
        "nominal",
        "parent",
        "subtree_quota",
        "usage",
    )

    def __init__(self, name: str, resource_groups: Iterable[ResourceGroup], fair_sharing_weight: int) -> None:
        self.name = name
        self.parent: CohortNode | None = None
        self.children: list[QuotaNode] = []
        self.fair_sharing_weight = fair_sharing_weight
        self.nominal: dict[FlavorResource, int] = {}
        self.borrowing_limit: dict[FlavorResource, int] = {}
        self.lending_limit: dict[FlavorResource, int] = {}
        for group in resource_groups:
            for flavor in group.flavors:
                for quota in flavor.resources:
                    key = (flavor.name, quota.name)
                    self.nominal[key] = quota.nominal
                    if quota.borrowing_limit is not None:
                        self.borrowing_limit[key] = quota.borrowing_limit
                    if quota.lending_limit is not None:
                        self.lending_limit[key] = quota.lending_limit
        self.subtree_quota: dict[FlavorResource, int] = {}
        self.guaranteed: dict[FlavorResource, int] = {}
        self.usage: dict[FlavorResource, int] = {}


class CohortNode(QuotaNode):
    """A Cohort; ``in_cycle`` marks a cohort whose parent chain loops (Kueue disables such trees)."""

    __slots__ = ("in_cycle", "parent_name")

    def __init__(self, spec: CohortSpec) -> None:
        super().__init__(spec.name, spec.resource_groups, spec.fair_sharing_weight)
        self.parent_name = spec.parent
        self.in_cycle = False


class ClusterQueueNode(QuotaNode):
    """A ClusterQueue: its spec, the workloads holding its quota, and which resource group covers each resource."""

    __slots__ = ("check_causes", "group_of_resource", "own_causes", "spec", "workloads")

    def __init__(self, spec: ClusterQueueSpec) -> None:
        super().__init__(spec.name, spec.resource_groups, spec.fair_sharing_weight)
        self.spec = spec
        self.workloads: dict[str, AdmittedWorkload] = {}
        self.group_of_resource = {
            resource: index for index, group in enumerate(spec.resource_groups) for resource in group.covered_resources
        }
        self.own_causes: list[Cause] = [(STOPPED, "ClusterQueue is stopped")] if spec.stopped else []
        """(Kueue's ``Active`` reason, what is wrong) for each way the queue itself keeps it from admitting, in Kueue's
        order: stopped (``Stopped``), naming a missing ResourceFlavor (``FlavorNotFound``), then under a Cohort whose
        parents loop (``CohortCycleDetected``); or only ``Terminating`` while it is being deleted."""
        self.check_causes: tuple[Cause, ...] = ()
        """(Kueue's ``Active`` reason, what is wrong) for each way its admission checks or Topologies keep it from
        admitting (``federation.admission.check_problems``)."""

    @property
    def inactive_reason(self) -> str | None:
        """Why the queue admits nothing, in words (its own causes first), or None while it is active."""
        causes = [*self.own_causes, *self.check_causes]
        return causes_message(causes) if causes else None

    @property
    def terminating(self) -> bool:
        """Whether the queue is being deleted."""
        return bool(self.own_causes) and self.own_causes[0][0] == TERMINATING

    def add_own_cause(self, reason: str, message: str) -> None:
        """Record a cause of the queue's own; being deleted (``Terminating``) replaces every other."""
        if reason == TERMINATING:
            self.own_causes = [(reason, message)]
        elif not self.terminating:
            self.own_causes.append((reason, message))
            self.own_causes.sort(key=lambda cause: _OWN_CAUSE_ORDER.get(cause[0], len(_OWN_CAUSE_ORDER)))


class Snapshot:
    """ClusterQueues, Cohorts, ResourceFlavors and admitted workloads, with Kueue's quota arithmetic."""

    def __init__(
        self,
        *,
        cluster_queues: Iterable[ClusterQueueSpec],
        cohorts: Iterable[CohortSpec] = (),
        flavors: Iterable[ResourceFlavorSpec] = (),
        admitted: Iterable[AdmittedWorkload] = (),
    ) -> None:
        self.flavors: dict[str, ResourceFlavorSpec] = {flavor.name: flavor for flavor in flavors}
        self.cohorts: dict[str, CohortNode] = {spec.name: CohortNode(spec) for spec in cohorts}
        self.cluster_queues: dict[str, ClusterQueueNode] = {}
        for spec in cluster_queues:
            node = ClusterQueueNode(spec)
            self.cluster_queues[spec.name] = node
            if spec.cohort is not None:
                node.parent = self._cohort(spec.cohort)
        self._link_cohorts()
        self._roots: dict[str, QuotaNode] = {}
        self._tree_members: dict[str, tuple[ClusterQueueNode, ...]] = {}
        for node in self.cluster_queues.values():
            if node.parent is not None:
                node.parent.children.append(node)
        for root in self._root_nodes():
            _compute_quota(root)
            members = tuple(_cluster_queues_under(root))
            for member in members:
                self._roots[member.name] = root
                self._tree_members[member.name] = members
        self._workload_queue: dict[str, str] = {}
        # per tree top and (flavor, resource): ClusterQueues using more than their own quota, kept incrementally
        # so reclaiming preemption need not scan every queue of a large cohort.
        self._borrowers: dict[QuotaNode, dict[FlavorResource, set[ClusterQueueNode]]] = {
            root: {} for root in self._roots.values()
        }
        self._undo: list[tuple[int, QuotaNode, Any, Any]] | None = None
        for workload in admitted:
            self.add_workload(workload)

    # ----- structure -------------------------------------------------------------------------------------------

    def _cohort(self, name: str) -> CohortNode:
        cohort = self.cohorts.get(name)
        if cohort is None:  # a cohort named only by its members exists implicitly, with no quota of its own
            cohort = self.cohorts[name] = CohortNode(CohortSpec(name))
        return cohort

    def _link_cohorts(self) -> None:
        for cohort in list(self.cohorts.values()):
            if cohort.parent_name is not None:
                cohort.parent = self._cohort(cohort.parent_name)
        for cohort in self.cohorts.values():
            seen: set[str] = set()
            node: CohortNode | None = cohort
            while node is not None and node.name not in seen:
                seen.add(node.name)
                node = node.parent
            if node is not None and node.name == cohort.name:
                cohort.in_cycle = True
        for cohort in self.cohorts.values():
            if cohort.in_cycle:
                cohort.parent = None  # break the loop so the tree stays walkable; its members are inactive
        for cohort in self.cohorts.values():
            if cohort.parent is not None:
                cohort.parent.children.append(cohort)
        for queue in self.cluster_queues.values():
            ancestor = queue.parent
            while ancestor is not None:
                if ancestor.in_cycle:  # Kueue v0.20 names the queue's own Cohort, whose hierarchy has the cycle
                    assert queue.parent is not None
                    queue.add_own_cause(COHORT_CYCLE, f'Cohort "{queue.parent.name}" has a cycle in hierarchy')
                    break
                ancestor = ancestor.parent

    def _root_nodes(self) -> Iterator[QuotaNode]:
        for node in (*self.cohorts.values(), *self.cluster_queues.values()):
            if node.parent is None:
                yield node

    def root_of(self, queue: ClusterQueueNode) -> QuotaNode:
        """The top of the cohort tree ``queue`` belongs to (the queue itself when it has no cohort)."""
        return self._roots[queue.name]

    def tree_members(self, queue: ClusterQueueNode) -> tuple[ClusterQueueNode, ...]:
        """Every ClusterQueue sharing a cohort tree with ``queue``, ``queue`` included."""
        return self._tree_members[queue.name]

    # ----- quota arithmetic ------------------------------------------------------------------------------------

    def available(self, node: QuotaNode, key: FlavorResource) -> int:
        """How much more of ``key`` the node may use now (negative when over-committed)."""
        usage = node.usage.get(key, 0)
        parent = node.parent
        if parent is None:
            return node.subtree_quota.get(key, 0) - usage
        guaranteed = node.guaranteed.get(key, 0)
        from_parent = self.available(parent, key)
        limit = node.borrowing_limit.get(key)
        if limit is not None:
            stored_in_parent = node.subtree_quota.get(key, 0) - guaranteed
            used_in_parent = max(0, usage - guaranteed)
            from_parent = min(from_parent, stored_in_parent - used_in_parent + limit)
        return max(0, guaranteed - usage) + from_parent

    def potential_available(self, node: QuotaNode, key: FlavorResource) -> int:
        """The most of ``key`` the node could ever use, with everything else in its tree idle."""
        return potential_available(node, key)

    def borrowing_queues(self, queue: ClusterQueueNode, key: FlavorResource) -> set[ClusterQueueNode]:
        """ClusterQueues of ``queue``'s tree that use more ``key`` than their own quota (do not mutate)."""
        return self._borrowers[self._roots[queue.name]].get(key, _NO_QUEUES)

    def _track_borrowing(self, queue: ClusterQueueNode, key: FlavorResource) -> None:
        by_key = self._borrowers[self._roots[queue.name]]
        if queue.usage.get(key, 0) > queue.subtree_quota.get(key, 0):
            by_key.setdefault(key, set()).add(queue)
        else:
            borrowers = by_key.get(key)
            if borrowers is not None:
                borrowers.discard(queue)

    @staticmethod
    def is_borrowing(node: QuotaNode, key: FlavorResource, extra: int = 0) -> bool:
        """Whether the node uses (or would, with ``extra`` more) beyond its own quota of ``key``."""
        return node.usage.get(key, 0) + extra > node.subtree_quota.get(key, 0)

    def add_usage(self, queue: ClusterQueueNode, usage: Mapping[FlavorResource, int]) -> None:
        """Charge ``usage`` to ``queue`` and, beyond each node's guaranteed quota, to its ancestors."""
        for key, total in usage.items():
            amount = total
            node: QuotaNode | None = queue
            while node is not None:
                current = node.usage.get(key)
                old = current or 0
                self._log_usage(node, key, current)
                node.usage[key] = old + amount
                local_room = node.guaranteed.get(key, 0) - old
                if amount <= local_room:
                    break
                if local_room > 0:
                    amount -= local_room
                node = node.parent
            self._track_borrowing(queue, key)

    def remove_usage(self, queue: ClusterQueueNode, usage: Mapping[FlavorResource, int]) -> None:
        """Release ``usage`` from ``queue`` and the part of it that was charged to its ancestors."""
        for key, total in usage.items():
            amount = total
            node: QuotaNode | None = queue
            while node is not None:
                current = node.usage.get(key)
                old = current or 0
                self._log_usage(node, key, current)
                node.usage[key] = old - amount
                stored_in_parent = old - node.guaranteed.get(key, 0)
                if stored_in_parent <= 0:
                    break
                amount = min(amount, stored_in_parent)
                node = node.parent
            self._track_borrowing(queue, key)

    def _log_usage(self, node: QuotaNode, key: FlavorResource, previous: int | None) -> None:
        if self._undo is not None:
            self._undo.append((_USAGE, node, key, previous))

    # ----- workloads -------------------------------------------------------------------------------------------

    def add_workload(self, workload: AdmittedWorkload) -> None:
        """Record an admitted workload and charge its usage to its ClusterQueue."""
        queue = self.cluster_queues[workload.workload.cluster_queue]
        if workload.key in self._workload_queue:
            raise ValueError(f"workload {workload.key} is already admitted")
        queue.workloads[workload.key] = workload
        self._workload_queue[workload.key] = queue.name
        self.add_usage(queue, workload.usage)
        if self._undo is not None:
            self._undo.append((_WORKLOAD_ADDED, queue, workload.key, None))

    def remove_workload(self, key: str) -> AdmittedWorkload:
        """Forget an admitted workload and release its usage; returns what was removed."""
        queue = self.cluster_queues[self._workload_queue.pop(key)]
        workload = queue.workloads.pop(key)
        self.remove_usage(queue, workload.usage)
        if self._undo is not None:
            self._undo.append((_WORKLOAD_REMOVED, queue, key, workload))
        return workload

    def admitted(self, key: str) -> AdmittedWorkload | None:
        """The admitted workload with ``key``, if any."""
        queue_name = self._workload_queue.get(key)
        return None if queue_name is None else self.cluster_queues[queue_name].workloads[key]

    def admitted_workloads(self) -> Iterator[AdmittedWorkload]:
        for queue in self.cluster_queues.values():
            yield from queue.workloads.values()

    # ----- what-if -------------------------------------------------------------------------------------------

    @contextmanager
    def what_if(self) -> Iterator[Snapshot]:
        """Changes made inside the block are undone when it exits (blocks nest)."""
        outermost = self._undo is None
        if outermost:
            self._undo = []
        assert self._undo is not None
        mark = len(self._undo)
        try:
            yield self
        finally:
            self._rollback(mark)
            if outermost:
                self._undo = None

    def _rollback(self, mark: int) -> None:
        log = self._undo
        assert log is not None
        while len(log) > mark:
            kind, node, key, previous = log.pop()
            if kind == _USAGE:
                if previous is None:
                    del node.usage[key]
                else:
                    node.usage[key] = previous
                if isinstance(node, ClusterQueueNode):
                    self._track_borrowing(node, key)
            elif kind == _WORKLOAD_ADDED:
                del cast(ClusterQueueNode, node).workloads[key]
                del self._workload_queue[key]
            else:
                cast(ClusterQueueNode, node).workloads[key] = previous
                self._workload_queue[key] = node.name

    def state(self) -> tuple[object, ...]:
        """Everything mutable, as comparable data (for tests and debugging).

        Workloads are a set: a rolled-back removal may change their iteration order, which no decision depends
        on (preemption candidates are sorted by a total order).
        """
        nodes = sorted((*self.cohorts.values(), *self.cluster_queues.values()), key=lambda node: node.name)
        return (
            tuple((node.name, tuple(sorted(node.usage.items()))) for node in nodes),
            tuple(sorted(self._workload_queue.items())),
            tuple((queue.name, tuple(sorted(queue.workloads.items()))) for queue in self.cluster_queues.values()),
        )

    def usage_of(self, name: str) -> dict[FlavorResource, int]:
        """A copy of a ClusterQueue's usage per ``(flavor, resource)``, zero entries dropped."""
        return {key: value for key, value in self.cluster_queues[name].usage.items() if value}


_NO_QUEUES: set[ClusterQueueNode] = set()


def _compute_quota(node: QuotaNode) -> None:
    """Fill ``subtree_quota`` and ``guaranteed`` bottom-up (children lend their non-guaranteed quota upward)."""
    subtree = dict(node.nominal)
    for child in node.children:
        _compute_quota(child)
        for key, quota in child.subtree_quota.items():
            subtree[key] = subtree.get(key, 0) + quota - child.guaranteed.get(key, 0)
    node.subtree_quota = subtree
    node.guaranteed = {
        key: max(0, subtree.get(key, 0) - limit) for key, limit in node.lending_limit.items() if key in subtree
    }


def _cluster_queues_under(node: QuotaNode) -> Iterator[ClusterQueueNode]:
    if isinstance(node, ClusterQueueNode):
        yield node
    for child in node.children:
        yield from _cluster_queues_under(child)


def potential_available(node: QuotaNode, key: FlavorResource) -> int:
    """The most of ``key`` ``node`` could ever use, with everything else in its tree idle (usage plays no part)."""
    parent = node.parent
    if parent is None:
        return node.subtree_quota.get(key, 0)
    most = node.guaranteed.get(key, 0) + potential_available(parent, key)
    limit = node.borrowing_limit.get(key)
    if limit is not None:
        most = min(most, node.subtree_quota.get(key, 0) + limit)
    return most
