"""Taking a dispatched Workload back from its worker, whatever the reason, in Kueue's steps.

First the decision is recorded (``Evicted=True`` with Kueue's reason, an Event, the eviction counters); from then on
each pass of the remote sync withdraws it: the copies on the worker are deleted, and once the worker confirms they
are gone the manager Job is stopped and the quota released (``Requeued``), so the Job never runs on two workers at
once. A worker that cannot be reached is waited for until the worker-lost timeout (each Workload it holds is told so
once the outage is more than a blip), then requeued without that confirmation (its copies are deleted when it
answers again). Copies that do not go (a finalizer on one, pods stuck terminating) are waited for the same way:
named on the Workload once the wait outlasts a graceful stop, and given up on after the worker-lost timeout. The
remote sync (``manager.remote_sync``) decides when; this module carries it out, with the conditions from
``manager.decisions.withdrawal``.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from typing import Any

import structlog

from federation.admission.eviction_counts import scheduling_stats_after
from federation.admission.queue_metrics import eviction_labels, eviction_latency, pods_ready_to_evicted, workload_labels
from federation.conditions import find_condition
from federation.kube.api import KubeApi
from federation.kube.cache import SyncedCache
from federation.kube.recorder import EventSink
from federation.kube.resources import WORKLOADS
from federation.obs.metrics import Metrics
from federation.pod_injection import requested_count
from manager.config import ManagerConfig
from manager.copy_cleanup import CopyCleaner
from manager.decisions.admission_checks import CheckEviction, eviction_conditions, multikueue_check_names
from manager.decisions.ledger import InFlightLedger
from manager.decisions.refusals import REFUSED_UNTIL_ANNOTATION, refusal_annotations
from manager.decisions.withdrawal import (
    EXCLUDED_CLUSTERS_ANNOTATION,
    REASON_EVICTED_BY_ADMISSION_CHECK,
    WITHDRAWN_FROM_ANNOTATION,
    copies_not_deleted_message,
    eviction_of,
    eviction_status,
    exclusion_annotation,
    linger_report_after,
    requeue_status,
    unreachable_report_in,
    withdrawn_annotation,
    withdrawn_from,
    worker_lost_message,
    worker_lost_time_left,
    worker_unreachable_message,
)
from manager.manager_jobs import stop_manager_job
from manager.worker_connection import WorkerConnection
from manager.workers import WorkerPool
from manager.workload_writes import WorkloadWrites

log = structlog.get_logger(__name__)

Obj = dict[str, Any]

UNREACHABLE_RECHECK_SECONDS = 30.0
"""While a workload's worker is unreachable, look again at least this often (the timeout may change meanwhile)."""
UNREACHABLE_TOLD_LIMIT = 100_000
"""How many Workloads' outage reports are remembered before the memory is cleared."""


