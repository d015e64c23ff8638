"""Descriptors of the Kubernetes resources kfed reads and writes, and their REST paths.

Every API call names its target with a :class:`Resource` instead of a generated client class, so one small
generic transport serves built-in kinds, Kueue's CRDs and kfed's own CRDs alike. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote


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


_KUEUE = "kueue.x-k8s.io"
_KUEUE_VERSION = "v1beta2"

NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
PODS = Resource("", "v1", "pods", "Pod", namespaced=True)
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
SECRETS = Resource("", "v1", "secrets", "Secret", namespaced=True)
CONFIG_MAPS = Resource("", "v1", "configmaps", "ConfigMap", namespaced=True)
CORE_EVENTS = Resource("", "v1", "events", "Event", namespaced=True)
EVENTS = Resource("events.k8s.io", "v1", "events", "Event", namespaced=True)
JOBS = Resource("batch", "v1", "jobs", "Job", namespaced=True)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True)
CRDS = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", namespaced=False)

WORKLOADS = Resource(_KUEUE, _KUEUE_VERSION, "workloads", "Workload", namespaced=True)
CLUSTER_QUEUES = Resource(_KUEUE, _KUEUE_VERSION, "clusterqueues", "ClusterQueue", namespaced=False)
LOCAL_QUEUES = Resource(_KUEUE, _KUEUE_VERSION, "localqueues", "LocalQueue", namespaced=True)
RESOURCE_FLAVORS = Resource(_KUEUE, _KUEUE_VERSION, "resourceflavors", "ResourceFlavor", namespaced=False)
COHORTS = Resource(_KUEUE, _KUEUE_VERSION, "cohorts", "Cohort", namespaced=False)
TOPOLOGIES = Resource(_KUEUE, _KUEUE_VERSION, "topologies", "Topology", namespaced=False)
ADMISSION_CHECKS = Resource(_KUEUE, _KUEUE_VERSION, "admissionchecks", "AdmissionCheck", namespaced=False)
MULTIKUEUE_CONFIGS = Resource(_KUEUE, _KUEUE_VERSION, "multikueueconfigs", "MultiKueueConfig", namespaced=False)
MULTIKUEUE_CLUSTERS = Resource(_KUEUE, _KUEUE_VERSION, "multikueueclusters", "MultiKueueCluster", namespaced=False)
WORKLOAD_PRIORITY_CLASSES = Resource(
    _KUEUE, _KUEUE_VERSION, "workloadpriorityclasses", "WorkloadPriorityClass", namespaced=False
)

CLUSTER_CAPACITIES = Resource("kfed.io", "v1alpha1", "clustercapacities", "ClusterCapacity", namespaced=False)

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
