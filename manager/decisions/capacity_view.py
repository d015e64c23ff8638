"""A worker's ClusterCapacity report, parsed once into the plain data dispatch scoring reads."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from federation.conditions import parse_time
from federation.quantity import parse_quantity
from federation.topology.report import summary_from_entry
from manager.decisions.dispatch import FlavorRoom, WorkerCapacity


@dataclass(frozen=True, slots=True)
class ParsedReport:
    generation: int
    observed_at: dt.datetime
    capacity: WorkerCapacity


def parse_report(report: Mapping[str, Any]) -> ParsedReport | None:
    """None when the report has no status yet (the agent creates the object first, then its status)."""
    status = report.get("status")
    if not status or "observedTime" not in status:
        return None
    cluster_queues: dict[str, list[FlavorRoom]] = {}
    for queue in status.get("clusterQueues") or ():
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
    topologies = {str(entry["name"]): summary_from_entry(entry) for entry in status.get("topologies") or ()}
    return ParsedReport(
        generation=int(status.get("generation", 0)),
        observed_at=parse_time(status["observedTime"]),
        capacity=WorkerCapacity(local_queues=local_queues, cluster_queues=cluster_queues, topologies=topologies),
    )
