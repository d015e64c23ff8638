"""ProvisioningRequestConfig (kueue.x-k8s.io/v1beta2): the parameters of a ProvisioningRequest admission check.

An AdmissionCheck with ``controllerName: kueue.x-k8s.io/provisioning-request`` names one of these in
``spec.parameters``; the agent's provisioning controller (``worker_agent.provisioning``) turns each Workload that
reserved quota behind such a check into an ``autoscaling.x-k8s.io/v1`` ProvisioningRequest of this class. Field
names, bounds and defaults are Kueue's. The ProvisioningRequest CRD itself belongs to the cluster autoscaler and is
a prerequisite of the worker, not part of kfed's CRDs.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, StrictStr

from federation.api.base import KUEUE_GROUP, KUEUE_VERSION, ApiObject, CrdInfo, KubeModel
from federation.api.common import DNS1123_SUBDOMAIN, Int32, ResourceName
from federation.api.schema import Crd

PROVISIONING_REQUEST_CONTROLLER_NAME = "kueue.x-k8s.io/provisioning-request"

DEFAULTED = Crd(defaulted=True)

PodSetMergePolicy = Literal["IdenticalPodTemplates", "IdenticalWorkloadSchedulingRequirements"]


class ProvisioningRequestRetryStrategy(KubeModel):
    """Retries of a failed request: about ``backoffBaseSeconds * 2^(n-1)`` apart, capped at ``backoffMaxSeconds``;
    after ``backoffLimitCount`` retries the check is Rejected (0 switches retrying off)."""

    backoff_limit_count: Annotated[Int32, DEFAULTED] | None = 3
    backoff_base_seconds: Annotated[Int32, DEFAULTED] | None = 60
    backoff_max_seconds: Annotated[Int32, DEFAULTED] | None = 1800


class ProvisioningRequestPodSetUpdatesNodeSelector(KubeModel):
    key: Annotated[
        StrictStr,
        Field(
            min_length=1,
            max_length=317,
            pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
            r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
        ),
    ]
    value_from_provisioning_class_detail: Annotated[StrictStr, Field(min_length=1, max_length=32768)]


class ProvisioningRequestPodSetUpdates(KubeModel):
    node_selector: (
        Annotated[
            list[ProvisioningRequestPodSetUpdatesNodeSelector],
            Field(max_length=8),
            Crd(list_type="map", map_keys=("key",)),
        ]
        | None
    ) = None


class ProvisioningRequestConfigSpec(KubeModel):
    provisioning_class_name: Annotated[StrictStr, Field(min_length=1, max_length=253, pattern=DNS1123_SUBDOMAIN)]
    parameters: Annotated[dict[str, Annotated[StrictStr, Field(max_length=255)]], Field(max_length=100)] | None = None
    managed_resources: Annotated[list[ResourceName], Field(max_length=100), Crd(list_type="set")] | None = None
    retry_strategy: Annotated[ProvisioningRequestRetryStrategy, DEFAULTED] = Field(
        default_factory=ProvisioningRequestRetryStrategy
    )
    pod_set_updates: ProvisioningRequestPodSetUpdates | None = None
    pod_set_merge_policy: PodSetMergePolicy | None = None


class ProvisioningRequestConfig(ApiObject):
    """How a ProvisioningRequest admission check asks the cluster autoscaler for capacity."""

    crd: ClassVar[CrdInfo] = CrdInfo(
        group=KUEUE_GROUP,
        version=KUEUE_VERSION,
        kind="ProvisioningRequestConfig",
        plural="provisioningrequestconfigs",
        short_names=("prc",),
        scope="Cluster",
        categories=("kueue",),
        status_subresource=False,
    )

    api_version: Literal["kueue.x-k8s.io/v1beta2"] = Field(default="kueue.x-k8s.io/v1beta2", alias="apiVersion")
    kind: Literal["ProvisioningRequestConfig"] = "ProvisioningRequestConfig"
    spec: ProvisioningRequestConfigSpec
