"""LocalQueue (kueue.x-k8s.io/v1beta2): the namespaced queue users submit to, backed by one ClusterQueue."""

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
from federation.api.clusterqueue import StopPolicy
from federation.api.common import (
    ClusterQueueReference,
    Int32,
    Int64,
    Quantity,
    ResourceFlavorReference,
    ResourceList,
    ResourceName,
    Time,
)
from federation.api.core import Conditions
from federation.api.quota import FairSharing
from federation.api.schema import Crd, Rule


class LocalQueueSpec(KubeModel):
    cluster_queue: (
        Annotated[ClusterQueueReference, Crd(rules=(Rule("self == oldSelf", "field is immutable"),))] | None
    ) = None
    stop_policy: Annotated[StopPolicy, Crd(defaulted=True)] = "None"
    fair_sharing: FairSharing | None = None


class LocalQueueResourceUsage(KubeModel):
    name: ResourceName
    total: Quantity | None = None


class LocalQueueFlavorUsage(KubeModel):
    name: ResourceFlavorReference
    resources: Annotated[list[LocalQueueResourceUsage], Field(max_length=16), Crd(list_type="map", map_keys=("name",))]


LocalQueueFlavorUsages = Annotated[
    list[LocalQueueFlavorUsage], Field(max_length=16), Crd(list_type="map", map_keys=("name",))
]


class LocalQueueAdmissionFairSharingStatus(KubeModel):
    consumed_resources: ResourceList
    last_update: Time


class LocalQueueFairSharingStatus(KubeModel):
    weighted_share: Int64
    admission_fair_sharing_status: LocalQueueAdmissionFairSharingStatus | None = None


class LocalQueueStatus(KubeModel):
    conditions: Conditions | None = None
    pending_workloads: Int32 | None = None
    reserving_workloads: Int32 | None = None
    admitted_workloads: Int32 | None = None
    flavors_reservation: LocalQueueFlavorUsages | None = None
    flavors_usage: LocalQueueFlavorUsages | None = None
    fair_sharing: LocalQueueFairSharingStatus | None = None


class LocalQueue(ApiObject):
    """A namespaced queue; Jobs select it with the label kueue.x-k8s.io/queue-name."""

    crd: ClassVar[CrdInfo] = CrdInfo(
        group=KUEUE_GROUP,
        version=KUEUE_VERSION,
        kind="LocalQueue",
        plural="localqueues",
        scope="Namespaced",
        short_names=("queue", "queues", "lq"),
        categories=("kueue",),
        printer_columns=(
            PrinterColumn("ClusterQueue", ".spec.clusterQueue", "string", "Backing ClusterQueue"),
            PrinterColumn("Pending Workloads", ".status.pendingWorkloads", "integer", "Number of pending workloads"),
            PrinterColumn(
                "Admitted Workloads",
                ".status.admittedWorkloads",
                "integer",
                "Number of admitted workloads that haven't finished yet.",
            ),
        ),
    )

    api_version: Literal["kueue.x-k8s.io/v1beta2"] = Field(default="kueue.x-k8s.io/v1beta2", alias="apiVersion")
    kind: Literal["LocalQueue"] = "LocalQueue"
    spec: LocalQueueSpec = Field(default_factory=LocalQueueSpec)
    status: LocalQueueStatus | None = None
