"""Small fluent builders for admission-core inputs, in the style of Kueue's test wrappers.

``make_workload("a").queue("cq").priority(100).request("cpu", "2").obj()`` and
``make_cluster_queue("cq").cohort("c").flavor_quota("default", cpu=("20", "10")).obj()`` keep test tables short;
quantities are written as Kubernetes strings and parsed here.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Self

from federation.admission.model import (
    AdmittedWorkload,
    ClusterQueueSpec,
    CohortSpec,
    FlavorFungibility,
    FlavorQuotas,
    NodeSelectorRequirement,
    PodSet,
    PreemptionPolicy,
    ResourceFlavorSpec,
    ResourceGroup,
    ResourceQuota,
    Taint,
    Toleration,
)
from federation.admission.model import (
    Workload as WorkloadSpec,
)
from federation.admission.snapshot import Snapshot
from federation.quantity import parse_quantity

QuotaArg = str | tuple[str, str | None] | tuple[str, str | None, str | None]


def _quota(resource: str, value: QuotaArg) -> ResourceQuota:
    if isinstance(value, str):
        return ResourceQuota(resource, parse_quantity(value))
    nominal, borrowing = value[0], value[1]
    lending = value[2] if len(value) > 2 else None
    return ResourceQuota(
        resource,
        parse_quantity(nominal),
        None if borrowing is None else parse_quantity(borrowing),
        None if lending is None else parse_quantity(lending),
    )


class _QuotaHolder:
    def __init__(self) -> None:
        self._groups: list[tuple[tuple[str, ...], list[FlavorQuotas]]] = []

    def flavor_quota(self, flavor: str, resources: dict[str, QuotaArg] | None = None, **named: QuotaArg) -> Self:
        """Add a flavor; ``cpu="20"`` or ``cpu=("20", borrowing_limit, lending_limit)``; joins the group covering
        the same resources, or starts a new group."""
        quotas = {**(resources or {}), **named}
        covered = tuple(quotas)
        flavor_quotas = FlavorQuotas(flavor, tuple(_quota(name, value) for name, value in quotas.items()))
        for group_resources, flavors in self._groups:
            if set(group_resources) == set(covered):
                flavors.append(flavor_quotas)
                return self
        self._groups.append((covered, [flavor_quotas]))
        return self

    def _resource_groups(self) -> tuple[ResourceGroup, ...]:
        return tuple(ResourceGroup(covered, tuple(flavors)) for covered, flavors in self._groups)


class ClusterQueueBuilder(_QuotaHolder):
    def __init__(self, name: str) -> None:
        super().__init__()
        self._spec = ClusterQueueSpec(name, ())

    def cohort(self, name: str) -> Self:
        self._spec = replace(self._spec, cohort=name)
        return self

    def strict_fifo(self) -> Self:
        self._spec = replace(self._spec, queueing_strategy="StrictFIFO")
        return self

    def preemption(
        self,
        within: str = "Never",
        reclaim: str = "Never",
        borrow: str = "Never",
        threshold: int | None = None,
    ) -> Self:
        policy = PreemptionPolicy(within, reclaim, borrow, threshold)  # type: ignore[arg-type]
        self._spec = replace(self._spec, preemption=policy)
        return self

    def fungibility(self, when_can_borrow: str = "MayStopSearch", when_can_preempt: str = "TryNextFlavor") -> Self:
        self._spec = replace(
            self._spec,
            flavor_fungibility=FlavorFungibility(when_can_borrow, when_can_preempt),  # type: ignore[arg-type]
        )
        return self

    def weight(self, weight: str) -> Self:
        self._spec = replace(self._spec, fair_sharing_weight=parse_quantity(weight))
        return self

    def stopped(self) -> Self:
        self._spec = replace(self._spec, stopped=True)
        return self

    def obj(self) -> ClusterQueueSpec:
        return replace(self._spec, resource_groups=self._resource_groups())


class CohortBuilder(_QuotaHolder):
    def __init__(self, name: str) -> None:
        super().__init__()
        self._spec = CohortSpec(name)

    def parent(self, name: str) -> Self:
        self._spec = replace(self._spec, parent=name)
        return self

    def weight(self, weight: str) -> Self:
        self._spec = replace(self._spec, fair_sharing_weight=parse_quantity(weight))
        return self

    def obj(self) -> CohortSpec:
        return replace(self._spec, resource_groups=self._resource_groups())


class FlavorBuilder:
    def __init__(self, name: str) -> None:
        self._spec = ResourceFlavorSpec(name)

    def label(self, key: str, value: str) -> Self:
        self._spec = replace(self._spec, node_labels={**self._spec.node_labels, key: value})
        return self

    def taint(self, key: str, value: str = "", effect: str = "NoSchedule") -> Self:
        taint = Taint(key, value, effect)  # type: ignore[arg-type]
        self._spec = replace(self._spec, node_taints=(*self._spec.node_taints, taint))
        return self

    def topology(self, name: str | None) -> Self:
        """``spec.topologyName`` ("" for none; None: not known, as on a MultiKueue manager)."""
        self._spec = replace(self._spec, topology_name=name)
        return self

    def obj(self) -> ResourceFlavorSpec:
        return self._spec


class WorkloadBuilder:
    def __init__(self, key: str) -> None:
        self._workload = WorkloadSpec(key, "", ())
        self._pod_sets: list[PodSet] = [PodSet("main", 1, {})]

    def queue(self, cluster_queue: str) -> Self:
        self._workload = replace(self._workload, cluster_queue=cluster_queue)
        return self

    def priority(self, priority: int) -> Self:
        self._workload = replace(self._workload, priority=priority)
        return self

    def created(self, at: float) -> Self:
        self._workload = replace(self._workload, creation_time=at)
        return self

    def pod_set(self, name: str, count: int = 1) -> Self:
        """Start another pod set; later ``request``/``count`` calls apply to it."""
        self._pod_sets.append(PodSet(name, count, {}))
        return self

    def _edit(self, **changes: object) -> Self:
        self._pod_sets[-1] = replace(self._pod_sets[-1], **changes)  # type: ignore[arg-type]
        return self

    def request(self, resource: str, quantity: str) -> Self:
        return self._edit(requests={**self._pod_sets[-1].requests, resource: parse_quantity(quantity)})

    def count(self, count: int) -> Self:
        return self._edit(count=count)

    def min_count(self, min_count: int) -> Self:
        return self._edit(min_count=min_count)

    def node_selector(self, key: str, value: str) -> Self:
        return self._edit(node_selector={**self._pod_sets[-1].node_selector, key: value})

    def required_affinity(self, *terms: tuple[NodeSelectorRequirement, ...]) -> Self:
        return self._edit(required_affinity=terms)

    def asks_for_topology(self) -> Self:
        return self._edit(topology_request=True)

    def toleration(self, key: str = "", operator: str = "Equal", value: str = "", effect: str = "") -> Self:
        toleration = Toleration(key, operator, value, effect)  # type: ignore[arg-type]
        return self._edit(tolerations=(*self._pod_sets[-1].tolerations, toleration))

    def obj(self) -> WorkloadSpec:
        return replace(self._workload, pod_sets=tuple(self._pod_sets))

    def admitted(self, flavor: str = "default", *, at: float = 0.0, evicted: bool = False) -> AdmittedWorkload:
        """This workload holding quota in one flavor for every resource it requests."""
        usage: dict[tuple[str, str], int] = {}
        for pod_set in self._pod_sets:
            for resource, amount in pod_set.requests.items():
                key = (flavor, resource)
                usage[key] = usage.get(key, 0) + amount * pod_set.count
        return AdmittedWorkload(self.obj(), usage, at, evicted)


def make_workload(key: str) -> WorkloadBuilder:
    return WorkloadBuilder(key)


def make_cluster_queue(name: str) -> ClusterQueueBuilder:
    return ClusterQueueBuilder(name)


def make_cohort(name: str) -> CohortBuilder:
    return CohortBuilder(name)


def make_flavor(name: str) -> FlavorBuilder:
    return FlavorBuilder(name)


def make_snapshot(
    queues: list[ClusterQueueBuilder],
    *,
    cohorts: tuple[CohortBuilder, ...] = (),
    flavors: tuple[FlavorBuilder, ...] = (),
    admitted: tuple[AdmittedWorkload, ...] = (),
) -> Snapshot:
    """A snapshot; every flavor a queue names but ``flavors`` omits exists with no labels or taints."""
    queue_specs = [queue.obj() for queue in queues]
    flavor_specs = {flavor.obj().name: flavor.obj() for flavor in flavors}
    for spec in queue_specs:
        for group in spec.resource_groups:
            for flavor_quotas in group.flavors:
                flavor_specs.setdefault(flavor_quotas.name, ResourceFlavorSpec(flavor_quotas.name))
    return Snapshot(
        cluster_queues=queue_specs,
        cohorts=[cohort.obj() for cohort in cohorts],
        flavors=flavor_specs.values(),
        admitted=admitted,
    )
