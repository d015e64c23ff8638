"""The Workloads of Jobs queued on kfed-agent's worker cluster itself: made, and kept in line with their Job.

Why this module exists: the job pass (``worker_agent.job_passes``) treats such a Job like a manager's copy once it
has a Workload (``decisions.local_jobs``); this is the I/O that gets it one, as Kueue's Job integration does. The
Workload is created from the Job with its priority resolved from this cluster's WorkloadPriorityClasses and
PriorityClasses (Event ``CreatedWorkload``). A Job that cannot have one gets a Warning Event
``CreatingWorkloadFailed`` and a log line, once per reason, and is looked at again in every pass (the class it names
may come). A user's edit of the Job is followed as ``federation.workload_match`` says: a waiting Job's Workload gets
its new pod sets, queue or time limit (Event ``UpdatedWorkload``), one that holds quota, or whose running Job's pod
count changed, is deleted (Event ``DeletedWorkload``) and the Job, stopped, gets a new one. A Job that runs without a
Workload (say, someone deleted it) is suspended first (Event ``Stopped``), as Kueue does, and gets its new Workload
once its pods are gone.
"""

from __future__ import annotations

from typing import Any

import structlog

from federation.job_stops import MISSING_WORKLOAD, REASON_STOPPED
from federation.kube import resources as r
from federation.kube.errors import AlreadyExists, Conflict, Invalid, KubeError, NotFound
from federation.kube.recorder import EventRecorder
from federation.kube.trigger import Trigger
from federation.workload_from_job import JobNotQueueable, Priority, priority_spec, resolve_priority
from federation.workload_match import WorkloadEdit, edit_for_job, updated_spec
from worker_agent.decisions.local_jobs import REASON_NOT_QUEUEABLE, local_workload
from worker_agent.world import World
from worker_agent.writes import Writes

log = structlog.get_logger(__name__)

Obj = dict[str, Any]
FIELD_MANAGER = "kfed-agent"


