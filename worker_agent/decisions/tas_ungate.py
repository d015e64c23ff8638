"""Which gated pods of a TAS workload go to which domain (pure): the ungater's decision.

Why this module exists: Kueue's ungater pins each pod behind the ``kueue.x-k8s.io/topology`` gate to a domain of
its pod set's ``topologyAssignment`` (a ``nodeSelector`` on the domain's level labels, down to the hostname) and
removes the gate; the kube-scheduler then binds it inside that domain. The rule that matters is the count: a
domain never gets more live pods than the assignment gives it, counting pods already running there (also after
a node-failure replacement rewrote the assignment) and pods already pinned to it. Pods with a completion index
go to the domain of their rank when it has room (ranks fill the assignment's domains in order); the rest take
the first domain with room. A pod for which no domain has room stays gated until one has.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from federation.topology import TopologyAssignment, decode_assignment, expand_ranks


@dataclass(frozen=True, slots=True)
class PodView:
    """One live (not terminal, not being deleted) pod of the pod set.

    ``domain`` is where it is pinned or bound: its values at the assignment's levels (None: not pinned yet).
    """

    key: str
    gated: bool
    domain: tuple[str, ...] | None
    index: int | None = None


@dataclass(frozen=True, slots=True)
class Ungate:
    """Pin ``pod`` with ``node_selector`` and remove the topology gate."""

    pod: str
    node_selector: Mapping[str, str]


def pod_domain(levels: Sequence[str], labels: Mapping[str, str]) -> tuple[str, ...] | None:
    """A pod's (or node's) values at ``levels`` from a node selector or node labels; None unless all present."""
    values = tuple(labels.get(level) for level in levels)
    if any(value is None for value in values):
        return None
    return tuple(str(value) for value in values)


def plan_ungates(assignment: TopologyAssignment, pods: Sequence[PodView]) -> list[Ungate]:
    levels = assignment.levels
    room: dict[tuple[str, ...], int] = {}
    order: list[tuple[str, ...]] = []
    for values, count in decode_assignment(assignment):
        if values not in room:
            order.append(values)
            room[values] = 0
        room[values] += count
    for pod in pods:
        if pod.domain is not None and pod.domain in room:
            room[pod.domain] -= 1
    try:
        by_rank = expand_ranks(assignment)
    except ValueError:
        by_rank = []
    ungates: list[Ungate] = []
    waiting = [pod for pod in pods if pod.gated and pod.domain is None]
    waiting.sort(key=lambda pod: (pod.index if pod.index is not None else 1 << 62, pod.key))
    for pod in waiting:
        target: tuple[str, ...] | None = None
        if pod.index is not None and 0 <= pod.index < len(by_rank) and room.get(by_rank[pod.index], 0) > 0:
            target = by_rank[pod.index]
        else:
            target = next((values for values in order if room[values] > 0), None)
        if target is None:
            break
        room[target] -= 1
        ungates.append(Ungate(pod=pod.key, node_selector=dict(zip(levels, target, strict=True))))
    return ungates
