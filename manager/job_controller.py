"""Job → Workload on the manager cluster: every queued Job managed by MultiKueue gets its Workload.

Level-triggered: for each Job key it re-reads the Job and creates the Workload if it is missing (a Job that was
running when its Workload was deleted is suspended again first, so it runs only once it is dispatched anew). A Job
relabelled with another ``kueue.x-k8s.io/priority-class`` re-prioritizes its Workload, pending or admitted, as in
Kueue; the remote sync carries the new priority to the worker's copy. A Job kfed
cannot queue (bad annotation, unknown WorkloadPriorityClass) gets a Warning Event saying why and is retried when
things change; a Job managed by another controller is left alone with one Event saying so. A Job edited while it
waits suspended (its pod count, min-parallelism, tolerations or queue) gets its Workload brought in line, as Kueue
does: updated when it holds no quota, replaced when it does; a queue change waits for the quota to be released.
A Job its user unsuspends while its Workload waits is suspended again (Event ``Stopped``, as Kueue does).
A running Job whose pod count its user changed loses its Workload (confirmed against the apiserver first), so it is
stopped and queued again at its new size (``federation.workload_match``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog

from federation.admission.orphans import being_deleted, left_behind, made_for
from federation.admission.queue_metrics import workload_creation_latency
from federation.api.labels import QUEUE_NAME_LABEL
from federation.conditions import is_true
from federation.job_stops import MISSING_WORKLOAD, NO_MATCHING_WORKLOAD, NOT_ADMITTED, REASON_STOPPED, WORKLOAD_DELETED
from federation.kube.api import KubeApi
from federation.kube.cache import WatchCache
from federation.kube.errors import AlreadyExists, Conflict, Forbidden, Invalid, NotFound
from federation.kube.overlay import WriteOverlay
from federation.kube.recorder import EventRecorder
from federation.kube.resources import JOBS, WORKLOADS
from federation.obs.metrics import Metrics
from federation.protocol import MULTIKUEUE_CONTROLLER
from federation.workload_from_job import (
    JobNotQueueable,
    Priority,
    job_owner_reference,
    priority_class_changed,
    priority_spec,
    resolve_priority,
    workload_for_job,
    workload_name_for_job,
)
from federation.workload_match import WorkloadEdit, edit_for_job, updated_spec
from manager.config import ManagerConfig
from manager.decisions.lifecycle import runs_unadmitted
from manager.decisions.sync import job_finish
from manager.manager_jobs import needs_stopping, stop_manager_job

log = structlog.get_logger(__name__)


class JobController:
    def __init__(
        self,
        *,
        api: KubeApi,
        config: ManagerConfig,
        jobs: WriteOverlay,
        workloads: WatchCache,
        priority_classes: WatchCache,
        pod_priority_classes: WatchCache,
        events: EventRecorder,
        runs_locally: Callable[[str, str], bool] = lambda _namespace, _queue: False,
        metrics: Metrics | None = None,
    ) -> None:
        self._api = api
        self._config = config
        self._jobs = jobs
        """The manager's Jobs with this process's writes laid over (the remote sync starts them and mirrors their
        status): the echoes of those writes do not bring a Job back here."""
        self._workloads = workloads
        self._priority_classes = priority_classes
        self._pod_priority_classes = pod_priority_classes
        self._events = events
        self._runs_locally = runs_locally
        self._metrics = metrics
        """(namespace, LocalQueue) → its Jobs run on the manager cluster, not kfed's (no MultiKueue check)."""
        self._ignored: set[str] = set()

    def _priority(self, job: dict[str, Any]) -> Priority:
        return resolve_priority(
            job,
            workload_class=self._priority_classes.store.get_by_name,
            pod_class=self._pod_priority_classes.store.get_by_name,
            pod_classes=self._pod_priority_classes.store,
        )

    async def _workload_exists(self, name: str, meta: dict[str, Any]) -> bool:
        """Ask the apiserver, not the cache: a Workload created moments ago may not have reached the cache yet."""
        try:
            await self._api.get(WORKLOADS, name, namespace=meta["namespace"])
        except NotFound:
            return False
        return True

    async def _stop(self, job: dict[str, Any], *, why: str) -> None:
        """Suspend a running Job whose Workload is gone, going or replaced (``why``: Kueue's Event message); it is
        queued again under a new Workload."""
        meta = job["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        job = await stop_manager_job(self._api, job, field_manager=self._config.field_manager)
        log.warning("job stopped: its workload was deleted", job=key, why=why)
        self._events.emit(job, reason="Stopped", note=why, action="Stop")

    async def _stop_unadmitted(self, job: dict[str, Any], workload: dict[str, Any]) -> float | None:
        """Suspend a Job its user unsuspended while its Workload waits (Kueue: Event ``Stopped``, "Not admitted by
        cluster queue"), once the apiserver confirms both: the caches may be a moment behind a dispatch."""
        meta, wl_meta = job["metadata"], workload["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        try:
            live_job = await self._api.get(JOBS, meta["name"], namespace=meta["namespace"])
            live_workload = await self._api.get(WORKLOADS, wl_meta["name"], namespace=wl_meta["namespace"])
            if job_finish(live_job) is not None or not runs_unadmitted(live_workload, live_job):
                return None  # the caches were behind; the change that caught up brings the Job back if need be
            job = await stop_manager_job(self._api, live_job, field_manager=self._config.field_manager)
        except Conflict:
            return 1.0  # the Job changed while it was stopped: look again with what it is now
        except NotFound:
            return None  # deleted meanwhile: its event brings the key back if there is anything left to do
        log.warning("job stopped: unsuspended while its workload is not admitted", job=key, workload=wl_meta["name"])
        self._events.emit(job, reason=REASON_STOPPED, note=NOT_ADMITTED, action="Stop")
        return None

    async def _reprioritize(self, job: dict[str, Any], workload: dict[str, Any]) -> None:
        key = f"{job['metadata']['namespace']}/{job['metadata']['name']}"
        try:
            priority = self._priority(job)
        except JobNotQueueable as err:
            log.warning("priority not changed", job=key, reason=str(err))
            self._events.emit(
                job, reason=err.reason or "UpdatingPriorityFailed", note=str(err), action="Update", event_type="Warning"
            )
            return  # re-examined when a WorkloadPriorityClass or the Job changes
        await self._api.patch(
            WORKLOADS,
            workload["metadata"]["name"],
            {"spec": priority_spec(priority)},
            namespace=workload["metadata"]["namespace"],
            field_manager=self._config.field_manager,
        )
        old = (workload.get("spec") or {}).get("priority", 0)
        log.info("workload priority changed", job=key, priority_class=priority.class_name, old=old, new=priority.value)
        self._events.emit(
            workload,
            reason="PriorityChanged",
            note=f"Priority {old} -> {priority.value} (priority class {priority.class_name or 'none'})",
            action="Update",
        )

    async def _still_running_edited(self, job: dict[str, Any], workload: dict[str, Any]) -> bool:
        """Ask the apiserver, not the cache, before a running Job's Workload is deleted: a Job cache a moment behind
        shows a Job the remote sync has since stopped (and given its Workload's count back) as running."""
        meta = job["metadata"]
        try:
            live = await self._api.get(JOBS, meta["name"], namespace=meta["namespace"])
        except NotFound:
            return False
        return edit_for_job(live, workload) is WorkloadEdit.RUNNING_REPLACE

    async def _follow_edit(self, job: dict[str, Any], workload: dict[str, Any]) -> float | None:
        """Bring the Workload in line with its edited Job (``federation.workload_match``). The Workload's
        resourceVersion is the write's precondition, so a reservation the scheduler writes meanwhile makes it a
        Conflict, decided again with what the Workload is then."""
        key = f"{job['metadata']['namespace']}/{job['metadata']['name']}"
        try:
            edit = edit_for_job(job, workload)
        except JobNotQueueable as err:
            log.warning("workload not updated to match its job", job=key, reason=str(err))
            self._events.emit(
                job, reason="UpdatingWorkloadFailed", note=str(err), action="Update", event_type="Warning"
            )
            return None  # the Workload keeps what it had; re-examined when the Job changes
        if edit is WorkloadEdit.KEEP:
            return None
        meta = workload["metadata"]
        ref = f"{meta['namespace']}/{meta['name']}"
        try:
            if edit in (WorkloadEdit.UPDATE, WorkloadEdit.UPDATE_QUEUE):
                spec = updated_spec(job, edit)
                await self._api.patch(
                    WORKLOADS,
                    meta["name"],
                    {"metadata": {"resourceVersion": meta["resourceVersion"]}, "spec": spec},
                    namespace=meta["namespace"],
                    field_manager=self._config.field_manager,
                )
                if edit is WorkloadEdit.UPDATE_QUEUE:  # Kueue records no Event for it
                    log.info("workload moved to its job's queue", job=key, workload=ref, queue=spec["queueName"])
                    return None
                reason, note = "UpdatedWorkload", f"Updated not matching Workload for suspended job: {ref}"
            else:
                if edit is WorkloadEdit.RUNNING_REPLACE and not await self._still_running_edited(job, workload):
                    return 1.0  # the cache was behind (the Job was stopped meanwhile): look again
                await self._api.delete(
                    WORKLOADS, meta["name"], namespace=meta["namespace"], resource_version=meta["resourceVersion"]
                )
                reason, note = "DeletedWorkload", f"Deleted not matching Workload: {ref}"
                if edit is WorkloadEdit.RUNNING_REPLACE:
                    log.warning(
                        "running job's pod count no longer matches its admitted workload: workload deleted",
                        job=key,
                        workload=ref,
                    )
                    await self._stop(job, why=NO_MATCHING_WORKLOAD)  # then it is queued again at its new size
        except Conflict:
            return 1.0  # the Workload changed since the cache saw it: look again with what it is now
        except NotFound:
            return None  # gone already: its DELETED event brings the Job back for a new Workload
        except Invalid as err:  # e.g. a count the Workload API refuses: the Workload keeps what it had
            log.warning("workload not updated to match its job", job=key, workload=ref, reason=str(err)[:500])
            self._events.emit(
                job, reason="UpdatingWorkloadFailed", note=str(err)[:1000], action="Update", event_type="Warning"
            )
            return None  # re-examined when the Job changes again
        log.info("workload brought in line with its edited job", job=key, workload=ref, edit=edit.value)
        self._events.emit(job, reason=reason, note=note, action="Update")
        return None

    async def _give_back_owner(self, job: dict[str, Any], workload: dict[str, Any]) -> None:
        """Someone took the ownerReference off the Workload of this live Job: put it back (at the Workload's
        resourceVersion), so the garbage collector deletes it with the Job and the remote sync carries on. Without
        it the Workload would read as left behind by a deleted Job (``federation.admission.orphans``)."""
        meta, wl_meta = job["metadata"], workload["metadata"]
        patch = {
            "metadata": {
                "resourceVersion": wl_meta["resourceVersion"],
                "ownerReferences": [job_owner_reference(meta["name"], meta["uid"])],
            }
        }
        await self._api.patch(
            WORKLOADS, wl_meta["name"], patch, namespace=wl_meta["namespace"], field_manager=self._config.field_manager
        )
        log.warning(
            "workload ownerReference given back",
            job=f"{meta['namespace']}/{meta['name']}",
            workload=f"{wl_meta['namespace']}/{wl_meta['name']}",
        )

    async def reconcile(self, key: str) -> float | None:
        job = self._jobs.get(key)
        if job is None or (job["metadata"].get("deletionTimestamp")):
            self._ignored.discard(key)
            return None
        if QUEUE_NAME_LABEL not in (job["metadata"].get("labels") or {}):
            return None
        managed_by = (job.get("spec") or {}).get("managedBy")
        if managed_by != MULTIKUEUE_CONTROLLER:
            queue = job["metadata"]["labels"][QUEUE_NAME_LABEL]
            if self._runs_locally(job["metadata"]["namespace"], queue):
                return None  # a local LocalQueue's Job: the policy left it to this cluster, as Kueue would
            if key not in self._ignored:
                self._ignored.add(key)
                self._events.emit(
                    job,
                    action="Queue",
                    reason="NotManagedByMultiKueue",
                    event_type="Warning",
                    note=f"spec.managedBy is {managed_by or 'unset'}, not {MULTIKUEUE_CONTROLLER}; kfed does not "
                    "dispatch this Job (is the kfed job admission policy installed?)",
                )
            return None
        meta = job["metadata"]
        name = workload_name_for_job(meta["name"], meta["uid"])
        existing = self._workloads.store.get_by_name(name, namespace=meta["namespace"])
        if existing is not None and left_behind(existing) and made_for(existing) == meta["uid"]:
            await self._give_back_owner(job, existing)
            return None  # the write brings the Workload back to the remote sync
        if existing is not None and being_deleted(existing):
            # Someone deleted it and a finalizer holds it: stopped as for a deleted Workload (Kueue: "Workload is
            # deleted"); a new one is made once it is gone (its DELETED event brings the Job back).
            if needs_stopping(job) and job_finish(job) is None:
                await self._stop(job, why=WORKLOAD_DELETED)
            return None
        if existing is not None:
            if priority_class_changed(existing, job) and not is_true(existing, "Finished"):
                await self._reprioritize(job, existing)  # then _follow_edit's write, if any, meets a Conflict: retried
            if job_finish(job) is None and runs_unadmitted(existing, job):
                return await self._stop_unadmitted(job, existing)
            return await self._follow_edit(job, existing)
        if job_finish(job) is not None:
            return None  # a finished Job keeps its final status; it needs no new Workload
        if needs_stopping(job) and not await self._workload_exists(name, meta):
            # Running without a Workload (someone deleted it), or its stop was cut short: stop it before queueing it
            # again, as Kueue does; its copies on the worker are garbage-collected with the old Workload.
            await self._stop(job, why=MISSING_WORKLOAD)
        try:
            workload = workload_for_job(job, priority=self._priority(job))
        except JobNotQueueable as err:
            log.warning("job not queueable", job=key, reason=str(err))
            reason = err.reason or "CreatingWorkloadFailed"
            self._events.emit(job, reason=reason, note=str(err), action="Queue", event_type="Warning")
            return None  # re-examined when a WorkloadPriorityClass or the Job changes
        try:
            created = await self._api.create(WORKLOADS, workload, field_manager=self._config.field_manager)
        except AlreadyExists:
            return None
        except Forbidden as err:
            if not err.namespace_terminating:
                raise  # the work queue retries it, and names a refusal
            log.info("no workload: the job's namespace is being deleted", job=key)
            return None  # the Job goes with its namespace
        except Invalid as err:  # something else in the Job the Workload API refuses: say so, do not retry it
            log.warning("workload not created: the Workload API refused it", job=key, reason=str(err)[:500])
            self._events.emit(
                job, reason="CreatingWorkloadFailed", note=str(err)[:1000], action="Queue", event_type="Warning"
            )
            return None  # re-examined when the Job changes
        # No CreatedWorkload Event (Kueue records one): it says nothing the Workload's ownerReference does not, and
        # it was a third of kfed's writes on the manager's Events per Job (README "How a Job flows").
        latency = workload_creation_latency(job, created)
        if self._metrics is not None and latency is not None:
            self._metrics.workload_created(job_kind="Job", seconds=latency)  # batch/v1 Jobs only
        log.info("created workload", job=key, workload=f"{meta['namespace']}/{name}")
        return None
