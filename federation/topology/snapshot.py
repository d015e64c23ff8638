"""An incrementally maintained snapshot of one topology's nodes and their free capacity.

Why this module exists: the agent sees a stream of Node and Pod events and must answer placement questions at
any time without rebuilding anything. ``TopologySnapshot`` turns those events (node added/changed/removed, pod
bound/finished, placement assumed/forgotten) into updates of a domain tree whose per-domain aggregates stay
current, and hands the placement code per-shape fit counts that are brought up to date lazily from a change log.

Nodes missing one of the topology's level labels are remembered but stay outside the tree (like Kueue, they
are not part of the topology) until a label update completes them. When the lowest topology level is not
``kubernetes.io/hostname`` the tree gets one extra, internal node level so that capacity is always checked per
node; assignments are still emitted at the topology's lowest level.

Usage of pods bound to nodes the snapshot does not know yet is kept and applied when the node appears.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Mapping
from typing import Any

from federation.api.labels import HOSTNAME_LABEL
from federation.topology.fitcache import ShapeFit, ShapeKey, shape_key
from federation.topology.model import PODS_RESOURCE, NodeSpec, Placement, PodSetRequest
from federation.topology.tree import Domain, NodeState, free_amounts

UNLIMITED_PODS = 1 << 40
"""Stand-in ``pods`` allocatable for nodes that report none (no pod-count limit)."""

_MAX_SHAPES = 32
_MAX_LOG = 1 << 16


class TopologySnapshot:
    """Nodes of one topology arranged as a tree of domains, with usage and per-shape fit caches."""

    def __init__(self, levels: tuple[str, ...] | list[str]) -> None:
        if not levels:
            raise ValueError("a topology needs at least one level")
        self.levels: tuple[str, ...] = tuple(levels)
        self.hostname_is_lowest = self.levels[-1] == HOSTNAME_LABEL
        self.tree_levels: tuple[str, ...] = self.levels if self.hostname_is_lowest else (*self.levels, HOSTNAME_LABEL)
        self.node_depth = len(self.tree_levels) - 1
        self.root = Domain(uid=0, depth=-1, values=(), parent=None)
        self._next_uid = 1
        self._by_depth: list[dict[tuple[str, ...], Domain]] = [{} for _ in self.tree_levels]
        self._specs: dict[str, NodeSpec] = {}
        self._nodes: dict[str, NodeState] = {}
        self._by_hostname: dict[str, NodeState] = {}
        self._used: dict[str, dict[str, int]] = {}
        self._pods: dict[str, tuple[str, dict[str, int]]] = {}
        self._assumed: dict[str, dict[str, dict[str, int]]] = {}
        self._changes: list[str] = []
        self._change_base = 0
        self._fits: OrderedDict[ShapeKey, ShapeFit] = OrderedDict()

    # ------------------------------------------------------------------ events

    def upsert_node(self, spec: NodeSpec) -> None:
        """A node was added or changed (labels, taints, allocatable)."""
        allocatable = dict(spec.allocatable)
        allocatable.setdefault(PODS_RESOURCE, UNLIMITED_PODS)
        spec = NodeSpec(
            name=spec.name,
            labels=dict(spec.labels),
            allocatable=allocatable,
            taints=tuple(spec.taints),
            unschedulable=spec.unschedulable,
        )
        self._specs[spec.name] = spec
        path = self._path_of(spec)
        current = self._nodes.get(spec.name)
        if current is not None and (path is None or current.domain.values != path):
            self._detach(current)
            current = None
        if path is None:
            self._log(spec.name)
            return
        if current is None:
            self._attach(spec, path)
        else:
            old_free = current.free
            current.spec = spec
            current.free = _free(spec, self._used.get(spec.name, {}))
            self._shift_aggregates(current.domain, old_free, current.free)
        self._log(spec.name)

    def remove_node(self, name: str) -> None:
        """A node was deleted. Usage of pods still recorded on it is kept until they finish."""
        self._specs.pop(name, None)
        current = self._nodes.get(name)
        if current is not None:
            self._detach(current)
        self._log(name)

    def bind_pod(self, pod_key: str, node: str, requests: Mapping[str, int]) -> None:
        """A non-terminal pod is bound to ``node`` and uses ``requests`` (``pods: 1`` is added here)."""
        self.finish_pod(pod_key)
        usage = {name: amount for name, amount in requests.items() if amount}
        usage[PODS_RESOURCE] = usage.get(PODS_RESOURCE, 0) + 1
        self._pods[pod_key] = (node, usage)
        self._change_usage(node, usage, sign=1)

    def finish_pod(self, pod_key: str) -> None:
        """A pod finished or was deleted; unknown keys are ignored."""
        entry = self._pods.pop(pod_key, None)
        if entry is not None:
            self._change_usage(entry[0], entry[1], sign=-1)

    def assume(self, key: str, usage_per_node: Mapping[str, Mapping[str, int]]) -> None:
        """Book usage decided in this cycle (e.g. a placement not yet bound) under ``key``; replaces earlier."""
        self.forget(key)
        booked = {node: dict(usage) for node, usage in usage_per_node.items()}
        self._assumed[key] = booked
        for node, usage in booked.items():
            self._change_usage(node, usage, sign=1)

    def assume_placement(self, key: str, placement: Placement, request: PodSetRequest) -> None:
        """Book a placement's usage under ``key`` so later placements in the same cycle do not double-book."""
        self.assume(key, placement.usage_per_node(request.per_pod_usage()))

    def forget(self, key: str) -> None:
        """Release usage booked by ``assume`` (once the pods are bound, or the placement is abandoned)."""
        booked = self._assumed.pop(key, None)
        for node, usage in (booked or {}).items():
            self._change_usage(node, usage, sign=-1)

    # ------------------------------------------------------------------ reading

    @property
    def node_names(self) -> list[str]:
        """Nodes that are part of the topology (all level labels present)."""
        return list(self._nodes)

    def node(self, name: str) -> NodeState | None:
        return self._nodes.get(name)

    def node_by_hostname(self, hostname: str) -> NodeState | None:
        """The node whose lowest tree value (its ``kubernetes.io/hostname`` label, or name) is ``hostname``."""
        return self._by_hostname.get(hostname)

    def node_at(self, values: tuple[str, ...]) -> NodeState | None:
        domain = self._by_depth[self.node_depth].get(values)
        return domain.node if domain is not None else None

    def node_free(self, name: str) -> dict[str, int]:
        """Free amounts of a node in the topology (allocatable minus used); empty if unknown."""
        state = self._nodes.get(name)
        return dict(state.free) if state is not None else {}

    def domains_at(self, depth: int) -> Iterator[Domain]:
        return iter(self._by_depth[depth].values())

    def domain(self, values: tuple[str, ...]) -> Domain | None:
        if not values:
            return self.root
        if len(values) > len(self.tree_levels):
            return None
        return self._by_depth[len(values) - 1].get(values)

    def level_depth(self, level: str) -> int:
        """Tree depth of a topology level; raises ``KeyError`` for a level the topology does not have."""
        try:
            return self.tree_levels.index(level)
        except ValueError:
            raise KeyError(level) from None

    def topology_values(self, node: NodeState) -> tuple[str, ...]:
        """The node's value at each topology level (the tree path without the internal node level)."""
        return node.domain.values[: len(self.levels)]

    def fit(self, request: PodSetRequest) -> ShapeFit:
        """Fit counts of the request's pod shape, brought up to date with every change since last use."""
        key = shape_key(request.per_pod_usage(), request.node_selector, tuple(request.tolerations))
        seq = self._change_base + len(self._changes)
        fit = self._fits.get(key)
        if fit is not None:
            self._fits.move_to_end(key)
            if fit.synced_seq < self._change_base or seq - fit.synced_seq > len(self._nodes):
                fit.rebuild(self._nodes.values())
            elif fit.synced_seq < seq:
                changed = dict.fromkeys(self._changes[fit.synced_seq - self._change_base :])
                fit.update((name, self._nodes.get(name)) for name in changed)
        else:
            fit = ShapeFit(key)
            fit.rebuild(self._nodes.values())
            self._fits[key] = fit
            while len(self._fits) > _MAX_SHAPES:
                self._fits.popitem(last=False)
        fit.synced_seq = seq
        return fit

    def fingerprint(self) -> dict[str, Any]:
        """A canonical, comparable view of the whole state (tests compare incremental updates with rebuilds)."""
        domains = {}
        for depth_index in self._by_depth:
            for values, domain in depth_index.items():
                domains["/".join(values)] = (
                    domain.node_count,
                    sorted(domain.free_sum.items()),
                    sorted(domain.refresh_max().items()),
                )
        nodes = {name: (state.domain.values, sorted(state.free.items())) for name, state in self._nodes.items()}
        return {"domains": dict(sorted(domains.items())), "nodes": dict(sorted(nodes.items()))}

    # ------------------------------------------------------------------ internals

    def _path_of(self, spec: NodeSpec) -> tuple[str, ...] | None:
        values = []
        for level in self.tree_levels:
            value = spec.labels.get(level)
            if value is None:
                if level != HOSTNAME_LABEL:
                    return None
                value = spec.name
            values.append(value)
        return tuple(values)

    def _log(self, name: str) -> None:
        self._changes.append(name)
        if len(self._changes) > _MAX_LOG:
            dropped = len(self._changes) // 2
            del self._changes[:dropped]
            self._change_base += dropped

    def _attach(self, spec: NodeSpec, path: tuple[str, ...]) -> None:
        parent = self.root
        for depth in range(len(path)):
            child = parent.children.get(path[depth])
            if child is None:
                child = Domain(uid=self._next_uid, depth=depth, values=path[: depth + 1], parent=parent)
                self._next_uid += 1
                parent.children[path[depth]] = child
                self._by_depth[depth][child.values] = child
            parent = child
        if parent.node is not None:
            # Two nodes claim the same path (e.g. a duplicated hostname label): the newer one wins.
            self._detach(parent.node)
            self._log(parent.node.spec.name)
            return self._attach(spec, path)
        state = NodeState(spec=spec, domain=parent, free=_free(spec, self._used.get(spec.name, {})))
        parent.node = state
        self._nodes[spec.name] = state
        self._by_hostname[path[-1]] = state
        for domain in parent.ancestors():
            domain.node_count += 1
        self._shift_aggregates(parent, {}, state.free)
        return None

    def _detach(self, state: NodeState) -> None:
        leaf = state.domain
        self._shift_aggregates(leaf, state.free, {})
        del self._nodes[state.spec.name]
        if self._by_hostname.get(leaf.values[-1]) is state:
            del self._by_hostname[leaf.values[-1]]
        leaf.node = None
        domain: Domain | None = leaf
        while domain is not None and domain.depth >= 0:
            domain.node_count -= 1
            parent = domain.parent
            if domain.node_count == 0 and parent is not None:
                del parent.children[domain.values[-1]]
                del self._by_depth[domain.depth][domain.values]
            domain = parent

    def _change_usage(self, node: str, usage: Mapping[str, int], *, sign: int) -> None:
        used = self._used.setdefault(node, {})
        for name, amount in usage.items():
            total = used.get(name, 0) + sign * amount
            if total:
                used[name] = total
            else:
                used.pop(name, None)
        if not used:
            del self._used[node]
        state = self._nodes.get(node)
        if state is None:
            return
        old_free = state.free
        state.free = _free(state.spec, used)
        self._shift_aggregates(state.domain, old_free, state.free)
        self._log(node)

    def _shift_aggregates(self, leaf: Domain, old_free: Mapping[str, int], new_free: Mapping[str, int]) -> None:
        # Aggregates add up only what is free (an over-committed node lends nothing to its neighbours).
        deltas = {
            name: max(new_free.get(name, 0), 0) - max(old_free.get(name, 0), 0) for name in {*old_free, *new_free}
        }
        deltas = {name: delta for name, delta in deltas.items() if delta}
        for domain in leaf.ancestors():
            if domain.node is None:
                domain.max_dirty = True
            free_sum = domain.free_sum
            for name, delta in deltas.items():
                total = free_sum.get(name, 0) + delta
                if total:
                    free_sum[name] = total
                else:
                    free_sum.pop(name, None)
            if domain.node is not None:
                domain.free_sum = {name: max(amount, 0) for name, amount in new_free.items()}


def _free(spec: NodeSpec, used: Mapping[str, int]) -> dict[str, int]:
    """What the node has free for new pods: nothing while it is cordoned (it stays in the tree, so the pods already
    on it keep their place and their usage, and its hostname still resolves for the assignments that use it)."""
    free = free_amounts(spec.allocatable, used)
    return {name: min(amount, 0) for name, amount in free.items()} if spec.unschedulable else free
