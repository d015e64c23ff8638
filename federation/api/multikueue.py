"""MultiKueueConfig and MultiKueueCluster (kueue.x-k8s.io/v1beta2): which worker clusters, and how to reach them."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, StrictStr

from federation.api.base import (
    AGE_COLUMN,
    KUEUE_GROUP,
    KUEUE_VERSION,
    ApiObject,
    CrdInfo,
    KubeModel,
    PrinterColumn,
)
from federation.api.core import Conditions
from federation.api.schema import Crd

LocationType = Literal["Secret", "Path"]
QuotaManagement = Literal["Manual", "Automated"]
"""Kueue's ``MultiKueueConfigQuotaManagementMode``: ``Automated`` makes the quota of each manager ClusterQueue using
the config follow the sum of its workers' ClusterQueues (condition ``MultiKueueManagerQuotaAutomation``)."""
KUBECONFIG_SECRET_KEY = "kubeconfig"
"""The key of a MultiKueueCluster's Secret that holds the kubeconfig."""


class KubeConfig(KubeModel):
    """Where the worker's kubeconfig is: a Secret in the controller's namespace (default) or a file path."""

    location: Annotated[StrictStr, Field(min_length=1, max_length=256)]
    location_type: Annotated[LocationType, Crd(defaulted=True)] = "Secret"


class ClusterSource(KubeModel):
    kube_config: KubeConfig


class MultiKueueClusterSpec(KubeModel):
    cluster_source: ClusterSource


class MultiKueueClusterStatus(KubeModel):
    conditions: Conditions | None = None


class MultiKueueCluster(ApiObject):
    """A worker cluster and how to connect to it."""

    crd: ClassVar[CrdInfo] = CrdInfo(
        group=KUEUE_GROUP,
        version=KUEUE_VERSION,
        kind="MultiKueueCluster",
        plural="multikueueclusters",
        short_names=("mkc",),
        scope="Cluster",
        categories=("kueue",),
        printer_columns=(
            PrinterColumn(
                "Connected",
                ".status.conditions[?(@.type=='Active')].status",
                "string",
                "MultiKueueCluster is connected",
            ),
            AGE_COLUMN,
        ),
    )

    api_version: Literal["kueue.x-k8s.io/v1beta2"] = Field(default="kueue.x-k8s.io/v1beta2", alias="apiVersion")
    kind: Literal["MultiKueueCluster"] = "MultiKueueCluster"
    spec: MultiKueueClusterSpec
    status: MultiKueueClusterStatus | None = None


class MultiKueueConfigSpec(KubeModel):
    clusters: Annotated[
        list[Annotated[StrictStr, Field(max_length=256)]],
        Field(min_length=1, max_length=20),
        Crd(list_type="set"),
    ]
    quota_management: QuotaManagement | None = None
    """How the quota of the manager ClusterQueues using this config is managed: Manual (the default) or Automated."""


class MultiKueueConfig(ApiObject):
    """The ordered list of MultiKueueClusters a MultiKueue AdmissionCheck dispatches to."""

    crd: ClassVar[CrdInfo] = CrdInfo(
        group=KUEUE_GROUP,
        version=KUEUE_VERSION,
        kind="MultiKueueConfig",
        plural="multikueueconfigs",
        short_names=("mkconf",),
        scope="Cluster",
        categories=("kueue",),
        status_subresource=False,
    )

    api_version: Literal["kueue.x-k8s.io/v1beta2"] = Field(default="kueue.x-k8s.io/v1beta2", alias="apiVersion")
    kind: Literal["MultiKueueConfig"] = "MultiKueueConfig"
    spec: MultiKueueConfigSpec
