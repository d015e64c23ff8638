"""kfed-agent's admission passes: local admission of pending Workloads, and the steps after it that Kueue takes.

Why this module exists: admission is the part of the agent's pass that reads the queues, quotas, flavors and checks
(``decisions.idle`` skips it while none of them changed) and writes only Workloads, mostly their status: the
``Requeued`` step of released Workloads (``federation.admission.requeued``), the steps of quota-holding Workloads'
admission checks (``decisions.checks``, which may also deactivate one), then the admissions, reservations, preemptions
and pending reasons that ``decisions.admission`` plans (held back, with Kueue's ``blockAdmission``, while an admitted
Workload's pods are not ready). The loop (``worker_agent.reconciler``) runs it first in each pass, and wakes when
``next_requeue_at`` says a requeue backoff ends.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from typing import Any

import anyio
import structlog

from federation.admission.api_drain import Veto, WorkloadUpdate
from federation.admission.api_workloads import workload_key
from federation.admission.cycle import DEFAULT_CYCLE_CONFIG, CycleConfig
from federation.admission.decisions import Admit
from federation.admission.queue_metrics import queued_since, workload_labels
from federation.admission.requeued import queues_of, requeued_step
from federation.conditions import find_condition, parse_time
from federation.kube import resources as r
from federation.kube.recorder import EventRecorder
from federation.obs.metrics import Metrics
from federation.protocol import REASON_PENDING_EVALUATION
from worker_agent.decisions.admission import blocking_veto, plan_admissions
from worker_agent.decisions.checks import (
    admitted_event_note,
    admitted_status,
    checks_for,
    checks_step,
    requeue_invalid,
    second_pass_failed,
    second_pass_problem,
)
from worker_agent.decisions.idle import IdleInputs
from worker_agent.decisions.tas_admission import TasPlacer
from worker_agent.indexes import WorkloadIndex
from worker_agent.provisioning import Provisioning
from worker_agent.tas import Tas
from worker_agent.world import World
from worker_agent.writes import WRITE_CONCURRENCY, Writes, copy_of_manager, limited, queue_of

log = structlog.get_logger(__name__)

Obj = dict[str, Any]

_ROUTINE_ADMISSION_EVENTS = frozenset({"QuotaReserved", "Admitted"})


class AdmissionPasses:
    def __init__(
        self,
        *,
        world: World,
        writes: Writes,
        workload_index: WorkloadIndex,
        cluster: str,
        events: EventRecorder,
        metrics: Metrics,
        clock: Callable[[], dt.datetime],
        on_admitted: Callable[[float], None],
        tas: Tas | None,
        provisioning: Provisioning | None,
        block_admission: bool = False,
        cycle: CycleConfig = DEFAULT_CYCLE_CONFIG,
    ) -> None:
        """``workload_index``: the Workloads' facts by key (``worker_agent.indexes``), shared with the Job-side
        passes; ``block_admission``: Kueue's ``waitForPodsReady.blockAdmission`` (:meth:`_blocking_veto`);
        ``cycle``: Kueue's scheduler-wide switches (``fairSharing``)."""
        self.world = world
        self.writes = writes
        self.workload_index = workload_index
        self.events = events
        self.metrics = metrics
        self.clock = clock
        self.on_admitted = on_admitted
        self.tas = tas
        self.provisioning = provisioning
        self.block_admission = block_admission
        self.cycle = cycle
        self.next_requeue_at: float | None = None
        """When the next requeue backoff ends (epoch seconds): the loop runs a pass then."""
        self.admission_idle = IdleInputs()
        """The admission pass is skipped while nothing it reads changed since it last had nothing to do."""
        self._log = log.bind(cluster=cluster)

    def _workload_by_key(self, key: str) -> Obj | None:
        namespace, _, name = key.partition("/")
        return self.world.workload(namespace, name)

    def _admission_stamp(self) -> tuple[int, ...] | None:
        """The versions of everything the admission pass reads (None: it reads more than the stamp can tell)."""
        if self.tas is not None and self.tas.index.flavors:
            return None  # TAS placement reads the nodes and pods through the topology index: always decide afresh
        stamp = self.world.admission_stamp()
        if self.tas is not None:
            stamp += (*(cache.store.version for cache in self.tas.caches()), self.tas.pod_writes.version)
        if self.provisioning is not None:  # which checks a ClusterQueue's admission lists
            stamp += tuple(cache.store.version for cache in self.provisioning.caches())
        return stamp

    async def admission_pass(self) -> None:
        now = self.clock()
        stamp = self._admission_stamp()  # before anything is read: a change during the pass makes the next one run
        if self.admission_idle.unchanged(stamp, now=now.timestamp(), due=self.next_requeue_at):
            return
        backoff_ends = await self._requeued_pass(now)  # before the state: an admission then starts from its write
        state = self.world.local_state(now_seconds=now.timestamp())
        self.next_requeue_at = state.next_requeue_at
        if backoff_ends is not None:
            self.next_requeue_at = min(backoff_ends, self.next_requeue_at or backoff_ends)
        if self.tas is not None:
            placer = self.tas.placer(state, self.world.all_workloads())
            placer.delay = self._delays_topology
            acted = await self._checks_pass(now, placer)  # second passes first: they hold quota already
            started = time.perf_counter()
            updates = plan_admissions(
                state,
                now=now,
                veto=self._blocking_veto(placer.veto),
                topology=placer.assignments,
                checks=self._checks_of,
                delayed=placer.delayed,
                workload_of=self._workload_by_key,
                config=self.cycle,
            )
        else:
            acted = await self._checks_pass(now, None)
            started = time.perf_counter()
            updates = plan_admissions(
                state,
                now=now,
                veto=self._blocking_veto(None),
                checks=self._checks_of,
                workload_of=self._workload_by_key,
                config=self.cycle,
            )
        if state.pending:  # Kueue counts an attempt per cycle that had heads to try
            admitted = any(update.outcome in ("admitted", "reserved") for update in updates)
            self.metrics.admission_attempt(admitted=admitted, seconds=time.perf_counter() - started)
        self.admission_idle.ran(stamp, acted=acted or bool(updates))
        if not updates:
            return
        limiter = anyio.CapacityLimiter(WRITE_CONCURRENCY)
        async with anyio.create_task_group() as tg:
            for update in updates:
                tg.start_soon(limited, limiter, self._write_admission, update, now)

    async def _requeued_pass(self, now: dt.datetime) -> float | None:
        """Kueue's second step of ``Requeued`` (``federation.admission.requeued``): a Workload released with
        ``Requeued=False`` gets ``True`` reason ``Reactivated`` once it is active again, or ``BackoffFinished`` once
        its requeue backoff has passed. Returns when the next backoff ends (epoch seconds), or None."""
        next_end: float | None = None
        local_queues = self.world.local_queues.store
        self.workload_index.refresh()
        for key in self.workload_index.holding("may_take_requeued_step"):
            workload = self.world.workload_by_key(key)
            if workload is None:
                continue
            local_queue, cluster_queue = queues_of(
                workload,
                local_queue=lambda namespace, name: local_queues.get_by_name(name, namespace=namespace),
                cluster_queue=self.world.cluster_queues.store.get_by_name,
            )
            step = requeued_step(workload, now=now, local_queue=local_queue, cluster_queue=cluster_queue)
            if step is None:
                continue
            if step.status is None:
                end = step.wait_until.timestamp() if step.wait_until is not None else None
                if end is not None:
                    next_end = end if next_end is None else min(next_end, end)
                continue
            bound = self._log.bind(workload=workload_key(workload))
            written = await self.writes.patch_status(r.WORKLOADS, workload, {"status": step.status}, bound)
            if written is None:
                continue
            self.world.workload_writes.remember(written)
            bound.info("workload.requeued", reason=step.reason, message=step.message)
        return next_end

    def _blocking_veto(self, then: Veto | None) -> Veto | None:
        """``then`` (the TAS placement's veto, or None), held back by Kueue's ``blockAdmission`` when it is on
        (``decisions.admission.blocking_veto``)."""
        if not self.block_admission:
            return then
        self.workload_index.refresh()
        keys = self.workload_index.holding("unready_quota_holder")
        holders = [workload for key in keys if (workload := self._workload_by_key(key)) is not None]
        return blocking_veto(holders, then)

    def _checks_of(self, admit: Admit) -> list[str]:
        queue = self.world.cluster_queues.store.get(admit.assignment.cluster_queue)
        flavors = {f for psa in admit.assignment.pod_set_assignments for f in psa.flavors.values()}
        return checks_for(queue, flavors)

    def _delays_topology(self, admit: Admit) -> bool:
        """Two-phase TAS: behind a ProvisioningRequest check the nodes do not exist yet; place after the checks."""
        if self.provisioning is None:
            return False
        return any(self.provisioning.is_provisioning(name) for name in self._checks_of(admit))

    def _invalid_entry(self, workload: Obj, placer: TasPlacer | None) -> str | None:
        tas = {name: placer is not None and name in placer.snapshots for name in (placer.tas if placer else {})}
        queues = {str(q["metadata"]["name"]) for q in self.world.cluster_queues.store}
        return second_pass_problem(workload, cluster_queues=queues, tas_flavors=tas)

    async def _checks_pass(self, now: dt.datetime, placer: TasPlacer | None) -> bool:
        """Act on the check states of quota-holding workloads (``worker_agent.decisions.checks``); returns whether
        any workload had a step to take."""
        acted = False
        self.workload_index.refresh()
        for key in self.workload_index.holding("may_take_checks_step"):
            current = self.world.workload_by_key(key)
            if current is None:
                continue
            workload = current
            step = checks_step(workload, now=now)
            if step is None:
                continue
            acted = True
            bound = self._log.bind(workload=workload_key(workload))
            status = step.status
            reason, message, event_type = step.event_reason, step.message, step.event_type
            if step.kind == "place":
                # An invalid entry (its queue, flavor or topology vanished) is requeued with backoff, not placed.
                problem = self._invalid_entry(workload, placer)
                placed = problem if problem is not None else placer.place_delayed(workload) if placer else {}
                if problem is not None:
                    status = requeue_invalid(workload, problem, now=now)
                    reason, message, event_type = REASON_PENDING_EVALUATION, f"Requeued: {problem}", "Warning"
                elif isinstance(placed, str):
                    failed = second_pass_failed(workload, placed, now=now)
                    if failed is None:
                        continue
                    status, reason, message, event_type = failed, "SecondPassFailed", placed, "Warning"
                else:
                    status = admitted_status(workload, now=now, topology=placed)
                    reason, message = "Admitted", admitted_event_note(workload, now=now)
            if step.kind == "deactivate":
                deactivated = await self.writes.deactivate(workload, bound)
                if deactivated is None:
                    continue
                workload = deactivated
            written = await self.writes.patch_status(r.WORKLOADS, workload, {"status": status}, bound)
            if written is None:
                continue
            self.world.workload_writes.remember(written)
            if reason == "Admitted":
                self._count_admitted(written, now)
                self.on_admitted(now.timestamp())
            bound.info("workload.checks_step", step=step.kind, reason=reason, message=message[:500])
            if reason not in _ROUTINE_ADMISSION_EVENTS or not copy_of_manager(written):
                self.events.emit(written, reason=reason, note=message[:1024], action="Admission", event_type=event_type)
        return acted

    def _count_admitted(self, written: Obj, now: dt.datetime) -> None:
        """Kueue's admission counters for a workload whose last admission check became Ready."""
        namespace, local_queue, priority_class = workload_labels(written)
        reserved = find_condition(written, "QuotaReserved") or {}
        reserved_at = str(reserved.get("lastTransitionTime") or "")
        since = queued_since(written)
        self.metrics.admitted(
            cluster_queue=queue_of(written),
            namespace=namespace,
            local_queue=local_queue,
            priority_class=priority_class,
            waited=now.timestamp() - parse_time(since).timestamp() if since else 0.0,
            checks_waited=now.timestamp() - parse_time(reserved_at).timestamp() if reserved_at else None,
        )

    async def _write_admission(self, update: WorkloadUpdate, now: dt.datetime) -> None:
        bound = self._log.bind(workload=update.key, queue=update.cluster_queue)
        written = await self.writes.patch_status(r.WORKLOADS, update.raw, {"status": update.status}, bound)
        if written is None:
            return
        self.world.workload_writes.remember(written)
        queue = update.cluster_queue or ""
        namespace, local_queue, priority_class = workload_labels(update.raw)
        since = queued_since(update.raw)
        waited = now.timestamp() - parse_time(since).timestamp() if since else 0.0
        if update.outcome in ("reserved", "admitted"):
            self.metrics.quota_reserved(
                cluster_queue=queue,
                namespace=namespace,
                local_queue=local_queue,
                priority_class=priority_class,
                waited=waited,
            )
        if update.outcome == "reserved":
            bound.info("workload.quota_reserved", flavors=_flavors(update.status), message=update.message)
        elif update.outcome == "admitted":
            # no admission check: quota reservation and admission are one write
            self.metrics.admitted(
                cluster_queue=queue,
                namespace=namespace,
                local_queue=local_queue,
                priority_class=priority_class,
                waited=waited,
                checks_waited=0.0,
            )
            self.on_admitted(now.timestamp())
            bound.info("workload.admitted", flavors=_flavors(update.status))
        elif update.outcome == "preempted":
            self.metrics.evicted(
                cluster_queue=queue,
                namespace=namespace,
                local_queue=local_queue,
                priority_class=priority_class,
                reason="Preempted",
            )
            bound.info("workload.preempted", message=update.message)
        else:
            bound.info("workload.pending", message=update.message)
        for event in update.events:
            if event.reason not in _ROUTINE_ADMISSION_EVENTS or not copy_of_manager(written):
                self.events.emit(
                    written, reason=event.reason, note=event.message, action="Admission", event_type=event.event_type
                )


def _flavors(status: Obj) -> list[str]:
    admission = status.get("admission") or {}
    return sorted({f for psa in admission.get("podSetAssignments") or () for f in (psa.get("flavors") or {}).values()})
