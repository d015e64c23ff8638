"""Between the topology core's plain data and what travels through the API: pod sets and ClusterCapacity entries.

Why this module exists: the agent and the manager both turn a Workload's pod set into a ``PodSetRequest`` (the
agent to place it, the manager to check a worker's capacity summary), and the agent writes, the manager reads,
the per-TAS-flavor ``topologies`` entry of ClusterCapacity. One module keeps both sides on the same units
(milli-units, except ``pods`` counted whole) and the same field names (``federation.api.capacity``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from federation.podspec import pod_requests
from federation.quantity import format_amount, parse_quantity
from federation.topology.model import PODS_RESOURCE, PodSetRequest, Toleration, TopologyRequest
from federation.topology.summary import CapacitySummary, DomainCapacity


def canonical(name: str, milli: int) -> int:
    """The core's unit of a resource given in milli-units: pods are counted whole, everything else in milli."""
    return milli // 1000 if name == PODS_RESOURCE else milli


def quantity_text(name: str, amount: int) -> str:
    """A canonical amount printed as a Kubernetes quantity."""
    milli = amount * 1000 if name == PODS_RESOURCE else amount
    return format_amount(name, milli)


def amounts(quantities: Mapping[str, Any] | None) -> dict[str, int]:
    out: dict[str, int] = {}
    for name, text in (quantities or {}).items():
        try:
            out[str(name)] = canonical(str(name), parse_quantity(str(text)))
        except ValueError:
            continue
    return out


def tolerations_of(items: Iterable[Mapping[str, Any]]) -> tuple[Toleration, ...]:
    return tuple(
        Toleration(
            key=str(t.get("key") or ""),
            operator="Exists" if t.get("operator") == "Exists" else "Equal",
            value=str(t.get("value") or ""),
            effect=str(t.get("effect") or ""),
        )
        for t in items
    )


def pod_set_request(
    pod_set: Mapping[str, Any],
    *,
    count: int | None = None,
    node_labels: Mapping[str, str] | None = None,
    tolerations: tuple[Toleration, ...] = (),
) -> PodSetRequest:
    """The placement request of one ``spec.podSets[]`` entry (annotations or ``topologyRequest``, node selector,
    tolerations, effective requests); ``node_labels``/``tolerations`` are what the flavor adds. Without any
    topology request the pod set is placed like Kueue's implicit TAS (unconstrained)."""
    template = pod_set.get("template") or {}
    pod_spec = template.get("spec") or {}
    topology = TopologyRequest.of_pod_set(pod_set)
    selector = {str(k): str(v) for k, v in (pod_spec.get("nodeSelector") or {}).items()}
    selector.update(node_labels or {})
    requests = {name: canonical(name, amount) for name, amount in pod_requests(pod_spec).items()}
    return PodSetRequest(
        count=int(pod_set.get("count", 1)) if count is None else count,
        requests=requests,
        topology=topology,
        node_selector=selector,
        tolerations=tolerations_of(pod_spec.get("tolerations") or ()) + tolerations,
    )


def topology_requests(workload: Mapping[str, Any]) -> list[PodSetRequest]:
    """The workload's pod sets as placement requests (what the manager checks a worker's summary with)."""
    out = []
    for pod_set in (workload.get("spec") or {}).get("podSets") or ():
        try:
            out.append(pod_set_request(pod_set))
        except (ValueError, TypeError):
            continue
    return out


def summary_entry(flavor: str, topology: str, summary: CapacitySummary) -> dict[str, Any]:
    """ClusterCapacity ``status.topologies[]`` for one TAS flavor: every domain above the node level."""
    domains = []
    for domain in summary.domains:
        if not domain.values:
            continue  # the whole-topology entry: the reader adds up the top level
        domains.append(
            {
                "levelValues": list(domain.values),
                "nodes": domain.nodes,
                "free": {name: quantity_text(name, amount) for name, amount in sorted(domain.free.items())},
                "largestNodeFree": {
                    name: quantity_text(name, amount) for name, amount in sorted(domain.largest_node_free.items())
                },
            }
        )
    return {"name": flavor, "topologyName": topology, "levels": list(summary.levels), "topologySummary": domains}


def summary_from_entry(entry: Mapping[str, Any]) -> CapacitySummary:
    """The summary a ``status.topologies[]`` entry describes (the whole-topology entry rebuilt from the top level)."""
    levels = tuple(str(level) for level in entry.get("levels") or ())
    domains = [
        DomainCapacity(
            values=tuple(str(v) for v in item.get("levelValues") or ()),
            nodes=int(item.get("nodes") or 0),
            free=amounts(item.get("free")),
            largest_node_free=amounts(item.get("largestNodeFree")),
        )
        for item in entry.get("topologySummary") or ()
    ]
    free: dict[str, int] = {}
    largest: dict[str, int] = {}
    nodes = 0
    for domain in domains:
        if len(domain.values) != 1:
            continue
        nodes += domain.nodes
        for name, amount in domain.free.items():
            free[name] = free.get(name, 0) + amount
        for name, amount in domain.largest_node_free.items():
            largest[name] = max(largest.get(name, 0), amount)
    root = DomainCapacity(values=(), nodes=nodes, free=free, largest_node_free=largest)
    return CapacitySummary(levels=levels, domains=(root, *domains))
