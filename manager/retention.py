"""Carry out Kueue's Workload retention policies on the manager (``manager.decisions.retention``).

A sweep over the Workload cache every few seconds: cheap (memory only), and it needs no timer per Workload. Deletes
are guarded by the object's uid, so a Workload or Job re-created under the same name is never deleted by mistake;
each one gets an Event and a log line. A failed delete is logged and tried again at the next sweep.
"""

from __future__ import annotations

import datetime as dt

import anyio
import structlog

from federation.kube.api import KubeApi, Propagation
from federation.kube.cache import WatchCache
from federation.kube.errors import KubeError
from federation.kube.recorder import EventRecorder
from federation.kube.resources import JOBS, WORKLOADS
from manager.decisions.retention import RetentionPolicy, retention_step

log = structlog.get_logger(__name__)

SWEEP_SECONDS = 5.0


class RetentionSweeper:
    def __init__(
        self,
        *,
        api: KubeApi,
        policy: RetentionPolicy,
        workloads: WatchCache,
        jobs: WatchCache,
        events: EventRecorder,
    ) -> None:
        self._api = api
        self._policy = policy
        self._workloads = workloads
        self._jobs = jobs
        self._events = events

    async def run(self) -> None:
        if not self._policy.enabled:
            return
        while True:
            await self.sweep()
            await anyio.sleep(SWEEP_SECONDS)

    async def sweep(self) -> int:
        """Delete what is due now; returns how many deletes were made."""
        now = dt.datetime.now(dt.UTC)
        deleted = 0
        for workload in list(self._workloads.store):
            step = retention_step(workload, now=now, policy=self._policy)
            meta = workload["metadata"]
            key = f"{meta['namespace']}/{meta['name']}"
            try:
                if step.delete_workload:
                    await self._api.delete(WORKLOADS, meta["name"], namespace=meta["namespace"], uid=meta["uid"])
                    self._events.emit(
                        workload,
                        reason="Deleted",
                        note="Deleted finished workload due to elapsed retention",
                        action="Delete",
                    )
                    log.info("finished workload deleted: retention elapsed", workload=key)
                    deleted += 1
                elif step.delete_job:
                    deleted += await self._delete_job(workload)
            except KubeError as err:
                log.warning("retention delete failed; tried again at the next sweep", workload=key, error=str(err))
        return deleted

    async def _delete_job(self, workload: dict[str, object]) -> int:
        meta = workload["metadata"]
        assert isinstance(meta, dict)
        owners = [ref for ref in meta.get("ownerReferences") or () if ref.get("kind") == "Job"]
        if not owners:
            await self._api.delete(WORKLOADS, meta["name"], namespace=meta["namespace"], uid=meta["uid"])
            return 1
        job = self._jobs.store.get_by_name(owners[0]["name"], namespace=meta["namespace"])
        await self._api.delete(
            JOBS,
            owners[0]["name"],
            namespace=meta["namespace"],
            uid=owners[0]["uid"],
            propagation_policy=Propagation.BACKGROUND,
            missing_ok=True,
        )
        if job is not None:
            self._events.emit(
                job, reason="Deleted", note="Deleted job: deactivation retention period expired", action="Delete"
            )
        log.info(
            "deactivated workload's job deleted: retention elapsed", workload=f"{meta['namespace']}/{meta['name']}"
        )
        return 1
