"""Raw Nodes, Pods, Topologies and pod templates read as the topology core's plain inputs (pure).

Why this module exists: the agent's watches hand over raw JSON; the topology core (``federation.topology``)
speaks ``NodeSpec``, per-node usage and ``PodSetRequest``. This is the one place that knows which fields of those
objects matter for topology-aware scheduling and node failures, so the controllers stay thin and the rules
(effective requests, terminal pods, readiness, which taints count) are tested as tables.

Units: every amount is milli-units (``federation.quantity``) except ``pods``, which the core counts in pods.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from federation.podspec import pod_requests
from federation.topology import NodeSpec, PodSetRequest, Taint, Toleration, report
from federation.topology.report import amounts, canonical, tolerations_of

Obj = Mapping[str, Any]

COMPLETION_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
NODE_CONTROLLER_TAINTS = frozenset({"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"})
"""Taints the node lifecycle controller adds for NotReady / unreachable nodes: judged by readiness and its delay,
not as user taints."""


def node_spec(node: Obj) -> NodeSpec:
    meta = node.get("metadata") or {}
    spec = node.get("spec") or {}
    taints = tuple(
        Taint(key=str(t.get("key") or ""), effect=str(t.get("effect") or ""), value=str(t.get("value") or ""))
        for t in spec.get("taints") or ()
    )
    return NodeSpec(
        name=str(meta.get("name", "")),
        labels=dict(meta.get("labels") or {}),
        allocatable=amounts((node.get("status") or {}).get("allocatable")),
        taints=taints,
        unschedulable=bool(spec.get("unschedulable")),
    )


def node_matches(node: Obj, node_labels: Mapping[str, str]) -> bool:
    """Whether a node belongs to a flavor with these ``nodeLabels``."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    return all(labels.get(key) == value for key, value in node_labels.items())


def node_not_ready_since(node: Obj) -> dt.datetime | None:
    """When the node's Ready condition stopped being True (None while Ready). A node without one is not ready
    since its creation."""
    for condition in (node.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "Ready":
            if condition.get("status") == "True":
                return None
            return _time(condition.get("lastTransitionTime")) or _time(
                (node.get("metadata") or {}).get("creationTimestamp")
            )
    return _time((node.get("metadata") or {}).get("creationTimestamp"))


def _time(text: object) -> dt.datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def pod_key(pod: Obj) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def pod_terminal(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def pod_live(pod: Obj) -> bool:
    """Neither finished nor being deleted (Kueue's progressing pod, once bound)."""
    return not pod_terminal(pod) and not (pod.get("metadata") or {}).get("deletionTimestamp")


def pod_usage(pod: Obj) -> tuple[str, dict[str, int]] | None:
    """``(node, requests)`` of a pod that holds node capacity (bound and not terminal), else None."""
    node = (pod.get("spec") or {}).get("nodeName")
    if not node or pod_terminal(pod):
        return None
    requests = pod_requests(pod.get("spec") or {})
    return str(node), {name: canonical(name, amount) for name, amount in requests.items()}


def topology_levels(topology: Obj) -> tuple[str, ...]:
    return tuple(str(level.get("nodeLabel")) for level in (topology.get("spec") or {}).get("levels") or ())


@dataclass(frozen=True, slots=True)
class FlavorTopology:
    """A TAS ResourceFlavor: its topology and what it adds to every pod (node labels, tolerations)."""

    name: str
    topology: str
    node_labels: Mapping[str, str]
    tolerations: tuple[Toleration, ...]


def flavor_topology(flavor: Obj) -> FlavorTopology | None:
    spec = flavor.get("spec") or {}
    topology = spec.get("topologyName")
    if not topology:
        return None
    return FlavorTopology(
        name=str((flavor.get("metadata") or {}).get("name", "")),
        topology=str(topology),
        node_labels={str(k): str(v) for k, v in (spec.get("nodeLabels") or {}).items()},
        tolerations=tolerations_of(spec.get("tolerations") or ()),
    )


def pod_set_request(pod_set: Obj, flavor: FlavorTopology, *, count: int | None = None) -> PodSetRequest:
    """The placement request of one ``spec.podSets[]`` entry on a TAS flavor (its node labels and tolerations
    added). ``count`` overrides the pod set's count (a partial admission)."""
    return report.pod_set_request(pod_set, count=count, node_labels=flavor.node_labels, tolerations=flavor.tolerations)


def untolerated_no_execute(node: NodeSpec, tolerations: tuple[Toleration, ...]) -> list[Taint]:
    """The node's NoExecute taints that ``tolerations`` do not tolerate (NotReady/unreachable taints excluded)."""
    return _untolerated(node, tolerations, "NoExecute")


def untolerated_no_schedule(node: NodeSpec, tolerations: tuple[Toleration, ...]) -> list[Taint]:
    """The node's NoSchedule taints that ``tolerations`` do not tolerate (NotReady/unreachable taints excluded; a
    cordoned node's ``node.kubernetes.io/unschedulable`` is one)."""
    return _untolerated(node, tolerations, "NoSchedule")


def _untolerated(node: NodeSpec, tolerations: tuple[Toleration, ...], effect: str) -> list[Taint]:
    from federation.topology.taints import tolerates

    return [
        taint
        for taint in node.taints
        if taint.effect == effect
        and taint.key not in NODE_CONTROLLER_TAINTS
        and not any(tolerates(toleration, taint) for toleration in tolerations)
    ]
