"""Plain inputs and outputs of the topology core.

Why this module exists: the snapshot, the placement, the replacement and the summary all speak about the same
few things (a node, a taint, a pod set's topology request, a placement). Keeping them here, as frozen dataclasses
with no behaviour beyond small derived views, lets the agent's controllers build them from API objects without
importing any algorithm, and lets tests build them by hand.

Units: every resource amount is a plain ``int`` in a canonical unit chosen by the caller. The convention kfed
uses is milli-units for ``cpu`` and bytes for ``memory``; everything else (``pods``, ``nvidia.com/gpu``,
``ephemeral-storage``...) in its base unit. The core never converts: it only compares and subtracts, so any
consistent unit works.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from federation.api.labels import (
    PODSET_PREFERRED_TOPOLOGY_ANNOTATION,
    PODSET_REQUIRED_TOPOLOGY_ANNOTATION,
    PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION,
    PODSET_SLICE_SIZE_ANNOTATION,
    PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION,
)

PODS_RESOURCE = "pods"

NODE_FAILURES_REASON = "NodeFailures"

NO_SCHEDULE = "NoSchedule"
NO_EXECUTE = "NoExecute"


@dataclass(frozen=True)
class Taint:
    """A node taint (``spec.taints[]``)."""

    key: str
    effect: str
    value: str = ""


@dataclass(frozen=True)
class Toleration:
    """A pod toleration; an empty ``key`` with ``Exists`` tolerates everything, an empty ``effect`` every effect."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""


@dataclass(frozen=True)
class NodeSpec:
    """What the topology core needs to know about one Node.

    ``allocatable`` is ``status.allocatable`` in canonical integer units. A node that reports no ``pods``
    allocatable has no pod-count limit.
    """

    name: str
    labels: Mapping[str, str]
    allocatable: Mapping[str, int]
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    """``spec.unschedulable`` (cordoned): as in Kueue, such a node is no capacity for new placements, whatever the
    pods tolerate; the usage of pods already bound to it is kept."""


@dataclass(frozen=True)
class TopologyRequest:
    """A pod set's topology request, as carried by Kueue's pod set annotations.

    Exactly one of ``required``, ``preferred`` or ``unconstrained`` applies; with none set the pod set is
    placed unconstrained (like a pod set without annotations on a TAS flavor). ``slice_level`` and
    ``slice_size`` group consecutive ranks into slices that each must sit in one domain of ``slice_level``.
    """

    required: str | None = None
    preferred: str | None = None
    unconstrained: bool = False
    slice_level: str | None = None
    slice_size: int | None = None

    @property
    def asks(self) -> bool:
        """A required, preferred or unconstrained topology is asked for (Kueue's ``TopologyRequest`` is set)."""
        return bool(self.required or self.preferred or self.unconstrained)

    @classmethod
    def of_pod_set(cls, pod_set: Mapping[str, Any]) -> TopologyRequest:
        """A ``spec.podSets[]`` entry's request: its template's annotations, else its ``topologyRequest``."""
        annotations = ((pod_set.get("template") or {}).get("metadata") or {}).get("annotations") or {}
        topology = cls.from_annotations(annotations)
        request = pod_set.get("topologyRequest") or {}
        if topology == cls() and request:
            return cls(
                required=request.get("required"),
                preferred=request.get("preferred"),
                unconstrained=bool(request.get("unconstrained")),
                slice_level=request.get("podSetSliceRequiredTopology"),
                slice_size=request.get("podSetSliceSize"),
            )
        return topology

    @classmethod
    def from_annotations(cls, annotations: Mapping[str, str]) -> TopologyRequest:
        size_text = annotations.get(PODSET_SLICE_SIZE_ANNOTATION)
        return cls(
            required=annotations.get(PODSET_REQUIRED_TOPOLOGY_ANNOTATION),
            preferred=annotations.get(PODSET_PREFERRED_TOPOLOGY_ANNOTATION),
            unconstrained=annotations.get(PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION, "").lower() == "true",
            slice_level=annotations.get(PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION),
            slice_size=int(size_text) if size_text else None,
        )


@dataclass(frozen=True)
class PodSetRequest:
    """One pod set to place: ``count`` identical pods with per-pod ``requests`` (each pod also uses 1 ``pods``)."""

    count: int
    requests: Mapping[str, int]
    topology: TopologyRequest = field(default_factory=TopologyRequest)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()

    def per_pod_usage(self) -> dict[str, int]:
        """The per-pod amounts the placement checks, ``pods: 1`` included."""
        usage = {name: amount for name, amount in self.requests.items() if amount > 0}
        usage[PODS_RESOURCE] = 1
        return usage


@dataclass(frozen=True)
class NodePods:
    """``count`` pods of a pod set on node ``node``; ``values`` is the node's domain value at every topology level."""

    node: str
    values: tuple[str, ...]
    count: int


@dataclass(frozen=True)
class Placement:
    """Where a pod set's pods go, one entry per node, in rank order (rank 0 on the first entry's first pod)."""

    levels: tuple[str, ...]
    node_pods: tuple[NodePods, ...]

    @property
    def pod_count(self) -> int:
        return sum(entry.count for entry in self.node_pods)

    def pods_per_node(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for entry in self.node_pods:
            counts[entry.node] = counts.get(entry.node, 0) + entry.count
        return counts

    def usage_per_node(self, per_pod: Mapping[str, int]) -> dict[str, dict[str, int]]:
        """The usage to book on each node (``per_pod`` must include ``pods``; see ``PodSetRequest.per_pod_usage``)."""
        return {
            node: {name: amount * count for name, amount in per_pod.items()}
            for node, count in self.pods_per_node().items()
        }


@dataclass(frozen=True)
class PlacementFailure:
    """The pod set cannot be placed now; ``message`` says why in terms a user can act on."""

    message: str
