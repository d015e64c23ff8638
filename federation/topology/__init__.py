"""Topology-aware placement, failed-node replacement and capacity summaries (pure).

The public entry points, re-exported here:

* ``TopologySnapshot`` -- nodes + usage of one topology, updated incrementally by events;
* ``place`` -- place a ``PodSetRequest`` (required / preferred / unconstrained, slices, selectors, tolerations);
* ``encode_placement`` / ``TopologyAssignment`` / ``decode_assignment`` / ``expand_ranks`` -- Kueue v1beta2
  ``topologyAssignment``;
* ``replace_failed_nodes`` -- re-place only the pods lost on any number of failed nodes;
* ``summarize`` / ``summary_fits`` -- the ClusterCapacity per-domain summary and its feasibility check.
"""

from federation.topology.encoding import TopologyAssignment, decode_assignment, encode_placement, expand_ranks
from federation.topology.model import (
    NodePods,
    NodeSpec,
    Placement,
    PlacementFailure,
    PodSetRequest,
    Taint,
    Toleration,
    TopologyRequest,
)
from federation.topology.placement import place
from federation.topology.replacement import PodMove, Replacement, ReplacementImpossible, replace_failed_nodes
from federation.topology.snapshot import TopologySnapshot
from federation.topology.summary import CapacitySummary, DomainCapacity, FitVerdict, summarize, summary_fits

__all__ = [
    "CapacitySummary",
    "DomainCapacity",
    "FitVerdict",
    "NodePods",
    "NodeSpec",
    "Placement",
    "PlacementFailure",
    "PodMove",
    "PodSetRequest",
    "Replacement",
    "ReplacementImpossible",
    "Taint",
    "Toleration",
    "TopologyAssignment",
    "TopologyRequest",
    "TopologySnapshot",
    "decode_assignment",
    "encode_placement",
    "expand_ranks",
    "place",
    "replace_failed_nodes",
    "summarize",
    "summary_fits",
]
