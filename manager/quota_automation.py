"""Kueue's MultiKueue manager quota automation, applied: keeps each manager ClusterQueue's quota and its
``MultiKueueManagerQuotaAutomation`` condition as ``manager.decisions.quota_automation`` decides.

Re-decided (for every ClusterQueue, after a short batch period as Kueue's eventsBatchPeriod) whenever a ClusterQueue,
LocalQueue, AdmissionCheck, MultiKueueConfig or MultiKueueCluster on the manager changes, and whenever a worker's
capacity (report or probed ClusterQueue status) or connection changes. Writes happen only on change, each at the
resourceVersion it was decided from; a Conflict re-decides. Each quota change is logged and recorded as an Event on
the ClusterQueue.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import structlog

from federation.conditions import set_condition
from federation.kube.api import KubeApi
from federation.kube.cache import WatchCache
from federation.kube.errors import Conflict, NotFound
from federation.kube.recorder import EventRecorder
from federation.kube.refusal import RefusalReporter
from federation.kube.resources import CLUSTER_QUEUES
from federation.kube.workqueue import WorkQueue
from manager.decisions.dispatch import WorkerCapacity
from manager.decisions.quota_automation import CONDITION, decide_quota
from manager.workers import WorkerPool

log = structlog.get_logger(__name__)

KEY = "quota-automation"
BATCH_PERIOD = 0.5
"""Seconds a change waits for others before the queues are decided again (a burst of reports makes one pass)."""


class QuotaAutomation:
    def __init__(
        self,
        *,
        api: KubeApi,
        field_manager: str,
        cluster_queues: WatchCache,
        local_queues: WatchCache,
        admission_checks: WatchCache,
        multikueue_configs: WatchCache,
        pool: WorkerPool,
        events: EventRecorder,
    ) -> None:
        self._api = api
        self._field_manager = field_manager
        self._cluster_queues = cluster_queues
        self._local_queues = local_queues
        self._admission_checks = admission_checks
        self._configs = multikueue_configs
        self._pool = pool
        self._events = events
        self.queue = WorkQueue(
            "quota-automation",
            observer=RefusalReporter(
                events=events, component="kfed-manager", lookup=cluster_queues.store.get, action="Configure"
            ),
        )

    def changed(self, *_args: Any) -> None:
        self.queue.add_after(KEY, BATCH_PERIOD)

    def _connected(self) -> dict[str, WorkerCapacity]:
        found: dict[str, WorkerCapacity] = {}
        for name, conn in list(self._pool.connections.items()):
            current = conn.current
            if conn.connected and current is not None:
                found[name] = current.capacity
        return found

    async def reconcile(self, _key: str) -> float | None:
        checks = {c["metadata"]["name"]: c for c in self._admission_checks.store}
        configs = {c["metadata"]["name"]: c for c in self._configs.store}
        connected = self._connected()
        retry = False
        for cached in list(self._cluster_queues.store):
            queue = cached
            name = queue["metadata"]["name"]
            local = {
                (q["metadata"]["namespace"], q["metadata"]["name"])
                for q in self._local_queues.store
                if (q.get("spec") or {}).get("clusterQueue") == name
            }
            decision = decide_quota(
                queue, admission_checks=checks, configs=configs, local_queues=local, connected=connected
            )
            try:
                if decision.resources is not None:
                    queue = await self._write_quota(queue, decision.resources)
                await self._write_condition(queue, decision)
            except Conflict:
                retry = True  # decided from a stale object: decide again from the cache
            except NotFound:
                continue
        return BATCH_PERIOD if retry else None

    async def _write_quota(self, queue: dict[str, Any], resources: list[dict[str, str]]) -> dict[str, Any]:
        meta = queue["metadata"]
        group = dict(queue["spec"]["resourceGroups"][0])
        flavor = dict(group["flavors"][0])
        before = flavor.get("resources") or []
        flavor["resources"] = resources
        group["flavors"] = [flavor]
        written = await self._api.patch(
            CLUSTER_QUEUES,
            meta["name"],
            {"metadata": {"resourceVersion": meta["resourceVersion"]}, "spec": {"resourceGroups": [group]}},
            field_manager=self._field_manager,
        )
        quota = ", ".join(f"{r['name']}={r['nominalQuota']}" for r in resources)
        was = ", ".join(f"{r.get('name')}={r.get('nominalQuota')}" for r in before)
        log.info("manager quota follows the workers", cluster_queue=meta["name"], quota=quota, was=was)
        self._events.emit(
            written,
            reason="QuotaAutomated",
            note=f"Nominal quota set to the workers' total: {quota} (was {was})",
            action="UpdateQuota",
        )
        return written

    async def _write_condition(self, queue: dict[str, Any], decision: Any) -> None:
        meta = queue["metadata"]
        current = (queue.get("status") or {}).get("conditions") or []
        if decision.condition is None:
            conditions = [c for c in current if c.get("type") != CONDITION]
            if len(conditions) == len(current):
                return
        else:
            conditions, changed = set_condition(
                current,
                condition_type=CONDITION,
                status=decision.condition.status,
                reason=decision.condition.reason,
                message=decision.condition.message,
                now=dt.datetime.now(dt.UTC),
                observed_generation=meta.get("generation"),
            )
            if not changed:
                return
            log.info(
                "quota automation condition",
                cluster_queue=meta["name"],
                status=decision.condition.status,
                reason=decision.condition.reason,
                message=decision.condition.message,
            )
        await self._api.patch_status(
            CLUSTER_QUEUES,
            meta["name"],
            {"metadata": {"resourceVersion": meta["resourceVersion"]}, "status": {"conditions": conditions}},
            field_manager=self._field_manager,
        )
