"""Cohort (kueue.x-k8s.io/v1beta2): a node in the tree of ClusterQueues that borrow from each other."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from federation.api.base import (
    KUEUE_GROUP,
    KUEUE_VERSION,
    ApiObject,
    CrdInfo,
    KubeModel,
)
from federation.api.common import CohortReference
from federation.api.quota import FairSharing, FairSharingStatus, ResourceGroups
from federation.api.schema import Rule


def _no_limit_without_parent(spec: CohortSpec, *, limit: str) -> bool:
    if spec.parent_name is not None:
        return True
    return all(getattr(r, limit) is None for rg in spec.resource_groups or () for f in rg.flavors for r in f.resources)


class CohortSpec(KubeModel):
    # Kueue rejects these in its webhook; kfed has no webhook, so the CRD carries the same checks as CEL.
    __crd_rules__ = (
        Rule(
            "!has(self.parentName) && has(self.resourceGroups) ? self.resourceGroups.all(rg, rg.flavors.all(f, "
            "f.resources.all(r, !has(r.borrowingLimit)))) : true",
            "borrowingLimit must be nil when parentName is empty",
            lambda s: _no_limit_without_parent(s, limit="borrowing_limit"),
        ),
        Rule(
            "!has(self.parentName) && has(self.resourceGroups) ? self.resourceGroups.all(rg, rg.flavors.all(f, "
            "f.resources.all(r, !has(r.lendingLimit)))) : true",
            "lendingLimit must be nil when parentName is empty",
            lambda s: _no_limit_without_parent(s, limit="lending_limit"),
        ),
    )

    parent_name: CohortReference | None = None
    resource_groups: ResourceGroups | None = None
    fair_sharing: FairSharing | None = None


class CohortStatus(KubeModel):
    fair_sharing: FairSharingStatus | None = None


class Cohort(ApiObject):
    """A Cohort: shared quota and limits for the ClusterQueues and Cohorts below it (a cycle disables the tree)."""

    crd: ClassVar[CrdInfo] = CrdInfo(
        group=KUEUE_GROUP,
        version=KUEUE_VERSION,
        kind="Cohort",
        plural="cohorts",
        short_names=("co",),
        scope="Cluster",
        categories=("kueue",),
    )

    api_version: Literal["kueue.x-k8s.io/v1beta2"] = Field(default="kueue.x-k8s.io/v1beta2", alias="apiVersion")
    kind: Literal["Cohort"] = "Cohort"
    spec: CohortSpec = Field(default_factory=CohortSpec)
    status: CohortStatus | None = None
