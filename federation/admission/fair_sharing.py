"""Fair sharing: weighted dominant-resource shares, used to order admission and to pick preemption victims.

A node's dominant-resource share (DRS) is, over every resource, the largest fraction of its parent's lendable quota
that the node uses *beyond its own quota* (borrowed), in per-mille; it is divided by the node's weight (milli-units,
Kueue's default weight 1 = 1000). A node that does not borrow has share 0; a weight of 0 makes any borrowing an
infinite share. Shares are integers, as in Kueue, so ties are exact.

``share_path`` gives the shares along the path from the top of the cohort tree down to a ClusterQueue; comparing
paths lexicographically is the tournament Kueue runs through the cohort tree (at each cohort, the child with the
lower share wins).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

from federation.admission.model import FlavorResource
from federation.admission.snapshot import ClusterQueueNode, QuotaNode, Snapshot

__all__ = ["INFINITE_SHARE", "dominant_resource_share", "share_path", "share_with_usage"]

INFINITE_SHARE = sys.maxsize


def dominant_resource_share(node: QuotaNode) -> int:
    """The node's weighted dominant-resource share (0 at the top of a tree, where nothing is borrowed)."""
    parent = node.parent
    if parent is None:
        return 0
    borrowed: dict[str, int] = {}
    for key, used in node.usage.items():
        over = used - node.subtree_quota.get(key, 0)
        if over > 0:
            borrowed[key[1]] = borrowed.get(key[1], 0) + over
    if not borrowed:
        return 0
    if node.fair_sharing_weight <= 0:
        return INFINITE_SHARE
    lendable: dict[str, int] = {}
    for (_, resource), quota in parent.subtree_quota.items():
        if resource in borrowed:
            lendable[resource] = lendable.get(resource, 0) + quota
    share = 0
    for resource, amount in borrowed.items():
        pool = lendable.get(resource, 0)
        share = max(share, amount * 1000 // pool) if pool > 0 else INFINITE_SHARE
    if share == INFINITE_SHARE:
        return share
    return share * 1000 // node.fair_sharing_weight


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
