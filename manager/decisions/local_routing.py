"""Which LocalQueues on the manager cluster feed a ClusterQueue without a MultiKueue check (pure).

A Job queued to such a LocalQueue is not kfed's: Kueue leaves it to run on the manager cluster itself. The Job
admission policy takes only the other Jobs away from the cluster's own Job controller; it reads the LocalQueues
listed here from a ConfigMap (``paramRef``) that kfed-manager keeps current. The list names the LocalQueues that
are certainly local, so a LocalQueue kfed has not seen yet, or one whose ClusterQueue names an AdmissionCheck that
does not exist yet, stays MultiKueue's (MultiKueue-first).

ConfigMap keys may not contain ``/``: a LocalQueue is keyed ``<namespace>.<name>``, unambiguous because a namespace
name has no dots. The value is the ClusterQueue's name, for people reading the ConfigMap.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from manager.decisions.admission_checks import multikueue_check_names

LOCAL_QUEUES_CONFIG_MAP = "kfed-local-queues"


def local_queue_key(namespace: str, name: str) -> str:
    return f"{namespace}.{name}"


def local_queues(
    *,
    local_queues: Iterable[Mapping[str, Any]],
    cluster_queues: Iterable[Mapping[str, Any]],
    admission_checks: Iterable[Mapping[str, Any]],
) -> dict[str, str]:
    """``<namespace>.<LocalQueue>`` → ClusterQueue, for every LocalQueue whose ClusterQueue runs Jobs locally."""
    checks = list(admission_checks)
    known = {str(check["metadata"]["name"]) for check in checks}
    multikueue = multikueue_check_names(checks)
    local_cluster_queues = set()
    for queue in cluster_queues:
        strategy = (queue.get("spec") or {}).get("admissionChecksStrategy") or {}
        names = {str(rule.get("name")) for rule in strategy.get("admissionChecks") or ()}
        if not names & multikueue and names <= known:
            local_cluster_queues.add(str(queue["metadata"]["name"]))
    routes = {}
    for queue in local_queues:
        meta, spec = queue.get("metadata") or {}, queue.get("spec") or {}
        target = str(spec.get("clusterQueue") or "")
        if target in local_cluster_queues:
            routes[local_queue_key(str(meta.get("namespace", "")), str(meta.get("name", "")))] = target
    return routes
