"""Workload (kueue.x-k8s.io/v1beta2): the unit of admission — pod sets, their queue and priority, and the result.

Pod templates are kept as raw mappings (`dict[str, Any]`): kfed reads a few well-known paths (requests, node
selectors, tolerations, annotations) and must not lose anything else, so it does not re-declare the pod schema.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, StrictStr

from federation.api.admissioncheck import CheckState
from federation.api.base import (
    AGE_COLUMN,
    KUEUE_GROUP,
    KUEUE_VERSION,
    ApiObject,
    CrdInfo,
    KubeModel,
    PrinterColumn,
)
from federation.api.common import (
    DNS1123_SUBDOMAIN,
    AdmissionCheckReference,
    Bool,
    ClusterQueueReference,
    Int32,
    LocalQueueName,
    PodSetReference,
    ResourceFlavorReference,
    ResourceList,
    Time,
)
from federation.api.core import Conditions, Tolerations, condition_is_true
from federation.api.schema import Crd, Rule

# Condition types.
QUOTA_RESERVED = "QuotaReserved"
ADMITTED = "Admitted"
FINISHED = "Finished"
PODS_READY = "PodsReady"
EVICTED = "Evicted"
PREEMPTED = "Preempted"
REQUEUED = "Requeued"
BLOCKED_ON_PREEMPTION_GATES = "BlockedOnPreemptionGates"
DEACTIVATION_TARGET = "DeactivationTarget"

# Eviction reasons.
EVICTED_BY_PREEMPTION = "Preempted"
EVICTED_BY_PODS_READY_TIMEOUT = "PodsReadyTimeout"
EVICTED_BY_ADMISSION_CHECK = "AdmissionCheck"
EVICTED_BY_CLUSTER_QUEUE_STOPPED = "ClusterQueueStopped"
EVICTED_BY_LOCAL_QUEUE_STOPPED = "LocalQueueStopped"
EVICTED_DUE_TO_NODE_FAILURES = "NodeFailures"
EVICTED_ON_MANAGER_CLUSTER = "EvictedOnManagerCluster"
EVICTED_BY_DEACTIVATION = "Deactivated"
DEACTIVATED_MESSAGE = "The workload is deactivated"
"""Kueue's message for an eviction because the Workload is inactive (``spec.active: false``)."""

DEFAULT_PODSET_NAME = "main"

PriorityClassGroup = Literal["kueue.x-k8s.io", "scheduling.k8s.io"]
PriorityClassKind = Literal["WorkloadPriorityClass", "PriorityClass"]
DelayedTopologyRequestState = Literal["Pending", "Ready"]
Label63 = Annotated[StrictStr, Field(max_length=63)]
Label317 = Annotated[StrictStr, Field(max_length=317)]


class PriorityClassRef(KubeModel):
    """The PriorityClass (pod) or WorkloadPriorityClass a workload's priority comes from."""

    __crd_rules__ = (
        Rule(
            "(self.group == 'scheduling.k8s.io') ? self.kind == 'PriorityClass' : true",
            "only the PriorityClass kind is allowed for the scheduling.k8s.io group",
            lambda r: r.group != "scheduling.k8s.io" or r.kind == "PriorityClass",
        ),
        Rule(
            "(self.group == 'kueue.x-k8s.io') ? self.kind == 'WorkloadPriorityClass' : true",
            "only the WorkloadPriorityClass kind is allowed for the kueue.x-k8s.io group",
            lambda r: r.group != "kueue.x-k8s.io" or r.kind == "WorkloadPriorityClass",
        ),
    )

    group: PriorityClassGroup
    kind: PriorityClassKind
    name: Annotated[StrictStr, Field(min_length=1, max_length=253, pattern=DNS1123_SUBDOMAIN)]


class PodSetTopologyRequest(KubeModel):
    """The topology constraints of a pod set (mirrors the kueue.x-k8s.io/podset-*-topology annotations)."""

    required: Label63 | None = None
    preferred: Label63 | None = None
    unconstrained: Bool | None = None
    pod_index_label: Label317 | None = None
    sub_group_index_label: Label317 | None = None
    sub_group_count: Int32 | None = None
    pod_set_group_name: Annotated[StrictStr, Field(max_length=256)] | None = None
    pod_set_slice_required_topology: Label63 | None = None
    pod_set_slice_size: Int32 | None = None


