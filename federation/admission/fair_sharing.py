"""Fair sharing: weighted dominant-resource shares, used to order admission and to pick preemption victims.

A node's dominant-resource share (DRS) is, over every resource, the largest fraction of what its parent could lend
that the node uses *beyond its own quota* (borrowed), in per-mille; it is divided by the node's weight (milli-units,
Kueue's default weight 1 = 1000) and rounded up. A node that does not borrow has share 0; a weight of 0 makes any
borrowing an infinite share. Shares are integers, as in Kueue, so ties are exact.

``share_path`` gives the shares along the path from the top of the cohort tree down to a ClusterQueue; comparing
paths lexicographically is the tournament Kueue runs through the cohort tree (at each cohort, the child with the
lower share wins).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping

from federation.admission.model import FlavorResource
from federation.admission.snapshot import ClusterQueueNode, QuotaNode, Snapshot, potential_available

__all__ = ["INFINITE_SHARE", "dominant_resource_share", "precise_weighted_share", "share_path", "share_with_usage"]

INFINITE_SHARE = sys.maxsize


def dominant_resource_share(node: QuotaNode) -> int:
    """The node's weighted dominant-resource share (0 at the top of a tree, where nothing is borrowed), as Kueue
    computes it: per resource, what the node borrows beyond its subtree quota per mille of what its parent could
    lend at most (every flavor of that resource, ``potential_available`` of the parent), the largest one divided
    by the weight and rounded up. A resource its parent could lend none of counts for nothing; with weight 0 any
    borrowing is an infinite share."""
    pools = _borrowed_of_lendable(node)
    if not pools:
        return 0
    if node.fair_sharing_weight <= 0:
        return INFINITE_SHARE
    # ceil(amount * 1000 / pool / (weight / 1000)), exactly; the ceiling of the largest is the largest ceiling
    weight = node.fair_sharing_weight
    return max(-(-amount * 1_000_000 // (pool * weight)) for amount, pool in pools)


def precise_weighted_share(node: QuotaNode) -> float:
    """The share before rounding (Kueue's weighted share gauges): ``math.inf`` when borrowing with weight 0."""
    pools = _borrowed_of_lendable(node)
    if not pools:
        return 0.0
    if node.fair_sharing_weight <= 0:
        return math.inf
    return max(amount * 1000 / pool for amount, pool in pools) / (node.fair_sharing_weight / 1000)


def _borrowed_of_lendable(node: QuotaNode) -> list[tuple[int, int]]:
    """(borrowed, lendable) per resource the node borrows and its parent could lend some of; empty at a top."""
    parent = node.parent
    if parent is None:
        return []
    borrowed: dict[str, int] = {}
    for key, used in node.usage.items():
        over = used - node.subtree_quota.get(key, 0)
        if over > 0:
            borrowed[key[1]] = borrowed.get(key[1], 0) + over
    if not borrowed:
        return []
    root = parent
    while root.parent is not None:
        root = root.parent
    lendable: dict[str, int] = {}
    for key in root.subtree_quota:
        if key[1] in borrowed:
            lendable[key[1]] = lendable.get(key[1], 0) + potential_available(parent, key)
    return [(amount, lendable[resource]) for resource, amount in borrowed.items() if lendable.get(resource, 0) > 0]


def share_path(queue: ClusterQueueNode) -> tuple[tuple[int, str], ...]:
    """``(share, name)`` of every node from just below the tree's top down to ``queue``, for tournament order."""
    path: list[tuple[int, str]] = []
    node: QuotaNode | None = queue
    while node is not None and node.parent is not None:
        path.append((dominant_resource_share(node), node.name))
        node = node.parent
    path.reverse()
    return tuple(path)


def share_with_usage(snapshot: Snapshot, queue: ClusterQueueNode, usage: Mapping[FlavorResource, int]) -> int:
    """The queue's share if ``usage`` were added to it (the snapshot is left unchanged)."""
    with snapshot.what_if():
        snapshot.add_usage(queue, usage)
        return dominant_resource_share(queue)
