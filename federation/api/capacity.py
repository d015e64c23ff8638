"""ClusterCapacity (kfed.io/v1alpha1): the free capacity a worker's agent publishes for the manager to probe.

One cluster-scoped object per worker, status only. `status.generation` increases with every published report so
the manager can tell a new report from a re-list and reconcile its in-flight ledger against it. Quantities are
strings (or integers) exactly as Kubernetes writes them; arithmetic is `federation.quantity`'s job.

Two views of capacity:
- quota: per local ClusterQueue and flavor, nominal quota, usage (reserved) and free quota per resource, plus how
  much more could be borrowed from the cohort right now;
- topology: per TAS flavor, a summary of free capacity per topology domain above the host level (e.g. per block
  and per rack), so the manager can tell whether a workload that needs one rack fits anywhere.

Plus, per ResourceFlavor the local ClusterQueues use, the node labels and tolerations the agent injects into a
Job's pod template when it starts it, so the manager can create a Job copy already unsuspended and placed, and the
flavor's node taints, so that with its node labels the manager can tell whether a pod set could be admitted to it.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, StrictStr

from federation.api.base import (
    KFED_GROUP,
    KFED_VERSION,
    ApiObject,
    CrdInfo,
    KubeModel,
    PrinterColumn,
)
from federation.api.common import (
    DNS1123_LABEL,
    DNS1123_SUBDOMAIN,
    Bool,
    ClusterQueueReference,
    CohortReference,
    Int32,
    Int64,
    LocalQueueName,
    Quantity,
    ResourceFlavorReference,
    ResourceList,
    ResourceName,
    Time,
    TopologyReference,
)
from federation.api.core import Conditions, Taint, Toleration
from federation.api.schema import Crd

CLUSTER_CAPACITY_NAME = "local"
"""The conventional name of the one ClusterCapacity object in a worker cluster."""


class ResourceCapacity(KubeModel):
    """Quota of one resource in one flavor of one ClusterQueue."""

    name: ResourceName
    nominal: Quantity
    usage: Quantity
    """Quota reserved by workloads (admitted or reserving)."""
    free: Quantity
    """nominal - usage, never below zero."""
    borrowing_headroom: Quantity | None = None
    """How much more the ClusterQueue could borrow from its cohort now (unset: not in a cohort)."""


class FlavorCapacity(KubeModel):
    name: ResourceFlavorReference
    resources: Annotated[list[ResourceCapacity], Field(max_length=64), Crd(list_type="map", map_keys=("name",))]


class ClusterQueueCapacity(KubeModel):
    """Quota state of one local ClusterQueue."""

    name: ClusterQueueReference
    cohort_name: CohortReference | None = None
    active: Bool | None = None
    inactive_reason: Annotated[StrictStr, Field(max_length=1024)] | None = None
    """Why it admits nothing, when ``active`` is false (e.g. "ClusterQueue is stopped")."""
    pending_workloads: Annotated[Int32, Field(ge=0)] | None = None
    flavors: Annotated[list[FlavorCapacity], Field(max_length=64), Crd(list_type="map", map_keys=("name",))]

    def flavor(self, name: str) -> FlavorCapacity | None:
        return next((f for f in self.flavors if f.name == name), None)


class RouteLimitRange(KubeModel):
    """The LimitRanges of a LocalQueue's namespace, summarized as Kueue summarizes them: the defaults a container gets
    and the bounds a container and a pod must keep (``federation.limit_ranges``)."""

    default_limits: ResourceList | None = None
    default_requests: ResourceList | None = None
    container_max: ResourceList | None = None
    container_min: ResourceList | None = None
    pod_max: ResourceList | None = None
    pod_min: ResourceList | None = None


class LocalQueueRoute(KubeModel):
    """Which local ClusterQueue a LocalQueue feeds, so the manager can map a workload's queueName to its quota."""

    namespace: Annotated[StrictStr, Field(min_length=1, max_length=63, pattern=DNS1123_LABEL)]
    name: LocalQueueName
    cluster_queue: ClusterQueueReference
    stopped: Bool | None = None
    """True when the LocalQueue admits nothing new (its ``stopPolicy`` is not None)."""
    namespace_not_selected: Bool | None = None
    """True when the ClusterQueue's ``namespaceSelector`` does not select the LocalQueue's namespace: it admits none
    of its workloads (Kueue: "workload namespace doesn't match ClusterQueue selector")."""
    limit_range: RouteLimitRange | None = None
    """The namespace's LimitRanges, when it has any: a workload whose pods they would refuse is not admitted there."""


class PodShape(KubeModel):
    """A pod size the agent counts free slots for in each topology domain (e.g. '1 GPU + 8 CPU')."""

    name: Annotated[StrictStr, Field(max_length=63, pattern=DNS1123_LABEL)]
    requests: ResourceList


class TopologyDomainCapacity(KubeModel):
    """Free capacity of one topology domain (e.g. one rack), identified by its value at each summarised level."""

    level_values: Annotated[
        list[Annotated[StrictStr, Field(max_length=63)]], Field(min_length=1, max_length=16), Crd(list_type="atomic")
    ]
    free: ResourceList | None = None
    """Allocatable minus requests of non-terminal pods, summed over the domain's schedulable nodes."""
    largest_node_free: ResourceList | None = None
    """Per resource, the most any single node of the domain has free (bounds what one pod can get)."""
    pods_of_shape: dict[str, Annotated[Int32, Field(ge=0)]] | None = None
    """Pod shape name to how many such pods fit in the domain, counted node by node."""
    nodes: Annotated[Int32, Field(ge=0)] | None = None