class PodSet(KubeModel):
    """`count` homogeneous pods described by one pod template."""

    __crd_rules__ = (
        Rule(
            "has(self.minCount) ? self.minCount <= self.count : true",
            "minCount should be positive and less or equal to count",
            lambda p: p.min_count is None or p.min_count <= p.count,
        ),
    )

    name: Annotated[PodSetReference, Crd(defaulted=True)] = DEFAULT_PODSET_NAME
    template: Annotated[dict[str, Any], Crd(preserve_unknown=True, description="A PodTemplateSpec, kept as-is.")]
    count: Annotated[Int32, Field(ge=0), Crd(defaulted=True)] = 1
    min_count: Annotated[Int32, Field(ge=0)] | None = None  # Kueue v0.20 allows 0
    topology_request: PodSetTopologyRequest | None = None

    @property
    def pod_spec(self) -> dict[str, Any]:
        spec = self.template.get("spec")
        return spec if isinstance(spec, dict) else {}

    @property
    def annotations(self) -> dict[str, str]:
        meta = self.template.get("metadata")
        found = meta.get("annotations") if isinstance(meta, dict) else None
        return dict(found) if isinstance(found, dict) else {}


GateName = Annotated[StrictStr, Field(min_length=1, max_length=63)]
GatePosition = Literal["Open", "Closed"]
MULTIKUEUE_PREEMPTION_GATE = "kueue.x-k8s.io/multikueue"
"""The gate a Kueue v0.20 MultiKueue manager puts on the Workload copies it sends (orchestrated preemption)."""


class PreemptionGate(KubeModel):
    """A gate that keeps the Workload from triggering preemption until ``status.preemptionGates`` opens it."""

    name: GateName


class PreemptionGateState(KubeModel):
    """The observed position of one preemption gate (a gate with no state is closed)."""

    name: GateName
    position: GatePosition
    last_transition_time: Time


class WorkloadSpec(KubeModel):
    __crd_rules__ = (
        Rule(
            "!has(self.priorityClassRef) || has(self.priority)",
            "priority should not be nil when priorityClassRef is set",
            lambda s: s.priority_class_ref is None or s.priority is not None,
        ),
    )

    pod_sets: Annotated[list[PodSet], Field(min_length=1, max_length=8), Crd(list_type="map", map_keys=("name",))]
    queue_name: LocalQueueName | None = None
    priority_class_ref: PriorityClassRef | None = None
    priority: Int32 | None = None
    active: Annotated[Bool, Crd(defaulted=True)] = True
    maximum_execution_time_seconds: Annotated[Int32, Field(ge=1)] | None = None
    preemption_gates: (
        Annotated[list[PreemptionGate], Field(max_length=8), Crd(list_type="map", map_keys=("name",))] | None
    ) = None


# --- topology assignment (compressed v1beta2 encoding) ----------------------------------------------------------


class TopologyAssignmentSliceLevelValues(KubeModel):
    """The values of one level across a slice's domains: `prefix + root + suffix` each, or one universal value."""

    __crd_rules__ = (
        Rule(
            "has(self.roots) != has(self.universalValue)",
            "Exactly one of roots, universalValue must be set",
            lambda v: (v.roots is None) != (v.universal_value is None),
        ),
        Rule(
            "!(has(self.universalValue) && (has(self.prefix) || has(self.suffix)))",
            "universalValue cannot be set together with prefix or suffix",
            lambda v: not (v.universal_value is not None and (v.prefix is not None or v.suffix is not None)),
        ),
    )

    prefix: Label63 | None = None
    suffix: Label63 | None = None
    roots: Annotated[list[Label63], Field(min_length=1, max_length=100000), Crd(list_type="atomic")] | None = None
    universal_value: Label63 | None = None

    def values(self, domain_count: int) -> list[str]:
        if self.universal_value is not None:
            return [self.universal_value] * domain_count
        return [f"{self.prefix or ''}{root}{self.suffix or ''}" for root in self.roots or ()]


