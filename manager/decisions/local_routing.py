"""Which LocalQueues on the manager cluster feed a ClusterQueue without a MultiKueue check (pure).

A Job queued to such a LocalQueue is not kfed's: Kueue leaves it to run on the manager cluster itself. The Job
admission policy takes only the other Jobs away from the cluster's own Job controller; it reads the LocalQueues
listed here from a ConfigMap (``paramRef``) that kfed-manager keeps current. The list names the LocalQueues that
are certainly local, so a LocalQueue kfed has not seen yet, or one whose ClusterQueue names an AdmissionCheck that
does not exist yet, stays MultiKueue's (MultiKueue-first).

ConfigMap keys may not contain ``/``: a LocalQueue is keyed ``<namespace>.<name>``, unambiguous because a namespace
name has no dots. The value is the ClusterQueue's name, for people reading the ConfigMap.

Jobs *without* the queue-name label (:func:`unlabelled_job_routes`) follow Kueue: in a namespace that matches
``managedJobsNamespaceSelector`` and has a LocalQueue named ``default``, the Job gets that LocalQueue (Kueue's
LocalQueue defaulting) and is then routed like any labelled Job; without one, ``manageJobsWithoutQueueName`` keeps
the Job suspended (Kueue manages it, but no queue admits it; the policy acts on creation only). Those namespaces
are keyed by their bare name (no dot), the value is ``default`` or empty.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from federation.admission.api_quotas import selector_matches
from manager.decisions.admission_checks import multikueue_check_names

LOCAL_QUEUES_CONFIG_MAP = "kfed-local-queues"
DEFAULT_LOCAL_QUEUE = "default"
"""Kueue's LocalQueue defaulting: the LocalQueue a Job without the queue-name label gets."""


def default_managed_namespace_selector(own_namespace: str) -> dict[str, Any]:
    """Kueue's default ``managedJobsNamespaceSelector``: every namespace but ``kube-system`` and its own."""
    return {
        "matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", own_namespace]}
        ]
    }


def unlabelled_job_routes(
    *,
    namespaces: Iterable[Mapping[str, Any]],
    local_queues: Iterable[Mapping[str, Any]],
    namespace_selector: Mapping[str, Any],
    manage_jobs_without_queue_name: bool,
) -> dict[str, str]:
    """``<namespace>`` → ``default`` (label the Job with that LocalQueue) or ``""`` (suspend it), for every
    namespace whose Jobs without the queue-name label kfed takes (see the module docstring)."""
    with_default = {
        str((queue.get("metadata") or {}).get("namespace", ""))
        for queue in local_queues
        if (queue.get("metadata") or {}).get("name") == DEFAULT_LOCAL_QUEUE
    }
    routes = {}
    for namespace in namespaces:
        meta = namespace.get("metadata") or {}
        name = str(meta.get("name", ""))
        if not selector_matches(
            namespace_selector, {**(meta.get("labels") or {}), "kubernetes.io/metadata.name": name}
        ):
            continue
        if name in with_default:
            routes[name] = DEFAULT_LOCAL_QUEUE
        elif manage_jobs_without_queue_name:
            routes[name] = ""
    return routes


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
