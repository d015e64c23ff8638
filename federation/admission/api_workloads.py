"""Adapters from raw Workload objects to the admission core: pod-set requests, scheduling constraints, usage.

Workloads are the hot path (thousands per worker), so they stay plain dicts and are read by path. Per-pod
requests are Kubernetes' effective requests (``federation.podspec``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from federation.admission import model as core
from federation.api.labels import JOB_UID_LABEL
from federation.api.workload import ADMITTED, FINISHED, QUOTA_RESERVED
from federation.conditions import find_condition, is_true, parse_time
from federation.limit_ranges import LimitRangeSummary, spec_as_run
from federation.podspec import Overheads, pod_requests
from federation.quantity import parse_quantity
from federation.reclaimable_pods import usable_count
from federation.topology.model import TopologyRequest

Obj = dict[str, Any]

PENDING, RESERVED, FINISHED_STATE, INACTIVE = "pending", "reserved", "finished", "inactive"


def workload_key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def workload_state(obj: Mapping[str, Any]) -> str:
    """``finished`` (holds nothing), ``reserved`` (holds quota), ``inactive`` (spec.active false) or ``pending``."""
    if is_true(obj, FINISHED):
        return FINISHED_STATE
    if is_true(obj, QUOTA_RESERVED):
        return RESERVED
    if (obj.get("spec") or {}).get("active") is False:
        return INACTIVE
    return PENDING


def is_admitted(obj: Mapping[str, Any]) -> bool:
    status = obj.get("status") or {}
    return bool(status.get("admission")) and is_true(obj, QUOTA_RESERVED) and is_true(obj, ADMITTED)


def _required_affinity(pod_spec: Mapping[str, Any]) -> tuple[tuple[core.NodeSelectorRequirement, ...], ...]:
    node_affinity = (pod_spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    terms = []
    for term in required.get("nodeSelectorTerms") or ():
        terms.append(
            tuple(
                core.NodeSelectorRequirement(
                    key=str(expr.get("key", "")),
                    operator=expr.get("operator", "In"),
                    values=tuple(str(v) for v in expr.get("values") or ()),
                )
                for expr in term.get("matchExpressions") or ()
            )
        )
    return tuple(terms)


def _tolerations(pod_spec: Mapping[str, Any]) -> tuple[core.Toleration, ...]:
    return tuple(
        core.Toleration(
            key=str(t.get("key") or ""),
            operator="Exists" if t.get("operator") == "Exists" else "Equal",
            value=str(t.get("value") or ""),
            effect=str(t.get("effect") or ""),
        )
        for t in pod_spec.get("tolerations") or ()
    )


@dataclass(frozen=True, slots=True)
class ResourceRules:
    """Kueue's ``resources`` configuration: which requested resources count for quota.

    ``exclude_prefixes`` (``excludeResourcePrefixes``): a resource whose name starts with one of them is ignored, as
    if the pods did not request it. ``ignore_undeclared`` (``quotaCheckStrategy: IgnoreUndeclared``): a resource the
    workload's ClusterQueue does not cover is ignored instead of blocking admission (Kueue's default
    ``BlockUndeclared`` leaves such a workload pending).
    """

    exclude_prefixes: tuple[str, ...] = ()
    ignore_undeclared: bool = False

    def counted(self, requests: Mapping[str, int]) -> dict[str, int]:
        if not self.exclude_prefixes:
            return dict(requests)
        return {name: amount for name, amount in requests.items() if not name.startswith(self.exclude_prefixes)}


ALL_RESOURCES = ResourceRules()


def without_undeclared(workload: core.Workload, covered: frozenset[str]) -> core.Workload:
    """``workload`` without the requests for resources outside ``covered`` (``IgnoreUndeclared``)."""
    if all(name in covered for ps in workload.pod_sets for name in ps.requests):
        return workload
    pod_sets = tuple(
        replace(ps, requests={name: amount for name, amount in ps.requests.items() if name in covered})
        for ps in workload.pod_sets
    )
    return replace(workload, pod_sets=pod_sets)


def core_pod_set(
    raw: Mapping[str, Any],
    *,
    rules: ResourceRules = ALL_RESOURCES,
    limits: LimitRangeSummary | None = None,
    overheads: Overheads = (),
) -> core.PodSet:
    """One ``spec.podSets[]`` entry, requests filtered by ``rules``, with the defaults of its namespace's LimitRanges
    (``limits``) for what its containers leave out and its RuntimeClass's overhead (``overheads``) when it sets
    none; raises ``ValueError`` on an unparsable quantity."""
    template = raw.get("template") or {}
    pod_spec = spec_as_run(template.get("spec") or {}, limits, overheads)
    min_count = raw.get("minCount")
    return core.PodSet(
        name=str(raw.get("name") or "main"),
        count=int(raw.get("count", 1)),
        requests=rules.counted(pod_requests(pod_spec)),
        min_count=int(min_count) if min_count is not None else None,
        node_selector=dict(pod_spec.get("nodeSelector") or {}),
        required_affinity=_required_affinity(pod_spec),
        tolerations=_tolerations(pod_spec),
        topology_request=asks_for_topology(raw),
    )


def asks_for_topology(raw: Mapping[str, Any]) -> bool:
    """Whether a ``spec.podSets[]`` entry asks for a topology: Kueue's required, preferred or unconstrained
    annotation on its template, or the same in its ``topologyRequest``."""
    return TopologyRequest.of_pod_set(raw).asks


def pod_set_usage(
    workload: Mapping[str, Any],
    counts: Mapping[str, int],
    *,
    rules: ResourceRules = ALL_RESOURCES,
    limits: LimitRangeSummary | None = None,
    overheads: Overheads = (),
) -> list[tuple[str, dict[str, int]]]:
    """Each pod set's name and its requests for ``counts[name]`` of its pods (all of them when it is not in
    ``counts``), as the LimitRanges ``limits`` and the RuntimeClasses' ``overheads`` of a cluster make its pods: what
    that cluster's quota charges for ``workload`` (a raw Workload); raises ``ValueError`` on an unparsable
    quantity."""
    found = []
    for raw in (workload.get("spec") or {}).get("podSets") or ():
        pod_set = core_pod_set(raw, rules=rules, limits=limits, overheads=overheads)
        count = counts.get(pod_set.name, pod_set.count)
        found.append((pod_set.name, {name: amount * count for name, amount in pod_set.requests.items() if amount}))
    return found


@dataclass(frozen=True, slots=True)
class QueuedWorkload:
    """A pending workload resolved to its ClusterQueue, ready for the core."""

    workload: core.Workload
    raw: Obj


def core_workload(
    obj: Mapping[str, Any],
    *,
    cluster_queue: str,
    rules: ResourceRules = ALL_RESOURCES,
    limits: LimitRangeSummary | None = None,
    overheads: Overheads = (),
) -> core.Workload:
    """The core's view of a workload (``rules.exclude_prefixes`` applied, the namespace's LimitRange defaults
    ``limits`` and the RuntimeClasses' ``overheads`` laid in); raises ``ValueError`` on malformed pod sets."""
    spec = obj.get("spec") or {}
    meta = obj.get("metadata") or {}
    return core.Workload(
        key=workload_key(obj),
        cluster_queue=cluster_queue,
        pod_sets=tuple(
            core_pod_set(ps, rules=rules, limits=limits, overheads=overheads) for ps in spec.get("podSets") or ()
        ),
        priority=int(spec.get("priority") or 0),
        creation_time=epoch_seconds(meta.get("creationTimestamp")) or 0.0,
        uid=str(meta.get("uid") or ""),
        job_uid=str((meta.get("labels") or {}).get(JOB_UID_LABEL) or ""),
    )