class TopologyAssignmentSlice(KubeModel):
    """`domainCount` domains with their per-level values and pod counts."""

    __crd_rules__ = (
        Rule(
            "!has(self.podCounts) || size(self.podCounts) == self.domainCount",
            "podCounts must have length equal to domainCount",
            lambda s: s.pod_counts is None or len(s.pod_counts) == s.domain_count,
        ),
        Rule(
            "has(self.podCounts) != has(self.universalPodCount)",
            "Exactly one of podCounts, universalPodCount must be set",
            lambda s: (s.pod_counts is None) != (s.universal_pod_count is None),
        ),
        Rule(
            "self.valuesPerLevel.all(x, !has(x.roots) || size(x.roots) == self.domainCount)",
            "roots, if set, must have length equal to domainCount of this TopologyAssignmentSlice",
            lambda s: all(v.roots is None or len(v.roots) == s.domain_count for v in s.values_per_level),
        ),
    )

    domain_count: Annotated[Int32, Field(ge=1)]
    values_per_level: Annotated[
        list[TopologyAssignmentSliceLevelValues], Field(min_length=1, max_length=16), Crd(list_type="atomic")
    ]
    pod_counts: Annotated[list[Int32], Field(min_length=1, max_length=100000), Crd(list_type="atomic")] | None = None
    universal_pod_count: Int32 | None = None

    def domains(self) -> list[tuple[tuple[str, ...], int]]:
        columns = [level.values(self.domain_count) for level in self.values_per_level]
        counts = self.pod_counts or [self.universal_pod_count or 0] * self.domain_count
        return [(tuple(col[i] for col in columns), counts[i]) for i in range(self.domain_count)]


class TopologyAssignment(KubeModel):
    """Where a pod set's pods go: node-label keys (`levels`) and, per domain, the values and a pod count."""

    __crd_rules__ = (
        Rule(
            "self.slices.all(x, size(x.valuesPerLevel) == size(self.levels))",
            "valuesPerLevel must have the same length as the number of levels in this TopologyAssignment",
            lambda a: all(len(s.values_per_level) == len(a.levels) for s in a.slices),
        ),
    )

    levels: Annotated[list[Label317], Field(min_length=1, max_length=16), Crd(list_type="atomic")]
    slices: Annotated[list[TopologyAssignmentSlice], Field(max_length=1000), Crd(list_type="atomic")]

    def domains(self) -> list[tuple[tuple[str, ...], int]]:
        """Every (values per level, pod count) pair, slices concatenated in order."""
        return [domain for s in self.slices for domain in s.domains()]

    @classmethod
    def from_domains(cls, levels: list[str], domains: list[tuple[tuple[str, ...], int]]) -> TopologyAssignment:
        """Encode domains as one slice, using universal values/counts where every domain agrees."""
        if not domains:
            return cls(levels=levels, slices=[])
        per_level: list[TopologyAssignmentSliceLevelValues] = []
        for i in range(len(levels)):
            column = [values[i] for values, _ in domains]
            if len(set(column)) == 1:
                per_level.append(TopologyAssignmentSliceLevelValues(universal_value=column[0]))
            else:
                per_level.append(TopologyAssignmentSliceLevelValues(roots=column))
        counts = [count for _, count in domains]
        one_slice = TopologyAssignmentSlice(
            domain_count=len(domains),
            values_per_level=per_level,
            **({"universal_pod_count": counts[0]} if len(set(counts)) == 1 else {"pod_counts": counts}),
        )
        return cls(levels=levels, slices=[one_slice])


class PodSetAssignment(KubeModel):
    """The admission result for one pod set: flavors per resource, usage, count, topology placement."""

    name: Annotated[PodSetReference, Crd(defaulted=True)] = DEFAULT_PODSET_NAME
    flavors: dict[str, ResourceFlavorReference] | None = None
    resource_usage: ResourceList | None = None
    count: Annotated[Int32, Field(ge=0)] | None = None
    topology_assignment: TopologyAssignment | None = None
    delayed_topology_request: DelayedTopologyRequestState | None = None


class Admission(KubeModel):
    cluster_queue: ClusterQueueReference
    pod_set_assignments: (
        Annotated[list[PodSetAssignment], Field(max_length=8), Crd(list_type="map", map_keys=("name",))] | None
    ) = None


class RequeueState(KubeModel):
    count: Annotated[Int32, Field(ge=0)] | None = None
    requeue_at: Time | None = None


class ReclaimablePod(KubeModel):
    name: PodSetReference
    count: Annotated[Int32, Field(ge=0)]


