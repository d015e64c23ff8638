"""The plain, frozen inputs of the admission core: quotas, flavors, workloads and what is already admitted.

These mirror the Kueue ``v1beta2`` fields the core needs, already parsed: quantities are integer milli-units
(see ``federation.quantity``), enums are Kueue's spellings as strings, times are seconds on any clock. They are
deliberately not the API models: a controller adapts API objects to these once, and the hot path only ever sees
tuples, ints and dicts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from federation.quantity import MILLI

__all__ = [
    "AdmittedWorkload",
    "ClusterQueueSpec",
    "CohortSpec",
    "FlavorFungibility",
    "FlavorQuotas",
    "FlavorResource",
    "NodeSelectorRequirement",
    "PodSet",
    "PreemptionPolicy",
    "ResourceFlavorSpec",
    "ResourceGroup",
    "ResourceQuota",
    "Taint",
    "Toleration",
    "Workload",
]

FlavorResource = tuple[str, str]
"""``(flavor name, resource name)``: the unit quota is accounted in."""

QueueingStrategy = Literal["StrictFIFO", "BestEffortFIFO"]
WithinClusterQueue = Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"]
ReclaimWithinCohort = Literal["Never", "LowerPriority", "Any"]
BorrowWithinCohortPolicy = Literal["Never", "LowerPriority"]
WhenCanBorrow = Literal["MayStopSearch", "TryNextFlavor"]
WhenCanPreempt = Literal["TryNextFlavor", "MayStopSearch"]


@dataclass(frozen=True, slots=True)
class ResourceQuota:
    """One resource of one flavor: ``nominalQuota`` plus the optional ``borrowingLimit`` and ``lendingLimit``."""

    name: str
    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(frozen=True, slots=True)
class FlavorQuotas:
    """A flavor's entry in a resource group; it lists every covered resource."""

    name: str
    resources: tuple[ResourceQuota, ...]


@dataclass(frozen=True, slots=True)
class ResourceGroup:
    """Resources that must all be served by the same flavor, with the flavors to try in order."""

    covered_resources: tuple[str, ...]
    flavors: tuple[FlavorQuotas, ...]


@dataclass(frozen=True, slots=True)
class Taint:
    """A ResourceFlavor ``nodeTaints`` entry."""

    key: str
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = "NoSchedule"

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


@dataclass(frozen=True, slots=True)
class Toleration:
    """A pod toleration; an empty ``key`` with ``Exists`` tolerates everything, an empty ``effect`` every effect."""

    key: str = ""
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.operator == "Exists":
            return not self.key or self.key == taint.key
        return self.key == taint.key and self.value == taint.value


@dataclass(frozen=True, slots=True)
class ResourceFlavorSpec:
    """A ResourceFlavor: the node labels and taints that its nodes carry, and its ``topologyName``."""

    name: str
    node_labels: Mapping[str, str] = field(default_factory=dict)
    node_taints: tuple[Taint, ...] = ()
    topology_name: str | None = None
    """"" for a flavor without topology-aware scheduling; None where the flavor itself is not known (a worker seen
    only through its capacity report or its queues), which takes a topology request on trust."""


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    """One ``matchExpressions`` entry of a required node-affinity term."""

    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator == "Exists":
            return present
        if self.operator == "DoesNotExist":
            return not present
        if self.operator == "NotIn":
            return not present or labels[self.key] not in self.values
        if not present:
            return False
        if self.operator == "In":
            return labels[self.key] in self.values
        try:
            label_value, bound = int(labels[self.key]), int(self.values[0])
        except (ValueError, IndexError):
            return False
        return label_value > bound if self.operator == "Gt" else label_value < bound


@dataclass(frozen=True, slots=True)
class PreemptionPolicy:
    """A ClusterQueue's ``spec.preemption``; ``max_priority_threshold`` belongs to ``borrowWithinCohort``."""

    within_cluster_queue: WithinClusterQueue = "Never"
    reclaim_within_cohort: ReclaimWithinCohort = "Never"
    borrow_within_cohort: BorrowWithinCohortPolicy = "Never"
    max_priority_threshold: int | None = None


@dataclass(frozen=True, slots=True)
class FlavorFungibility:
    """A ClusterQueue's ``spec.flavorFungibility`` with Kueue's defaults."""

    when_can_borrow: WhenCanBorrow = "MayStopSearch"
    when_can_preempt: WhenCanPreempt = "TryNextFlavor"


@dataclass(frozen=True, slots=True)
class ClusterQueueSpec:
    """A ClusterQueue; ``fair_sharing_weight`` is in milli-units (Kueue's default weight 1 is ``1000``)."""

    name: str
    resource_groups: tuple[ResourceGroup, ...]
    cohort: str | None = None
    queueing_strategy: QueueingStrategy = "BestEffortFIFO"
    preemption: PreemptionPolicy = PreemptionPolicy()
    flavor_fungibility: FlavorFungibility = FlavorFungibility()
    fair_sharing_weight: int = MILLI
    stopped: bool = False


@dataclass(frozen=True, slots=True)
class CohortSpec:
    """A Cohort: optional parent, optional shared quota of its own, fair-sharing weight in milli-units."""

    name: str
    parent: str | None = None
    resource_groups: tuple[ResourceGroup, ...] = ()
    fair_sharing_weight: int = MILLI


@dataclass(frozen=True, slots=True)
class PodSet:
    """A Workload pod set: per-pod requests (milli-units) and the scheduling constraints flavors must satisfy.

    ``required_affinity`` holds the ``nodeSelectorTerms`` of required node affinity: the terms are ORed, the
    requirements inside a term ANDed.
    """

    name: str
    count: int
    requests: Mapping[str, int]
    min_count: int | None = None
    node_selector: Mapping[str, str] = field(default_factory=dict)
    required_affinity: tuple[tuple[NodeSelectorRequirement, ...], ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    topology_request: bool = False
    """It asks for a topology (required, preferred or unconstrained): as in Kueue, only a flavor with a
    ``topologyName`` can take it."""


@dataclass(frozen=True, slots=True)
class Workload:
    """A pending Workload as the scheduler sees it; ``key`` is unique (e.g. ``namespace/name``).

    ``queue_time`` orders equal priorities inside a queue (Kueue's creation or requeue timestamp); ``None`` means
    ``creation_time``.
    """

    key: str
    cluster_queue: str
    pod_sets: tuple[PodSet, ...]
    priority: int = 0
    creation_time: float = 0.0
    queue_time: float | None = None
    uid: str = ""
    job_uid: str = ""
    """The Workload's uid and its Job's (``kueue.x-k8s.io/job-uid``), named in the message of those it preempts."""

    @property
    def ordering_time(self) -> float:
        return self.creation_time if self.queue_time is None else self.queue_time


@dataclass(frozen=True, slots=True)
class AdmittedWorkload:
    """A Workload holding quota: its usage per ``(flavor, resource)`` and when quota was reserved.

    ``evicted`` marks a workload already told to stop that still holds quota until it is gone.
    """

    workload: Workload
    usage: Mapping[FlavorResource, int]
    admitted_at: float
    evicted: bool = False

    @property
    def key(self) -> str:
        return self.workload.key
