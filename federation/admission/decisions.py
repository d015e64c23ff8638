"""What one scheduling cycle decides about each queue head: admit it, preempt for it, or keep it waiting.

The shapes follow Kueue's ``status.admission`` (``clusterQueue`` and ``podSetAssignments[]{name, flavors,
resourceUsage, count}``) and its pending condition (a reason plus a message a person can act on), so an adapter can
write them to the API unchanged. ``Wait.retry_immediately`` tells the queue whether the workload goes straight back
to its heap (it lost a race inside the cycle, or waits for its victims to go) or may be parked as inadmissible.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from federation.admission.model import FlavorResource, Workload

__all__ = [
    "Admit",
    "Assignment",
    "Decision",
    "PendingReason",
    "PodSetAssignment",
    "Preempt",
    "PreemptionReason",
    "Victim",
    "Wait",
]

PendingReason = Literal[
    "PendingEvaluation",
    "NoMatchingFlavor",
    "WaitingForQuota",
    "ExceedsMaxQuota",
    "Misconfigured",
    "Suspended",
    "TopologyPlacementFailed",
]
"""Kueue v0.20's ``QuotaReserved=False`` reasons a scheduling cycle gives (``Misconfigured``: the ClusterQueue does
not exist; ``Suspended``: it is inactive; ``TopologyPlacementFailed``: a TAS placement refused it)."""
PreemptionReason = Literal[
    "InClusterQueue", "InCohortReclamation", "InCohortReclaimWhileBorrowing", "InCohortFairSharing"
]


@dataclass(frozen=True, slots=True)
class PodSetAssignment:
    """One pod set's flavors (resource → flavor), total usage (resource → milli-units) and admitted pod count."""

    name: str
    flavors: Mapping[str, str]
    resource_usage: Mapping[str, int]
    count: int


@dataclass(frozen=True, slots=True)
class Assignment:
    """Where a workload's quota comes from; ``usage`` totals every pod set per ``(flavor, resource)``."""

    cluster_queue: str
    pod_set_assignments: tuple[PodSetAssignment, ...]
    usage: Mapping[FlavorResource, int]
    borrows: bool


@dataclass(frozen=True, slots=True)
class Admit:
    """Reserve quota for ``workload`` as ``assignment`` says."""

    workload: Workload
    assignment: Assignment


@dataclass(frozen=True, slots=True)
class Victim:
    """An admitted workload to evict so a preemptor fits, with Kueue's preemption reason."""

    key: str
    cluster_queue: str
    reason: PreemptionReason
    message: str


@dataclass(frozen=True, slots=True)
class Preempt:
    """Evict ``victims``; ``workload`` stays pending and will fit once they are gone."""

    workload: Workload
    assignment: Assignment
    victims: tuple[Victim, ...]
    message: str


@dataclass(frozen=True, slots=True)
class Wait:
    """Keep ``workload`` pending, with Kueue's reason and a message saying what it waits for."""

    workload: Workload
    reason: PendingReason
    message: str
    retry_immediately: bool = False


Decision = Admit | Preempt | Wait
