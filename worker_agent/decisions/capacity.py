"""The contents of the worker's ClusterCapacity report: per ClusterQueue and flavor, nominal quota, usage, free
quota and borrowing headroom per resource, plus which ClusterQueue each LocalQueue feeds (and whether that
ClusterQueue admits from it at all: a stopped LocalQueue, a namespace it does not select), and per TAS flavor the
free capacity of every topology domain above the node level (blocks, racks).

Computed from the same snapshot local admission uses, after the pass's admissions, so the report never disagrees
with what the agent just admitted. ``free`` is ``nominal - usage`` (never negative); ``borrowingHeadroom`` (only
for ClusterQueues in a cohort) is what the queue could take now beyond its free nominal quota, i.e. the core's
``available`` minus ``free``. ``flavors`` lists, for each existing ResourceFlavor a reported ClusterQueue names,
the node labels and tolerations the agent injects into a Job's pod template when it starts it
(``decisions.jobs.start_decision``), so that the manager can create a Job copy already placed. Generation and time
are the publisher's business; this module is pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from federation.admission.api_quotas import FlavorInfo
from federation.admission.api_state import LocalQueueInfo, QuotaState
from federation.admission.snapshot import ClusterQueueNode
from federation.limit_ranges import limit_range_entry
from federation.quantity import format_amount

Obj = dict[str, Any]


def _flavor_entries(state: QuotaState, node: ClusterQueueNode) -> list[Obj]:
    snapshot = state.snapshot
    in_cohort = node.parent is not None
    entries: list[Obj] = []
    for group in node.spec.resource_groups:
        for flavor in group.flavors:
            resources: list[Obj] = []
            for quota in flavor.resources:
                key = (flavor.name, quota.name)
                usage = max(0, node.usage.get(key, 0))
                free = max(0, quota.nominal - usage)
                entry: Obj = {
                    "name": quota.name,
                    "nominal": format_amount(quota.name, quota.nominal),
                    "usage": format_amount(quota.name, usage),
                    "free": format_amount(quota.name, free),
                }
                if in_cohort:
                    headroom = max(0, snapshot.available(node, key) - free)
                    entry["borrowingHeadroom"] = format_amount(quota.name, headroom)
                resources.append(entry)
            entries.append({"name": flavor.name, "resources": resources})
    return entries


def _placement_entries(state: QuotaState, flavors: Mapping[str, FlavorInfo]) -> list[Obj]:
    """Per ResourceFlavor a reported ClusterQueue names (and that exists), what a Job admitted to it gets."""
    used = {
        flavor.name
        for node in state.snapshot.cluster_queues.values()
        for group in node.spec.resource_groups
        for flavor in group.flavors
    }
    entries: list[Obj] = []
    for name in sorted(used):
        info = flavors.get(name)
        if info is None:
            continue
        entry: Obj = {"name": name, "topologyName": info.spec.topology_name or ""}
        if info.spec.node_labels:
            entry["nodeLabels"] = dict(info.spec.node_labels)
        if info.tolerations:
            entry["tolerations"] = [dict(toleration) for toleration in info.tolerations]
        if info.spec.node_taints:
            entry["nodeTaints"] = [
                {"key": t.key, "effect": t.effect} | ({"value": t.value} if t.value else {})
                for t in info.spec.node_taints
            ]
        entries.append(entry)
    return entries


def _route(state: QuotaState, lq: LocalQueueInfo) -> Obj:
    route: Obj = {"namespace": lq.namespace, "name": lq.name, "clusterQueue": lq.cluster_queue}
    if lq.stopped:
        route["stopped"] = True
    if not state.selects(lq):
        route["namespaceNotSelected"] = True
    limits = state.limit_ranges.get(lq.namespace)
    if limits is not None:
        route["limitRange"] = limit_range_entry(limits)
    return route


def capacity_status(
    state: QuotaState,
    *,
    pending_counts: Mapping[str, int],
    flavors: Mapping[str, FlavorInfo],
    topologies: Sequence[Obj] = (),
) -> Obj:
    """``status`` of ClusterCapacity without ``generation`` and ``observedTime`` (the publisher adds them);
    ``flavors`` are the worker's ResourceFlavors (``World.flavor_infos``); ``topologies`` are the TAS flavors'
    capacity summaries (``federation.topology.report.summary_entry``)."""
    queues: list[Obj] = []
    for name in sorted(state.snapshot.cluster_queues):
        node = state.snapshot.cluster_queues[name]
        entry: Obj = {"name": name}
        if node.spec.cohort:
            entry["cohortName"] = node.spec.cohort
        entry["active"] = node.inactive_reason is None
        if node.inactive_reason is not None:
            entry["inactiveReason"] = node.inactive_reason[:1024]
        entry["pendingWorkloads"] = pending_counts.get(name, 0)
        entry["flavors"] = _flavor_entries(state, node)
        queues.append(entry)
    routes = [
        _route(state, lq)
        for lq in sorted(state.local_queues.values(), key=lambda q: (q.namespace, q.name))
        if lq.cluster_queue
    ]
    status: Obj = {
        "clusterQueues": queues,
        "localQueues": routes,
        "flavors": _placement_entries(state, flavors),
        # the manager judges this worker with these, not with its own RuntimeClasses
        "runtimeClasses": [{"name": name, "overhead": dict(overhead)} for name, overhead in state.runtime_overheads],
    }
    if topologies:
        status["topologies"] = list(topologies)
    return status
