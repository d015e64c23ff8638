"""Descriptors of the Kubernetes resources kfed reads and writes, and their REST paths.

Every API call names its target with a :class:`Resource` instead of a generated client class, so one small
generic transport serves built-in kinds, Kueue's CRDs and kfed's own CRDs alike. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from federation.api import (
    AdmissionCheck,
    ClusterCapacity,
    ClusterQueue,
    Cohort,
    LocalQueue,
    MultiKueueCluster,
    MultiKueueConfig,
    ResourceFlavor,
    Topology,
    Workload,
    WorkloadPriorityClass,
)
from federation.api.base import ApiObject
from federation.api.provisioning import ProvisioningRequestConfig


@dataclass(frozen=True, slots=True)
class Resource:
    """One REST resource: ``group`` is ``""`` for the core API."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def label(self) -> str:
        """Short stable name for logs and metrics, e.g. ``jobs.batch`` or ``pods``."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def path(self, *, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        """REST path. Without ``name`` it is the collection (all namespaces when ``namespace`` is None)."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced:
            if namespace:
                base += f"/namespaces/{quote(namespace, safe='')}"
            elif name is not None:
                raise ValueError(f"{self.kind} is namespaced: a namespace is required to address {name!r}")
        elif namespace:
            raise ValueError(f"{self.kind} is cluster-scoped: got namespace {namespace!r}")
        base += f"/{self.plural}"
        if name is not None:
            if not name:
                raise ValueError(f"empty {self.kind} name")
            base += f"/{quote(name, safe='')}"
        if subresource:
            if name is None:
                raise ValueError("a subresource needs an object name")
            base += f"/{subresource}"
        return base


NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
LIMIT_RANGES = Resource("", "v1", "limitranges", "LimitRange", namespaced=True)
RUNTIME_CLASSES = Resource("node.k8s.io", "v1", "runtimeclasses", "RuntimeClass", namespaced=False)
PODS = Resource("", "v1", "pods", "Pod", namespaced=True)
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
SECRETS = Resource("", "v1", "secrets", "Secret", namespaced=True)
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount", namespaced=True)
CONFIG_MAPS = Resource("", "v1", "configmaps", "ConfigMap", namespaced=True)
API_SERVICES = Resource("apiregistration.k8s.io", "v1", "apiservices", "APIService", namespaced=False)
CORE_EVENTS = Resource("", "v1", "events", "Event", namespaced=True)
EVENTS = Resource("events.k8s.io", "v1", "events", "Event", namespaced=True)
JOBS = Resource("batch", "v1", "jobs", "Job", namespaced=True)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True)
POD_TEMPLATES = Resource("", "v1", "podtemplates", "PodTemplate", namespaced=True)
PRIORITY_CLASSES = Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False)
PROVISIONING_REQUESTS = Resource(
    "autoscaling.x-k8s.io", "v1", "provisioningrequests", "ProvisioningRequest", namespaced=True
)
"""The cluster autoscaler's kind (its CRD is a prerequisite of the ProvisioningRequest admission check)."""
SUBJECT_ACCESS_REVIEWS = Resource(
    "authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", namespaced=False
)
CRDS = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", namespaced=False)


def for_kind(kind: type[ApiObject]) -> Resource:
    """The REST resource of one of kfed's CRD kinds, from its model (one source of truth for group and names)."""
    crd = kind.crd
    return Resource(crd.group, crd.version, crd.plural, crd.kind, namespaced=crd.namespaced)


WORKLOADS = for_kind(Workload)
CLUSTER_QUEUES = for_kind(ClusterQueue)
LOCAL_QUEUES = for_kind(LocalQueue)
RESOURCE_FLAVORS = for_kind(ResourceFlavor)
COHORTS = for_kind(Cohort)
TOPOLOGIES = for_kind(Topology)
ADMISSION_CHECKS = for_kind(AdmissionCheck)
MULTIKUEUE_CONFIGS = for_kind(MultiKueueConfig)
MULTIKUEUE_CLUSTERS = for_kind(MultiKueueCluster)
WORKLOAD_PRIORITY_CLASSES = for_kind(WorkloadPriorityClass)
CLUSTER_CAPACITIES = for_kind(ClusterCapacity)
PROVISIONING_REQUEST_CONFIGS = for_kind(ProvisioningRequestConfig)

KUEUE_RESOURCES: tuple[Resource, ...] = (
    WORKLOADS,
    CLUSTER_QUEUES,
    LOCAL_QUEUES,
    RESOURCE_FLAVORS,
    COHORTS,
    TOPOLOGIES,
    ADMISSION_CHECKS,
    MULTIKUEUE_CONFIGS,
    MULTIKUEUE_CLUSTERS,
    WORKLOAD_PRIORITY_CLASSES,
)
