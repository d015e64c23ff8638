"""Kueue's ClusterQueue, LocalQueue and Cohort status on the manager, written from what a scheduling pass saw.

Why this module exists: the queues' status (pending, reserving and admitted counts, usage, ``Active`` with the
queue's own reasons and its admission checks', the finalizer of a queue in use) is an aggregate of every Workload,
so it is written only when it changed and at most once per :data:`QUEUE_STATUS_INTERVAL` seconds, whatever the
number of passes; a write skipped for the interval is made by a pass scheduled for when it is over. The queues are
read through :class:`WriteOverlay` views, since on a busy apiserver the watch can lag more than the interval, and a
write at the old resourceVersion is a 409 Conflict.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from typing import Any

import anyio

from federation.admission.api_queue_status import (
    cluster_queue_references,
    cohort_status_patches,
    finalizer_changes,
    in_use_changes,
    local_queue_status_patches,
    pending_by_cluster_queue,
    pending_by_local_queue,
    queue_status_patches,
)
from federation.admission.api_state import QuotaState
from federation.kube.api import KubeApi
from federation.kube.cache import SyncedCache
from federation.kube.overlay import WriteOverlay
from federation.kube.resources import (
    ADMISSION_CHECKS,
    CLUSTER_QUEUES,
    COHORTS,
    LOCAL_QUEUES,
    RESOURCE_FLAVORS,
    Resource,
)
from federation.kube.status_writes import write_finalizers, write_status_patches

QUEUE_STATUS_INTERVAL = 1.0


class QueueStatusWrites:
    def __init__(
        self,
        *,
        api: KubeApi,
        field_manager: str,
        fair_sharing: bool,
        cluster_queues: SyncedCache,
        local_queues: SyncedCache,
        cohorts: SyncedCache,
        admission_checks: SyncedCache,
        flavors: SyncedCache,
        admission_check_view: WriteOverlay | None = None,
        start_soon: Callable[..., None],
        trigger: Callable[[], None],
    ) -> None:
        """``start_soon``: starts a task in the scheduler's task group; ``trigger()``: a scheduling pass soon."""
        self._api = api
        self._field_manager = field_manager
        self._fair_sharing = fair_sharing
        self._start_soon = start_soon
        self._trigger = trigger
        flavor_view = WriteOverlay(flavors.store)
        flavors.add_handler(flavor_view.observe)
        if admission_check_view is None:
            admission_check_view = WriteOverlay(admission_checks.store)
            admission_checks.add_handler(admission_check_view.observe)
        self._in_use: tuple[tuple[Resource, WriteOverlay], ...] = (
            (RESOURCE_FLAVORS, flavor_view),
            (ADMISSION_CHECKS, admission_check_view),
        )
        """The kinds that carry Kueue's resource-in-use finalizer while a ClusterQueue names them."""
        self.cluster_queues = WriteOverlay(cluster_queues.store)
        """The ClusterQueues with this process's status writes laid over the cache."""
        self._local_queues = WriteOverlay(local_queues.store)
        self._cohorts = WriteOverlay(cohorts.store)
        cluster_queues.add_handler(self.cluster_queues.observe)
        local_queues.add_handler(self._local_queues.observe)
        cohorts.add_handler(self._cohorts.observe)
        self._written_at = -QUEUE_STATUS_INTERVAL
        self._deferred = False
        self._lq_counts: dict[str, tuple[list[Any], dict[str, int]]] = {}

    async def _trigger_after(self, delay: float) -> None:
        await anyio.sleep(delay)
        self._deferred = False
        self._trigger()

    async def _write_in_use(self, queues: dict[str, dict[str, Any]]) -> bool:
        """Kueue's resource-in-use finalizer on the ResourceFlavors and AdmissionChecks (``in_use_changes``)."""
        used = dict(zip((RESOURCE_FLAVORS, ADMISSION_CHECKS), cluster_queue_references(queues.values()), strict=True))
        all_written = True
        for resource, overlay in self._in_use:
            async with overlay.write_lock:  # the AdmissionChecks' status writer shares their view
                current = {str(o["metadata"]["name"]): o for o in overlay}
                ok, _ = await write_finalizers(
                    self._api,
                    resource,
                    in_use_changes(current, used[resource]),
                    current=current,
                    field_manager=self._field_manager,
                    overlay=overlay,
                )
            all_written &= ok
        return all_written

    async def write(
        self,
        state: QuotaState,
        queues: dict[str, dict[str, Any]],
        *,
        admitted: set[str],
        admitted_in: set[str],
        now: dt.datetime,
    ) -> None:
        """Write what changed in the queues' status after a pass that built ``state`` and admitted ``admitted`` (in
        the ClusterQueues ``admitted_in``); ``queues``: the ClusterQueues by name, as the pass read them."""
        api, field_manager = self._api, self._field_manager
        wait = self._written_at + QUEUE_STATUS_INTERVAL - time.monotonic()
        if wait > 0:
            if not self._deferred:
                self._deferred = True
                self._start_soon(self._trigger_after, wait)
            return
        self._written_at = time.monotonic()
        pending = pending_by_cluster_queue(state, admitted)
        finalized, updated = await write_finalizers(
            api,
            CLUSTER_QUEUES,
            finalizer_changes(state, queues),
            current=queues,
            field_manager=field_manager,
            overlay=self.cluster_queues,
        )
        queues = {**queues, **updated}  # the status below is written at the resourceVersion the finalizers made
        written = await write_status_patches(
            api,
            CLUSTER_QUEUES,
            queue_status_patches(
                state,
                queues,
                pending=pending,
                now=now,
                fair_sharing=self._fair_sharing,
            ),
            current=queues,
            field_manager=field_manager,
            overlay=self.cluster_queues,
        )
        written &= finalized
        written &= await self._write_in_use(queues)
        cohorts = {str(c["metadata"]["name"]): c for c in self._cohorts}
        written &= await write_status_patches(
            api,
            COHORTS,
            cohort_status_patches(state, cohorts, fair_sharing=self._fair_sharing),
            current=cohorts,
            field_manager=field_manager,
            overlay=self._cohorts,
        )
        local_queues = {f"{q['metadata']['namespace']}/{q['metadata']['name']}": q for q in self._local_queues}
        lq_patches = local_queue_status_patches(
            state,
            local_queues,
            pending=pending_by_local_queue(state, admitted, memo=self._lq_counts, admitted_in=admitted_in),
            now=now,
        )
        written &= await write_status_patches(
            api,
            LOCAL_QUEUES,
            lq_patches,
            current=local_queues,
            field_manager=field_manager,
            overlay=self._local_queues,
        )
        if not written:
            self._trigger()