def reserved_usage(obj: Mapping[str, Any]) -> dict[core.FlavorResource, int]:
    """What a quota-holding workload uses, from ``status.admission`` (``resourceUsage`` per assigned flavor), less
    what its reclaimable pods gave back (``status.reclaimablePods``, Kueue's ``ReclaimablePods``)."""
    usage: dict[core.FlavorResource, int] = {}
    status = obj.get("status") or {}
    admission = status.get("admission") or {}
    reclaims = bool(status.get("reclaimablePods"))
    for assignment in admission.get("podSetAssignments") or ():
        flavors = assignment.get("flavors") or {}
        count = int(assignment.get("count") or 0)
        usable = usable_count(obj, str(assignment.get("name")), count) if reclaims and count > 0 else count
        for resource, quantity in (assignment.get("resourceUsage") or {}).items():
            flavor = flavors.get(resource)
            if flavor is None:
                continue
            key = (str(flavor), str(resource))
            amount = parse_quantity(str(quantity))
            if usable != count:
                amount = amount * usable // count
            usage[key] = usage.get(key, 0) + amount
    return usage


def reserved_cluster_queue(obj: Mapping[str, Any]) -> str | None:
    admission = (obj.get("status") or {}).get("admission") or {}
    queue = admission.get("clusterQueue")
    return str(queue) if queue else None


def epoch_seconds(text: object) -> float | None:
    """Seconds since the epoch of an RFC 3339 timestamp, or None when absent or malformed."""
    if not isinstance(text, str) or not text:
        return None
    try:
        return parse_time(text).timestamp()
    except ValueError:
        return None


def reserved_at(obj: Mapping[str, Any]) -> float:
    found = find_condition(obj, QUOTA_RESERVED)
    return (epoch_seconds(found.get("lastTransitionTime")) if found else None) or 0.0
