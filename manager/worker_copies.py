"""kfed-manager's writes to a worker cluster: the copies of a dispatched Workload and its Job, and their priority.

The remote sync (``manager.remote_sync``) decides which of the sync plan's steps a pass carries out; the steps that
create or update copies in the worker are here, so every create there goes through one place: it tells our copy
(made by an earlier attempt) from a same-named object that is not ours (``NotOurs``, DESIGN §7) or is the manager's
own object (``ManagerClusterReached``: the worker is the manager cluster), turns the worker's
403 into ``RefusedByWorker``, and counts a dispatch once per Workload copy made. Deleting copies is
``manager.copy_cleanup``'s.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import structlog

from federation.api.labels import PRIORITY_CLASS_LABEL
from federation.conditions import find_condition, parse_time
from federation.kube.errors import AlreadyExists, Forbidden
from federation.kube.resources import JOBS, WORKLOADS
from federation.obs.metrics import Metrics
from federation.protocol import MANAGER_UID_LABEL
from federation.workload_from_job import workload_priority_class
from manager.concurrently import concurrently
from manager.config import ManagerConfig
from manager.decisions.remote_copies import is_ours, remote_job, remote_workload
from manager.decisions.shared_servers import manager_cluster_message
from manager.decisions.sync import Step
from manager.worker_connection import WorkerConnection
from manager.workload_writes import REMOTE_SYNC

log = structlog.get_logger(__name__)

Obj = dict[str, Any]


class NotOurs(RuntimeError):
    """A same-named object in the worker was not created by this manager; it is left alone."""


class ManagerClusterReached(NotOurs):
    """The same-named object in the worker is the manager's own (the same uid): the worker's kubeconfig reaches the
    manager cluster itself (``manager.decisions.shared_servers``)."""


class RefusedByWorker(RuntimeError):
    """The worker answered 403 Forbidden to creating a copy: the manager's credentials there lack a permission, or
    the worker's admission (a policy or webhook, a ResourceQuota) refused the copy; the message says which."""


class WorkerCopies:
    def __init__(self, *, config: ManagerConfig, metrics: Metrics) -> None:
        self._config = config
        self._metrics = metrics

    async def create_and_update(
        self,
        steps: list[Step],
        *,
        conn: WorkerConnection,
        workload: Obj,
        manager_job: Obj | None,
        remote_wl: Obj | None,
        remote_jb: Obj | None,
        started_copy: Obj | None,
        start_after_admit: bool,
    ) -> None:
        """The plan's steps that write to the worker, at once: the copies it creates and their new priority.
        ``started_copy`` is the Job copy ``create_started_job`` creates, here unless ``start_after_admit`` (then
        it is created with :meth:`create` once the manager Workload is ``Admitted``)."""
        worker = conn.name

        async def create_workload_copy(job_copy: Obj | None) -> None:
            copy_ = remote_workload(
                workload, origin=self._config.origin, sent_at=dt.datetime.now(dt.UTC), job_copy=job_copy
            )
            if (await self.create(conn, WORKLOADS, copy_, source_uid=workload["metadata"].get("uid")))[0]:
                self._count_dispatch(workload, worker=worker)  # once per copy made, not per attempt

        async def create_job_copy() -> Obj:
            assert manager_job is not None
            job_copy = remote_job(manager_job, manager_workload=workload, origin=self._config.origin)
            return (await self.create(conn, JOBS, job_copy, source_uid=manager_job["metadata"].get("uid")))[1]

        async def create_copies() -> None:
            # For a stock Kueue worker the Job copy first: the Workload copy is owned by it, so the Job's deletion
            # takes the Workload along. A kfed-agent worker gets the Job copy only once it admitted the Workload.
            job_copy = await create_job_copy() if "create_remote_job" in steps else remote_jb
            await create_workload_copy(job_copy)

        async def reprioritize() -> None:
            assert remote_wl is not None
            await self.update_priority(conn, workload, remote_wl=remote_wl, remote_jb=remote_jb)

        async def create_started_job() -> None:
            assert started_copy is not None
            await self.create(conn, JOBS, started_copy)

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

    def _count_dispatch(self, workload: Obj, *, worker: str) -> None:
        queue = str(((workload.get("status") or {}).get("admission") or {}).get("clusterQueue") or "")
        self._metrics.multikueue_dispatched.labels(queue, worker, self._metrics.role).inc()
        reserved = find_condition(workload, "QuotaReserved")
        if reserved is not None and reserved.get("status") == "True" and reserved.get("lastTransitionTime"):
            since = parse_time(str(reserved["lastTransitionTime"]))
            self._metrics.dispatch_latency.labels(worker).observe(
                max(0.0, (dt.datetime.now(dt.UTC) - since).total_seconds())
            )

    async def create(
        self, conn: WorkerConnection, resource: Any, obj: Obj, *, source_uid: str | None = None
    ) -> tuple[bool, Obj]:
        """Create ``obj`` on the worker; returns whether it is new (False when our copy was already there, made by
        an earlier attempt) and the object on the worker. ``source_uid`` is the uid of the manager's object ``obj``
        copies: found under the copy's name, the worker is the manager cluster itself (``ManagerClusterReached``)."""
        view = conn.workload_view if resource is WORKLOADS else conn.job_view
        try:
            created = await conn.api.create(resource, obj, field_manager=self._config.field_manager)
            view.created(created, writer=REMOTE_SYNC)
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
            if source_uid and (existing.get("metadata") or {}).get("uid") == source_uid:
                raise ManagerClusterReached(
                    manager_cluster_message(kind=resource.kind, namespace=meta["namespace"], name=meta["name"])
                ) from None
            if not is_ours(existing, origin=self._config.origin, manager_workload_uid=uid):
                raise NotOurs(
                    f"{resource.kind} {meta['namespace']}/{meta['name']} already exists in {conn.name} and was not "
                    "created by this kfed manager; it is left untouched"
                ) from None
            view.created(existing, writer=REMOTE_SYNC)
            return False, existing
        log.info(
            "created remote object",
            cluster=conn.name,
            kind=resource.kind,
            workload=f"{obj['metadata']['namespace']}/{obj['metadata']['name']}",
        )
        return True, created

    async def adopt(self, conn: WorkerConnection, copies: Sequence[Mapping[str, Any]], *, workload: Obj) -> None:
        """Label a stock Kueue manager's copies of ``workload`` as this manager's (``lifecycle.adoptions``), each
        guarded by its uid: from then on they are handled as copies kfed-manager made."""
        meta = workload["metadata"]
        for copy in copies:
            resource = WORKLOADS if copy.get("kind") == "Workload" else JOBS
            copy_meta = copy["metadata"]
            body = {"metadata": {"uid": copy_meta.get("uid"), "labels": {MANAGER_UID_LABEL: meta["uid"]}}}
            written = await conn.api.patch(
                resource,
                copy_meta["name"],
                body,
                namespace=copy_meta["namespace"],
                field_manager=self._config.field_manager,
            )
            view = conn.workload_view if resource is WORKLOADS else conn.job_view
            view.wrote(dict(copy), written, writer=REMOTE_SYNC)
            log.info(
                "adopted a stock Kueue manager's copy",
                cluster=conn.name,
                kind=resource.kind,
                workload=f"{meta['namespace']}/{meta['name']}",
            )

    async def update_priority(
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
