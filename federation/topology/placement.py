"""Placement of one pod set on a topology snapshot, with Kueue's TAS semantics.

Why this module exists: this is the decision the agent makes when it admits a TAS workload locally. It follows
Kueue's two phases -- count how many pods (or slices) fit in every domain, then choose domains and walk down to
nodes -- but reads the counts from the snapshot's incrementally maintained per-shape caches, so a placement
costs a scan of the domains at one level plus the walk down, not a pass over every node.

Rules (as in Kueue):

* ``required`` level: every pod (every slice) in a single domain of that level, else failure.
* ``preferred`` level: a single domain of that level if one fits; otherwise climb one level at a time; at the
  top, spread greedily over top-level domains.
* ``unconstrained``: nodes anywhere, least free capacity first (``LeastFreeCapacity``).
* required/preferred use ``BestFit``: among domains that fit, the tightest; when spreading, take the roomiest
  domains first (fewest domains) and, for the remainder, the tightest domain that fits it. The same rule picks
  children at every level on the way down.
* slices: ``slice_size`` consecutive ranks form a slice that must sit in one domain of ``slice_level``; above
  that level counts are in whole slices (a domain of the slice level holds ``pods // slice_size`` slices).

Ties are broken by domain values so results are deterministic.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from federation.topology.fitcache import ShapeFit
from federation.topology.model import NodePods, Placement, PlacementFailure, PodSetRequest
from federation.topology.snapshot import TopologySnapshot
from federation.topology.tree import Domain


class _Shortfall(Exception):
    """Internal: a split found less room than its caller counted (a bug if it ever escapes)."""


class Planner:
    """Chooses domains and nodes from fit counts (``counts``: domain uid -> pods of the shape that fit there).

    ``counts`` covers at least the part of the tree being planned in. Units are slices at and above the slice
    level and pods below it; without slices the slice level is the node level and slices have one pod.
    """

    def __init__(
        self, snapshot: TopologySnapshot, counts: Mapping[int, int], *, slice_depth: int, slice_size: int
    ) -> None:
        self.snapshot = snapshot
        self.counts = counts
        self.slice_depth = slice_depth
        self.slice_size = slice_size
        self._slice_memo: dict[int, int] = {}

    def units(self, domain: Domain) -> int:
        """Pods (below the slice level) or whole slices (at and above it) that fit in ``domain``."""
        if self.slice_size == 1 and domain.depth >= 0:
            return self.counts.get(domain.uid, 0)
        if domain.depth > self.slice_depth:
            return self.counts.get(domain.uid, 0)
        if domain.depth == self.slice_depth:
            return self.counts.get(domain.uid, 0) // self.slice_size
        cached = self._slice_memo.get(domain.uid)
        if cached is None:
            if domain.depth >= 0 and self.counts.get(domain.uid, 0) < self.slice_size:
                cached = 0
            else:
                cached = sum(self.units(child) for child in domain.children.values())
            self._slice_memo[domain.uid] = cached
        return cached

    def tightest(self, domains: Iterable[Domain], need: int) -> tuple[Domain | None, int]:
        """The domain with the fewest units that still holds ``need``, and the largest unit count seen."""
        best: Domain | None = None
        best_units = 0
        largest = 0
        for domain in domains:
            units = self.units(domain)
            largest = max(largest, units)
            if units >= need and (
                best is None or units < best_units or (units == best_units and domain.values < best.values)
            ):
                best, best_units = domain, units
        return best, largest

    def split(self, children: Iterable[Domain], need: int) -> list[tuple[Domain, int]]:
        """BestFit split of ``need`` units over ``children``: roomiest first, then the tightest for the rest."""
        candidates = [(units, child) for child in children if (units := self.units(child)) > 0]
        candidates.sort(key=lambda item: (-item[0], item[1].values))
        shares: list[tuple[Domain, int]] = []
        for index, (units, child) in enumerate(candidates):
            if need <= 0:
                break
            if units >= need:
                last_units, last = min(
                    (item for item in candidates[index:] if item[0] >= need), key=lambda item: (item[0], item[1].values)
                )
                del last_units
                shares.append((last, need))
                need = 0
                break
            shares.append((child, units))
            need -= units
        if need > 0:
            raise _Shortfall(need)
        return shares

    def descend(self, domain: Domain, amount: int, out: list[tuple[Domain, int]]) -> None:
        """Assign ``amount`` units to ``domain`` and walk down to nodes, appending ``(node domain, pods)``."""
        if domain.depth == self.slice_depth:
            amount *= self.slice_size
        if domain.node is not None:
            out.append((domain, amount))
            return
        for child, share in self.split(domain.children.values(), amount):
            self.descend(child, share, out)


def place(snapshot: TopologySnapshot, request: PodSetRequest) -> Placement | PlacementFailure:
    """Place ``request`` on ``snapshot`` (not mutated; book the result with ``snapshot.assume_placement``)."""
    shape = resolve_shape(snapshot, request)
    if isinstance(shape, PlacementFailure):
        return shape
    mode, depth, slice_depth, slice_size = shape
    if request.count == 0:
        return Placement(levels=snapshot.levels, node_pods=())
    fit = snapshot.fit(request)
    planner = Planner(snapshot, fit.domain_count, slice_depth=slice_depth, slice_size=slice_size)
    need = request.count // slice_size
    chosen: list[tuple[Domain, int]] = []
    try:
        if mode == "unconstrained":
            failure = _least_free_global(snapshot, fit, request.count, chosen)
        elif mode == "required":
            failure = _required(snapshot, planner, depth=depth, need=need, chosen=chosen, fit=fit)
        else:
            failure = _preferred(snapshot, planner, depth=depth, need=need, chosen=chosen, fit=fit)
    except _Shortfall as shortfall:  # pragma: no cover - counts and splits disagree
        return PlacementFailure(f"internal error: counted room was missing ({shortfall})")
    if failure is not None:
        return failure
    return to_placement(snapshot, chosen)


PlanShape = tuple[str, int, int, int]


def resolve_shape(snapshot: TopologySnapshot, request: PodSetRequest) -> PlanShape | PlacementFailure:
    """Validate the request against the topology: (mode, level depth, slice depth, slice size) or a failure."""
    topology = request.topology
    if request.count < 0:
        return PlacementFailure(f"pod count {request.count} is negative")
    if topology.required is not None:
        mode, level = "required", topology.required
    elif topology.preferred is not None:
        mode, level = "preferred", topology.preferred
    else:
        mode, level = "unconstrained", snapshot.levels[-1]
    if level not in snapshot.levels:
        return PlacementFailure(f"topology level {level!r} is not one of the topology's levels {list(snapshot.levels)}")
    depth = snapshot.level_depth(level)
    slice_depth, slice_size = snapshot.node_depth, 1
    if topology.slice_level is not None or topology.slice_size is not None:
        if topology.slice_level is None or topology.slice_size is None:
            return PlacementFailure("a slice needs both a slice topology level and a slice size")
        if topology.slice_level not in snapshot.levels:
            return PlacementFailure(f"slice topology level {topology.slice_level!r} is not in the topology")
        if topology.slice_size < 1 or request.count % topology.slice_size:
            return PlacementFailure(
                f"pod count {request.count} is not a multiple of the slice size {topology.slice_size}"
            )
        slice_depth, slice_size = snapshot.level_depth(topology.slice_level), topology.slice_size
        if mode == "unconstrained":
            mode, depth = "preferred", 0
        if slice_depth < depth:
            return PlacementFailure(
                f"slice level {topology.slice_level!r} must not be above the pod set's level {level!r}"
            )
    return mode, depth, slice_depth, slice_size


def _unit_name(planner: Planner) -> str:
    return "pods" if planner.slice_size == 1 else f"slices of {planner.slice_size} pods"


def _required(
    snapshot: TopologySnapshot,
    planner: Planner,
    *,
    depth: int,
    need: int,
    chosen: list[tuple[Domain, int]],
    fit: ShapeFit,
) -> PlacementFailure | None:
    domain, largest = _tightest_at(snapshot, planner, depth, need, fit)
    if domain is None:
        return PlacementFailure(
            f"no {snapshot.tree_levels[depth]} domain has room for {need} {_unit_name(planner)}; "
            f"the roomiest has room for {largest}"
        )
    planner.descend(domain, need, chosen)
    return None


def _preferred(
    snapshot: TopologySnapshot,
    planner: Planner,
    *,
    depth: int,
    need: int,
    chosen: list[tuple[Domain, int]],
    fit: ShapeFit,
) -> PlacementFailure | None:
    for level_depth in range(depth, -1, -1):
        domain, _ = _tightest_at(snapshot, planner, level_depth, need, fit)
        if domain is not None:
            planner.descend(domain, need, chosen)
            return None
    total = planner.units(snapshot.root)
    if total < need:
        return PlacementFailure(f"the topology has room for {total} of {need} {_unit_name(planner)}")
    planner.descend(snapshot.root, need, chosen)
    return None


def _tightest_at(
    snapshot: TopologySnapshot, planner: Planner, depth: int, need: int, fit: ShapeFit
) -> tuple[Domain | None, int]:
    if depth == snapshot.node_depth and planner.slice_size == 1:
        # The bucket index answers "smallest node count >= need" without scanning every node.
        if not fit.buckets:
            return None, 0
        fitting = [count for count in fit.buckets if count >= need]
        if not fitting:
            return None, max(fit.buckets)
        tightest_path = fit.buckets[min(fitting)][0]
        return snapshot.domain(tightest_path), max(fit.buckets)
    return planner.tightest(snapshot.domains_at(depth), need)


def _least_free_global(
    snapshot: TopologySnapshot, fit: ShapeFit, need: int, chosen: list[tuple[Domain, int]]
) -> PlacementFailure | None:
    total = sum(fit.domain_count.get(domain.uid, 0) for domain in snapshot.root.children.values())
    if total < need:
        return PlacementFailure(f"the topology has room for {total} of {need} pods")
    for count in sorted(fit.buckets):
        for path in fit.buckets[count]:
            take = min(count, need)
            node_domain = snapshot.domain(path)
            assert node_domain is not None
            chosen.append((node_domain, take))
            need -= take
            if need == 0:
                return None
    raise _Shortfall(need)  # pragma: no cover - the total said there was room


def least_free(nodes: Iterable[tuple[Domain, int]], need: int, chosen: list[tuple[Domain, int]]) -> int:
    """LeastFreeCapacity over explicit ``(node domain, pods that fit)`` pairs; returns what is still missing."""
    for node_domain, count in sorted(nodes, key=lambda item: (item[1], item[0].values)):
        if need == 0:
            break
        if count <= 0:
            continue
        take = min(count, need)
        chosen.append((node_domain, take))
        need -= take
    return need


def to_placement(snapshot: TopologySnapshot, chosen: Iterable[tuple[Domain, int]]) -> Placement:
    """Chosen ``(node domain, pods)`` pairs as a ``Placement`` in canonical rank order (by domain values)."""
    merged: dict[tuple[str, ...], int] = {}
    for domain, pods in chosen:
        if pods > 0:
            merged[domain.values] = merged.get(domain.values, 0) + pods
    entries = []
    for values in sorted(merged):
        node_domain = snapshot.domain(values)
        assert node_domain is not None
        assert node_domain.node is not None
        entries.append(
            NodePods(node=node_domain.node.spec.name, values=values[: len(snapshot.levels)], count=merged[values])
        )
    return Placement(levels=snapshot.levels, node_pods=tuple(entries))
