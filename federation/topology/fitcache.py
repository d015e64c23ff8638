"""Per pod-shape fit counts, maintained incrementally.

Why this module exists: the expensive part of topology-aware placement is "how many pods of this shape fit on
each node, and in each rack, block...". Recomputing that over 40,000 nodes for every workload is what makes
scheduling cycles take seconds. Workloads in a cluster share a handful of pod shapes (requests, node selector,
tolerations), so the snapshot keeps one ``ShapeFit`` per recently used shape and, on each use, updates only the
nodes that changed since its last use. Each changed node costs one fit computation plus one integer delta per
tree level; a domain's count is then a dictionary lookup.

``buckets`` indexes nodes with at least one slot by slot count (sorted canonically within a count) so that
"least free capacity first" and "tightest single node" need no scan over all nodes.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping

from federation.topology.model import Toleration
from federation.topology.taints import taints_tolerated
from federation.topology.tree import Domain, NodeState

ShapeKey = tuple[tuple[tuple[str, int], ...], tuple[tuple[str, str], ...], tuple[Toleration, ...]]


def shape_key(
    per_pod: Mapping[str, int], node_selector: Mapping[str, str], tolerations: tuple[Toleration, ...]
) -> ShapeKey:
    return (tuple(sorted(per_pod.items())), tuple(sorted(node_selector.items())), tolerations)


def node_fit_count(node: NodeState, key: ShapeKey) -> int:
    """How many pods of shape ``key`` fit on ``node`` right now (0 if the node is filtered out)."""
    usage_items, selector_items, tolerations = key
    spec = node.spec
    if selector_items:
        labels = spec.labels
        for label, value in selector_items:
            if labels.get(label) != value:
                return 0
    if spec.taints and not taints_tolerated(spec.taints, tolerations):
        return 0
    free = node.free
    fit = -1
    for name, amount in usage_items:
        available = free.get(name, 0)
        if available < amount:
            return 0
        count = available // amount
        if fit < 0 or count < fit:
            fit = count
    return max(fit, 0)


class ShapeFit:
    """Fit counts of one pod shape: per node, per domain (summed over its nodes) and nodes bucketed by count."""

    __slots__ = ("buckets", "domain_count", "key", "node_entry", "synced_seq")

    def __init__(self, key: ShapeKey) -> None:
        self.key = key
        self.synced_seq = -1
        self.node_entry: dict[str, tuple[int, Domain]] = {}
        self.domain_count: dict[int, int] = {}
        self.buckets: dict[int, list[tuple[str, ...]]] = {}

    def rebuild(self, nodes: Iterable[NodeState]) -> None:
        self.node_entry = {}
        self.domain_count = {}
        grouped: dict[int, list[tuple[str, ...]]] = {}
        domain_count = self.domain_count
        key = self.key
        for node in nodes:
            count = node_fit_count(node, key)
            self.node_entry[node.spec.name] = (count, node.domain)
            if count:
                grouped.setdefault(count, []).append(node.domain.values)
                for domain in node.domain.ancestors():
                    domain_count[domain.uid] = domain_count.get(domain.uid, 0) + count
        for paths in grouped.values():
            paths.sort()
        self.buckets = grouped

    def update(self, changed: Iterable[tuple[str, NodeState | None]]) -> None:
        """Re-evaluate the named nodes; ``None`` means the node left the tree."""
        domain_count = self.domain_count
        for name, node in changed:
            old = self.node_entry.pop(name, None)
            if old is not None and old[0]:
                old_count, old_domain = old
                self._unbucket(old_count, old_domain.values)
                for domain in old_domain.ancestors():
                    remaining = domain_count[domain.uid] - old_count
                    if remaining:
                        domain_count[domain.uid] = remaining
                    else:
                        del domain_count[domain.uid]
            if node is None:
                continue
            count = node_fit_count(node, self.key)
            self.node_entry[name] = (count, node.domain)
            if count:
                bisect.insort(self.buckets.setdefault(count, []), node.domain.values)
                for domain in node.domain.ancestors():
                    domain_count[domain.uid] = domain_count.get(domain.uid, 0) + count

    def _unbucket(self, count: int, path: tuple[str, ...]) -> None:
        bucket = self.buckets[count]
        index = bisect.bisect_left(bucket, path)
        del bucket[index]
        if not bucket:
            del self.buckets[count]

    def node_count(self, name: str) -> int:
        entry = self.node_entry.get(name)
        return entry[0] if entry is not None else 0
