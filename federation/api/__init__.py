"""Pydantic models of kfed's API (Kueue v1beta2 kinds and kfed's ClusterCapacity) and CRD generation. Pure."""

from __future__ import annotations

from federation.api.admissioncheck import AdmissionCheck, AdmissionCheckSpec
from federation.api.base import ApiObject, CrdInfo, KubeModel
from federation.api.capacity import ClusterCapacity, ClusterCapacityStatus
from federation.api.clusterqueue import ClusterQueue, ClusterQueueSpec, ClusterQueueStatus
from federation.api.cohort import Cohort, CohortSpec
from federation.api.core import Condition
from federation.api.kinds import ALL_KINDS, UnknownKind, model_for, parse_object
from federation.api.localqueue import LocalQueue, LocalQueueSpec, LocalQueueStatus
from federation.api.meta import ObjectMeta, OwnerReference
from federation.api.multikueue import MultiKueueCluster, MultiKueueConfig
from federation.api.priority import WorkloadPriorityClass
from federation.api.resourceflavor import ResourceFlavor, ResourceFlavorSpec
from federation.api.topology import Topology, TopologySpec
from federation.api.workload import PodSet, Workload, WorkloadSpec, WorkloadStatus

__all__ = [
    "ALL_KINDS",
    "AdmissionCheck",
    "AdmissionCheckSpec",
    "ApiObject",
    "ClusterCapacity",
    "ClusterCapacityStatus",
    "ClusterQueue",
    "ClusterQueueSpec",
    "ClusterQueueStatus",
    "Cohort",
    "CohortSpec",
    "Condition",
    "CrdInfo",
    "KubeModel",
    "LocalQueue",
    "LocalQueueSpec",
    "LocalQueueStatus",
    "MultiKueueCluster",
    "MultiKueueConfig",
    "ObjectMeta",
    "OwnerReference",
    "PodSet",
    "ResourceFlavor",
    "ResourceFlavorSpec",
    "Topology",
    "TopologySpec",
    "UnknownKind",
    "Workload",
    "WorkloadPriorityClass",
    "WorkloadSpec",
    "WorkloadStatus",
    "model_for",
    "parse_object",
]
