"""Keep the ``kfed-local-queues`` ConfigMap current: the LocalQueues whose Jobs stay on the manager cluster, and the
namespaces whose Jobs without the queue-name label kfed takes (Kueue's LocalQueue defaulting and
``manageJobsWithoutQueueName``).

The Job admission policy reads it through ``paramRef``: it leaves Jobs of those LocalQueues alone, and labels or
suspends unlabelled Jobs of those namespaces (see ``manager.decisions.local_routing``). Rewritten whenever
LocalQueues, ClusterQueues, AdmissionChecks or Namespaces (their labels) change, and only when its content
differs. A failed write is retried with the work queue's backoff and logged; until it lands,
a Job of a LocalQueue created moments ago is still taken for MultiKueue (the policy's safe default).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog

from federation.kube.api import KubeApi
from federation.kube.cache import WatchCache
from federation.kube.errors import NotFound
from federation.kube.resources import CONFIG_MAPS
from manager.decisions.local_routing import (
    LOCAL_QUEUES_CONFIG_MAP,
    local_queue_key,
    local_queues,
    unlabelled_job_routes,
)

log = structlog.get_logger(__name__)

KEY = "local-queues"
"""The work queue's only key: there is one ConfigMap."""


class LocalQueuesConfig:
    def __init__(
        self,
        *,
        api: KubeApi,
        namespace: str,
        field_manager: str,
        local_queues: WatchCache,
        cluster_queues: WatchCache,
        admission_checks: WatchCache,
        namespaces: WatchCache | None = None,
        managed_namespace_selector: Mapping[str, Any] | None = None,
        manage_jobs_without_queue_name: bool = False,
    ) -> None:
        self._api = api
        self._namespace = namespace
        self._field_manager = field_manager
        self._local_queues = local_queues
        self._cluster_queues = cluster_queues
        self._admission_checks = admission_checks
        self._namespaces = namespaces
        self._selector = managed_namespace_selector
        self._manage_without_queue_name = manage_jobs_without_queue_name
        self._written: dict[str, str] | None = None

    def local(self) -> dict[str, str]:
        return local_queues(
            local_queues=self._local_queues.store,
            cluster_queues=self._cluster_queues.store,
            admission_checks=self._admission_checks.store,
        )

    def wanted(self) -> dict[str, str]:
        wanted = self.local()
        if self._namespaces is not None and self._selector is not None:
            wanted |= unlabelled_job_routes(
                namespaces=self._namespaces.store,
                local_queues=self._local_queues.store,
                namespace_selector=self._selector,
                manage_jobs_without_queue_name=self._manage_without_queue_name,
            )
        return wanted

    def is_local(self, namespace: str, local_queue: str) -> bool:
        """The LocalQueue's Jobs run on the manager cluster (its ClusterQueue has no MultiKueue check)."""
        return local_queue_key(namespace, local_queue) in self.local()

    async def reconcile(self, _key: str) -> None:
        wanted = self.wanted()
        if wanted == self._written:
            return
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": LOCAL_QUEUES_CONFIG_MAP,
                "namespace": self._namespace,
                "labels": {"app.kubernetes.io/part-of": "kfed"},
            },
            "data": wanted,
        }
        try:
            current = await self._api.get(CONFIG_MAPS, LOCAL_QUEUES_CONFIG_MAP, namespace=self._namespace)
        except NotFound:
            await self._api.create(CONFIG_MAPS, body, field_manager=self._field_manager)
        else:
            if (current.get("data") or {}) != wanted:
                body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
                body["metadata"]["labels"] = {**(current["metadata"].get("labels") or {}), **body["metadata"]["labels"]}
                body["metadata"]["annotations"] = current["metadata"].get("annotations") or {}
                await self._api.replace(CONFIG_MAPS, body, field_manager=self._field_manager)
        self._written = wanted
        log.info(
            "local LocalQueues updated", configmap=LOCAL_QUEUES_CONFIG_MAP, local=sorted(wanted)[:50], keys=len(wanted)
        )
