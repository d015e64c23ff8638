"""Replacement of pods lost on failed nodes, for any number of failed nodes.

Why this module exists: Kueue replaces at most one failed node per workload and evicts on the second. kfed
re-places exactly the pods that were on failed nodes -- all of them, whatever the number of failed nodes --
and leaves every other pod where it is:

* required level: the new pods go inside the domain of that level the workload already occupies;
* preferred level: inside the workload's domain of that level if there is room, else the smallest enclosing
  domain with room, else anywhere (spread as in a fresh placement);
* unconstrained: anywhere, least free capacity first;
* slices: a lost pod goes back into its own slice's domain of the slice level (ranks ``k*size ..
  (k+1)*size-1`` form slice ``k``), so every slice stays in one domain.

When that is impossible the result says so, and the agent evicts the workload with reason ``NodeFailures``.

Works on assignments whose lowest level is ``kubernetes.io/hostname`` (Kueue's replacement has the same
requirement): only then does an assignment name the node of every pod. Hosts of the assignment that the
snapshot does not know any more (deleted nodes) count as failed.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from federation.api.labels import HOSTNAME_LABEL
from federation.topology.encoding import TopologyAssignment, encode_placement, expand_ranks
from federation.topology.fitcache import ShapeFit
from federation.topology.model import (
    NODE_FAILURES_REASON,
    NodePods,
    Placement,
    PlacementFailure,
    PodSetRequest,
)
from federation.topology.placement import Planner, resolve_shape, to_placement
from federation.topology.snapshot import TopologySnapshot
from federation.topology.tree import Domain, NodeState


@dataclass(frozen=True)
class PodMove:
    """The pod of ``rank`` (completion index) moves from failed ``from_host`` to ``to_host`` (hostname values)."""

    rank: int
    from_host: str
    to_host: str


@dataclass(frozen=True)
class Replacement:
    """The repaired assignment. ``added`` holds only the new pods (book it with ``assume_placement``)."""

    assignment: TopologyAssignment
    placement: Placement
    added: Placement
    moves: tuple[PodMove, ...]
    rank_hosts: tuple[str, ...]


@dataclass(frozen=True)
class ReplacementImpossible:
    message: str
    reason: str = NODE_FAILURES_REASON


def replace_failed_nodes(
    snapshot: TopologySnapshot,
    request: PodSetRequest,
    assignment: TopologyAssignment,
    failed_nodes: Collection[str],
    *,
    rank_hosts: Sequence[str] | None = None,
) -> Replacement | ReplacementImpossible:
    """Re-place the pods of ``assignment`` that sit on ``failed_nodes`` (node names), keeping all others.

    ``rank_hosts`` is the hostname of each rank as actually running; it defaults to the assignment's own
    rank order (right for an assignment never repaired before, and for any assignment without slices).
    The snapshot must include the workload's surviving pods' usage; failed nodes are never chosen.
    """
    if tuple(assignment.levels) != (HOSTNAME_LABEL,) or not snapshot.hostname_is_lowest:
        return ReplacementImpossible("node replacement needs kubernetes.io/hostname as the lowest topology level")
    hosts = list(rank_hosts) if rank_hosts is not None else [values[0] for values in expand_ranks(assignment)]
    if len(hosts) != request.count:
        return ReplacementImpossible(f"the assignment has {len(hosts)} pods but the pod set has {request.count}")
    shape = resolve_shape(snapshot, request)
    if isinstance(shape, PlacementFailure):
        return ReplacementImpossible(shape.message)
    mode, depth, slice_depth, slice_size = shape

    failed_hosts = set()
    for name in failed_nodes:
        state = snapshot.node(name)
        failed_hosts.add(state.domain.values[-1] if state is not None else name)
    failed_hosts.update(host for host in set(hosts) if snapshot.node_by_hostname(host) is None)
    affected = [rank for rank, host in enumerate(hosts) if host in failed_hosts]
    if not affected:
        placement = _placement_of(snapshot, hosts)
        return Replacement(assignment, placement, Placement(snapshot.levels, ()), (), tuple(hosts))

    excluded = set()
    for host in failed_hosts:
        failed_state = snapshot.node_by_hostname(host)
        if failed_state is not None:
            excluded.add(failed_state.spec.name)
    survivors = [snapshot.node_by_hostname(host) for host in hosts if host not in failed_hosts]
    survivor_domains = [state.domain for state in survivors if state is not None]
    fit = snapshot.fit(request)

    new_hosts = list(hosts)
    added: list[tuple[Domain, int]] = []
    if slice_size > 1:
        outcome = _replace_slices(
            snapshot,
            fit,
            hosts=hosts,
            affected=affected,
            excluded=excluded,
            slice_depth=slice_depth,
            slice_size=slice_size,
            workload_scope=_common_ancestor_at(survivor_domains, depth),
        )
        if isinstance(outcome, ReplacementImpossible):
            return outcome
        for ranks, chosen in outcome:
            _hand_out(ranks, chosen, new_hosts)
            added.extend(chosen)
    else:
        chosen_or_failure = _replace_pods(
            snapshot, fit, mode=mode, depth=depth, need=len(affected), excluded=excluded, survivors=survivor_domains
        )
        if isinstance(chosen_or_failure, ReplacementImpossible):
            return chosen_or_failure
        _hand_out(affected, chosen_or_failure, new_hosts)
        added.extend(chosen_or_failure)

    placement = _placement_of(snapshot, new_hosts)
    moves = tuple(PodMove(rank=rank, from_host=hosts[rank], to_host=new_hosts[rank]) for rank in affected)
    return Replacement(
        assignment=encode_placement(placement),
        placement=placement,
        added=to_placement(snapshot, added),
        moves=moves,
        rank_hosts=tuple(new_hosts),
    )


def _replace_pods(
    snapshot: TopologySnapshot,
    fit: ShapeFit,
    *,
    mode: str,
    depth: int,
    need: int,
    excluded: set[str],
    survivors: list[Domain],
) -> list[tuple[Domain, int]] | ReplacementImpossible:
    chosen: list[tuple[Domain, int]] = []
    if mode == "unconstrained":
        # Least free capacity first, straight from the shape's bucket index, skipping failed nodes.
        for count in sorted(fit.buckets):
            for path in fit.buckets[count]:
                state = snapshot.node_at(path)
                if state is None or state.spec.name in excluded:
                    continue
                take = min(count, need)
                chosen.append((state.domain, take))
                need -= take
                if need == 0:
                    return chosen
        return ReplacementImpossible(f"no room for {need} more replacement pods")
    home = _common_ancestor_at(survivors, depth)
    if mode == "required":
        if home is None and survivors:
            return ReplacementImpossible("surviving pods are not inside one required domain")
        counts = _scoped_counts(home or snapshot.root, fit, excluded, {})
        planner = Planner(snapshot, counts, slice_depth=snapshot.node_depth, slice_size=1)
        if home is None:
            home, _ = planner.tightest(snapshot.domains_at(depth), need)
        if home is None or planner.units(home) < need:
            level = snapshot.tree_levels[depth]
            room = planner.units(home) if home is not None else 0
            return ReplacementImpossible(f"the required {level} domain has room for {room} of {need} replacement pods")
        planner.descend(home, need, chosen)
        return chosen
    # preferred: the workload's own domain, then enclosing domains, then anywhere.
    scopes: list[Domain] = []
    domain = home
    while domain is not None:
        scopes.append(domain)
        domain = domain.parent
    if not scopes:
        counts = _scoped_counts(snapshot.root, fit, excluded, {})
        planner = Planner(snapshot, counts, slice_depth=snapshot.node_depth, slice_size=1)
        for level_depth in range(depth, -1, -1):
            best, _ = planner.tightest(snapshot.domains_at(level_depth), need)
            if best is not None:
                scopes.append(best)
                break
        scopes.append(snapshot.root)
    for scope in scopes:
        counts = _scoped_counts(scope, fit, excluded, {})
        planner = Planner(snapshot, counts, slice_depth=snapshot.node_depth, slice_size=1)
        if planner.units(scope) >= need:
            planner.descend(scope, need, chosen)
            return chosen
    return ReplacementImpossible(f"the topology has room for {planner.units(snapshot.root)} of {need} pods")


def _replace_slices(
    snapshot: TopologySnapshot,
    fit: ShapeFit,
    *,
    hosts: list[str],
    affected: list[int],
    excluded: set[str],
    slice_depth: int,
    slice_size: int,
    workload_scope: Domain | None,
) -> list[tuple[list[int], list[tuple[Domain, int]]]] | ReplacementImpossible:
    by_slice: dict[int, list[int]] = {}
    for rank in affected:
        by_slice.setdefault(rank // slice_size, []).append(rank)
    overlay: dict[str, int] = {}
    outcome = []
    for index, ranks in sorted(by_slice.items()):
        members = hosts[index * slice_size : (index + 1) * slice_size]
        known = [state.domain for host in members if (state := snapshot.node_by_hostname(host))]
        home = _common_ancestor_at(known, slice_depth)
        if home is None and known:
            return ReplacementImpossible(f"slice {index} is not inside one {snapshot.tree_levels[slice_depth]}")
        scope = home if home is not None else (workload_scope or snapshot.root)
        counts = _scoped_counts(scope, fit, excluded, overlay)
        planner = Planner(snapshot, counts, slice_depth=snapshot.node_depth, slice_size=1)
        if home is None:
            candidates = [domain for domain in _domains_under(scope) if domain.depth == slice_depth]
            home, _ = planner.tightest(candidates, len(ranks))
        if home is None or planner.units(home) < len(ranks):
            return ReplacementImpossible(
                f"slice {index}: its {snapshot.tree_levels[slice_depth]} has no room for {len(ranks)} replacement pods"
            )
        chosen: list[tuple[Domain, int]] = []
        planner.descend(home, len(ranks), chosen)
        for node_domain, pods in chosen:
            assert node_domain.node is not None
            overlay[node_domain.node.spec.name] = overlay.get(node_domain.node.spec.name, 0) + pods
        outcome.append((ranks, chosen))
    return outcome


def _hand_out(ranks: list[int], chosen: list[tuple[Domain, int]], new_hosts: list[str]) -> None:
    """Give the lost ranks, in order, to the chosen nodes, in canonical order."""
    slots = [domain.values[-1] for domain, pods in sorted(chosen, key=lambda item: item[0].values) for _ in range(pods)]
    for rank, host in zip(sorted(ranks), slots, strict=True):
        new_hosts[rank] = host


def _placement_of(snapshot: TopologySnapshot, hosts: Sequence[str]) -> Placement:
    counts: dict[str, int] = {}
    for host in hosts:
        counts[host] = counts.get(host, 0) + 1
    entries = []
    for host, count in counts.items():
        state = snapshot.node_by_hostname(host)
        assert state is not None
        entries.append(NodePods(node=state.spec.name, values=snapshot.topology_values(state), count=count))
    entries.sort(key=lambda entry: entry.values)
    return Placement(levels=snapshot.levels, node_pods=tuple(entries))


def _common_ancestor_at(domains: Sequence[Domain], depth: int) -> Domain | None:
    """The single domain at ``depth`` containing all ``domains``; ``None`` if there are none or several."""
    found: Domain | None = None
    for domain in domains:
        ancestor = domain
        while ancestor.depth > depth and ancestor.parent is not None:
            ancestor = ancestor.parent
        if found is None:
            found = ancestor
        elif ancestor is not found:
            return None
    return found


def _domains_under(scope: Domain) -> list[Domain]:
    found = [scope]
    index = 0
    while index < len(found):
        found.extend(found[index].children.values())
        index += 1
    return found


def _nodes_under(scope: Domain) -> list[NodeState]:
    return [domain.node for domain in _domains_under(scope) if domain.node is not None]


def _scoped_counts(scope: Domain, fit: ShapeFit, excluded: set[str], overlay: dict[str, int]) -> dict[int, int]:
    """Fit counts for ``scope`` and below, with ``excluded`` nodes empty and ``overlay`` pods already taken."""
    counts: dict[int, int] = {}
    for state in _nodes_under(scope):
        name = state.spec.name
        if name in excluded:
            continue
        count = fit.node_count(name) - overlay.get(name, 0)
        if count <= 0:
            continue
        domain: Domain | None = state.domain
        while domain is not None and domain.depth >= scope.depth:
            counts[domain.uid] = counts.get(domain.uid, 0) + count
            domain = domain.parent
    return counts