class PodSetUpdate(KubeModel):
    """Additive changes an admission check asks for on a pod set."""

    name: PodSetReference
    labels: dict[str, StrictStr] | None = None
    annotations: dict[str, StrictStr] | None = None
    node_selector: dict[str, StrictStr] | None = None
    tolerations: Tolerations | None = None


class AdmissionCheckState(KubeModel):
    name: AdmissionCheckReference
    state: CheckState
    last_transition_time: Time
    message: Annotated[StrictStr, Field(max_length=32768)]
    requeue_after_seconds: Annotated[Int32, Field(ge=0)] | None = None
    retry_count: Annotated[Int32, Field(ge=0)] | None = None
    pod_set_updates: Annotated[list[PodSetUpdate], Field(max_length=8), Crd(list_type="atomic")] | None = None


class PodSetRequest(KubeModel):
    name: PodSetReference
    resources: ResourceList | None = None


class WorkloadSchedulingStatsEviction(KubeModel):
    reason: Annotated[StrictStr, Field(max_length=316)]
    underlying_cause: Annotated[StrictStr, Field(max_length=316)]
    count: Annotated[Int32, Field(ge=0)]


class SchedulingStats(KubeModel):
    evictions: (
        Annotated[
            list[WorkloadSchedulingStatsEviction],
            Field(max_length=256),
            Crd(list_type="map", map_keys=("reason", "underlyingCause")),
        ]
        | None
    ) = None


class UnhealthyNode(KubeModel):
    name: Label63


class WorkloadStatus(KubeModel):
    __crd_rules__ = (
        Rule(
            "!has(oldSelf.clusterName) || !has(self.clusterName) || oldSelf.clusterName == self.clusterName",
            "clusterName is immutable once set",
        ),
        Rule(
            "!has(self.clusterName) || (!has(self.nominatedClusterNames) || (has(self.nominatedClusterNames) && "
            "size(self.nominatedClusterNames) == 0))",
            "clusterName and nominatedClusterNames are mutually exclusive",
            lambda s: s.cluster_name is None or not s.nominated_cluster_names,
        ),
    )

    conditions: Conditions | None = None
    admission: Admission | None = None
    requeue_state: RequeueState | None = None
    reclaimable_pods: (
        Annotated[list[ReclaimablePod], Field(max_length=8), Crd(list_type="map", map_keys=("name",))] | None
    ) = None
    admission_checks: (
        Annotated[list[AdmissionCheckState], Field(max_length=8), Crd(list_type="map", map_keys=("name",))] | None
    ) = None
    resource_requests: (
        Annotated[list[PodSetRequest], Field(max_length=8), Crd(list_type="map", map_keys=("name",))] | None
    ) = None
    accumulated_past_execution_time_seconds: Int32 | None = None
    scheduling_stats: SchedulingStats | None = None
    nominated_cluster_names: (
        Annotated[list[Annotated[StrictStr, Field(max_length=256)]], Field(max_length=10), Crd(list_type="atomic")]
        | None
    ) = None
    cluster_name: Annotated[StrictStr, Field(max_length=256)] | None = None
    unhealthy_nodes: (
        Annotated[list[UnhealthyNode], Field(max_length=8), Crd(list_type="map", map_keys=("name",))] | None
    ) = None
    preemption_gates: (
        Annotated[list[PreemptionGateState], Field(max_length=8), Crd(list_type="map", map_keys=("name",))] | None
    ) = None


_RESERVED = "self.status.conditions.exists(c, c.type == 'QuotaReserved' && c.status == 'True')"
_OLD_RESERVED = (
    "has(oldSelf.status) && has(oldSelf.status.conditions) && "
    "oldSelf.status.conditions.exists(c, c.type == 'QuotaReserved' && c.status == 'True')"
)
_ADMITTED = "self.status.conditions.exists(c, c.type == 'Admitted' && c.status == 'True')"
_OLD_ADMITTED = (
    "has(oldSelf.status) && has(oldSelf.status.conditions) && "
    "oldSelf.status.conditions.exists(c, c.type == 'Admitted' && c.status == 'True')"
)
_BOTH_REFS = "has(oldSelf.spec.priorityClassRef) && has(self.spec.priorityClassRef)"


def _assignments_match(wl: Workload) -> bool:
    status = wl.status
    if status is None or status.admission is None or not condition_is_true(status.conditions, QUOTA_RESERVED):
        return True
    return len(wl.spec.pod_sets) == len(status.admission.pod_set_assignments or ())


