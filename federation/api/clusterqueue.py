"""ClusterQueue (kueue.x-k8s.io/v1beta2): quota per flavor, cohort membership, queueing and preemption policy."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field

from federation.api.base import (
    KUEUE_GROUP,
    KUEUE_VERSION,
    ApiObject,
    CrdInfo,
    KubeModel,
    PrinterColumn,
)
from federation.api.common import AdmissionCheckReference, CohortReference, Int32, ResourceFlavorReference
from federation.api.core import Conditions, LabelSelector
from federation.api.quota import FairSharing, FairSharingStatus, FlavorUsages, ResourceGroup, ResourceGroups
from federation.api.schema import Crd, Rule

QueueingStrategy = Literal["StrictFIFO", "BestEffortFIFO"]
StopPolicy = Literal["None", "Hold", "HoldAndDrain"]
FlavorFungibilityPolicy = Literal["MayStopSearch", "TryNextFlavor"]
ReclaimWithinCohortPolicy = Literal["Never", "LowerPriority", "Any"]
WithinClusterQueuePolicy = Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"]
BorrowWithinCohortPolicy = Literal["Never", "LowerPriority"]

DEFAULTED = Crd(defaulted=True)


class FlavorFungibility(KubeModel):
    """Whether admission tries the next flavor before borrowing or preempting in the current one."""

    when_can_borrow: Annotated[FlavorFungibilityPolicy, DEFAULTED] = "MayStopSearch"
    when_can_preempt: Annotated[FlavorFungibilityPolicy, DEFAULTED] = "TryNextFlavor"


class BorrowWithinCohort(KubeModel):
    """Preemption in other ClusterQueues of the cohort while the pending workload borrows."""

    policy: Annotated[BorrowWithinCohortPolicy, DEFAULTED] = "Never"
    max_priority_threshold: Int32 | None = None


class ClusterQueuePreemption(KubeModel):
    """Preemption policies of a ClusterQueue."""

    __crd_rules__ = (
        Rule(
            "!(self.reclaimWithinCohort == 'Never' && has(self.borrowWithinCohort) && "
            "self.borrowWithinCohort.policy != 'Never')",
            "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never",
            lambda p: not (p.reclaim_within_cohort == "Never" and p.borrow_within_cohort.policy != "Never"),
        ),
    )

    reclaim_within_cohort: Annotated[ReclaimWithinCohortPolicy, DEFAULTED] = "Never"
    borrow_within_cohort: Annotated[BorrowWithinCohort, DEFAULTED] = Field(default_factory=BorrowWithinCohort)
    within_cluster_queue: Annotated[WithinClusterQueuePolicy, DEFAULTED] = "Never"


class AdmissionCheckStrategyRule(KubeModel):
    """An admission check and the flavors it applies to (all flavors when onFlavors is empty)."""

    name: AdmissionCheckReference
    on_flavors: Annotated[list[ResourceFlavorReference], Field(max_length=64), Crd(list_type="set")] | None = None


class AdmissionChecksStrategy(KubeModel):
    admission_checks: Annotated[
        list[AdmissionCheckStrategyRule], Field(min_length=1, max_length=64), Crd(list_type="map", map_keys=("name",))
    ]


def _no_limit_without_cohort(spec: ClusterQueueSpec, *, limit: str) -> bool:
    if spec.cohort_name is not None:
        return True
    return all(getattr(r, limit) is None for rg in spec.resource_groups or () for f in rg.flavors for r in f.resources)


class ClusterQueueSpec(KubeModel):
    __crd_rules__ = (
        Rule(
            "!has(self.cohortName) && has(self.resourceGroups) ? self.resourceGroups.all(rg, rg.flavors.all(f, "
            "f.resources.all(r, !has(r.borrowingLimit)))) : true",
            "borrowingLimit must be nil when cohort is empty",
            lambda s: _no_limit_without_cohort(s, limit="borrowing_limit"),
        ),
        Rule(
            "!has(self.cohortName) && has(self.resourceGroups) ? self.resourceGroups.all(rg, rg.flavors.all(f, "
            "f.resources.all(r, !has(r.lendingLimit)))) : true",
            "lendingLimit must be nil when cohort is empty",
            lambda s: _no_limit_without_cohort(s, limit="lending_limit"),
        ),
    )

    resource_groups: ResourceGroups | None = None
    cohort_name: CohortReference | None = None
    queueing_strategy: Annotated[QueueingStrategy, DEFAULTED] = "BestEffortFIFO"
    namespace_selector: LabelSelector | None = None
    flavor_fungibility: Annotated[FlavorFungibility, DEFAULTED] = Field(default_factory=FlavorFungibility)
    preemption: Annotated[ClusterQueuePreemption, DEFAULTED] = Field(default_factory=ClusterQueuePreemption)
    admission_checks_strategy: AdmissionChecksStrategy | None = None
    stop_policy: Annotated[StopPolicy, DEFAULTED] = "None"
    fair_sharing: FairSharing | None = None

    def groups(self) -> list[ResourceGroup]:
        return list(self.resource_groups or ())


class ClusterQueueStatus(KubeModel):
    conditions: Conditions | None = None
    flavors_reservation: FlavorUsages | None = None
    flavors_usage: FlavorUsages | None = None
    pending_workloads: Int32 | None = None
    reserving_workloads: Int32 | None = None
    admitted_workloads: Int32 | None = None
    fair_sharing: FairSharingStatus | None = None


class ClusterQueue(ApiObject):
    """A cluster-wide pool of quota that LocalQueues submit workloads to."""

    crd: ClassVar[CrdInfo] = CrdInfo(
        group=KUEUE_GROUP,
        version=KUEUE_VERSION,
        kind="ClusterQueue",
        plural="clusterqueues",
        scope="Cluster",
        short_names=("cq",),
        categories=("kueue",),
        printer_columns=(
            PrinterColumn("Cohort", ".spec.cohortName", "string", "Cohort that this ClusterQueue belongs to"),
            PrinterColumn(
                "Strategy", ".spec.queueingStrategy", "string", "The queueing strategy used to prioritize workloads", 1
            ),
            PrinterColumn("Pending Workloads", ".status.pendingWorkloads", "integer", "Number of pending workloads"),
            PrinterColumn(
                "Admitted Workloads",
                ".status.admittedWorkloads",
                "integer",
                "Number of admitted workloads that haven't finished yet",
                1,  # as in Kueue: shown with -o wide
            ),
        ),
    )

    api_version: Literal["kueue.x-k8s.io/v1beta2"] = Field(default="kueue.x-k8s.io/v1beta2", alias="apiVersion")
    kind: Literal["ClusterQueue"] = "ClusterQueue"
    spec: ClusterQueueSpec = Field(default_factory=ClusterQueueSpec)
    status: ClusterQueueStatus | None = None