class LocalJobs:
    def __init__(self, *, world: World, writes: Writes, trigger: Trigger, events: EventRecorder, cluster: str) -> None:
        self.world = world
        self.api = world.api
        self.writes = writes
        self.trigger = trigger
        self.events = events
        self._told: dict[str, tuple[str, str]] = {}
        """Job key → (uid, message) of the Jobs told why they have no Workload, or why it was not updated (once per
        message)."""
        self._log = log.bind(cluster=cluster)

    def forget(self, key: str) -> None:
        """The Job ``key`` is gone."""
        self._told.pop(key, None)

    def _priority(self, job: Obj) -> Priority:
        """The Job's priority from this cluster's WorkloadPriorityClasses and PriorityClasses (``JobNotQueueable``
        when the class it names does not exist)."""
        return resolve_priority(
            job,
            workload_class=self.world.workload_priority_classes.store.get_by_name,
            pod_class=self.world.pod_priority_classes.store.get_by_name,
            pod_classes=self.world.pod_priority_classes.store,
        )

    async def reprioritize(self, key: str, job: Obj, workload: Obj, unsettled: set[str]) -> None:
        """The Job's ``kueue.x-k8s.io/priority-class`` label names another class than its Workload's: the Workload
        takes that class's priority, as in Kueue (a class that does not exist is told, and the Workload keeps its
        priority)."""
        try:
            priority = self._priority(job)
        except JobNotQueueable as err:
            self._tell(key, job, err.reason or "UpdatingPriorityFailed", str(err), unsettled)
            return
        meta = workload["metadata"]
        body = {"metadata": {"resourceVersion": meta["resourceVersion"]}, "spec": priority_spec(priority)}
        try:
            await self.api.patch(
                r.WORKLOADS, meta["name"], body, namespace=meta["namespace"], field_manager=FIELD_MANAGER
            )
        except (Conflict, NotFound):
            self.trigger.pull()
            return
        except Invalid as err:  # e.g. a class added to a Workload that holds quota: said, not retried
            message = f"the Workload API refused the new priority: {str(err)[:800]}"
            self._tell(key, job, "UpdatingPriorityFailed", message, unsettled)
            return
        except KubeError as exc:
            self._log.warning("workload.update_failed", job=key, error=str(exc)[:300])
            self.writes.retry(job, exc)
            unsettled.add(key)
            return
        old = (workload.get("spec") or {}).get("priority", 0)
        self._log.info(
            "workload.priority_changed", job=key, priority_class=priority.class_name, old=old, new=priority.value
        )

    async def queue(self, key: str, job: Obj, unsettled: set[str]) -> None:
        """Create the Workload of a Job queued here that has none (``key`` is left in ``unsettled`` when it could not
        be, for the next pass)."""
        try:
            priority = self._priority(job)
        except JobNotQueueable as err:
            self._tell(key, job, err.reason or REASON_NOT_QUEUEABLE, str(err), unsettled)
            return
        workload = local_workload(job, priority=priority)
        if isinstance(workload, str):
            self._tell(key, job, REASON_NOT_QUEUEABLE, workload, unsettled)
            return
        meta = workload["metadata"]
        ref = f"{meta['namespace']}/{meta['name']}"
        bound = self._log.bind(job=key, workload=ref)
        try:
            await self.api.create(r.WORKLOADS, workload, field_manager=FIELD_MANAGER)
        except AlreadyExists:
            return  # its watch event is on the way
        except Invalid as err:  # something in the Job the Workload API refuses: said, not retried
            message = f"the Workload API refused its Workload: {str(err)[:800]}"
            self._tell(key, job, REASON_NOT_QUEUEABLE, message, unsettled)
            return
        except KubeError as exc:
            bound.warning("workload.create_failed", error=str(exc)[:300])
            self.writes.retry(job, exc)
            unsettled.add(key)
            return
        self._told.pop(key, None)
        bound.info("workload.created", why="a Job queued on this worker")
        self.events.emit(job, reason="CreatedWorkload", note=f"Created Workload: {ref}", action="Queue")

    async def stop(self, key: str, job: Obj, unsettled: set[str], message: str = MISSING_WORKLOAD) -> None:
        """Suspend a Job queued here that runs without a Workload, or whose Workload is being deleted (guarded by its
        uid); its pods' end, a change of the Job, brings it back to the job pass, which then queues it."""
        written = await self.writes.suspend_job(job, {"spec": {"suspend": True}}, self._log.bind(job=key))
        if written is None:
            unsettled.add(key)
            return
        self.world.job_writes.remember(written)
        self._log.warning("job.suspended", job=key, why=message)
        self.events.emit(written, reason=REASON_STOPPED, note=message, action="Stop")

    def edit_of(self, key: str, job: Obj, workload: Obj, unsettled: set[str]) -> WorkloadEdit:
        """What the Workload of a Job queued here needs to describe the Job again (``follow_edit`` does it); a Job
        whose edit makes it unqueueable is told why and keeps its Workload as it is (``KEEP``)."""
        try:
            return edit_for_job(job, workload)
        except JobNotQueueable as err:
            self._tell(key, job, "UpdatingWorkloadFailed", str(err), unsettled)
            return WorkloadEdit.KEEP

    async def follow_edit(self, key: str, job: Obj, workload: Obj, edit: WorkloadEdit, unsettled: set[str]) -> None:
        """Update or delete the Workload as ``edit`` says, at the Workload's resourceVersion (a Conflict is decided
        again at once)."""
        meta = workload["metadata"]
        namespace, name = str(meta["namespace"]), str(meta["name"])
        bound = self._log.bind(job=key, workload=f"{namespace}/{name}")
        try:
            if edit in (WorkloadEdit.UPDATE, WorkloadEdit.UPDATE_QUEUE):
                body = {"metadata": {"resourceVersion": meta["resourceVersion"]}, "spec": updated_spec(job, edit)}
                await self.api.patch(r.WORKLOADS, name, body, namespace=namespace, field_manager=FIELD_MANAGER)
                reason, note = "UpdatedWorkload", f"Updated not matching Workload for suspended job: {namespace}/{name}"
            else:
                await self.api.delete(r.WORKLOADS, name, namespace=namespace, resource_version=meta["resourceVersion"])
                reason, note = "DeletedWorkload", f"Deleted not matching Workload: {namespace}/{name}"
        except (Conflict, NotFound):
            self.trigger.pull()
            return
        except Invalid as err:  # e.g. a count the Workload API refuses: the Workload keeps what it had
            self._tell(key, job, "UpdatingWorkloadFailed", str(err)[:1000], unsettled)
            return
        except KubeError as exc:
            bound.warning("workload.update_failed", error=str(exc)[:300])
            self.writes.retry(job, exc)
            unsettled.add(key)
            return
        bound.info("workload.follows_job_edit", edit=edit.value)
        if edit is not WorkloadEdit.UPDATE_QUEUE:  # Kueue records no Event for a move to another queue
            self.events.emit(job, reason=reason, note=note, action="Update")

    def _tell(self, key: str, job: Obj, reason: str, message: str, unsettled: set[str]) -> None:
        """A Warning Event and a log line saying why, once per message; the Job is looked at again next pass."""
        unsettled.add(key)
        uid = str((job.get("metadata") or {}).get("uid") or "")
        if self._told.get(key) == (uid, message):
            return
        self._told[key] = (uid, message)
        self._log.warning("job.not_queueable", job=key, reason=reason, message=message)
        self.events.emit(job, reason=reason, note=message, action="Queue", event_type="Warning")
