"""Carry out the sync plan for one dispatched workload: create the copies, mirror status, finish, clean up.

Keyed by manager Workload (``namespace/name``). Every pass re-derives the plan from the caches
(:func:`manager.decisions.sync.plan`), so a crash between any two steps is repaired by the next pass. Objects in
a worker that carry the same name but are not ours are never touched (DESIGN §7). When a pass finds that the
Workload must be taken back from its worker, ``manager.evictions`` carries that out. The steps' writes to the worker
are ``manager.worker_copies``'s, those to the manager Workload's status ``manager.dispatch_progress``'s: this module
keeps the order of the cases and of the steps.
"""

from __future__ import annotations

import datetime as dt
import time
from functools import partial
from typing import Any

import structlog

from federation.admission.deactivation import deactivation_reason
from federation.admission.execution_time import execution_time_left
from federation.admission.orphans import being_deleted, left_behind, live_job
from federation.conditions import is_true
from federation.kube.api import KubeApi
from federation.kube.cache import WatchCache
from federation.kube.errors import Conflict, Invalid, KubeError, NotFound
from federation.kube.overlay import WriteOverlay, WriteTally, look_again_after_writes
from federation.kube.recorder import EventRecorder
from federation.kube.resources import JOBS
from federation.obs.metrics import Metrics
from federation.protocol import MULTIKUEUE_CONTROLLER
from federation.reclaimable_pods import reclaimable_update
from manager.concurrently import concurrently
from manager.config import ManagerConfig
from manager.copy_cleanup import BATCH_WINDOW_SECONDS, DELETE_RESEND_SECONDS, CopyCleaner
from manager.decisions.admission_checks import (
    check_states,
    multikueue_check_names,
    owner_rejection,
    worker_rejection,
)
from manager.decisions.job_status import mirrored_job_status
from manager.decisions.ledger import InFlightLedger
from manager.decisions.lifecycle import Phase, adoptions, held_worker, phase_of
from manager.decisions.remote_copies import is_ours, made_for, started_remote_job
from manager.decisions.sync import Step, job_finish, mirror_wait, plan
from manager.decisions.withdrawal import (
    copies_out_of_reach,
    deactivated,
    dispatch_time_left,
    drained_by_stop_policy,
    foreign_reservation,
    foreign_reservation_release,
    moved_message,
    pending_deactivation_status,
    withdrawal_reason,
)
from manager.dispatch_progress import DispatchProgress
from manager.evictions import Evictions
from manager.manager_jobs import start_manager_job_spec
from manager.reservation_holds import ReservationHolds, ReservationNotWritten
from manager.worker_connection import WorkerConnection
from manager.worker_copies import ManagerClusterReached, NotOurs, RefusedByWorker, WorkerCopies
from manager.workers import WorkerPool
from manager.workload_writes import WorkloadWrites

log = structlog.get_logger(__name__)

Obj = dict[str, Any]

INVALID_RETRY_SECONDS = 60.0
"""How long to wait before repeating a write the apiserver rejected as invalid (it is reported each time)."""
COPIES_LOOK_AGAIN_SECONDS = DELETE_RESEND_SECONDS + BATCH_WINDOW_SECONDS
"""How soon a finished workload whose copies went into a batched delete is looked at again: gone by then, unless
the batch failed, in which case they are sent again."""
REPORT_WAIT_SECONDS = 1.0
"""How soon to look again at a workload its worker admitted with a flavor the worker's last report does not list."""


def owner_job_name(workload: Obj) -> str | None:
    for ref in workload["metadata"].get("ownerReferences") or ():
        if ref.get("kind") == "Job" and ref.get("controller"):
            return str(ref["name"])
    return None