class TopologyCapacity(KubeModel):
    """The capacity summary of one TAS flavor."""

    name: ResourceFlavorReference
    """The ResourceFlavor's name."""
    topology_name: TopologyReference
    levels: Annotated[
        list[Annotated[StrictStr, Field(max_length=317)]],
        Field(min_length=1, max_length=16),
        Crd(list_type="atomic"),
    ]
    """Node labels the domains are keyed by, highest first; usually the Topology's levels above the host."""
    pod_shapes: Annotated[list[PodShape], Field(max_length=16), Crd(list_type="map", map_keys=("name",))] | None = None
    topology_summary: (
        Annotated[list[TopologyDomainCapacity], Field(max_length=10000), Crd(list_type="atomic")] | None
    ) = None


class FlavorPlacement(KubeModel):
    """What a Job admitted to one ResourceFlavor gets in its pod template: the flavor's ``nodeLabels`` as node
    selector and its ``tolerations`` (Kueue's Job start), exactly as the agent injects them."""

    name: ResourceFlavorReference
    node_labels: Annotated[dict[str, StrictStr], Field(max_length=8), Crd(map_type="atomic")] | None = None
    """Unset when the flavor has none."""
    tolerations: Annotated[list[Toleration], Field(max_length=8), Crd(list_type="atomic")] | None = None
    """The ResourceFlavor's ``spec.tolerations``; unset when it has none."""
    node_taints: Annotated[list[Taint], Field(max_length=8), Crd(list_type="atomic")] | None = None
    """The ResourceFlavor's ``spec.nodeTaints`` (what a pod must tolerate to be admitted to it); unset when it has
    none."""
    topology_name: Annotated[StrictStr, Field(max_length=253)] | None = None
    """The ResourceFlavor's ``spec.topologyName``, "" when it has none (only such a flavor takes a pod set that asks
    for a topology); unset in reports of agents that did not say."""


class RuntimeClassOverhead(KubeModel):
    """A RuntimeClass of the worker with a pod overhead: a pod naming it is charged that overhead there (Kueue adds
    it to the pod's requests, as the RuntimeClass admission plugin adds it to the pod)."""

    name: Annotated[StrictStr, Field(min_length=1, max_length=253, pattern=DNS1123_SUBDOMAIN)]
    overhead: ResourceList
    """The RuntimeClass's ``overhead.podFixed``."""


class ClusterCapacityStatus(KubeModel):
    generation: Annotated[Int64, Field(ge=0)]
    """Increases by one with every report the agent publishes."""
    observed_time: Time
    """When the agent computed this report."""
    cluster_queues: (
        Annotated[list[ClusterQueueCapacity], Field(max_length=1000), Crd(list_type="map", map_keys=("name",))] | None
    ) = None
    local_queues: (
        Annotated[list[LocalQueueRoute], Field(max_length=10000), Crd(list_type="map", map_keys=("namespace", "name"))]
        | None
    ) = None
    """Every LocalQueue of the worker and the ClusterQueue it points to."""
    topologies: (
        Annotated[list[TopologyCapacity], Field(max_length=64), Crd(list_type="map", map_keys=("name",))] | None
    ) = None
    flavors: (
        Annotated[list[FlavorPlacement], Field(max_length=1000), Crd(list_type="map", map_keys=("name",))] | None
    ) = None
    """One entry per existing ResourceFlavor that a reported ClusterQueue names."""
    runtime_classes: (
        Annotated[list[RuntimeClassOverhead], Field(max_length=1000), Crd(list_type="map", map_keys=("name",))] | None
    ) = None
    """The worker's RuntimeClasses that have a pod overhead (empty: none has one; unset in the reports of agents
    older than this field, whose workers the manager judges by its own RuntimeClasses)."""
    conditions: Conditions | None = None

    def cluster_queue(self, name: str) -> ClusterQueueCapacity | None:
        return next((cq for cq in self.cluster_queues or () if cq.name == name), None)

    def local_queue(self, namespace: str, name: str) -> LocalQueueRoute | None:
        return next((q for q in self.local_queues or () if q.namespace == namespace and q.name == name), None)

    def topology(self, flavor: str) -> TopologyCapacity | None:
        return next((t for t in self.topologies or () if t.name == flavor), None)

    def flavor(self, name: str) -> FlavorPlacement | None:
        return next((f for f in self.flavors or () if f.name == name), None)


class ClusterCapacity(ApiObject):
    """Free quota and topology capacity of one worker cluster, published by its kfed agent."""

    crd: ClassVar[CrdInfo] = CrdInfo(
        group=KFED_GROUP,
        version=KFED_VERSION,
        kind="ClusterCapacity",
        plural="clustercapacities",
        scope="Cluster",
        short_names=("ccap",),
        categories=("kfed",),
        printer_columns=(
            PrinterColumn("Generation", ".status.generation", "integer", "Report counter"),
            PrinterColumn("Observed", ".status.observedTime", "date", "When the report was computed"),
            PrinterColumn("Age", ".metadata.creationTimestamp", "date", "Time since the object was created"),
        ),
    )

    api_version: Literal["kfed.io/v1alpha1"] = Field(default="kfed.io/v1alpha1", alias="apiVersion")
    kind: Literal["ClusterCapacity"] = "ClusterCapacity"
    status: ClusterCapacityStatus | None = None
