"""Carry out the sync plan for one dispatched workload: create the copies, mirror status, finish, clean up.

Keyed by manager Workload (``namespace/name``). Every pass re-derives the plan from the caches
(:func:`manager.decisions.sync.plan`), so a crash between any two steps is repaired by the next pass. Objects in
a worker that carry the same name but are not ours are never touched (DESIGN §7). When a pass finds that the
Workload must be taken back from its worker, ``manager.evictions`` carries that out.
"""

from __future__ import annotations

import datetime as dt
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from federation.admission.deactivation import deactivation_reason
from federation.admission.queue_metrics import (
    cohort_ancestors,
    queued_since,
    ready_waits,
    workload_labels,
)
from federation.admission.requeued import may_take_requeued_step, queues_of, requeued_step
from federation.api.labels import PRIORITY_CLASS_LABEL
from federation.conditions import conditions_of, find_condition, is_true, parse_time, set_condition
from federation.kube.api import KubeApi
from federation.kube.cache import WatchCache
from federation.kube.errors import AlreadyExists, Forbidden, Invalid
from federation.kube.overlay import WriteOverlay
from federation.kube.recorder import EventRecorder
from federation.kube.resources import JOBS, WORKLOADS
from federation.obs.metrics import Metrics
from federation.protocol import MANAGER_UID_LABEL, REASON_ADMITTED, REASON_FAILED, REASON_SUCCEEDED
from manager.concurrently import concurrently
from manager.config import ManagerConfig
from manager.copy_cleanup import CopyCleaner
from manager.decisions.admission_checks import (
    CheckGate,
    admitted_checks,
    check_eviction,
    check_states,
    dispatch_gate,
    dispatched_message,
    multikueue_check_names,
    owner_check_eviction,
    owner_rejection,
    rejected_checks,
    waiting_message,
    with_multikueue_message,
    worker_checks_message,
    worker_rejection,
)
from manager.decisions.execution_time import (
    REASON_EXCEEDED,
    exceeded_note,
    exceeded_status,
    execution_time_left,
    limit_of,
)
from manager.decisions.ledger import InFlightLedger
from manager.decisions.lifecycle import Phase, held_worker, phase_of
from manager.decisions.pods_ready import (
    REASON_PODS_READY_TIMEOUT,
    deactivation_target,
    pods_ready_step,
    waiting_for_start,
)
from manager.decisions.remote_copies import is_ours, remote_job, remote_workload, started_remote_job
from manager.decisions.reservation import topology_ready
from manager.decisions.sync import Step, job_finish, mirror_wait, mirrored_job_status, plan
from manager.decisions.withdrawal import (
    deactivated,
    dispatch_time_left,
    drained_by_stop_policy,
    pending_deactivation_status,
    withdrawal_reason,
)
from manager.decisions.workload_from_job import workload_priority_class
from manager.evictions import Evictions
from manager.manager_jobs import start_manager_job_spec
from manager.reservation_holds import ReservationHolds, ReservationNotWritten
from manager.workers import WorkerConnection, WorkerPool
from manager.workload_writes import WorkloadWrites

log = structlog.get_logger(__name__)

Obj = dict[str, Any]

INVALID_RETRY_SECONDS = 60.0
"""How long to wait before repeating a write the apiserver rejected as invalid (it is reported each time)."""
REPORT_WAIT_SECONDS = 1.0
"""How soon to look again at a workload its worker admitted with a flavor the worker's last report does not list."""


def owner_job_name(workload: Obj) -> str | None:
    for ref in workload["metadata"].get("ownerReferences") or ():
        if ref.get("kind") == "Job" and ref.get("controller"):
            return str(ref["name"])
    return None


class NotOurs(RuntimeError):
    """A same-named object in the worker was not created by this manager; it is left alone."""


