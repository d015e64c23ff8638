"""kfed-agent's passes that end an admitted Workload's run for running too long or not starting, as Kueue does.

Why this module exists: Kueue on a worker deactivates a Workload that spent its ``maximumExecutionTimeSeconds``, and,
with ``waitForPodsReady`` configured, evicts one whose pods are not ready in time and requeues it with a backoff
(deactivating it past the requeuing limit). kfed-agent does the same for the Workloads on its worker that it judges: for
the time limit, every Workload that carries one (kfed-manager's copies carry none: the manager keeps that clock); for
readiness, every Workload but kfed-manager's copies (the manager judges those from their Job copy). The decisions are
``federation.admission.execution_time``, ``federation.admission.pods_ready`` and ``decisions.run_limits``; each pass
notes when it must look again, for the reconciler's loop to wake then. The deactivation and job passes that follow
evict, stop the Job and release the quota.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable
from typing import Any

import structlog

from federation.admission.execution_time import REASON_EXCEEDED, exceeded_note, exceeded_status, limit_of
from federation.admission.pods_ready import (
    REASON_PODS_READY_TIMEOUT,
    WaitForPodsReady,
    deactivation_target,
    pods_ready_step,
    waiting_for_start,
)
from federation.admission.queue_metrics import readiness_samples
from federation.conditions import conditions_of, find_condition
from federation.kube import resources as r
from federation.kube.recorder import EventRecorder
from federation.obs.metrics import Metrics
from worker_agent.decisions.run_limits import pods_ready_condition_status, pods_ready_eviction_status
from worker_agent.indexes import JobIndex, WorkloadIndex
from worker_agent.world import World
from worker_agent.writes import Writes, count_eviction

log = structlog.get_logger(__name__)

Obj = dict[str, Any]


class RunLimits:
    def __init__(
        self,
        *,
        world: World,
        writes: Writes,
        workload_index: WorkloadIndex,
        job_index: JobIndex,
        cluster: str,
        events: EventRecorder,
        metrics: Metrics,
        clock: Callable[[], dt.datetime],
        wait_for_pods_ready: WaitForPodsReady | None,
    ) -> None:
        """``workload_index``, ``job_index``: the reconciler's indexes (``worker_agent.indexes``), brought up to date
        here; ``wait_for_pods_ready``: Kueue's waitForPodsReady for the Jobs queued on this worker (None: off)."""
        self.world = world
        self.writes = writes
        self.workload_index = workload_index
        self.job_index = job_index
        self.events = events
        self.metrics = metrics
        self.clock = clock
        self.wait_for_pods_ready = wait_for_pods_ready
        self.next_due: float | None = None
        """When (epoch seconds) a pass must look again: a time limit or a readiness timeout falls due."""
        self._log = log.bind(cluster=cluster)

    async def run_limits_pass(self) -> None:
        """Both limits, and the next time either must be looked at again."""
        now = self.clock()
        self.workload_index.refresh()
        due = [await self._execution_time(now)]
        if self.wait_for_pods_ready is not None:
            due.append(await self._pods_ready(self.wait_for_pods_ready, now))
        self.next_due = min((d for d in due if d is not None), default=None)

    async def _execution_time(self, now: dt.datetime) -> float | None:
        """Deactivate the admitted Workloads that spent their ``maximumExecutionTimeSeconds``: its
        ``DeactivationTarget`` first, then ``spec.active: false``, with Kueue's Warning Event. Returns when the next
        one is spent."""
        next_due: float | None = None
        for key, due_at in sorted(self.workload_index.execution_deadlines.items()):
            if now.timestamp() < due_at:
                next_due = due_at if next_due is None else min(next_due, due_at)
                continue
            workload = self.world.workload_by_key(key)
            if workload is None:
                continue
            bound = self._log.bind(workload=key)
            if await self._deactivate(workload, exceeded_status(workload, now=now), bound) is None:
                continue
            limit = limit_of(workload) or 0
            bound.warning("workload.deactivated", why="maximum execution time exceeded", limit=limit)
            self.events.emit(
                workload, reason=REASON_EXCEEDED, note=exceeded_note(limit), action="Deactivate", event_type="Warning"
            )
        return next_due

    async def _pods_ready(self, policy: WaitForPodsReady, now: dt.datetime) -> float | None:
        """Kueue's waitForPodsReady for the Workloads of Jobs queued here: the ``PodsReady`` condition as their Job's
        pods become ready or stop being so, a ``PodsReadyTimeout`` eviction with a requeue backoff past the timeout,
        and deactivation past the requeuing limit. Returns when the next timeout falls due."""
        self.job_index.refresh()
        next_due: float | None = None
        for key in self.workload_index.holding("readiness_judged_here"):
            workload = self.world.workload_by_key(key)
            if workload is None:
                continue
            jobs = sorted(self.job_index.named.get(key, ()))
            job = self.world.job_by_key(jobs[0]) if jobs else None
            step = pods_ready_step(workload, remote_job=job, now=now, policy=policy, jitter=random.random() * 0.05)
            bound = self._log.bind(workload=key)
            condition = step.condition
            if condition is None and find_condition(workload, "PodsReady") is None:
                condition = waiting_for_start(workload, now=now)  # as Kueue shows a Workload just admitted
            if condition is not None:
                status = pods_ready_condition_status(workload, condition, now=now)
                written = await self.writes.patch_status(r.WORKLOADS, workload, {"status": status}, bound)
                if written is None:
                    continue
                self.world.workload_writes.remember(written)
                if (samples := readiness_samples(workload, written, now=now)) is not None:
                    self.metrics.pods_ready(**samples)
                workload = written
            if step.deactivate:
                target = {"conditions": [*conditions_of(workload), deactivation_target(workload, now=now)]}
                if await self._deactivate(workload, target, bound) is not None:
                    bound.warning("workload.deactivated", why="requeuing limit exceeded")
            elif step.evict_message is not None:
                await self._evict(workload, pods_ready_eviction_status(workload, step, now=now), step.evict_message)
            elif step.recheck_after is not None:
                due_at = now.timestamp() + step.recheck_after
                next_due = due_at if next_due is None else min(next_due, due_at)
        return next_due

    async def _deactivate(self, workload: Obj, status: Obj, bound: Any) -> Obj | None:
        """Write ``status`` (its ``DeactivationTarget``), then ``spec.active: false``; the deactivation pass evicts
        it. The Workload as written, or None when a write failed (retried by the next pass)."""
        marked = await self.writes.patch_status(r.WORKLOADS, workload, {"status": status}, bound)
        if marked is None:
            return None
        self.world.workload_writes.remember(marked)
        deactivated = await self.writes.deactivate(marked, bound)
        if deactivated is not None:
            self.world.workload_writes.remember(deactivated)
        return deactivated

    async def _evict(self, workload: Obj, status: Obj, message: str) -> None:
        key = f"{workload['metadata']['namespace']}/{workload['metadata']['name']}"
        bound = self._log.bind(workload=key)
        written = await self.writes.patch_status(r.WORKLOADS, workload, {"status": status}, bound)
        if written is None:
            return
        self.world.workload_writes.remember(written)
        reason = REASON_PODS_READY_TIMEOUT
        count_eviction(self.metrics, written, reason=reason)
        bound.warning("workload.evicted", reason=reason, message=message)
        self.events.emit(written, reason=f"EvictedDueTo{reason}", note=message, action="Evict")


__all__ = ["RunLimits"]
