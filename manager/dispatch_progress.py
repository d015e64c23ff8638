"""The manager Workload's status as its dispatch goes on, in Kueue's words: its admission checks, Admitted, PodsReady,
the execution time, Finished and Requeued.

The remote sync (``manager.remote_sync``) decides, case by case, which of these a pass writes; the writes, with their
Events, log lines and metrics, are here. Where one of them takes the Workload back (a Rejected check, a PodsReady
timeout, the execution time used up), ``manager.evictions`` carries that out. The writes to the worker are
``manager.worker_copies``'s.
"""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

import structlog

from federation.admission.api_drain import admitted_note
from federation.admission.execution_time import (
    REASON_EXCEEDED,
    exceeded_note,
    exceeded_status,
    limit_of,
    total_execution_time,
)
from federation.admission.orphans import OWNER_NOT_FOUND_MESSAGE, orphan_finish
from federation.admission.pods_ready import (
    REASON_PODS_READY_TIMEOUT,
    deactivation_target,
    pods_ready_step,
    waiting_for_start,
)
from federation.admission.queue_metrics import cohort_ancestors, queued_since, readiness_samples, workload_labels
from federation.admission.requeued import may_take_requeued_step, queues_of, requeued_step
from federation.conditions import conditions_of, find_condition, is_true, parse_time, set_condition, workload_generation
from federation.kube.cache import WatchCache
from federation.kube.recorder import EventRecorder
from federation.obs.metrics import Metrics
from federation.protocol import REASON_ADMITTED, REASON_FAILED, REASON_SUCCEEDED
from manager.config import ManagerConfig
from manager.decisions.admission_checks import (
    CheckGate,
    admitted_checks,
    check_eviction,
    dispatch_gate,
    dispatched_message,
    multikueue_check_names,
    owner_check_eviction,
    rejected_checks,
    waiting_message,
    with_multikueue_message,
    worker_checks_message,
    worker_queue_message,
)
from manager.decisions.ledger import InFlightLedger
from manager.decisions.reservation import topology_ready
from manager.decisions.sync import job_finish
from manager.decisions.unschedulable import cleared_on_finish, shown_unschedulable
from manager.evictions import Evictions
from manager.workload_writes import WorkloadWrites

log = structlog.get_logger(__name__)

Obj = dict[str, Any]