class RefusedByWorker(RuntimeError):
    """The worker answered 403 Forbidden to creating a copy: the manager's credentials there lack a permission, or
    the worker's admission (a policy or webhook, a ResourceQuota) refused the copy; the message says which."""


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
        self._metrics = metrics
        self._cleaner = cleaner
        self._cohorts = cohorts
        """Cohorts, for the cohort chain of ``kueue_cohort_subtree_admitted_workloads_total`` (None: not counted)."""
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
        if not checks or (workload.get("spec") or {}).get("active", True) is False:
            return None
        job = manager_job
        if job is None and (name := owner_job_name(workload)) is not None:
            job = self._job_view.get_by_name(name, namespace=workload["metadata"]["namespace"])
        message = owner_rejection(workload, owner_job=job)
        return None if message is None else (str(checks[0]["name"]), message)

    async def _reject_for_owner(self, workload: Obj, rejection: tuple[str, str], *, worker: str) -> None:
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

    async def reconcile(self, key: str) -> float | None:
        try:
            return await self._reconcile(key)
        except ReservationNotWritten as err:
            # A write of this pass carried the reservation the scheduler held back, and was refused: the scheduler
            # names the refusal and decides again (which brings the Workload back here).
            log.info("held reservation refused; the scheduler decides again", workload=key, error=str(err)[:300])
            return None

    async def _reconcile(self, key: str) -> float | None:
        """One pass over a workload, as ordered cases: gone → garbage; its manager Job already finished → finish it;
        copies where they do not belong → delete;
        not dispatched → nothing; a Job kfed cannot run on a worker → MultiKueue check Rejected, deactivated;
        its worker unreachable → wait, requeue past the worker-lost timeout; stale copies
        of an earlier incarnation → remove them first; evicting → withdraw; dispatch unsound → evict; otherwise
        carry out the sync plan."""
        workload = self._workload_view.get(key)
        if workload is None:
            await self._cleaner.collect_garbage(only_key=key, job_name=self._job_names.pop(key, None))
            self._ledger.forget(key)
            self._mirrored_at.pop(key, None)
            return None
        worker = held_worker(workload)
        manager_job = self._manager_job(workload)
        if job_finish(manager_job) is not None and not is_true(workload, "Finished"):
            # The Job's final status is on the manager already (the process stopped before it marked the Workload,
            # or its worker became unreachable right after): that result stands; never requeue a finished Job.
            await self._finish(workload, remote_job=manager_job, worker=worker or "")
            return None
        await self._cleaner.delete_strays(key, job_name=owner_job_name(workload), holder=worker)
        wrote, backoff_left = await self._requeued(workload, key)
        if wrote:
            return None  # the Workload's watch event brings it back
        if (deactivation := pending_deactivation_status(workload, now=dt.datetime.now(dt.UTC))) is not None:
            await self._writes.patch_status(workload, deactivation)
            log.info("deactivated workload without quota marked evicted", workload=key)
            return None
        if worker is None or not is_true(workload, "QuotaReserved"):
            return backoff_left
        if (unrunnable := self._owner_rejection(workload, manager_job)) is not None:
            if self._writes.reservation_unwritten(workload):
                # held back by the scheduler (for a copy that is not sent now): written on its own within
                # --reservation-hold, and this Workload is back here then
                return max(self._config.reservation_hold, 0.5)
            await self._reject_for_owner(workload, unrunnable, worker=worker)
            return None
        conn = self._pool.connections.get(worker)
        if conn is None or not conn.connected:
            # The execution time clock is the manager's: it runs out on time even while the worker cannot be reached
            # (the copies go when it answers again, or the worker-lost timeout requeues the deactivated Workload).
            now = dt.datetime.now(dt.UTC)
            budget = None if deactivated(workload) else execution_time_left(workload, now=now)
            if budget is not None and budget <= 0:
                await self._out_of_time(workload, worker=worker, now=now)
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
        stale = [obj for obj in (found_jb, found_wl) if obj is not None and not self._ours(obj, uid)]
        if stale:
            await self._cleaner.delete_copies(conn, stale, why="copy of an earlier workload with the same name")
            return 1.0
        remote_wl, remote_jb = found_wl, found_jb
        phase = phase_of(workload, manager_job=manager_job, remote_workload=remote_wl, copies_known=True)
        ready_recheck: float | None = None
        if phase is Phase.EVICTING:
            if job_finish(remote_jb) is None:
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
                return None  # the Workload's watch event brings it back to withdraw the copies
            budget = execution_time_left(workload, now=now)
            if budget is not None and budget <= 0:
                await self._out_of_time(workload, worker=worker, now=now)
                return None  # deactivated: the watch event brings it back to withdraw it
            ready_step = await self._pods_ready(workload, worker=worker, remote_jb=remote_jb, now=now)
            if ready_step is None:
                return None  # evicted or deactivated: the watch event brings it back
            workload, ready_recheck = ready_step
            if budget is not None:  # look again when the budget runs out
                ready_recheck = budget if ready_recheck is None else min(ready_recheck, budget)
        gated = await self._admission_checks_gate(
            workload, worker=worker, copies=remote_wl is not None or remote_jb is not None
        )
        if gated is None:
            return None
        gate, workload = gated
        waiting = worker_checks_message(remote_wl, worker) if not is_true(workload, "Admitted") else None
        if waiting is not None:  # the worker's own checks (a ProvisioningRequest...) hold it: say so on the manager
            multikueue = multikueue_check_names(self._admission_checks.store)
            shown = with_multikueue_message(workload, multikueue_checks=multikueue, message=waiting)
            if shown is not None:
                workload = await self._writes.patch_status(workload, {"admissionChecks": shown})
                log.info("waiting for the worker's admission checks", workload=key, cluster=worker, message=waiting)
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
                steps = [s for s in steps if s not in ("create_started_job", "mark_admitted", "unsuspend_manager_job")]
                again = REPORT_WAIT_SECONDS
        if "mirror_job_status" in steps:
            wait = mirror_wait(self._mirrored_at.get(key), now=time.monotonic(), finished=job_finish(remote_jb))
            if wait > 0:  # made by the requeue below
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
        except NotOurs as err:
            await self._evictions.exclude(workload, worker=worker, why=str(err))
            return None  # the annotation's watch event brings the workload back for the withdrawal
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

        async def create_workload_copy(job_copy: Obj | None) -> None:
            copy_ = remote_workload(workload, origin=self._config.origin, job_copy=job_copy)
            if (await self._create(conn, WORKLOADS, copy_))[0]:
                self._count_dispatch(workload, worker=worker)  # once per copy made, not per attempt

        async def create_job_copy() -> Obj:
            assert manager_job is not None
            job_copy = remote_job(manager_job, manager_workload=workload, origin=self._config.origin)
            return (await self._create(conn, JOBS, job_copy))[1]

        async def create_copies() -> None:
            # For a stock Kueue worker the Job copy first: the Workload copy is owned by it, so the Job's deletion
            # takes the Workload along. A kfed-agent worker gets the Job copy only once it admitted the Workload.
            job_copy = await create_job_copy() if "create_remote_job" in steps else remote_jb
            await create_workload_copy(job_copy)

        async def reprioritize() -> None:
            assert remote_wl is not None
            await self._update_remote_priority(conn, workload, remote_wl=remote_wl, remote_jb=remote_jb)

        async def create_started_job() -> None:
            assert started_copy is not None
            await self._create(conn, JOBS, started_copy)

        # A reservation not written yet is written with Admitted before the Job copy may start: a manager stopping
        # in between must not leave a running Job its successor does not know the workload holds there.
        start_after_admit = "mark_admitted" in steps and self._writes.reservation_unwritten(workload)
        first: list[Callable[[], Awaitable[Any]]] = []
        if "create_started_job" in steps and started_copy is not None and not start_after_admit:
            first.append(create_started_job)
        if "create_remote_workload" in steps:
            first.append(create_copies)
        elif "create_remote_job" in steps and manager_job is not None:
            first.append(create_job_copy)
        if "update_remote_priority" in steps and remote_wl is not None:
            first.append(reprioritize)
        await concurrently(*first)

        async def admit() -> None:
            nonlocal workload
            workload = await self._mark_admitted(workload, worker=worker, remote_workload=remote_wl)

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
                        {**manager_job, "status": mirrored_job_status(remote_jb)},
                        field_manager=self._config.field_manager,
                    ),
                )
                self._mirrored_at[key] = time.monotonic()

        if start_after_admit:
            await admit()
            if self._writes.reservation_unwritten(workload):
                return workload  # Admitted was not written (a check is not Ready): no Job copy without the reservation
            later = [create_started_job] if "create_started_job" in steps and started_copy is not None else []
            await concurrently(*later, job_side)
        else:
            # The Workload's status and the Job are different objects: Admitted and the Job's unsuspend go together.
            await concurrently(*([admit] if "mark_admitted" in steps else []), job_side)
        if "finish_manager_workload" in steps:
            await self._finish(workload, remote_job=remote_jb, worker=worker)
            self._mirrored_at.pop(key, None)
        if "delete_remote" in steps:
            await self._cleaner.delete_copies(conn, [remote_jb, remote_wl], why="the workload finished", finished=True)
        return workload

    def _count_dispatch(self, workload: Obj, *, worker: str) -> None:
        queue = str(((workload.get("status") or {}).get("admission") or {}).get("clusterQueue") or "")
        self._metrics.multikueue_dispatched.labels(queue, worker, self._metrics.role).inc()
        reserved = find_condition(workload, "QuotaReserved")
        if reserved is not None and reserved.get("status") == "True" and reserved.get("lastTransitionTime"):
            since = parse_time(str(reserved["lastTransitionTime"]))
            self._metrics.dispatch_latency.labels(worker).observe(
                max(0.0, (dt.datetime.now(dt.UTC) - since).total_seconds())
            )

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

    def _ours(self, remote: Obj, uid: str) -> bool:
        return is_ours(remote, origin=self._config.origin, manager_workload_uid=uid)

    async def _admission_checks_gate(self, workload: Obj, *, worker: str, copies: bool) -> tuple[CheckGate, Obj] | None:
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

    async def _requeued(self, workload: Obj, key: str) -> tuple[bool, float | None]:
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

    async def _create(self, conn: WorkerConnection, resource: Any, obj: Obj) -> tuple[bool, Obj]:
        """Create ``obj`` on the worker; returns whether it is new (False when our copy was already there, made by
        an earlier attempt) and the object on the worker."""
        view = conn.workload_view if resource is WORKLOADS else conn.job_view
        try:
            created = await conn.api.create(resource, obj, field_manager=self._config.field_manager)
            view.created(created)
        except Forbidden as err:
            meta = obj["metadata"]
            why = (
                "the credentials in its MultiKueueCluster's kubeconfig lack this permission"
                if err.permission_denied
                else f"not a permission: {err.why()}"
            )
            raise RefusedByWorker(
                f"{conn.name} refused to create {resource.kind} {meta['namespace']}/{meta['name']}: {err}; {why}"
            ) from None
        except AlreadyExists:
            meta = obj["metadata"]
            existing = await conn.api.get(resource, meta["name"], namespace=meta["namespace"])
            uid = meta["labels"].get(MANAGER_UID_LABEL)
            if not is_ours(existing, origin=self._config.origin, manager_workload_uid=uid):
                raise NotOurs(
                    f"{resource.kind} {meta['namespace']}/{meta['name']} already exists in {conn.name} and was not "
                    "created by this kfed manager; it is left untouched"
                ) from None
            view.created(existing)
            return False, existing
        log.info(
            "created remote object",
            cluster=conn.name,
            kind=resource.kind,
            workload=f"{obj['metadata']['namespace']}/{obj['metadata']['name']}",
        )
        return True, created

    async def _out_of_time(self, workload: Obj, *, worker: str, now: dt.datetime) -> None:
        """The workload used its ``maximumExecutionTimeSeconds`` (``manager.decisions.execution_time``): deactivate
        it, with Kueue's Warning Event."""
        await self._evictions.deactivate(workload, status=exceeded_status(workload, now=now))
        limit = limit_of(workload) or 0
        self._events.emit(
            workload, reason=REASON_EXCEEDED, note=exceeded_note(limit), action="Deactivate", event_type="Warning"
        )
        key = f"{workload['metadata']['namespace']}/{workload['metadata']['name']}"
        log.warning("workload deactivated: maximum execution time exceeded", workload=key, cluster=worker, limit=limit)

    async def _pods_ready(
        self, workload: Obj, *, worker: str, remote_jb: Obj | None, now: dt.datetime
    ) -> tuple[Obj, float | None] | None:
        """Kueue's waitForPodsReady (``manager.decisions.pods_ready``): record readiness, or evict with
        ``PodsReadyTimeout`` and a requeue backoff, or deactivate past the requeuing limit (then None). Otherwise
        the workload as it is now and when to look at its readiness again."""
        policy = self._config.wait_for_pods_ready
        if policy is None:
            return workload, None
        step = pods_ready_step(workload, remote_job=remote_jb, now=now, policy=policy, jitter=random.random() * 0.05)
        key = f"{workload['metadata']['namespace']}/{workload['metadata']['name']}"
        if step.deactivate:
            await self._evictions.deactivate(
                workload, status={"conditions": [*conditions_of(workload), deactivation_target(now)]}
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
            workload = await self._writes.patch_status(workload, {"conditions": [*merged, step.condition]})
            log.info("pods readiness changed", workload=key, cluster=worker, reason=step.condition["reason"])
            waits = ready_waits(workload, now=now) if step.condition["status"] == "True" else None
            if waits is not None:
                namespace, local_queue, priority_class = workload_labels(workload)
                self._metrics.pods_ready(
                    cluster_queue=str(
                        ((workload.get("status") or {}).get("admission") or {}).get("clusterQueue") or ""
                    ),
                    namespace=namespace,
                    local_queue=local_queue,
                    priority_class=priority_class,
                    queued=waits[0],
                    admitted=waits[1],
                )
        return workload, step.recheck_after

    async def _update_remote_priority(
        self, conn: WorkerConnection, workload: Obj, *, remote_wl: Obj, remote_jb: Obj | None
    ) -> None:
        """Give the copies the manager Workload's new priority: the Workload copy's spec (the worker queues and
        preempts by it) and the Job copy's priority-class label (a stock Kueue worker derives it from that)."""
        spec = workload.get("spec") or {}
        ref = spec.get("priorityClassRef")
        meta = remote_wl["metadata"]
        await conn.api.patch(
            WORKLOADS,
            meta["name"],
            {"spec": {"priority": spec.get("priority", 0), "priorityClassRef": ref}},
            namespace=meta["namespace"],
            field_manager=self._config.field_manager,
        )
        if remote_jb is not None:
            try:
                await conn.api.patch(
                    JOBS,
                    remote_jb["metadata"]["name"],
                    {"metadata": {"labels": {PRIORITY_CLASS_LABEL: workload_priority_class(ref)}}},
                    namespace=meta["namespace"],
                    field_manager=self._config.field_manager,
                )
            except Forbidden as err:
                # Kueue's documented role for the manager on a worker has no Job patch (Kueue itself only
                # reprioritizes the Workload copy, which is what the worker queues by): the label stays as it was.
                log.info("job copy's priority label not updated", cluster=conn.name, error=str(err)[:200])
        log.info(
            "copy reprioritized",
            workload=f"{meta['namespace']}/{meta['name']}",
            cluster=conn.name,
            priority=spec.get("priority", 0),
        )

    async def _mark_admitted(self, workload: Obj, *, worker: str, remote_workload: Obj | None) -> Obj:
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
            )
            if self._config.wait_for_pods_ready is not None and find_condition(workload, "PodsReady") is None:
                conditions = [*conditions, waiting_for_start(now)]  # Kueue's clock for the PodsReady timeout
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
            note=f"Admitted by ClusterQueue {queue}, wait time since reservation was "
            f"{max(0.0, (now - since).total_seconds()):.0f}s",
            action="Admit",
        )
        log.info("workload admitted", workload=key, cluster=worker, queue=queue)
        return updated

    async def _finish(self, workload: Obj, *, remote_job: Obj | None, worker: str) -> None:
        finish = job_finish(remote_job)
        assert finish is not None
        now = dt.datetime.now(dt.UTC)
        conditions, changed = set_condition(
            (workload.get("status") or {}).get("conditions") or [],
            condition_type="Finished",
            status=True,
            reason=REASON_SUCCEEDED if finish.succeeded else REASON_FAILED,
            message=finish.message or ("Job finished successfully" if finish.succeeded else "Job failed"),
            now=now,
        )
        if changed:
            await self._writes.patch_status(workload, {"conditions": conditions})
        key = f"{workload['metadata']['namespace']}/{workload['metadata']['name']}"
        self._ledger.forget(key)
        queue = str(((workload.get("status") or {}).get("admission") or {}).get("clusterQueue") or "")
        namespace, local_queue, priority_class = workload_labels(workload)
        self._metrics.finished(
            cluster_queue=queue, namespace=namespace, local_queue=local_queue, priority_class=priority_class
        )
        log.info("workload finished", workload=key, cluster=worker, succeeded=finish.succeeded)
