"""Compact per-domain capacity summary for the ClusterCapacity report, and a feasibility check on it.

Why this module exists: the manager picks a worker cluster for a TAS workload without seeing its nodes. The
agent publishes, for the whole topology and for every domain above the node level (every block, every rack),
three things per domain: the number of nodes, the free amount of each resource summed over its nodes, and the
largest free amount of each resource on any single node. For 40,000 nodes in 1,000 racks that is about a
thousand small entries -- a few hundred kilobytes of JSON, well inside one Kubernetes object.

From that the manager can bound, for any pod shape, how many pods a domain could hold:

    pods(D) <= min over resources r of  floor(free_sum[r] / request[r])
    pods(D) <= nodes(D) * min over r of floor(largest_node_free[r] / request[r])

Both are upper bounds of what the full placement computes (a sum of floors never exceeds the floor of the
sum, and no node has more free than the largest), so ``summary_fits`` NEVER rejects a workload the placement
would place at that level. The approximation goes only the other way; it may accept a workload the worker
then rejects because:

* resources are pooled across nodes (two half-free nodes look like one free node), and the per-resource
  largest amounts may come from different nodes;
* node selectors, taints and tolerations are not in the summary (all nodes of the topology count, but for
  cordoned ones: as in Kueue, a node with ``spec.unschedulable`` is no capacity, for the placement either);
* for slices at the node level, slices per node are bounded with the largest node only.

The worker's own placement stays authoritative; a rejected dispatch simply returns to the manager's queue.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from federation.topology.model import PodSetRequest
from federation.topology.snapshot import TopologySnapshot


@dataclass(frozen=True)
class DomainCapacity:
    """Free capacity of one domain; ``values`` is its value at each level from the top (``()``: everything)."""

    values: tuple[str, ...]
    nodes: int
    free: Mapping[str, int]
    largest_node_free: Mapping[str, int]

    def pod_bound(self, per_pod: Mapping[str, int]) -> int:
        """An upper bound on pods of shape ``per_pod`` (``pods`` included) that fit in this domain."""
        return min(self.free_bound(per_pod), self.nodes * self.node_bound(per_pod))

    def free_bound(self, per_pod: Mapping[str, int]) -> int:
        return _bound(self.free, per_pod)

    def node_bound(self, per_pod: Mapping[str, int]) -> int:
        """An upper bound on pods of the shape that fit on any one node of this domain."""
        return _bound(self.largest_node_free, per_pod)


@dataclass(frozen=True)
class CapacitySummary:
    """``levels`` are the tree levels (topology levels, plus the node level if the topology lacks it)."""

    levels: tuple[str, ...]
    domains: tuple[DomainCapacity, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "levels": list(self.levels),
            "domains": [
                {
                    "values": list(domain.values),
                    "nodes": domain.nodes,
                    "free": dict(sorted(domain.free.items())),
                    "largestNodeFree": dict(sorted(domain.largest_node_free.items())),
                }
                for domain in self.domains
            ],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CapacitySummary:
        return cls(
            levels=tuple(data["levels"]),
            domains=tuple(
                DomainCapacity(
                    values=tuple(item["values"]),
                    nodes=int(item["nodes"]),
                    free={name: int(amount) for name, amount in item.get("free", {}).items()},
                    largest_node_free={name: int(amount) for name, amount in item.get("largestNodeFree", {}).items()},
                )
                for item in data.get("domains", ())
            ),
        )

    def at_depth(self, depth: int) -> Iterable[DomainCapacity]:
        """Domains whose values reach ``depth`` (``-1``: the whole-topology entry)."""
        return (domain for domain in self.domains if len(domain.values) == depth + 1)


@dataclass(frozen=True)
class FitVerdict:
    fits: bool
    message: str


def summarize(snapshot: TopologySnapshot) -> CapacitySummary:
    """The summary of ``snapshot``: the whole topology first, then every domain above the node level."""
    tops = sorted(snapshot.domains_at(0), key=lambda item: item.values)
    free: dict[str, int] = {}
    largest: dict[str, int] = {}
    for top in tops:
        for name, amount in top.free_sum.items():
            free[name] = free.get(name, 0) + amount
        for name, amount in top.refresh_max().items():
            largest[name] = max(largest.get(name, 0), amount)
    domains = [_capacity((), sum(top.node_count for top in tops), free, largest)]
    for depth in range(snapshot.node_depth):
        for domain in sorted(snapshot.domains_at(depth), key=lambda item: item.values):
            domains.append(_capacity(domain.values, domain.node_count, domain.free_sum, domain.refresh_max()))
    return CapacitySummary(levels=snapshot.tree_levels, domains=tuple(domains))


def _capacity(
    values: tuple[str, ...], nodes: int, free: Mapping[str, int], largest: Mapping[str, int]
) -> DomainCapacity:
    return DomainCapacity(
        values=values,
        nodes=nodes,
        free={name: amount for name, amount in free.items() if amount > 0},
        largest_node_free={name: amount for name, amount in largest.items() if amount > 0},
    )


def summary_fits(summary: CapacitySummary, request: PodSetRequest) -> FitVerdict:
    """Whether ``request`` may fit according to ``summary`` (never ``False`` when placement would succeed)."""
    levels = summary.levels
    topology = request.topology
    per_pod = request.per_pod_usage()
    if request.count <= 0:
        return FitVerdict(True, "nothing to place")
    level = topology.required
    if level is not None and level not in levels:
        return FitVerdict(False, f"topology level {level!r} is not in this cluster's topology")
    node_depth = len(levels) - 1
    slice_size = topology.slice_size or 1
    slice_depth = levels.index(topology.slice_level) if topology.slice_level in levels else node_depth
    if topology.slice_level is not None and topology.slice_level not in levels:
        return FitVerdict(False, f"slice level {topology.slice_level!r} is not in this cluster's topology")
    if request.count % slice_size:
        return FitVerdict(False, f"pod count {request.count} is not a multiple of the slice size {slice_size}")
    need = request.count // slice_size
    if level is not None and levels.index(level) == node_depth:
        best = max((domain.node_bound(per_pod) for domain in summary.at_depth(node_depth - 1)), default=0)
        fits = best >= request.count
        return FitVerdict(fits, f"a single node may hold {best} of {request.count} pods")
    depth = levels.index(level) if level is not None else -1
    best = 0
    for domain in summary.at_depth(depth):
        room = _slices_bound(summary, domain, per_pod, slice_depth=slice_depth, slice_size=slice_size)
        best = max(best, room)
        if room >= need:
            return FitVerdict(True, f"domain {'/'.join(domain.values) or 'all'} may hold {room} of {need}")
    where = f"any {level} domain" if level is not None else "the topology"
    return FitVerdict(False, f"{where} holds at most {best} of {need} {'pods' if slice_size == 1 else 'slices'}")


def _slices_bound(
    summary: CapacitySummary, domain: DomainCapacity, per_pod: Mapping[str, int], *, slice_depth: int, slice_size: int
) -> int:
    node_depth = len(summary.levels) - 1
    if slice_size == 1:
        return domain.pod_bound(per_pod)
    # Slices are counted in the slice-level domains under ``domain`` (for node-level slices: their parents).
    counting_depth = min(slice_depth, node_depth - 1)
    total = 0
    for inner in summary.at_depth(counting_depth):
        if inner.values[: len(domain.values)] != domain.values:
            continue
        if slice_depth == node_depth:
            total += min(
                inner.free_bound(per_pod) // slice_size, inner.nodes * (inner.node_bound(per_pod) // slice_size)
            )
        else:
            total += inner.pod_bound(per_pod) // slice_size
    return total


def _bound(amounts: Mapping[str, int], per_pod: Mapping[str, int]) -> int:
    bound = -1
    for name, amount in per_pod.items():
        if amount <= 0:
            continue
        count = amounts.get(name, 0) // amount
        if bound < 0 or count < bound:
            bound = count
    return max(bound, 0)
