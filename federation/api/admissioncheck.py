"""AdmissionCheck (kueue.x-k8s.io/v1beta2): a gate a workload must pass besides quota (MultiKueue is one)."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, StrictStr

from federation.api.base import KUEUE_GROUP, KUEUE_VERSION, ApiObject, CrdInfo, KubeModel
from federation.api.common import DNS1123_LABEL, DNS1123_SUBDOMAIN
from federation.api.core import Conditions
from federation.api.schema import Crd, Rule

CheckState = Literal["Pending", "Ready", "Retry", "Rejected"]
MULTIKUEUE_CONTROLLER_NAME = "kueue.x-k8s.io/multikueue"


class AdmissionCheckParametersReference(KubeModel):
    api_group: Annotated[StrictStr, Field(min_length=1, max_length=253, pattern=DNS1123_SUBDOMAIN)]
    kind: Annotated[StrictStr, Field(min_length=1, max_length=63, pattern=r"^(?i)[a-z]([-a-z0-9]*[a-z0-9])?$")]
    name: Annotated[StrictStr, Field(min_length=1, max_length=63, pattern=DNS1123_LABEL)]


class AdmissionCheckSpec(KubeModel):
    controller_name: Annotated[
        StrictStr, Field(min_length=1, max_length=253), Crd(rules=(Rule("self == oldSelf", "field is immutable"),))
    ]
    parameters: AdmissionCheckParametersReference | None = None


class AdmissionCheckStatus(KubeModel):
    conditions: Conditions | None = None


class AdmissionCheck(ApiObject):
    """An admission check, processed by the controller named in spec.controllerName."""

    crd: ClassVar[CrdInfo] = CrdInfo(
        group=KUEUE_GROUP,
        version=KUEUE_VERSION,
        kind="AdmissionCheck",
        plural="admissionchecks",
        short_names=("ac",),
        scope="Cluster",
        categories=("kueue",),
    )

    api_version: Literal["kueue.x-k8s.io/v1beta2"] = Field(default="kueue.x-k8s.io/v1beta2", alias="apiVersion")
    kind: Literal["AdmissionCheck"] = "AdmissionCheck"
    spec: AdmissionCheckSpec
    status: AdmissionCheckStatus | None = None
