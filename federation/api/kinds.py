"""The registry of every kind kfed serves, and parsing of arbitrary manifests into the right model."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from federation.api.admissioncheck import AdmissionCheck
from federation.api.base import ApiObject
from federation.api.capacity import ClusterCapacity
from federation.api.clusterqueue import ClusterQueue
from federation.api.cohort import Cohort
from federation.api.localqueue import LocalQueue
from federation.api.multikueue import MultiKueueCluster, MultiKueueConfig
from federation.api.priority import WorkloadPriorityClass
from federation.api.provisioning import ProvisioningRequestConfig
from federation.api.resourceflavor import ResourceFlavor
from federation.api.schema import model_schema, prune
from federation.api.topology import Topology
from federation.api.workload import Workload

ALL_KINDS: tuple[type[ApiObject], ...] = (
    ResourceFlavor,
    ClusterQueue,
    LocalQueue,
    Cohort,
    Workload,
    WorkloadPriorityClass,
    Topology,
    AdmissionCheck,
    MultiKueueConfig,
    MultiKueueCluster,
    ProvisioningRequestConfig,
    ClusterCapacity,
)
"""Every top-level kind, in the order CRDs are listed."""

_BY_TYPE: dict[tuple[str, str], type[ApiObject]] = {(k.crd.api_version, k.crd.kind): k for k in ALL_KINDS}


class UnknownKind(LookupError):
    """A manifest's apiVersion/kind is not one kfed models."""


def model_for(api_version: str, kind: str) -> type[ApiObject]:
    try:
        return _BY_TYPE[(api_version, kind)]
    except KeyError:
        raise UnknownKind(f"kfed does not model {kind} in {api_version}") from None


def parse_object(obj: Mapping[str, Any], *, lenient: bool = False) -> ApiObject:
    """Validate a manifest (as decoded JSON/YAML) into its model.

    With `lenient`, fields kfed does not model are dropped first, the way an apiserver with kfed's CRDs would
    prune them; use it to read objects written by a newer Kueue. Without it, unknown fields are an error.
    """
    model = model_for(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
    if lenient:
        obj = prune(model_schema(model), dict(obj))
    return model.model_validate(obj)
