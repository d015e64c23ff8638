"""Does a suspended Job's Workload still describe the Job? (pure)

While a Job waits suspended, its user may still edit it: ``parallelism`` and ``completions`` (the pod count), the
``kueue.x-k8s.io/job-min-parallelism`` annotation (the ``minCount``) and the pod template's tolerations. A Workload
that kept the old values would reserve quota for pods the Job no longer has, or too few for those it now has, and
its copy on the worker would be admitted for one size while the Job copy runs another. Kueue compares the two on
every reconcile and, for a suspended Job, brings the Workload in line: a Workload holding no quota gets the Job's
new pod sets (Event ``UpdatedWorkload`` on the Job); one holding quota is deleted, which releases the quota and
withdraws any copy, and a new Workload is queued for the Job (Event ``DeletedWorkload``).

What is compared is what Kueue compares and a suspended Job can change: the pod count, ``minCount``, the
tolerations (not once the Workload is admitted: admission may add a flavor's), and each container's resource
requests and limits, as quantities ("1000m" is "1"), where the cluster lets a suspended Job's resources change.
A running Job is not compared: its template is immutable, and a count edited while it runs reaches neither the
Workload nor the copy (Kueue would stop such a Job and queue it again; kfed does not yet).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import Any

from federation.conditions import is_true
from federation.quantity import parse_quantity


class WorkloadEdit(enum.Enum):
    """What a suspended Job's edit asks of its existing Workload."""

    KEEP = "keep"
    UPDATE = "update"
    """The Workload holds no quota: its pod sets become the Job's."""
    REPLACE = "replace"
    """The Workload holds quota: delete it; the Job gets a new one, queued from the start."""


def _quantities(values: Mapping[str, Any] | None) -> dict[str, int | str]:
    out: dict[str, int | str] = {}
    for name, text in (values or {}).items():
        try:
            out[name] = parse_quantity(str(text))
        except ValueError:
            out[name] = str(text)  # the apiserver validated it; compare it as written
    return out


_Resources = tuple[str, dict[str, int | str], dict[str, int | str]]


def _container_resources(containers: Sequence[Mapping[str, Any]] | None) -> list[_Resources]:
    return [
        (
            str(c.get("name")),
            _quantities((c.get("resources") or {}).get("requests")),
            _quantities((c.get("resources") or {}).get("limits")),
        )
        for c in containers or ()
    ]


def _pod_set_key(pod_set: Mapping[str, Any], *, with_tolerations: bool) -> tuple[object, ...]:
    spec = (pod_set.get("template") or {}).get("spec") or {}
    return (
        pod_set.get("name"),
        int(pod_set.get("count", 1)),
        pod_set.get("minCount"),
        _container_resources(spec.get("containers")),
        _container_resources(spec.get("initContainers")),
        (spec.get("tolerations") or []) if with_tolerations else None,
    )


def pod_sets_match(
    wanted: Sequence[Mapping[str, Any]], existing: Sequence[Mapping[str, Any]], *, admitted: bool
) -> bool:
    """Whether the pod sets built from the Job now (``wanted``) are those the Workload has."""
    if len(wanted) != len(existing):
        return False
    return all(
        _pod_set_key(a, with_tolerations=not admitted) == _pod_set_key(b, with_tolerations=not admitted)
        for a, b in zip(wanted, existing, strict=True)
    )


def edit_for_suspended_job(
    job: Mapping[str, Any], workload: Mapping[str, Any], *, wanted_pod_sets: Sequence[Mapping[str, Any]]
) -> WorkloadEdit:
    """What to do with ``workload`` now that its Job's pod sets are ``wanted_pod_sets``."""
    if not (job.get("spec") or {}).get("suspend", False):
        return WorkloadEdit.KEEP
    if is_true(workload, "Finished") or (workload.get("metadata") or {}).get("deletionTimestamp"):
        return WorkloadEdit.KEEP
    existing = (workload.get("spec") or {}).get("podSets") or []
    if pod_sets_match(wanted_pod_sets, existing, admitted=is_true(workload, "Admitted")):
        return WorkloadEdit.KEEP
    return WorkloadEdit.REPLACE if is_true(workload, "QuotaReserved") else WorkloadEdit.UPDATE
