"""Quota structures shared by ClusterQueue and Cohort: resource groups, per-flavor quotas, usage, fair sharing."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from federation.api.base import KubeModel
from federation.api.common import Int64, Quantity, ResourceFlavorReference, ResourceList, ResourceName, Time
from federation.api.schema import Crd, Rule


class ResourceQuota(KubeModel):
    """Quota of one resource in one flavor."""

    name: ResourceName
    nominal_quota: Quantity
    borrowing_limit: Quantity | None = None
    lending_limit: Quantity | None = None


class FlavorQuotas(KubeModel):
    """The quotas a flavor provides, one per covered resource, in coveredResources order."""

    name: ResourceFlavorReference
    resources: Annotated[
        list[ResourceQuota], Field(min_length=1, max_length=64), Crd(list_type="map", map_keys=("name",))
    ]


class ResourceGroup(KubeModel):
    """Resources that share a list of flavors; every flavor lists exactly the covered resources, in order."""

    __crd_rules__ = (
        Rule(
            "self.flavors.all(x, size(x.resources) == size(self.coveredResources))",
            "flavors must have the same number of resources as the coveredResources",
            lambda rg: all(len(f.resources) == len(rg.covered_resources) for f in rg.flavors),
        ),
        Rule(
            "self.flavors.all(x, x.resources.map(r, r.name) == self.coveredResources)",
            "each flavor must list the coveredResources, in the same order",
            lambda rg: all([r.name for r in f.resources] == rg.covered_resources for f in rg.flavors),
        ),
    )

    covered_resources: Annotated[list[ResourceName], Field(min_length=1, max_length=64), Crd(list_type="atomic")]
    flavors: Annotated[list[FlavorQuotas], Field(min_length=1, max_length=64), Crd(list_type="map", map_keys=("name",))]


ResourceGroups = Annotated[list[ResourceGroup], Field(max_length=16), Crd(list_type="atomic")]


class FairSharing(KubeModel):
    """Fair-sharing properties of a ClusterQueue, Cohort or LocalQueue."""

    weight: Annotated[Quantity, Crd(defaulted=True)] = 1


class AdmissionFairSharingStatus(KubeModel):
    consumed_resources: ResourceList
    last_update: Time


class FairSharingStatus(KubeModel):
    """Current fair-sharing state of a ClusterQueue, Cohort or LocalQueue."""

    weighted_share: Int64
    admission_fair_sharing_status: AdmissionFairSharingStatus | None = None


class ResourceUsage(KubeModel):
    name: ResourceName
    total: Quantity | None = None
    borrowed: Quantity | None = None


class FlavorUsage(KubeModel):
    """Quota used (or reserved) in one flavor, per resource."""

    name: ResourceFlavorReference
    resources: Annotated[list[ResourceUsage], Field(max_length=64), Crd(list_type="map", map_keys=("name",))]


FlavorUsages = Annotated[list[FlavorUsage], Field(max_length=64), Crd(list_type="map", map_keys=("name",))]
