"""Scalar field types shared by every kind: names, quantities, sized integers and timestamps.

Each type is an `Annotated` alias that both validates in Python (like the apiserver would) and tells the CRD
generator how to publish it. Quantities stay the strings (or integers) the user wrote; arithmetic on them lives in
`federation.quantity`, not here, so the models round-trip byte for byte.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, Field, Strict, StrictInt, StrictStr

from federation.api.schema import QUANTITY_PATTERN, Crd

DNS1123_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
DNS1123_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
QUALIFIED_NAME = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
"""A label key / condition type: optional DNS-subdomain prefix and a name part."""

_QUANTITY_RE = re.compile(QUANTITY_PATTERN)
_RFC3339_RE = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _check_int32(value: int) -> int:
    if not INT32_MIN <= value <= INT32_MAX:
        raise ValueError(f"{value} does not fit in int32")
    return value


def _check_int64(value: int) -> int:
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"{value} does not fit in int64")
    return value


def _check_quantity(value: str | int) -> str | int:
    if isinstance(value, str) and not _QUANTITY_RE.fullmatch(value):
        raise ValueError(f"{value!r} is not a Kubernetes quantity (e.g. '500m', '2Gi', '1.5', 4)")
    return value


def _check_time(value: str) -> str:
    if not _RFC3339_RE.fullmatch(value):
        raise ValueError(f"{value!r} is not an RFC 3339 date-time (e.g. '2025-01-02T03:04:05Z')")
    return value


Int32 = Annotated[int, Strict(), AfterValidator(_check_int32), Crd(format="int32")]
Int64 = Annotated[int, Strict(), AfterValidator(_check_int64), Crd(format="int64")]
Bool = Annotated[bool, Strict()]

Quantity = Annotated[
    StrictStr | StrictInt,
    AfterValidator(_check_quantity),
    Crd(int_or_string=True, pattern=QUANTITY_PATTERN),
]
"""A resource.Quantity as written: '500m', '2Gi', 4. Integers and strings are both accepted and kept as given."""

Time = Annotated[StrictStr, AfterValidator(_check_time), Crd(format="date-time")]
"""A metav1.Time, kept as its RFC 3339 text."""

DnsName = Annotated[StrictStr, Field(max_length=253, pattern=DNS1123_SUBDOMAIN)]
"""An object name / reference validated as a DNS-1123 subdomain (Kueue's *Reference types)."""
ClusterQueueReference = DnsName
CohortReference = DnsName
ResourceFlavorReference = DnsName
TopologyReference = DnsName
LocalQueueName = DnsName

PodSetReference = Annotated[StrictStr, Field(max_length=63, pattern=DNS1123_LABEL)]
AdmissionCheckReference = Annotated[StrictStr, Field(min_length=1, max_length=316)]

ResourceName = Annotated[StrictStr, Field(min_length=1, max_length=317)]
"""A corev1.ResourceName (cpu, memory, vendor.com/gpu). Bounded so CEL rules over resource lists stay cheap."""

ResourceList = dict[str, Quantity]
"""A corev1.ResourceList: resource name to quantity."""

StringMap = dict[str, StrictStr]


def is_quantity(value: Any) -> bool:
    """Whether `value` is a valid quantity as the CRD accepts it (a non-bool int or a matching string)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, str) and _QUANTITY_RE.fullmatch(value) is not None