class Workload(ApiObject):
    """A workload: what to admit (pod sets), where it queues, its priority, and the admission result."""

    crd: ClassVar[CrdInfo] = CrdInfo(
        group=KUEUE_GROUP,
        version=KUEUE_VERSION,
        kind="Workload",
        plural="workloads",
        scope="Namespaced",
        short_names=("kwl", "kueueworkload", "kueueworkloads"),
        categories=("kueue",),
        printer_columns=(
            PrinterColumn("Queue", ".spec.queueName", "string", "Name of the queue this workload was submitted to"),
            PrinterColumn(
                "Reserved in",
                ".status.admission.clusterQueue",
                "string",
                "Name of the ClusterQueue where the workload is reserving quota",
            ),
            PrinterColumn("Admitted", ".status.conditions[?(@.type=='Admitted')].status", "string", "Admission status"),
            PrinterColumn(
                "Finished", ".status.conditions[?(@.type=='Finished')].status", "string", "Workload finished"
            ),
            AGE_COLUMN,
        ),
    )

    __crd_rules__ = (
        Rule(
            f"has(self.status) && has(self.status.conditions) && {_RESERVED} && has(self.status.admission) ? "
            "size(self.spec.podSets) == size(self.status.admission.podSetAssignments) : true",
            "podSetAssignments must have the same number of podSets as the spec",
            _assignments_match,
        ),
        Rule(
            f"({_OLD_RESERVED}) ? (!has(oldSelf.spec.priorityClassRef) && !has(self.spec.priorityClassRef)) || "
            f"({_BOTH_REFS}) : true",
            "priorityClassRef is immutable while workload quota reserved",
        ),
        Rule(
            f"({_OLD_RESERVED} && {_BOTH_REFS}) ? "
            "oldSelf.spec.priorityClassRef.group == self.spec.priorityClassRef.group : true",
            "priorityClassRef.group is immutable while workload quota reserved",
        ),
        Rule(
            f"({_OLD_RESERVED} && {_BOTH_REFS}) ? "
            "oldSelf.spec.priorityClassRef.kind == self.spec.priorityClassRef.kind : true",
            "priorityClassRef.kind is immutable while workload quota reserved",
        ),
        Rule(
            f"({_OLD_RESERVED} && {_BOTH_REFS} && self.spec.priorityClassRef.group == 'scheduling.k8s.io' && "
            "self.spec.priorityClassRef.kind == 'PriorityClass') ? "
            "oldSelf.spec.priorityClassRef.name == self.spec.priorityClassRef.name : true",
            "priorityClassRef.name is immutable for scheduling.k8s.io/priorityclass while workload quota reserved",
        ),
        Rule(
            f"({_OLD_RESERVED}) && (has(self.status) && has(self.status.conditions) && {_RESERVED}) && "
            "has(oldSelf.spec.queueName) && has(self.spec.queueName) ? "
            "oldSelf.spec.queueName == self.spec.queueName : true",
            "queueName is immutable while workload quota reserved",
        ),
        Rule(
            f"(({_OLD_ADMITTED}) && (has(self.status) && has(self.status.conditions) && {_ADMITTED})) ? "
            "((has(oldSelf.spec.maximumExecutionTimeSeconds) ? oldSelf.spec.maximumExecutionTimeSeconds : 0) == "
            "(has(self.spec.maximumExecutionTimeSeconds) ? self.spec.maximumExecutionTimeSeconds : 0)) : true",
            "maximumExecutionTimeSeconds is immutable while workload quota reserved",
        ),
    )

    api_version: Literal["kueue.x-k8s.io/v1beta2"] = Field(default="kueue.x-k8s.io/v1beta2", alias="apiVersion")
    kind: Literal["Workload"] = "Workload"
    spec: WorkloadSpec
    status: WorkloadStatus | None = None

    @property
    def is_quota_reserved(self) -> bool:
        return self.status is not None and condition_is_true(self.status.conditions, QUOTA_RESERVED)

    @property
    def is_admitted(self) -> bool:
        return self.status is not None and condition_is_true(self.status.conditions, ADMITTED)

    @property
    def is_finished(self) -> bool:
        return self.status is not None and condition_is_true(self.status.conditions, FINISHED)
