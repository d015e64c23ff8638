"""What a worker has room for, as the plain data dispatch scoring reads: parsed once from its kfed-agent's
ClusterCapacity report, or, for a worker without that report (stock Kueue there, or a manager credential with only
the permissions Kueue documents for MultiKueue, which do not cover ``clustercapacities.kfed.io``), probed from its
ClusterQueues' status (nominal quota less ``flavorsReservation``) and its LocalQueues, as DESIGN §5 says."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from federation.admission.model import ResourceFlavorSpec, Taint
from federation.conditions import parse_time
from federation.limit_ranges import limit_range_from_entry
from federation.pod_injection import FlavorInjection
from federation.podspec import overheads_of
from federation.quantity import parse_quantity
from federation.topology.report import summary_from_entry
from manager.decisions.dispatch import FlavorRoom, WorkerCapacity


@dataclass(frozen=True, slots=True)
class ParsedReport:
    generation: int
    observed_at: dt.datetime
    capacity: WorkerCapacity
    flavors: Mapping[str, FlavorInjection] | None = None
    """What each of the worker's ResourceFlavors adds to a started Job's pods, from a report that lists them (a
    kfed-agent that admits a Workload copy before its Job copy exists); None for a report without them (an older
    agent) and for probed capacity (stock Kueue): the manager then sends the Job copy suspended with the Workload
    copy, for the worker to start."""


def report_age(report: ParsedReport, *, now: dt.datetime, received_at: dt.datetime, renewed: bool) -> float:
    """Seconds since the worker's agent last renewed ``report``, by the manager's clock: from when a new generation of
    it arrived (``received_at``; ``renewed``: the manager saw the generation change). A report not renewed since the
    manager first saw it may be long dead, so its own ``observedTime`` (the agent's clock) counts too. Clocks that
    disagree then neither make a live agent's report stale for longer than one heartbeat (a worker clock behind the
    manager's) nor keep a dead agent's report fresh (one ahead of it)."""
    since_received = (now - received_at).total_seconds()
    if renewed:
        return since_received
    return max(since_received, (now - report.observed_at).total_seconds())


def parse_report(report: Mapping[str, Any]) -> ParsedReport | None:
    """None when the report has no status yet (the agent creates the object first, then its status)."""
    status = report.get("status")
    if not status or "observedTime" not in status:
        return None
    cluster_queues: dict[str, list[FlavorRoom]] = {}
    inactive: dict[str, str] = {}
    for queue in status.get("clusterQueues") or ():
        if queue.get("active") is False:
            inactive[str(queue["name"])] = str(queue.get("inactiveReason") or "the worker's agent reports it inactive")
        rooms: list[FlavorRoom] = []
        for flavor in queue.get("flavors") or ():
            nominal: dict[str, int] = {}
            free: dict[str, int] = {}
            borrowable: dict[str, int] = {}
            for resource in flavor.get("resources") or ():
                name = resource["name"]
                nominal[name] = parse_quantity(str(resource["nominal"]))
                free[name] = parse_quantity(str(resource["free"]))
                if resource.get("borrowingHeadroom") is not None:
                    borrowable[name] = parse_quantity(str(resource["borrowingHeadroom"]))
            rooms.append(FlavorRoom(name=flavor["name"], nominal=nominal, free=free, borrowable=borrowable))
        cluster_queues[queue["name"]] = rooms
    local_queues = {
        (route["namespace"], route["name"]): route["clusterQueue"] for route in status.get("localQueues") or ()
    }
    routes = status.get("localQueues") or ()
    stopped = frozenset((route["namespace"], route["name"]) for route in routes if route.get("stopped"))
    unselected = frozenset((route["namespace"], route["name"]) for route in routes if route.get("namespaceNotSelected"))
    limit_ranges = {
        (route["namespace"], route["name"]): limit_range_from_entry(route["limitRange"])
        for route in routes
        if route.get("limitRange")
    }
    topologies = {str(entry["name"]): summary_from_entry(entry) for entry in status.get("topologies") or ()}
    return ParsedReport(
        generation=int(status.get("generation", 0)),
        observed_at=parse_time(status["observedTime"]),
        capacity=WorkerCapacity(
            local_queues=local_queues,
            cluster_queues=cluster_queues,
            topologies=topologies,
            inactive=inactive,
            stopped_local_queues=stopped,
            unselected_local_queues=unselected,
            limit_ranges=limit_ranges,
            flavor_nodes=_flavor_nodes(status.get("flavors")),
            runtime_overheads=(
                overheads_of((entry["name"], entry.get("overhead")) for entry in status["runtimeClasses"] or ())
                if "runtimeClasses" in status
                else None
            ),
        ),
        flavors=_flavor_injections(status["flavors"]) if "flavors" in status else None,
    )


def _flavor_nodes(entries: Iterable[Mapping[str, Any]] | None) -> dict[str, ResourceFlavorSpec]:
    """The reported flavors that have node labels or taints, or say whether they have a topology, as flavor
    assignment reads them."""
    nodes: dict[str, ResourceFlavorSpec] = {}
    for entry in entries or ():
        labels = {str(k): str(v) for k, v in (entry.get("nodeLabels") or {}).items()}
        taints = tuple(
            Taint(key=str(t["key"]), value=str(t.get("value") or ""), effect=t.get("effect") or "NoSchedule")
            for t in entry.get("nodeTaints") or ()
        )
        topology = entry.get("topologyName")
        if labels or taints or topology is not None:
            name = str(entry["name"])
            nodes[name] = ResourceFlavorSpec(name, labels, taints, None if topology is None else str(topology))
    return nodes


def _flavor_injections(entries: Iterable[Mapping[str, Any]] | None) -> dict[str, FlavorInjection]:
    return {
        str(entry["name"]): FlavorInjection(
            node_labels={str(k): str(v) for k, v in (entry.get("nodeLabels") or {}).items()},
            tolerations=tuple(entry.get("tolerations") or ()),
        )
        for entry in entries or ()
    }


def _inactive_reason(queue: Mapping[str, Any]) -> str | None:
    """Why a stock Kueue ClusterQueue admits nothing (its ``Active`` condition's message), None when it is active
    or has no status yet (the queue is new: Kueue admits into it once it is ready)."""
    for condition in (queue.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "Active" and condition.get("status") != "True":
            return str(condition.get("message") or condition.get("reason") or "its Active condition is not True")
    return None


def capacity_from_queues(
    cluster_queues: Iterable[Mapping[str, Any]],
    local_queues: Iterable[Mapping[str, Any]],
    *,
    observed_at: dt.datetime,
) -> ParsedReport:
    """A worker's capacity probed through its queues, for a worker that publishes no ClusterCapacity.

    Per ClusterQueue and flavor: the nominal quota of ``spec.resourceGroups`` and, free, that quota less the
    flavor's ``status.flavorsReservation`` total (never below zero). What the cohort could lend is unknown here, so
    nothing counts as borrowable. A ClusterQueue that says it is not ``Active`` (stopped, or missing a flavor or
    check) offers no room, and is listed in ``inactive`` with its condition's message, as a kfed-agent's report lists
    its inactive ones (``parse_report``), so a refusal says why. A ClusterQueue without ``namespaceSelector`` selects
    no namespace (Kueue's default), so its LocalQueues are unselected; a selector's match against the worker's
    namespace labels is not probed (the manager does not read the worker's namespaces), and counts as a match.
    ``observed_at`` is when the manager saw this state; the in-flight ledger compares it to the copies'
    reservation times."""
    rooms: dict[str, list[FlavorRoom]] = {}
    inactive: dict[str, str] = {}
    selecting_none: set[str] = set()
    for queue in cluster_queues:
        if (queue.get("spec") or {}).get("namespaceSelector") is None:
            selecting_none.add(str(queue["metadata"]["name"]))
        reason = _inactive_reason(queue)
        if reason is not None:
            inactive[str(queue["metadata"]["name"])] = reason
            continue
        reserved: dict[tuple[str, str], int] = {}
        for flavor in (queue.get("status") or {}).get("flavorsReservation") or ():
            for resource in flavor.get("resources") or ():
                reserved[(str(flavor["name"]), str(resource["name"]))] = parse_quantity(str(resource.get("total", "0")))
        flavors: list[FlavorRoom] = []
        for group in (queue.get("spec") or {}).get("resourceGroups") or ():
            for flavor in group.get("flavors") or ():
                nominal: dict[str, int] = {}
                free: dict[str, int] = {}
                for resource in flavor.get("resources") or ():
                    name = str(resource["name"])
                    amount = parse_quantity(str(resource.get("nominalQuota", "0")))
                    nominal[name] = amount
                    free[name] = max(0, amount - reserved.get((str(flavor["name"]), name), 0))
                flavors.append(FlavorRoom(name=str(flavor["name"]), nominal=nominal, free=free))
        rooms[str(queue["metadata"]["name"])] = flavors
    routes: dict[tuple[str, str], str] = {}
    stopped: set[tuple[str, str]] = set()
    for local_queue in local_queues:
        key = (str(local_queue["metadata"]["namespace"]), str(local_queue["metadata"]["name"]))
        spec = local_queue.get("spec") or {}
        if spec.get("clusterQueue"):
            routes[key] = str(spec["clusterQueue"])
        if (spec.get("stopPolicy") or "None") != "None":
            stopped.add(key)
    return ParsedReport(
        generation=0,
        observed_at=observed_at,
        capacity=WorkerCapacity(
            local_queues=routes,
            cluster_queues=rooms,
            inactive=inactive,
            stopped_local_queues=frozenset(stopped),
            unselected_local_queues=frozenset(key for key, queue in routes.items() if queue in selecting_none),
        ),
    )