class RemoteSync:
    def __init__(
        self,
        *,
        api: KubeApi,
        config: ManagerConfig,
        workloads: WriteOverlay,
        jobs: WriteOverlay,
        admission_checks: WatchCache,
        cluster_queues: WatchCache,
        local_queues: WatchCache,
        pool: WorkerPool,
        ledger: InFlightLedger,
        events: EventRecorder,
        metrics: Metrics,
        cleaner: CopyCleaner,
        cohorts: WatchCache | None = None,
        holds: ReservationHolds | None = None,
    ) -> None:
        """``holds``: the reservations the scheduler holds back, written with the Workload's next status write."""
        self._api = api
        self._config = config
        self._workload_view = workloads
        """The manager Workloads with this process's writes the cache has not shown yet (``federation.kube.overlay``):
        a pass right after a write must not repeat it on the stale cached object (a 409, or a duplicate write)."""
        self._job_view = jobs
        self._admission_checks = admission_checks
        self._cluster_queues = cluster_queues
        self._local_queues = local_queues
        self._pool = pool
        self._ledger = ledger
        self._events = events
        self._cleaner = cleaner
        self._writes = WorkloadWrites(
            api=api, field_manager=config.field_manager, workloads=workloads, jobs=jobs, holds=holds
        )
        self._evictions = Evictions(
            api=api,
            config=config,
            writes=self._writes,
            admission_checks=admission_checks,
            pool=pool,
            ledger=ledger,
            cleaner=cleaner,
            events=events,
            metrics=metrics,
            on_requeued=self._forget_mirror,
        )
        self._copies = WorkerCopies(config=config, metrics=metrics)
        self._progress = DispatchProgress(
            config=config,
            writes=self._writes,
            evictions=self._evictions,
            admission_checks=admission_checks,
            cluster_queues=cluster_queues,
            local_queues=local_queues,
            ledger=ledger,
            events=events,
            metrics=metrics,
            cohorts=cohorts,
        )
        self._mirrored_at: dict[str, float] = {}
        self._job_names: dict[str, str] = {}
        """Workload key → its Job's name, for the Workloads sent to a worker: once the Workload is deleted, its Job copy
        is found by name."""

    def _forget_mirror(self, key: str) -> None:
        """The Workload's dispatch is over: its next one mirrors its Job's status from scratch."""
        self._mirrored_at.pop(key, None)

    def _manager_job(self, workload: Obj) -> Obj | None:
        name = owner_job_name(workload)
        if name is None:
            return None
        job = self._job_view.get_by_name(name, namespace=workload["metadata"]["namespace"])
        owner_uid = next(r["uid"] for r in workload["metadata"]["ownerReferences"] if r["name"] == name)
        return job if job is not None and job["metadata"]["uid"] == owner_uid else None

    def _owner_rejection(self, workload: Obj, manager_job: Obj | None) -> tuple[str, str] | None:
        """(kfed's check, Kueue's message) when kfed cannot run this reserved Workload's Job on a worker: no owner,
        an owner of another kind, a Job not managed by MultiKueue (``owner_rejection``). Sent anyway, its copy would
        wait for a Job copy that never comes, be evicted by the worker and come back, again and again."""
        multikueue = multikueue_check_names(self._admission_checks.store)
        checks = [c for c in check_states(workload) if c.get("name") in multikueue]
        if not checks or (workload.get("spec") or {}).get("active", True) is False or is_true(workload, "Finished"):
            return None
        job = manager_job
        if job is None and (name := owner_job_name(workload)) is not None:
            job = self._job_view.get_by_name(name, namespace=workload["metadata"]["namespace"])
        message = owner_rejection(workload, owner_job=job)
        return None if message is None else (str(checks[0]["name"]), message)

    async def reconcile(self, key: str) -> float | None:
        """One pass (:meth:`_reconcile`). The echoes of this process's own writes do not bring a workload back
        (``manager.runtime``), so a pass that wrote and did not settle what its writes made is run again at once,
        as the echo would have made it run (after a Finished, the copies' deletion; after an eviction, the
        withdrawal)."""
        try:
            return await look_again_after_writes(partial(self._reconcile, key))
        except ReservationNotWritten as err:
            # A write of this pass carried the reservation the scheduler held back, and was refused: the scheduler
            # names the refusal and decides again (which brings the Workload back here).
            log.info("held reservation refused; the scheduler decides again", workload=key, error=str(err)[:300])
            return None

    async def _reconcile(self, key: str, writes: WriteTally) -> float | None:
        """One pass over a workload, as ordered cases: gone → garbage; its manager Job already finished → finish it;
        left behind by its deleted Job (orphaned) → finish it, reason OwnerNotFound (its ownerReference taken off while
        the Job lives → wait for the job controller to put it back); copies where they do not belong
        → delete; a reservation another MultiKueue dispatcher made (several workers nominated) → released once those
        copies are gone; not dispatched → nothing; a Job kfed cannot run on a worker → MultiKueue check Rejected,
        deactivated; its worker unreachable → wait, requeue past the worker-lost timeout; a stock Kueue manager's
        copies → adopted; stale copies of an earlier incarnation → remove them first; evicting → withdraw; dispatch
        unsound → evict; otherwise carry out the sync plan."""
        workload = self._workload_view.get(key)
        if workload is None or being_deleted(workload):
            # Gone, or going (a finalizer someone put on it holds it): its copies are garbage, as Kueue removes the
            # remote objects of a Workload being deleted; the job controller stops its Job.
            job_name = self._job_names.pop(key, None) if workload is None else owner_job_name(workload)
            await self._cleaner.collect_garbage(only_key=key, job_name=job_name)
            self._ledger.forget(key)
            self._mirrored_at.pop(key, None)
            return None
        worker = held_worker(workload)
        manager_job = self._manager_job(workload)
        if job_finish(manager_job) is not None and not is_true(workload, "Finished"):
            # The Job's final status is on the manager already (the process stopped before it marked the Workload,
            # or its worker became unreachable right after): that result stands; never requeue a finished Job.
            await self._progress.finish(workload, remote_job=manager_job, worker=worker or "")
            return None
        if being_deleted(manager_job) and not is_true(workload, "Finished"):
            # Its Job is being deleted, held by a finalizer someone put on it (without one, the Job is gone at once
            # and its Workload with it): finished as Kueue finishes the Workload of a Job being deleted, which
            # releases its quota; the pass after this write removes its copies, so it stops running.
            await self._progress.finish_orphaned(workload, worker=worker or "")
            return None
        if left_behind(workload):
            owner = live_job(workload, jobs=self._job_view)
            if owner is None:
                # Its Job was deleted and the Workload left behind (``kubectl delete --cascade=orphan``): finished as
                # Kueue finishes it, which releases its quota; the pass after this write removes its copies.
                await self._progress.finish_orphaned(workload, worker=worker or "")
                return None
            if (owner.get("spec") or {}).get("managedBy") == MULTIKUEUE_CONTROLLER:
                # Its ownerReference was taken off while its Job lives: the job controller gives it back, and that
                # write brings the Workload here again; nothing is decided on it without its owner meanwhile.
                return None
        strays = await self._cleaner.delete_strays(key, job_name=owner_job_name(workload), holder=worker)
        wrote, backoff_left = await self._progress.requeued(workload, key)
        if wrote:
            return None  # what it wrote is looked at again at once (reconcile)
        if (deactivation := pending_deactivation_status(workload, now=dt.datetime.now(dt.UTC))) is not None:
            await self._writes.patch_status(workload, deactivation)
            log.info("deactivated workload without quota marked evicted", workload=key)
            return None
        if worker is None and (foreign := self._foreign_reservation(workload)) is not None:
            if strays or self._still_connecting(workload):
                return 1.0  # released once the copies that dispatcher sent are known and gone
            now = dt.datetime.now(dt.UTC)
            await self._writes.patch_status(workload, foreign_reservation_release(workload, message=foreign, now=now))
            log.info("reservation released", workload=key, why=foreign)
            return None
        if worker is None or not is_true(workload, "QuotaReserved"):
            return backoff_left
        if (unrunnable := self._owner_rejection(workload, manager_job)) is not None:
            if self._writes.reservation_unwritten(workload):
                # held back by the scheduler (for a copy that is not sent now): written on its own within
                # --reservation-hold, and this Workload is back here then
                return max(self._config.reservation_hold, 0.5)
            await self._progress.reject_for_owner(workload, unrunnable, worker=worker)
            return None
        conn = self._pool.connections.get(worker)
        if conn is None or not conn.connected:
            # The execution time clock is the manager's: it runs out on time even while the worker cannot be reached
            # (the copies go when it answers again, or the worker-lost timeout requeues the deactivated Workload).
            now = dt.datetime.now(dt.UTC)
            budget = None if deactivated(workload) else execution_time_left(workload, now=now)
            if budget is not None and budget <= 0:
                await self._progress.out_of_time(workload, worker=worker, now=now)
                return None
            wait = await self._evictions.worker_unreachable(workload, manager_job, worker=worker)
            return wait if budget is None or wait is None else min(wait, budget)
        namespace = workload["metadata"]["namespace"]
        uid = workload["metadata"]["uid"]
        job_name = owner_job_name(workload)
        if job_name is not None:
            self._job_names[key] = job_name
        # The worker's caches only hold objects with our origin label: one with another manager uid is a copy of
        # an earlier Workload of the same name (deleted and re-created), which must go before this one is sent.
        found_wl = conn.workload_view.get(key)
        found_jb = conn.job_view.get_by_name(job_name, namespace=namespace) if job_name else None
        origin = self._config.origin
        adopted = adoptions(found_wl, found_jb, workload=workload, worker=worker, origin=origin)
        if adopted:  # a stock Kueue manager's copies, made before kfed-manager took over: ours from now on
            await self._copies.adopt(conn, adopted, workload=workload)
            return 0.1
        stale = [obj for obj in (found_jb, found_wl) if obj is not None and not self._ours(obj, uid)]
        if stale:
            await self._cleaner.delete_copies(conn, stale, why="copy of an earlier workload with the same name")
            return 1.0
        remote_wl, remote_jb = found_wl, found_jb
        moved = conn.moved_from
        if moved is not None and copies_out_of_reach(
            workload, remote_workload=remote_wl, remote_job=remote_jb, moved_at=moved[1]
        ):
            why = moved_message(was=moved[0], now=conn.address)
            return await self._evictions.worker_unreachable(
                workload, manager_job, worker=worker, since=moved[1], problem=why
            )
        phase = phase_of(workload, manager_job=manager_job, remote_workload=remote_wl, copies_known=True)
        ready_recheck: float | None = None
        if phase is Phase.EVICTING:
            if job_finish(remote_jb) is None:
                if remote_jb is None and job_name is not None:
                    try:  # a Job copy that lost its origin label is out of the caches' sight but may still run
                        remote_jb = await self._unlabelled_job_copy(conn, job_name, namespace=namespace, uid=uid)
                    except KubeError as err:  # not a wait without end: the withdrawal goes on by what the caches show
                        log.warning(
                            "job copy not looked up; withdrawn by what the worker's caches show",
                            workload=key,
                            cluster=worker,
                            error=str(err)[:300],
                        )
                return await self._evictions.withdraw(conn, workload, manager_job, [remote_jb, remote_wl])
            # it finished on the worker while being withdrawn: keep its result (the plan below finishes it)
        elif (drained := self._drained(workload)) is not None:
            cause, message = drained
            await self._evictions.evict(
                workload, worker=worker, reason=message, now=dt.datetime.now(dt.UTC), cause=cause
            )
            return None
        elif deactivated(workload) and not is_true(workload, "Finished"):
            cause, message = deactivation_reason(workload)
            await self._evictions.evict(
                workload, worker=worker, reason=message, now=dt.datetime.now(dt.UTC), cause=cause
            )
            return None
        elif (rejection := worker_rejection(remote_wl, worker)) is not None:
            await self._evictions.evict_for_checks(workload, rejection, worker=worker)
            return None
        else:
            now = dt.datetime.now(dt.UTC)
            reason = withdrawal_reason(
                manager_workload=workload,
                worker=worker,
                remote_workload=remote_wl,
                remote_job=remote_jb,
                manager_job=manager_job,
                now=now,
                dispatch_timeout=self._config.dispatch_timeout,
            )
            if reason is not None:
                await self._evictions.evict(workload, worker=worker, reason=reason, now=now)
                return None  # looked at again at once for its write (reconcile), to withdraw the copies
            budget = execution_time_left(workload, now=now)
            if budget is not None and budget <= 0:
                await self._progress.out_of_time(workload, worker=worker, now=now)
                return None  # deactivated: looked at again at once for its write (reconcile), to withdraw it
            ready_step = await self._progress.pods_ready(workload, worker=worker, remote_jb=remote_jb, now=now)
            if ready_step is None:
                return None  # evicted or deactivated: looked at again at once for the write (reconcile)
            workload, ready_recheck = ready_step
            if budget is not None:  # look again when the budget runs out
                ready_recheck = budget if ready_recheck is None else min(ready_recheck, budget)
        gated = await self._progress.checks_gate(
            workload, worker=worker, copies=remote_wl is not None or remote_jb is not None
        )
        if gated is None:
            return ready_recheck
        gate, workload = gated
        workload, queued_recheck = await self._progress.show_worker_checks(workload, remote_wl, worker=worker)
        if queued_recheck is not None:  # look again when the worker's queue has held the copy long enough to say why
            ready_recheck = queued_recheck if ready_recheck is None else min(ready_recheck, queued_recheck)
        workload = await self._progress.show_unschedulable(workload, remote_wl, worker=worker, manager_job=manager_job)
        flavors = conn.report.flavors if conn.report is not None else None
        steps = plan(
            manager_workload=workload,
            manager_job=manager_job,
            remote_workload=remote_wl,
            remote_job=remote_jb,
            checks_ready=gate.open,
            job_after_admission=flavors is not None,
        )
        again: float | None = None
        deferred: set[Step] = set()  # steps the plan asks for that this pass leaves to the look ``again`` sets
        started_copy: Obj | None = None
        if "create_started_job" in steps and manager_job is not None and remote_wl is not None and flavors is not None:
            try:
                started_copy = started_remote_job(
                    manager_job,
                    manager_workload=workload,
                    origin=self._config.origin,
                    admitted_copy=remote_wl,
                    flavors=flavors,
                )
            except KeyError as missing:
                # The worker admitted it with a flavor its last report does not list yet (created just before):
                # wait for the next report; past the agent's job-copy timeout the worker evicts the copy, visibly.
                log.warning(
                    "waiting for the worker's report to list a flavor",
                    workload=key,
                    cluster=worker,
                    flavor=str(missing.args[0]),
                )
                deferred.update(("create_started_job", "mark_admitted", "unsuspend_manager_job"))
                steps = [s for s in steps if s not in deferred]
                again = REPORT_WAIT_SECONDS
        if "mirror_job_status" in steps:
            wait = mirror_wait(self._mirrored_at.get(key), now=time.monotonic(), finished=job_finish(remote_jb))
            if wait > 0:  # made by the requeue below
                deferred.add("mirror_job_status")
                steps = [step for step in steps if step != "mirror_job_status"]
                again = wait
        if ready_recheck is not None:
            again = min(again, ready_recheck) if again is not None else ready_recheck
        left = dispatch_time_left(remote_wl, now=dt.datetime.now(dt.UTC), timeout=self._config.dispatch_timeout)
        if left is not None:  # look again when the worker's time to admit it is up
            again = max(min(again, left) if again is not None else left, 0.05)
        try:
            workload = await self._carry_out(
                steps,
                conn=conn,
                workload=workload,
                manager_job=manager_job,
                remote_wl=remote_wl,
                remote_jb=remote_jb,
                started_copy=started_copy,
            )
        except ManagerClusterReached as err:
            self._pool.reaches_manager(worker, str(err))
            await self._evictions.exclude(workload, worker=worker, why=f"worker cluster {worker!r} is not used: {err}")
            return None
        except NotOurs as err:
            await self._evictions.exclude(workload, worker=worker, why=str(err))
            return None  # the annotation's write brings the workload back at once for the withdrawal
        except RefusedByWorker as err:
            await self._evictions.exclude(workload, worker=worker, why=str(err), refused=True)
            return None
        except Invalid as err:
            # The API refuses a write we derived from the worker's objects: say so where users look, retry slowly.
            log.error("sync write rejected", workload=key, cluster=worker, error=str(err)[:500])
            self._events.emit(
                workload, reason="SyncFailed", note=f"write rejected: {err}"[:1000], action="Sync", event_type="Warning"
            )
            return INVALID_RETRY_SECONDS
        # What this pass's writes made, planned again: the steps it unlocks are taken now (the copies' deletion
        # once Finished is written), and a pass that leaves nothing to do is settled (the echoes bring it nothing).
        remote_wl = conn.workload_view.get(key)
        remote_jb = conn.job_view.get_by_name(job_name, namespace=namespace) if job_name else None
        after = plan(
            manager_workload=workload,
            manager_job=self._manager_job(workload),
            remote_workload=remote_wl,
            remote_job=remote_jb,
            checks_ready=gate.open,
            job_after_admission=flavors is not None,
        )
        if "delete_remote" in after:  # after the final status and Finished: the copies have nothing more to give
            batched = await self._cleaner.delete_copies(
                conn, [remote_jb, remote_wl], why="the workload finished", finished=True
            )
            if batched:  # left to a batch: look again while the copies last, to send them again if it failed
                again = min(again, COPIES_LOOK_AGAIN_SECONDS) if again is not None else COPIES_LOOK_AGAIN_SECONDS
        elif all(step in deferred for step in after):
            writes.settle()
        return again

    async def _carry_out(
        self,
        steps: list[Step],
        *,
        conn: WorkerConnection,
        workload: Obj,
        manager_job: Obj | None,
        remote_wl: Obj | None,
        remote_jb: Obj | None,
        started_copy: Obj | None = None,
    ) -> Obj:
        """Carry out a plan's steps; the ones that do not depend on each other at once (each call waits on a busy
        apiserver: one after the other, a 300-Job burst queued each workload's next step for seconds). Returns the
        Workload as written last. ``started_copy`` is the Job copy ``create_started_job`` creates."""
        worker = conn.name
        meta = workload["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"

        # A reservation not written yet is written with Admitted before the Job copy may start: a manager stopping
        # in between must not leave a running Job its successor does not know the workload holds there.
        start_after_admit = "mark_admitted" in steps and self._writes.reservation_unwritten(workload)
        await self._copies.create_and_update(
            steps,
            conn=conn,
            workload=workload,
            manager_job=manager_job,
            remote_wl=remote_wl,
            remote_jb=remote_jb,
            started_copy=started_copy,
            start_after_admit=start_after_admit,
        )

        async def admit() -> None:
            nonlocal workload
            workload = await self._progress.mark_admitted(workload, worker=worker, remote_workload=remote_wl)

        async def job_side() -> None:
            nonlocal manager_job
            if manager_job is None:
                return
            if "unsuspend_manager_job" in steps:
                manager_job = self._writes.wrote_job(
                    manager_job,
                    await self._api.patch(
                        JOBS,
                        manager_job["metadata"]["name"],
                        {"spec": start_manager_job_spec(manager_job, workload)},
                        namespace=meta["namespace"],
                        field_manager=self._config.field_manager,
                    ),
                )
            if "mirror_job_status" in steps and remote_jb is not None:
                manager_job = self._writes.wrote_job(
                    manager_job,
                    await self._api.replace_status(
                        JOBS,
                        {**manager_job, "status": mirrored_job_status(remote_jb, manager_job=manager_job)},
                        field_manager=self._config.field_manager,
                    ),
                )
                self._mirrored_at[key] = time.monotonic()

        if start_after_admit:
            await admit()
            if self._writes.reservation_unwritten(workload):
                return workload  # Admitted was not written (a check is not Ready): no Job copy without the reservation
            later = (
                [partial(self._copies.create, conn, JOBS, started_copy)]
                if "create_started_job" in steps and started_copy is not None
                else []
            )
            await concurrently(*later, job_side)
        else:
            # The Workload's status and the Job are different objects: Admitted and the Job's unsuspend go together.
            await concurrently(*([admit] if "mark_admitted" in steps else []), job_side)
        if "finish_manager_workload" in steps:
            await self._progress.finish(workload, remote_job=remote_jb, worker=worker)
            self._mirrored_at.pop(key, None)
        elif "mirror_job_status" in steps and remote_jb is not None:
            workload = await self._write_reclaimable(workload, remote_jb)
        return workload

    async def _write_reclaimable(self, workload: Obj, remote_jb: Obj) -> Obj:
        """Kueue's ``status.reclaimablePods``, from the Job as the worker runs it, written with its status mirror (so
        at most once per mirror period): the quota of pods that will not run again goes back to the ClusterQueue."""
        reclaimable = reclaimable_update(remote_jb, workload)
        if reclaimable is None:
            return workload
        try:
            workload = await self._writes.patch_status(workload, {"reclaimablePods": reclaimable or None})
        except (Conflict, NotFound):
            return workload  # changed meanwhile: the pass its change brings decides again
        meta = workload["metadata"]
        log.info("reclaimable pods", workload=f"{meta['namespace']}/{meta['name']}", reclaimable=reclaimable)
        return workload

    def _drained(self, workload: Obj) -> tuple[str, str] | None:
        if is_true(workload, "Finished"):
            return None
        queue_name = ((workload.get("status") or {}).get("admission") or {}).get("clusterQueue")
        local_name = (workload.get("spec") or {}).get("queueName")
        return drained_by_stop_policy(
            workload,
            cluster_queue=self._cluster_queues.store.get_by_name(queue_name) if queue_name else None,
            local_queue=(
                self._local_queues.store.get_by_name(local_name, namespace=workload["metadata"]["namespace"])
                if local_name
                else None
            ),
        )

    def _still_connecting(self, workload: Obj) -> bool:
        """Whether a worker the workload names is still connecting: its copies are not known yet (one that failed
        is not waited for)."""
        nominated = (workload.get("status") or {}).get("nominatedClusterNames") or ()
        connections = [self._pool.connections.get(str(name)) for name in nominated]
        return any(conn is not None and conn.health.state == "connecting" for conn in connections)

    def _foreign_reservation(self, workload: Obj) -> str | None:
        multikueue = multikueue_check_names(self._admission_checks.store)
        return foreign_reservation(workload, multikueue_checks=multikueue)

    async def _unlabelled_job_copy(self, conn: WorkerConnection, name: str, *, namespace: str, uid: str) -> Obj | None:
        """The worker's Job ``name`` if it is our copy for the manager Workload ``uid`` (its uid label) though the
        caches do not hold it (someone took its origin label off): withdrawn with the others, so the Job does not
        run on there while it is dispatched again. A Job not made for this Workload is never touched."""
        try:
            job = await conn.api.get(JOBS, name, namespace=namespace)
        except NotFound:
            return None
        if not made_for(job, uid):
            return None
        log.warning("job copy without our origin label withdrawn", cluster=conn.name, job=f"{namespace}/{name}")
        return dict(job, kind="Job")

    def _ours(self, remote: Obj, uid: str) -> bool:
        return is_ours(remote, origin=self._config.origin, manager_workload_uid=uid)