class DispatchProgress:
    def __init__(
        self,
        *,
        config: ManagerConfig,
        writes: WorkloadWrites,
        evictions: Evictions,
        admission_checks: WatchCache,
        cluster_queues: WatchCache,
        local_queues: WatchCache,
        ledger: InFlightLedger,
        events: EventRecorder,
        metrics: Metrics,
        cohorts: WatchCache | None = None,
    ) -> None:
        self._config = config
        self._writes = writes
        self._evictions = evictions
        self._admission_checks = admission_checks
        self._cluster_queues = cluster_queues
        self._local_queues = local_queues
        self._ledger = ledger
        self._events = events
        self._metrics = metrics
        self._cohorts = cohorts
        """Cohorts, for the cohort chain of ``kueue_cohort_subtree_admitted_workloads_total`` (None: not counted)."""

    async def reject_for_owner(self, workload: Obj, rejection: tuple[str, str], *, worker: str) -> None:
        """kfed's check Rejected with Kueue's message, the Workload deactivated and evicted, as Kueue does."""
        check, message = rejection
        multikueue = multikueue_check_names(self._admission_checks.store)
        await self._evictions.evict_for_checks(
            workload,
            owner_check_eviction(check, message),
            worker=worker,
            admission_checks=rejected_checks(
                workload, multikueue_checks=multikueue, message=message, now=dt.datetime.now(dt.UTC)
            ),
        )

    async def show_worker_checks(
        self, workload: Obj, remote_wl: Obj | None, *, worker: str
    ) -> tuple[Obj, float | None]:
        """Until it is ``Admitted``, the MultiKueue check's message says which of the worker's own admission checks
        hold its copy, or why the worker's queue has not admitted it (``worker_queue_message``: after a while, with
        an Event and a log line); returns the Workload as it is now, and the seconds until the queue's reason is to
        be shown (the caller looks again then)."""
        if is_true(workload, "Admitted"):
            return workload, None
        key = f"{workload['metadata']['namespace']}/{workload['metadata']['name']}"
        waiting = worker_checks_message(remote_wl, worker)  # the worker's own checks (a ProvisioningRequest...)
        queued, recheck = (
            (None, None)
            if waiting is not None
            else worker_queue_message(remote_wl, worker, now=dt.datetime.now(dt.UTC))
        )
        message = waiting or queued
        if message is None:
            return workload, recheck
        multikueue = multikueue_check_names(self._admission_checks.store)
        shown = with_multikueue_message(workload, multikueue_checks=multikueue, message=message)
        if shown is None:
            return workload, None
        workload = await self._writes.patch_status(workload, {"admissionChecks": shown})
        if waiting is not None:
            log.info("waiting for the worker's admission checks", workload=key, cluster=worker, message=message)
        else:
            log.info("waiting in the worker's queue", workload=key, cluster=worker, message=message[:300])
            self._events.emit(workload, reason="WaitingOnWorker", note=message[:1000], action="Dispatch")
        return workload, None

    async def show_unschedulable(
        self, workload: Obj, remote_wl: Obj | None, *, worker: str, manager_job: Obj | None
    ) -> Obj:
        """The copy's ``kfed.io/PodsUnschedulable`` on the manager Workload, naming the worker, with a Warning Event
        on the Workload and its Job when it turns ``True``; returns the Workload as it is now."""
        if is_true(workload, "Finished"):
            return workload
        shown = shown_unschedulable(workload, remote_wl, worker=worker, now=dt.datetime.now(dt.UTC))
        if shown is None:
            return workload
        workload = await self._writes.patch_status(workload, {"conditions": shown.conditions})
        key = f"{workload['metadata']['namespace']}/{workload['metadata']['name']}"
        if shown.unschedulable:
            note = shown.message[:1000]
            for regarding in (workload, manager_job) if manager_job is not None else (workload,):
                self._events.emit(
                    regarding, reason="PodsUnschedulable", note=note, action="Schedule", event_type="Warning"
                )
            log.warning("pods unschedulable on the worker", workload=key, cluster=worker, message=shown.message[:300])
        else:
            log.info("pods no longer unschedulable on the worker", workload=key, cluster=worker)
        return workload

    async def checks_gate(self, workload: Obj, *, worker: str, copies: bool) -> tuple[CheckGate, Obj] | None:
        """The Workload's other admission checks (``manager.decisions.admission_checks``). None when this pass
        stops here: it waits for them to be Ready before sending anything (the MultiKueue check's message names
        them), or a Rejected/Retry check evicts it (the eviction path takes over at the next pass); otherwise the
        gate for the plan and the Workload as it is now."""
        key = f"{workload['metadata']['namespace']}/{workload['metadata']['name']}"
        multikueue = multikueue_check_names(self._admission_checks.store)
        gate = dispatch_gate(workload, multikueue_checks=multikueue)
        eviction = check_eviction(gate)
        if eviction is not None:
            await self._evictions.evict_for_checks(workload, eviction, worker=worker)
            return None
        if copies or is_true(workload, "Admitted"):
            return gate, workload
        if gate.open:
            checks = with_multikueue_message(workload, multikueue_checks=multikueue, message=dispatched_message(worker))
            if checks is not None:  # it said what it waited for: now it dispatches
                workload = await self._writes.patch_status(workload, {"admissionChecks": checks})
                log.info("admission checks ready; dispatching", workload=key, cluster=worker)
            return gate, workload
        message = waiting_message(gate.pending, worker)
        checks = with_multikueue_message(workload, multikueue_checks=multikueue, message=message)
        if checks is not None:
            await self._writes.patch_status(workload, {"admissionChecks": checks})
            self._events.emit(workload, reason="WaitingForAdmissionChecks", note=message, action="Dispatch")
            log.info("waiting for admission checks", workload=key, cluster=worker, checks=list(gate.pending))
        return None

    async def requeued(self, workload: Obj, key: str) -> tuple[bool, float | None]:
        """Kueue's second step of ``Requeued`` (``federation.admission.requeued``): ``Reactivated`` once a
        deactivated workload is active again, ``BackoffFinished`` once the backoff of a ``PodsReadyTimeout`` or
        ``AdmissionCheck`` eviction has passed (also when the workload got its reservation again first),
        ``LocalQueueRestarted``/``ClusterQueueRestarted`` once the queue that drained it is started again. Returns
        whether it wrote, and the seconds until the backoff ends while it runs."""
        if not may_take_requeued_step(workload):
            return False, None
        now = dt.datetime.now(dt.UTC)
        local_queue, cluster_queue = queues_of(
            workload,
            local_queue=lambda namespace, name: self._local_queues.store.get_by_name(name, namespace=namespace),
            cluster_queue=self._cluster_queues.store.get_by_name,
        )
        step = requeued_step(workload, now=now, local_queue=local_queue, cluster_queue=cluster_queue)
        if step is None:
            return False, None
        if step.status is None:
            return False, (step.wait_until - now).total_seconds() if step.wait_until is not None else None
        await self._writes.patch_status(workload, step.status)
        log.info("workload requeued", workload=key, reason=step.reason, message=step.message)
        return True, None

    async def out_of_time(self, workload: Obj, *, worker: str, now: dt.datetime) -> None:
        """The workload used its ``maximumExecutionTimeSeconds`` (``federation.admission.execution_time``): deactivate
        it, with Kueue's Warning Event."""
        await self._evictions.deactivate(workload, status=exceeded_status(workload, now=now))
        limit = limit_of(workload) or 0
        self._events.emit(
            workload, reason=REASON_EXCEEDED, note=exceeded_note(limit), action="Deactivate", event_type="Warning"
        )
        key = f"{workload['metadata']['namespace']}/{workload['metadata']['name']}"
        log.warning("workload deactivated: maximum execution time exceeded", workload=key, cluster=worker, limit=limit)

    async def pods_ready(
        self, workload: Obj, *, worker: str, remote_jb: Obj | None, now: dt.datetime
    ) -> tuple[Obj, float | None] | None:
        """Kueue's waitForPodsReady (``federation.admission.pods_ready``): record readiness, or evict with
        ``PodsReadyTimeout`` and a requeue backoff, or deactivate past the requeuing limit (then None). Otherwise
        the workload as it is now and when to look at its readiness again."""
        policy = self._config.wait_for_pods_ready
        if policy is None:
            return workload, None
        step = pods_ready_step(workload, remote_job=remote_jb, now=now, policy=policy, jitter=random.random() * 0.05)
        key = f"{workload['metadata']['namespace']}/{workload['metadata']['name']}"
        if step.deactivate:
            await self._evictions.deactivate(
                workload, status={"conditions": [*conditions_of(workload), deactivation_target(workload, now=now)]}
            )
            log.warning("workload deactivated: requeuing limit exceeded", workload=key, cluster=worker)
            return None
        if step.evict_message is not None:
            await self._evictions.evict(
                workload,
                worker=worker,
                reason=step.evict_message,
                now=now,
                cause=REASON_PODS_READY_TIMEOUT,
                underlying_cause=step.evict_underlying,
                requeue_state=step.requeue_state,
            )
            return None
        if step.condition is not None:
            merged = [c for c in conditions_of(workload) if c.get("type") != "PodsReady"]
            before = workload
            workload = await self._writes.patch_status(workload, {"conditions": [*merged, step.condition]})
            log.info("pods readiness changed", workload=key, cluster=worker, reason=step.condition["reason"])
            if (samples := readiness_samples(before, workload, now=now)) is not None:
                self._metrics.pods_ready(**samples)
        return workload, step.recheck_after

    async def mark_admitted(self, workload: Obj, *, worker: str, remote_workload: Obj | None) -> Obj:
        """The worker admitted the copy: kfed's MultiKueue check becomes Ready, and the Workload is ``Admitted``
        once every check is Ready (Kueue's rule; the others were Ready when the copies were created)."""
        now = dt.datetime.now(dt.UTC)
        status = workload.get("status") or {}
        checks, all_ready = admitted_checks(
            workload, multikueue_checks=multikueue_check_names(self._admission_checks.store), worker=worker, now=now
        )
        conditions = status.get("conditions") or []
        if all_ready:
            conditions, _ = set_condition(
                conditions,
                condition_type="Admitted",
                status=True,
                reason=REASON_ADMITTED,
                message="The workload is admitted",  # Kueue's words; the worker is in status.clusterName
                now=now,
                observed_generation=workload_generation(workload),
            )
            if self._config.wait_for_pods_ready is not None and find_condition(workload, "PodsReady") is None:
                # Kueue's clock for the PodsReady timeout
                conditions = [*conditions, waiting_for_start(workload, now=now)]
        admission = topology_ready(workload, remote_workload)
        if (
            not all_ready
            and admission is None
            and checks == list(status.get("admissionChecks") or ())
            and status.get("clusterName") == worker
        ):
            return workload  # already recorded; waits for another check to become Ready again
        # Kueue's rule: once admitted, clusterName replaces the nomination (they are mutually exclusive).
        patch: Obj = {
            "conditions": conditions,
            "clusterName": worker,
            "nominatedClusterNames": None,
            "admissionChecks": checks,
        }
        if admission is not None:  # delayedTopologyRequest Pending -> Ready: the worker assigned the topology
            patch["admission"] = admission
        # a reservation still held back (manager.reservation_holds) is written with it: one write records both
        updated = await self._writes.patch_status(workload, patch)
        key = f"{workload['metadata']['namespace']}/{workload['metadata']['name']}"
        reserved = find_condition(remote_workload, "QuotaReserved") if remote_workload else None
        if reserved is not None and reserved.get("lastTransitionTime"):
            self._ledger.reserved(key, at=parse_time(str(reserved["lastTransitionTime"])))
        if not all_ready:
            log.warning("worker admitted the copy but an admission check is not Ready", workload=key, cluster=worker)
            return updated
        queue = (status.get("admission") or {}).get("clusterQueue", "")
        reserved_at = find_condition(workload, "QuotaReserved") or {}
        since = parse_time(str(reserved_at.get("lastTransitionTime") or workload["metadata"]["creationTimestamp"]))
        namespace, local_queue, priority_class = workload_labels(workload)
        self._metrics.admitted(
            cluster_queue=queue,
            namespace=namespace,
            local_queue=local_queue,
            priority_class=priority_class,
            waited=(now - parse_time(queued_since(workload))).total_seconds(),
            checks_waited=(now - since).total_seconds(),
        )
        self._metrics.multikueue_admitted.labels(queue, worker, self._metrics.role).inc()
        if self._cohorts is not None:
            ancestors = cohort_ancestors(self._cluster_queues.store.get_by_name(queue), self._cohorts.store.get_by_name)
            self._metrics.cohort_admitted(cohorts=ancestors, priority_class=priority_class)
        self._events.emit(
            workload,
            reason="Admitted",
            note=admitted_note(queue, reserved_seconds=(now - since).total_seconds()),
            action="Admit",
        )
        log.info("workload admitted", workload=key, cluster=worker, queue=queue)
        return updated

    async def finish(self, workload: Obj, *, remote_job: Obj | None, worker: str) -> None:
        """The Job ended (``remote_job``'s Complete or Failed): ``Finished`` with Kueue's reason and the Job's
        message."""
        finish = job_finish(remote_job)
        assert finish is not None
        now = dt.datetime.now(dt.UTC)
        conditions, _ = set_condition(
            (workload.get("status") or {}).get("conditions") or [],
            condition_type="Finished",
            status=True,
            reason=REASON_SUCCEEDED if finish.succeeded else REASON_FAILED,
            message=finish.message or ("Job finished successfully" if finish.succeeded else "Job failed"),
            now=now,
            observed_generation=workload_generation(workload),
        )
        await self._finished(workload, conditions, now=now, worker=worker, succeeded=finish.succeeded)

    async def finish_orphaned(self, workload: Obj, *, worker: str) -> None:
        """Its Job is gone and it was left behind, or its Job is being deleted (``federation.admission.orphans``):
        ``Finished``, reason ``OwnerNotFound``, as Kueue finishes it; the next pass removes its copies."""
        now = dt.datetime.now(dt.UTC)
        await self._finished(workload, orphan_finish(workload, now=now), now=now, worker=worker, succeeded=False)
        key = f"{workload['metadata']['namespace']}/{workload['metadata']['name']}"
        log.warning("orphaned workload finished", workload=key, message=OWNER_NOT_FOUND_MESSAGE)

    async def _finished(
        self, workload: Obj, conditions: list[dict[str, Any]], *, now: dt.datetime, worker: str, succeeded: bool
    ) -> None:
        conditions = cleared_on_finish(conditions, now=now)
        if conditions != list(conditions_of(workload)):
            await self._writes.patch_status(workload, {"conditions": conditions})
        key = f"{workload['metadata']['namespace']}/{workload['metadata']['name']}"
        self._ledger.forget(key)
        queue = str(((workload.get("status") or {}).get("admission") or {}).get("clusterQueue") or "")
        namespace, local_queue, priority_class = workload_labels(workload)
        finished = {**workload, "status": {**(workload.get("status") or {}), "conditions": conditions}}
        self._metrics.finished(
            cluster_queue=queue,
            namespace=namespace,
            local_queue=local_queue,
            priority_class=priority_class,
            execution_seconds=total_execution_time(finished),
        )
        log.info("workload finished", workload=key, cluster=worker, succeeded=succeeded)