class Evictions:
    def __init__(
        self,
        *,
        api: KubeApi,
        config: ManagerConfig,
        writes: WorkloadWrites,
        admission_checks: SyncedCache,
        pool: WorkerPool,
        ledger: InFlightLedger,
        cleaner: CopyCleaner,
        events: EventSink,
        metrics: Metrics,
        on_requeued: Callable[[str], None] = lambda _key: None,
    ) -> None:
        """``on_requeued(key)``: told when a Workload's quota was released (its dispatch is over)."""
        self._api = api
        self._config = config
        self._writes = writes
        self._admission_checks = admission_checks
        self._pool = pool
        self._ledger = ledger
        self._cleaner = cleaner
        self._events = events
        self._metrics = metrics
        self._on_requeued = on_requeued
        self._withdrawing_since: dict[str, tuple[str, float, bool]] = {}
        """Workload key → (when it was evicted, the monotonic time its withdrawal started waiting for its copies to
        go, whether that was told); dropped when the workload is requeued."""
        self._unreachable_told: dict[str, dt.datetime] = {}
        """Workload key → the start of the outage its Workload and Job were told about (once per outage)."""

    async def worker_unreachable(
        self,
        workload: Obj,
        manager_job: Obj | None,
        *,
        worker: str,
        since: dt.datetime | None = None,
        problem: str | None = None,
    ) -> float | None:
        """The holding worker cannot be reached: wait (a blip evicts nothing) until the worker-lost timeout, counted
        from when the connection was lost, then requeue deliberately and visibly without confirming the copies are
        gone; they are deleted when the worker answers again (see ``CopyCleaner.delete_strays``). ``since`` and
        ``problem`` are given when the copies are out of reach for another cause than the connection (the worker's
        kubeconfig names another server since then)."""
        if since is None:
            since = self._pool.unreachable_since(worker)
        now = dt.datetime.now(dt.UTC)
        timeout = self._config.worker_lost_timeout
        left = worker_lost_time_left(since, now=now, timeout=timeout)
        key = f"{workload['metadata']['namespace']}/{workload['metadata']['name']}"
        if left > 0:
            report_in = unreachable_report_in(since, now=now, timeout=timeout)
            if since is not None and report_in <= 0 and self._unreachable_told.get(key) != since:
                why = self._pool.dropped_reason(worker) if problem is None else problem
                self._tell_unreachable(key, workload, manager_job, worker=worker, since=since, problem=why)
            elif report_in > 0:
                return min(left, report_in, UNREACHABLE_RECHECK_SECONDS)
            return min(left, UNREACHABLE_RECHECK_SECONDS)
        self._unreachable_told.pop(key, None)
        message = worker_lost_message(worker, timeout=self._config.worker_lost_timeout)
        key = await self.requeue(
            workload, manager_job, reason=REASON_EVICTED_BY_ADMISSION_CHECK, message=message, counted=True
        )
        self.report_eviction(workload, note=f"{message}; requeued", worker=worker)
        log.warning("workload requeued from a lost worker", workload=key, cluster=worker, message=message)
        return None

    def _tell_unreachable(
        self, key: str, workload: Obj, manager_job: Obj | None, *, worker: str, since: dt.datetime, problem: str
    ) -> None:
        """Once per outage: a Warning Event on the Workload and its Job saying what they wait for, and a log line."""
        if len(self._unreachable_told) >= UNREACHABLE_TOLD_LIMIT:
            self._unreachable_told.clear()  # entries of Workloads that finished meanwhile; at worst one more Event
        self._unreachable_told[key] = since
        message = worker_unreachable_message(
            worker, since=since, timeout=self._config.worker_lost_timeout, problem=problem
        )
        for regarding in (workload, manager_job) if manager_job is not None else (workload,):
            self._events.emit(regarding, reason="WorkerUnreachable", note=message, action="Sync", event_type="Warning")
        log.warning("waiting for an unreachable worker", workload=key, cluster=worker, message=message)

    def count_eviction(self, workload: Obj, *, cause: str, worker: str, underlying_cause: str = "") -> None:
        """Kueue's eviction counters (per ClusterQueue and LocalQueue) and MultiKueue's per worker."""
        queue = str(((workload.get("status") or {}).get("admission") or {}).get("clusterQueue") or "")
        namespace, local_queue, priority_class = workload_labels(workload)
        reason, underlying = eviction_labels(cause, underlying_cause)
        self._metrics.evicted(
            cluster_queue=queue,
            namespace=namespace,
            local_queue=local_queue,
            priority_class=priority_class,
            reason=reason,
            underlying_cause=underlying,
            pods_ready_for=pods_ready_to_evicted(workload, now=dt.datetime.now(dt.UTC)),
        )
        self._metrics.multikueue_evicted.labels(queue, worker, cause, self._metrics.role).inc()

    def report_eviction(
        self,
        workload: Obj,
        *,
        note: str,
        worker: str,
        cause: str = REASON_EVICTED_BY_ADMISSION_CHECK,
        underlying_cause: str = "",
    ) -> None:
        """Count an eviction kfed decided for the workload's worker, and say so on the Workload (an Event)."""
        self.count_eviction(workload, cause=cause, worker=worker, underlying_cause=underlying_cause)
        self._events.emit(
            workload,
            reason=f"EvictedDueTo{cause}",
            note=note,
            action="Evict",
            event_type="Normal",  # as Kueue records its EvictedDueTo… Events
        )

    async def deactivate(self, workload: Obj, *, status: Obj) -> None:
        """Deactivate the workload for kfed's own reason: ``status`` (its ``DeactivationTarget`` condition) first,
        then ``spec.active: false``; the eviction that follows names the target's reason
        (``federation.admission.deactivation``)."""
        workload = await self._writes.patch_status(workload, status)
        meta = workload["metadata"]
        self._writes.wrote(
            workload,
            await self._api.patch(
                WORKLOADS,
                meta["name"],
                {"spec": {"active": False}},
                namespace=meta["namespace"],
                field_manager=self._config.field_manager,
            ),
        )

    async def exclude(self, workload: Obj, *, worker: str, why: str, refused: bool = False) -> None:
        """Remember on the Workload that ``worker`` holds a foreign object of this name, or (``refused``) refused to
        create our copy (avoided until the time ``manager.decisions.refusals`` gives); the next pass withdraws, and
        the workload is not dispatched there while that holds."""
        meta = workload["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        annotations: dict[str, str]
        if refused:
            annotations = refusal_annotations(
                workload,
                worker,
                now=dt.datetime.now(dt.UTC),
                base=self._config.refusal_backoff,
                cap=self._config.refusal_backoff_max,
            )
            retry_after = annotations[REFUSED_UNTIL_ANNOTATION]
            log.error("worker refused a copy", workload=key, cluster=worker, error=why, retry_after=retry_after)
            reason = "RemoteWriteForbidden"
        else:
            log.warning("remote name taken by a foreign object", workload=key, cluster=worker, error=why)
            reason = "RemoteObjectConflict"
            annotations = {EXCLUDED_CLUSTERS_ANNOTATION: exclusion_annotation(workload, worker)}
        self._events.emit(workload, reason=reason, note=why[:1000], action="Dispatch", event_type="Warning")
        updated = await self._api.patch(
            WORKLOADS,
            meta["name"],
            {"metadata": {"annotations": annotations}},
            namespace=meta["namespace"],
            field_manager=self._config.field_manager,
        )
        self._writes.wrote(workload, updated)

    async def evict(
        self,
        workload: Obj,
        *,
        worker: str,
        reason: str,
        now: dt.datetime,
        cause: str = REASON_EVICTED_BY_ADMISSION_CHECK,
        underlying_cause: str = "",
        requeue_state: Obj | None = None,
    ) -> None:
        """Record the decision to take the workload back (``Evicted=True`` with reason ``cause``; for the MultiKueue
        check's own reasons the check in ``Retry``): from here on every pass withdraws it, whatever made the
        decision, until its copies are gone and the quota is released."""
        meta = workload["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        by_check = cause == REASON_EVICTED_BY_ADMISSION_CHECK
        if by_check and worker not in withdrawn_from(workload):
            workload = self._writes.wrote(
                workload,
                await self._api.patch(
                    WORKLOADS,
                    meta["name"],
                    {"metadata": {"annotations": {WITHDRAWN_FROM_ANNOTATION: withdrawn_annotation(workload, worker)}}},
                    namespace=meta["namespace"],
                    field_manager=self._config.field_manager,
                ),
            )
            meta = workload["metadata"]
        status = eviction_status(
            workload,
            reason=cause,
            message=reason,
            now=now,
            retry_checks=multikueue_check_names(self._admission_checks.store) if by_check else (),
        )
        if requeue_state is not None:
            status["requeueState"] = dict(requeue_state)
        status["schedulingStats"] = scheduling_stats_after(workload, cause, underlying_cause=underlying_cause)
        await self._writes.patch_status(workload, status)
        self.report_eviction(
            workload,
            note=f"{reason}; withdrawing it from the worker",
            worker=worker,
            cause=cause,
            underlying_cause=underlying_cause,
        )
        log.warning("workload evicted from its worker", workload=key, cluster=worker, reason=reason)

    async def withdraw(
        self, conn: WorkerConnection, workload: Obj, manager_job: Obj | None, copies: list[Obj | None]
    ) -> float | None:
        """Carry out an eviction: delete our copies in ``conn``'s worker, and once they are confirmed gone (the
        worker's caches no longer hold them) stop the manager Job and release the reservation (requeued)."""
        meta = workload["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        reason, message = eviction_of(workload)
        present = [copy for copy in copies if copy is not None]
        if present:
            await self._cleaner.delete_copies(conn, copies, why=message)
            if await self._copies_linger(
                workload, manager_job, worker=conn.name, copies=present, why=(reason, message)
            ):
                return None  # requeued without them
            return 1.0  # their DELETED events bring this key back; the delay is a safety net
        await self.requeue(workload, manager_job, reason=reason, message=message)
        log.info("workload requeued", workload=key, cluster=conn.name, reason=reason, message=message)
        return None

    async def _copies_linger(
        self, workload: Obj, manager_job: Obj | None, *, worker: str, copies: list[Obj], why: tuple[str, str]
    ) -> bool:
        """Copies that do not go (a finalizer someone put on one, its pods stuck terminating on a dead node) are
        named on the Workload and its Job (a Warning Event) and in the log once the wait outlasts a graceful stop of
        their pods (``linger_report_after``); after the worker-lost timeout the workload is requeued without them, as
        for a worker that does not answer. Returns whether it was requeued."""
        meta = workload["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        # one wait per eviction: an entry a withdrawal left behind (cut short by a lost lease) never shortens the next
        evicted_at = str((find_condition(workload, "Evicted") or {}).get("lastTransitionTime") or "")
        now = time.monotonic()
        if len(self._withdrawing_since) >= UNREACHABLE_TOLD_LIMIT:
            self._withdrawing_since.clear()  # entries of Workloads deleted meanwhile; at worst a wait starts over
        entry = self._withdrawing_since.get(key)
        if entry is None or entry[0] != evicted_at:
            entry = self._withdrawing_since[key] = (evicted_at, now, False)
        _, since, told = entry
        waited = now - since
        timeout = self._config.worker_lost_timeout
        given_up = waited >= timeout
        if not given_up and (told or waited < linger_report_after(copies, timeout=timeout)):
            return False
        note = copies_not_deleted_message(worker, copies, waited=waited, timeout=timeout, given_up=given_up)
        if given_up:
            await self.requeue(workload, manager_job, reason=why[0], message=why[1])
        else:
            self._withdrawing_since[key] = (evicted_at, since, True)
        for regarding in (workload, manager_job) if manager_job is not None else (workload,):
            self._events.emit(regarding, reason="CopiesNotDeleted", note=note, action="Sync", event_type="Warning")
        log.warning("copies in the worker not deleted", workload=key, cluster=worker, message=note)
        return given_up

    async def requeue(
        self, workload: Obj, manager_job: Obj | None, *, reason: str, message: str, counted: bool = False
    ) -> str:
        """Stop the manager Job and release the reservation (the workload is queued again); returns its key.
        ``counted``: this is the eviction itself (none was recorded before), counted in ``schedulingStats``."""
        meta = workload["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        self._withdrawing_since.pop(key, None)
        if manager_job is not None:
            was_running = not (manager_job.get("spec") or {}).get("suspend", False)
            stopped = await stop_manager_job(
                self._api, manager_job, field_manager=self._config.field_manager, pod_count=requested_count(workload)
            )
            if was_running:  # Kueue: the Job it suspends for an eviction gets Stopped, with the eviction's message
                self._events.emit(stopped, reason="Stopped", note=message, action="Stop")
        now = dt.datetime.now(dt.UTC)
        status = requeue_status(workload, reason=reason, message=message, now=now)
        if counted:
            status["schedulingStats"] = scheduling_stats_after(workload, reason)
        await self._writes.patch_status(workload, status)
        latency = eviction_latency(workload, {"status": status}, now=now)
        if latency is not None:
            self._metrics.quota_released(cluster_queue=latency[0], reason=latency[1], seconds=latency[2])
        self._ledger.forget(key)
        self._on_requeued(key)
        return key

    async def evict_for_checks(
        self,
        workload: Obj,
        eviction: CheckEviction,
        *,
        worker: str,
        admission_checks: list[dict[str, Any]] | None = None,
    ) -> None:
        """Start Kueue's eviction for a Rejected (deactivate first) or Retry check: ``Evicted=True`` while the
        reservation is held; the eviction path then withdraws any copies and releases the quota.
        ``admission_checks``: the check list to write with it (kfed's own check Rejected)."""
        meta = workload["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        if eviction.deactivate and (workload.get("spec") or {}).get("active", True) is not False:
            workload = self._writes.wrote(
                workload,
                await self._api.patch(
                    WORKLOADS,
                    meta["name"],
                    {"metadata": {"resourceVersion": meta["resourceVersion"]}, "spec": {"active": False}},
                    namespace=meta["namespace"],
                    field_manager=self._config.field_manager,
                ),
            )
        now = dt.datetime.now(dt.UTC)
        await self._writes.patch_status(
            workload,
            {
                "conditions": eviction_conditions(workload, eviction, now=now),
                "schedulingStats": scheduling_stats_after(workload, eviction.reason),
                **({"admissionChecks": admission_checks} if admission_checks is not None else {}),
            },
        )
        self.count_eviction(workload, cause=eviction.reason, worker=worker)
        self._events.emit(  # Kueue: AdmissionCheckRejected is a Warning, its EvictedDueTo… Events are Normal
            workload,
            reason=eviction.event_reason,
            note=eviction.event_message,
            action="Evict",
            event_type="Warning" if eviction.deactivate else "Normal",
        )
        log.warning(
            "admission check evicts the workload",
            workload=key,
            cluster=worker,
            deactivated=eviction.deactivate,
            message=eviction.message,
        )
