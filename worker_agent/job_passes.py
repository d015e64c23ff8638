"""kfed-agent's Job-side passes: starting and stopping the Jobs of admitted and evicted Workloads, and finishing them.

Why this module exists: after admission, the agent's pass turns Workload states into Job states and back, reading
mostly the Jobs and their Workloads, found through ``worker_agent.indexes`` rather than by walking the caches (the job
pass looks only at the Jobs that changed, or whose Workload did, since the last one): the deactivation pass evicts the
Workloads someone deactivated here, the Job-copy pass evicts admitted kfed-manager copies whose Job copy has not come
in time, the job pass stops the Jobs of evicted Workloads and releases their quota, suspends Jobs running without
quota, starts the Jobs of admitted Workloads (checking a started kfed-manager Job copy's placement once) and finishes
the Workloads of ended Jobs — a kfed-manager copy's finish in memory first, written only if the copy is still there
after a grace — and the orphan pass finishes the Workloads whose Job was deleted without them. A Job someone
queued on the worker itself gets its Workload here (``decisions.local_jobs``; one running without it is stopped
first), and goes on as a manager's copy does; the Workload of one being deleted (a finalizer holds it) is finished as
orphaned at once, as Kueue does. The loop (``worker_agent.reconciler``) runs them
in that order after admission, and wakes when ``next_job_copy_due`` or ``next_finish_due()`` says so.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Mapping
from typing import Any

import anyio
import anyio.abc
import structlog

from federation.admission.api_quotas import FlavorInfo
from federation.admission.api_workloads import FINISHED_STATE, is_admitted, workload_state
from federation.admission.deactivation import deactivation_eviction
from federation.admission.execution_time import total_execution_time
from federation.admission.orphans import OWNER_NOT_FOUND_MESSAGE, being_deleted, orphan_finish, orphaned
from federation.admission.queue_metrics import workload_labels
from federation.conditions import is_true
from federation.job_stops import MISSING_WORKLOAD, NOT_ADMITTED, REASON_STOPPED, WORKLOAD_DELETED
from federation.kube import resources as r
from federation.kube.errors import Conflict, KubeError, NotFound
from federation.kube.recorder import EventRecorder
from federation.kube.refusal import is_refusal
from federation.kube.trigger import Trigger
from federation.obs.metrics import Metrics
from federation.protocol import REASON_OWNER_NOT_FOUND
from federation.reclaimable_pods import reclaimable_update
from federation.workload_from_job import priority_class_changed
from federation.workload_match import WorkloadEdit
from worker_agent.decisions.job_copies import (
    JobCopyMissing,
    count_out_of_sync,
    eviction_status,
    job_copy_timeouts,
    out_of_sync,
    running_out_of_sync,
    stock_copy_out_of_sync,
)
from worker_agent.decisions.jobs import (
    FINISH_GRACE_SECONDS,
    FinishWorkload,
    finish_decision,
    finish_deferred,
    finished_view,
    injections,
    start_decision,
)
from worker_agent.decisions.local_jobs import (
    WithoutWorkload,
    local_queue_name,
    needs_local_workload,
    owner_going,
    without_workload,
)
from worker_agent.decisions.preemption import (
    evicted_holding_quota,
    release_status,
    running_without_reservation,
    stopped,
    suspend_patch,
)
from worker_agent.indexes import JobIndex, WorkloadIndex
from worker_agent.local_jobs import LocalJobs
from worker_agent.world import World
from worker_agent.writes import WRITE_CONCURRENCY, Writes, copy_of_manager, count_eviction, limited, name_of

log = structlog.get_logger(__name__)


def _orphan_finish(workload: Obj, now: dt.datetime) -> FinishWorkload:
    """Finish ``workload`` as orphaned (Kueue's ``OwnerNotFound``): its Job is gone, or being deleted."""
    return FinishWorkload(
        {"conditions": orphan_finish(workload, now=now)}, REASON_OWNER_NOT_FOUND, OWNER_NOT_FOUND_MESSAGE
    )


Obj = dict[str, Any]


UNRESERVED = "the Job runs but its Workload holds no quota in this cluster"
FINISHED_OUT_OF_SYNC = "the Job runs but its prebuilt Workload was finished out of sync with it (OutOfSync)"
_SUSPENDED_EVENTS: dict[str, tuple[str, str, str, str]] = {
    UNRESERVED: (REASON_STOPPED, NOT_ADMITTED, "Stop", "Normal"),  # Kueue's
    FINISHED_OUT_OF_SYNC: ("Suspended", FINISHED_OUT_OF_SYNC, "Suspend", "Warning"),  # Kueue leaves such a Job running
}
"""The Event (reason, note, action, type) on a Job suspended by ``JobPasses._suspend_unreserved``, by why."""


class JobPasses:
    def __init__(
        self,
        *,
        world: World,
        writes: Writes,
        trigger: Trigger,
        workload_index: WorkloadIndex,
        job_index: JobIndex,
        cluster: str,
        events: EventRecorder,
        metrics: Metrics,
        clock: Callable[[], dt.datetime],
        on_released: Callable[[], None],
        job_copy_timeout: float,
    ) -> None:
        """``workload_index``, ``job_index``: the indexes the passes bring up to date and read
        (``worker_agent.indexes``; ``workload_index`` shared with the admission passes)."""
        self.world = world
        self.api = world.api
        self.writes = writes
        self.trigger = trigger
        self.workload_index = workload_index
        self.job_index = job_index
        self._jobs_changed = world.job_changes.reader()
        self._workloads_changed = world.workload_changes.reader()
        """The changes since the last job pass: the Jobs to look at again are the changed ones and those naming a
        changed Workload (``job_pass``)."""
        self._unsettled: set[str] = set()
        """Jobs the last job pass acted on or could not decide for: looked at again in the next one."""
        self.events = events
        self.metrics = metrics
        self.clock = clock
        self.on_released = on_released
        """Quota was released without a write the watches would see (a deferred finish): report it."""
        self.job_copy_timeout = job_copy_timeout
        self.next_job_copy_due: float | None = None
        """When the next admitted kfed-manager copy without a Job copy reaches its timeout (epoch seconds)."""
        self.finish_grace = FINISH_GRACE_SECONDS
        self._finish_owed: dict[tuple[str, str], tuple[float, FinishWorkload]] = {}
        """kfed-manager copies finished in memory only: key → (monotonic time the write is due, the finish)."""
        self._owed_changes = world.workload_changes.reader()
        """The Workloads changed since the last look at the finishes owed (``_write_owed_finishes``)."""
        self._placement_checked: set[str] = set()
        """uids of started kfed-manager Job copies whose placement matched their flavors when first seen."""
        self.local_jobs = LocalJobs(world=world, writes=writes, trigger=trigger, events=events, cluster=cluster)
        """The Workloads of the Jobs queued on this worker itself."""
        self._term_started = clock()
        """Job copies created well before this leadership term are not checked again (``out_of_sync``)."""
        self._log = log.bind(cluster=cluster)

    def next_finish_due(self) -> float | None:
        """Monotonic time the first deferred Finished write falls due (None: no finish is owed)."""
        if not self._finish_owed:
            return None
        return min(due for due, _ in self._finish_owed.values())

    async def job_pass(self) -> None:
        """Finish the workloads of ended Jobs and start the Jobs of admitted workloads, up to WRITE_CONCURRENCY
        writes at once (one after the other, a burst of 150 admitted copies took seconds to start). An evicted
        Workload's Job is stopped and its quota released (``decisions.preemption``), also when it has no Job. Only the
        Jobs that changed, that name a Workload that changed, or that the last pass acted on or could not decide for
        are looked at (``_candidates``): every decision below reads only the Job and its Workload, and the flavors only
        to start a Job or to check a started Job copy's placement the first time it is seen."""
        flavors = None
        now = self.clock()
        limiter = anyio.CapacityLimiter(WRITE_CONCURRENCY)
        self.workload_index.refresh()
        candidates = self._candidates()
        named = self.job_index.named
        # Evicted Workloads still holding quota that no Job names: released at the end (the others are stopped with
        # their Job below).
        jobless = [key for key in self.workload_index.holding("evicted_holding_quota") if key not in named]
        # Every candidate stays unsettled until this pass settles it: a pass cut short by a failure leaves the ones it
        # did not get to for the next.
        unsettled = set(candidates)
        self._unsettled = unsettled
        async with anyio.create_task_group() as tg:
            self._write_owed_finishes(tg, limiter)
            for key in sorted(candidates):
                job = self.world.job_by_key(key)
                target = self.job_index.target.get(key)
                workload = self.world.workload(*target) if job is not None and target is not None else None
                # A Workload of a Job queued here that someone deleted while a finalizer holds it counts as gone (as
                # in Kueue): its Job is stopped, and queued anew once the Workload's name is free.
                going = (
                    workload is not None and job is not None and needs_local_workload(job) and being_deleted(workload)
                )
                if job is None or target is None or workload is None or going:
                    unsettled.discard(key)  # looked at again when the Job, or its Workload, comes or changes
                    if job is None:
                        self.local_jobs.forget(key)
                    elif target is not None and needs_local_workload(job):
                        step = without_workload(job)
                        if step is WithoutWorkload.STOP:
                            message = WORKLOAD_DELETED if going else MISSING_WORKLOAD
                            tg.start_soon(limited, limiter, self.local_jobs.stop, key, job, unsettled, message)
                        elif step is WithoutWorkload.QUEUE and not going:
                            tg.start_soon(limited, limiter, self.local_jobs.queue, key, job, unsettled)
                    continue
                namespace, name = target
                bound = self._log.bind(job=key, workload=f"{namespace}/{name}")
                local = local_queue_name(job) is not None
                if local and owner_going(job, workload):
                    tg.start_soon(
                        limited, limiter, self._finish_workload, workload, _orphan_finish(workload, now), bound
                    )
                    continue
                if local and priority_class_changed(workload, job) and not is_true(workload, "Finished"):
                    tg.start_soon(limited, limiter, self.local_jobs.reprioritize, key, job, workload, unsettled)
                    continue  # its edits, if any, are followed once the priority is written
                edit = self.local_jobs.edit_of(key, job, workload, unsettled) if local else WorkloadEdit.KEEP
                if edit is not WorkloadEdit.KEEP:
                    follow = self.local_jobs.follow_edit
                    tg.start_soon(limited, limiter, follow, key, job, workload, edit, unsettled)
                    continue
                if evicted_holding_quota(workload):
                    tg.start_soon(limited, limiter, self._stop_evicted, job, workload, now, bound)
                    continue
                if running_without_reservation(job, workload):
                    tg.start_soon(limited, limiter, self._suspend_unreserved, job, workload, bound, UNRESERVED)
                    continue
                if running_out_of_sync(job, workload):
                    tg.start_soon(
                        limited, limiter, self._suspend_unreserved, job, workload, bound, FINISHED_OUT_OF_SYNC
                    )
                    continue
                finish = finish_decision(job, workload, now=now) or stock_copy_out_of_sync(job, workload, now=now)
                if finish is not None and finish_deferred(workload):
                    self._finish_in_memory(workload, finish, bound)
                    continue
                if finish is not None:
                    tg.start_soon(limited, limiter, self._finish_workload, workload, finish, bound)
                    continue
                if flavors is None:
                    flavors = self.world.flavor_infos()
                stale = count_out_of_sync(job, workload, now=now) or self._placement_eviction(
                    job, workload, flavors, now
                )
                if stale is not None:
                    tg.start_soon(limited, limiter, self._evict_job_copy_missing, stale, now)
                    continue
                reclaimable = reclaimable_update(job, workload)
                if reclaimable is not None:
                    tg.start_soon(limited, limiter, self._write_reclaimable, workload, reclaimable, bound)
                    continue
                try:
                    start = start_decision(job, workload, flavors=flavors)
                except KeyError as missing:
                    message = f"ResourceFlavor {missing.args[0]} assigned to the workload doesn't exist"
                    bound.warning("job.start_blocked", message=message)
                    self.events.emit(job, reason="FlavorNotFound", note=message, action="Start", event_type="Warning")
                    continue
                if start is None:
                    unsettled.discard(key)  # nothing to do until it or its Workload changes
                    continue
                queue = ((workload.get("status") or {}).get("admission") or {}).get("clusterQueue", "")
                tg.start_soon(limited, limiter, self._start_job, job, start.patch, start.flavors, str(queue), bound)
            for jobless_key in jobless:
                evicted = self.world.workload_by_key(jobless_key)
                if evicted is not None:
                    bound = self._log.bind(workload=jobless_key)
                    tg.start_soon(limited, limiter, self._stop_evicted, None, evicted, now, bound)

    def _candidates(self) -> set[str]:
        """The keys of the Jobs the job pass looks at: those changed since the last one, those naming a Workload
        changed since, and those it left unsettled; every Job when the changes are not known (the first pass, or the
        Job index had to start over)."""
        jobs_changed = self._jobs_changed.take()
        workloads_changed = self._workloads_changed.take()
        rebuilt = self.job_index.refresh() is None
        if rebuilt or jobs_changed is None or workloads_changed is None:
            return {key for key, _ in self.world.job_items()}
        named = self.job_index.named
        candidates = jobs_changed | self._unsettled
        for workload_key_changed in workloads_changed:
            candidates.update(named.get(workload_key_changed, ()))
        return candidates

    def _placement_eviction(
        self, job: Obj, workload: Obj, flavors: Mapping[str, FlavorInfo], now: dt.datetime
    ) -> JobCopyMissing | None:
        """The first time a started Job copy of an admitted kfed-manager copy is seen, check that it carries its
        flavors' placement as this cluster has them (``decisions.job_copies.out_of_sync``); the copy's eviction
        when it does not. Checked once per Job, and only for Jobs created in this term: a ResourceFlavor edited while
        the Job runs does not stop it, also across an agent restart."""
        uid = str((job.get("metadata") or {}).get("uid") or "")
        if not uid or uid in self._placement_checked or (job.get("spec") or {}).get("suspend") is not False:
            return None
        try:
            eviction = out_of_sync(job, workload, flavors=injections(flavors), now=now, term_started=self._term_started)
        except KeyError:
            return None  # a flavor of its admission is gone: nothing to compare with
        if eviction is None and is_admitted(workload):
            if len(self._placement_checked) > 2 * len(self.world.jobs.store) + 64:  # forget deleted Jobs
                self._placement_checked &= {str(j["metadata"].get("uid")) for j in self.world.all_jobs()}
            self._placement_checked.add(uid)
        return eviction

    async def deactivation_pass(self) -> None:
        """Evict the Workloads someone deactivated here (``federation.admission.deactivation``, as Kueue does): the
        job pass then stops their Jobs and releases their quota, and a MultiKueue manager takes its copy back."""
        now = self.clock()
        self.workload_index.refresh()
        for key in self.workload_index.holding("needs_deactivation_eviction"):
            workload = self.world.workload_by_key(key)
            eviction = deactivation_eviction(workload, now=now) if workload is not None else None
            if workload is None or eviction is None:
                continue
            bound = self._log.bind(workload=key)
            written = await self.writes.patch_status(r.WORKLOADS, workload, {"status": eviction.status}, bound)
            if written is None:
                continue
            self.world.workload_writes.remember(written)
            bound.warning("workload.evicted", reason=eviction.reason, message=eviction.message)
            if not is_true(workload, "QuotaReserved"):
                continue  # Kueue reports (Event, metric) only the eviction of a workload that held quota
            count_eviction(self.metrics, written, reason=eviction.reason)
            self.events.emit(written, reason=f"EvictedDueTo{eviction.reason}", note=eviction.message, action="Evict")

    async def orphan_pass(self) -> None:
        """Finish the Workloads whose Job was deleted without them (``federation.admission.orphans``: reason
        ``OwnerNotFound``, as Kueue does), which releases their quota: no Job names them, so the job pass never
        would. One left without its owner while its Job lives is the job pass's, as before."""
        now = self.clock()
        self.workload_index.refresh()  # the Job index, only read here, is the job pass's, brought up to date there
        for key in self.workload_index.holding("left_behind"):
            workload = self.world.workload_by_key(key)
            naming = (self.world.job_by_key(job_key) for job_key in self.job_index.named.get(key, ()))
            if workload is None or not orphaned(workload, jobs=(job for job in naming if job is not None)):
                continue  # its Job lives (its ownerReference was taken off by hand): they end together
            await self._finish_workload(workload, _orphan_finish(workload, now), self._log.bind(workload=key))

    async def job_copy_pass(self) -> None:
        """Evict the admitted kfed-manager copies whose Job copy has not come within ``job_copy_timeout``
        (``decisions.job_copies``) and note when the next one falls due, for the loop to wake then. The index's
        admission times pass over the copies not due yet; the decision is taken on the due ones."""
        self.workload_index.refresh()
        self.job_index.refresh()
        named = self.job_index.named
        now = self.clock()
        next_due: float | None = None
        due: list[Obj] = []
        for key, since in sorted(self.workload_index.job_copy_admitted_since.items()):
            due_at = since + self.job_copy_timeout
            if key in named:
                continue
            if now.timestamp() < due_at:
                next_due = due_at if next_due is None else min(next_due, due_at)
            elif (workload := self.world.workload_by_key(key)) is not None:
                due.append(workload)
        timeouts = job_copy_timeouts(due, named_by_jobs=named, now=now, timeout=self.job_copy_timeout)
        self.next_job_copy_due = next_due  # the copies handed over are all past due: it finds no later deadline
        for eviction in timeouts.evictions:
            await self._evict_job_copy_missing(eviction, now)

    async def _evict_job_copy_missing(self, eviction: JobCopyMissing, now: dt.datetime) -> None:
        """Deactivate the copy (so it is not admitted again at once), then evict it with the eviction's reason
        (``JobCopyMissing`` or ``OutOfSync``); the job pass releases it."""
        bound = self._log.bind(workload=eviction.key)
        workload, status = eviction.raw, eviction.status
        if (workload.get("spec") or {}).get("active", True) is not False:
            deactivated = await self.writes.deactivate(workload, bound)
            if deactivated is None:
                return
            workload = deactivated
            status = eviction_status(workload, eviction.message, now=now, reason=eviction.reason)  # new generation
        written = await self.writes.patch_status(r.WORKLOADS, workload, {"status": status}, bound)
        if written is None:
            return
        self.world.workload_writes.remember(written)
        count_eviction(self.metrics, written, reason=eviction.reason)
        bound.warning("workload.evicted", reason=eviction.reason, message=eviction.message)
        self.events.emit(written, reason=eviction.reason, note=eviction.message, action="Evict", event_type="Warning")

    async def _stop_evicted(self, job: Obj | None, workload: Obj, now: dt.datetime, bound: Any) -> None:
        """An evicted Workload's Job is suspended first; once no pod of it is active, its quota is released."""
        if job is not None and not stopped(job):
            patch = suspend_patch(job, workload)
            if patch is None:
                return  # suspended, pods still terminating: the Job's next status change pulls the trigger
            if await self._suspend(job, patch, bound) is not None:
                bound.info("job.suspended", why="workload evicted")
            return
        released = await self.writes.patch_status(
            r.WORKLOADS, workload, {"status": release_status(workload, now=now)}, bound
        )
        if released is not None:
            self.world.workload_writes.remember(released)
            bound.info("workload.quota_released", why="evicted")

    async def _suspend(self, job: Obj, patch: Obj, bound: Any) -> Obj | None:
        """``patch`` (a ``suspend_patch``) guarded by the Job's uid (``Writes.suspend_job``); the Job as written, or
        None when the write failed."""
        written = await self.writes.suspend_job(job, patch, bound)
        if written is not None:
            self.world.job_writes.remember(written)
        return written

    async def _suspend_unreserved(self, job: Obj, workload: Obj, bound: Any, message: str) -> None:
        """Suspend a started Job whose Workload holds no quota here (``running_without_reservation``, or finished
        out of sync with it: ``decisions.job_copies.running_out_of_sync``), saying ``message`` in the log. The
        first gets Kueue's Event (Normal ``Stopped``, "Not admitted by cluster queue"); the second, which Kueue
        leaves running, a Warning ``Suspended`` with ``message``."""
        patch = suspend_patch(job, workload)
        written = await self._suspend(job, patch, bound) if patch is not None else None
        if written is None:
            return
        bound.warning("job.suspended", why=message)
        reason, note, action, event_type = _SUSPENDED_EVENTS[message]
        self.events.emit(written, reason=reason, note=note, action=action, event_type=event_type)

    def _finish_in_memory(self, workload: Obj, finish: FinishWorkload, bound: Any) -> None:
        """A kfed-manager copy whose Job ended: finished for the agent's passes and reports at once, written only if
        it is still there after the grace (``decisions.jobs.finish_deferred``)."""
        key = name_of(workload)
        if key not in self._finish_owed:
            self._count_finished(workload)
            bound.info("workload.finished", reason=finish.reason, message=finish.message, written="deferred")
            self._owed_changes.mark(f"{key[0]}/{key[1]}")  # looked at in the next pass, changed or not
        due, _ = self._finish_owed.get(key, (time.monotonic() + self.finish_grace, finish))
        self._finish_owed[key] = (due, finish)
        self.world.workload_writes.show(finished_view(workload, finish))
        self.on_released()

    def _write_owed_finishes(self, tg: anyio.abc.TaskGroup, limiter: anyio.CapacityLimiter) -> None:
        """Deferred finishes whose copy the manager has not deleted within the grace are written now. Only the copies
        that changed since the last pass, and those due, are looked at (the others are as they were then)."""
        changed = self._owed_changes.take()
        now = time.monotonic()
        for key, (due, finish) in list(self._finish_owed.items()):
            text = f"{key[0]}/{key[1]}"
            if changed is not None and now < due and text not in changed:
                continue
            cached = self.world.workloads.store.get(text)
            if cached is None or workload_state(cached) == FINISHED_STATE:
                del self._finish_owed[key]  # deleted by the manager (the usual end), or finished by someone else
            elif now >= due:
                del self._finish_owed[key]
                bound = self._log.bind(workload=text)
                tg.start_soon(limited, limiter, self._finish_workload, cached, finish, bound, False)

    async def _write_reclaimable(self, workload: Obj, reclaimable: list[dict[str, Any]], bound: Any) -> None:
        """Kueue's ``status.reclaimablePods``: the quota of the Job's pods that will not run again goes back to the
        worker's ClusterQueue (and shows in its capacity report)."""
        body = {"status": {"reclaimablePods": reclaimable or None}}
        written = await self.writes.patch_status(r.WORKLOADS, workload, body, bound)
        if written is not None:
            self.world.workload_writes.remember(written)
            bound.info("workload.reclaimable_pods", reclaimable=reclaimable)

    def _count_finished(self, workload: Obj) -> None:
        queue = str(((workload.get("status") or {}).get("admission") or {}).get("clusterQueue") or "")
        namespace, local_queue, priority_class = workload_labels(workload)
        self.metrics.finished(
            cluster_queue=queue,
            namespace=namespace,
            local_queue=local_queue,
            priority_class=priority_class,
            execution_seconds=total_execution_time(workload),
        )

    async def _finish_workload(self, workload: Obj, finish: FinishWorkload, bound: Any, count: bool = True) -> None:
        namespace, name = name_of(workload)
        written = await self.writes.patch_status(r.WORKLOADS, workload, {"status": finish.status}, bound)
        if written is None:
            return
        self.world.workload_writes.remember(written)
        if count:
            self._count_finished(written)
        bound.info("workload.finished", reason=finish.reason, message=finish.message)
        note = f"Workload '{namespace}/{name}' is declared finished: {finish.message}"
        if not copy_of_manager(written):
            self.events.emit(written, reason="Finished", note=note, action="Finish")

    async def _start_job(self, job: Obj, patch: Obj, flavors: tuple[str, ...], queue: str, bound: Any) -> None:
        namespace, name = name_of(job)
        started = time.monotonic()
        # Guarded by the Job's uid, not its resourceVersion: the Job controller writes the Job's status (its
        # Suspended condition) right after the copy is created, and a resourceVersion guard made that a 409
        # Conflict and another pass for about every other Job. The patch only sets spec fields decided from the
        # Workload; a Job re-created under the same name has another uid and is refused.
        body = {**patch, "metadata": {"uid": (job.get("metadata") or {}).get("uid")}}
        try:
            written = await self.api.patch(r.JOBS, name, body, namespace=namespace, field_manager="kfed-agent")
        except Conflict:
            bound.debug("agent.write_conflict", resource=r.JOBS.label)
            self.trigger.pull()
            return
        except NotFound:
            return
        except KubeError as exc:
            bound.warning("job.start_failed", error=str(exc)[:300])
            if not is_refusal(exc):  # a refusal gets its own Event, once
                self.events.emit(job, reason="StartFailed", note=str(exc)[:1000], action="Start", event_type="Warning")
            self.writes.retry(job, exc)
            return
        self.writes.wrote(job)
        self.world.job_writes.remember(written)
        bound.info("job.started", flavors=list(flavors), seconds=round(time.monotonic() - started, 3))
        if not copy_of_manager(written):
            self.events.emit(written, reason="Started", note=f"Admitted by clusterQueue {queue}", action="Start")
