"""WorkloadPriorityClass (kueue.x-k8s.io/v1beta2): a named priority value Jobs select by label."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, StrictStr

from federation.api.base import KUEUE_GROUP, KUEUE_VERSION, ApiObject, CrdInfo, PrinterColumn
from federation.api.common import Int32


class WorkloadPriorityClass(ApiObject):
    """A priority for workloads, independent of the pods' own PriorityClass. Fields are top-level, no spec."""

    crd: ClassVar[CrdInfo] = CrdInfo(
        group=KUEUE_GROUP,
        version=KUEUE_VERSION,
        kind="WorkloadPriorityClass",
        plural="workloadpriorityclasses",
        scope="Cluster",
        short_names=("wpc",),
        categories=("kueue",),
        printer_columns=(PrinterColumn("Value", ".value", "integer", "Value of workloadPriorityClass's Priority"),),
        status_subresource=False,
    )

    api_version: Literal["kueue.x-k8s.io/v1beta2"] = Field(default="kueue.x-k8s.io/v1beta2", alias="apiVersion")
    kind: Literal["WorkloadPriorityClass"] = "WorkloadPriorityClass"
    value: Int32
    description: Annotated[StrictStr, Field(max_length=2048)] | None = None
