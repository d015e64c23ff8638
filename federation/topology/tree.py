"""The mutable domain tree behind a topology snapshot.

Why this module exists: placement, capacity summaries and per-shape fit caches all walk the same tree
(root → blocks → racks → nodes) and read the same per-node free amounts. Keeping the node and domain records
in one small module lets those modules share them without importing each other. Nothing here is public API:
callers use ``TopologySnapshot``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from federation.topology.model import NodeSpec


class Domain:
    """One topology domain: a block, a rack, ... or a node (the leaves).

    ``values`` holds the domain's value at every tree level from the top down to its own, so it identifies the
    domain uniquely and sorts domains canonically. ``free_sum`` is the sum of its nodes' free amounts (negative
    amounts of over-committed nodes count as zero), kept up to date on every change; ``free_max`` (largest free
    amount on any one of its nodes, per resource) is recomputed lazily when ``max_dirty`` is set.
    """

    __slots__ = (
        "children",
        "depth",
        "free_max",
        "free_sum",
        "max_dirty",
        "node",
        "node_count",
        "parent",
        "uid",
        "values",
    )

    def __init__(self, *, uid: int, depth: int, values: tuple[str, ...], parent: Domain | None) -> None:
        self.uid = uid
        self.depth = depth
        self.values = values
        self.parent = parent
        self.children: dict[str, Domain] = {}
        self.node: NodeState | None = None
        self.free_sum: dict[str, int] = {}
        self.free_max: dict[str, int] = {}
        self.max_dirty = False
        self.node_count = 0

    def ancestors(self) -> Iterator[Domain]:
        """This domain and every domain above it, up to (excluding) the root."""
        domain: Domain | None = self
        while domain is not None and domain.depth >= 0:
            yield domain
            domain = domain.parent

    def refresh_max(self) -> dict[str, int]:
        """Recompute ``free_max`` from the children (or the node) if it is stale, and return it."""
        if self.node is not None:
            return self.free_sum
        if self.max_dirty:
            largest: dict[str, int] = {}
            for child in self.children.values():
                for name, amount in child.refresh_max().items():
                    if amount > largest.get(name, amount - 1):
                        largest[name] = amount
            self.free_max = largest
            self.max_dirty = False
        return self.free_max


class NodeState:
    """A node attached to the tree: its spec, its leaf domain and its free amounts (allocatable minus used)."""

    __slots__ = ("domain", "free", "spec")

    def __init__(self, *, spec: NodeSpec, domain: Domain, free: dict[str, int]) -> None:
        self.spec = spec
        self.domain = domain
        self.free = free


def free_amounts(allocatable: Mapping[str, int], used: Mapping[str, int]) -> dict[str, int]:
    """Allocatable minus used, per resource; a resource used but not allocatable goes negative."""
    free = dict(allocatable)
    for name, amount in used.items():
        free[name] = free.get(name, 0) - amount
    return free
