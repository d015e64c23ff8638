"""Wires kfed-manager together: the manager cluster's caches, the worker pool and the controllers.

Events only route keys: a Job change queues that Job for the Job controller and its Workload for remote sync;
any change to queues, quotas, workloads or a worker's capacity report triggers the global scheduler; a remote
copy's change queues its manager Workload. Every controller re-reads the caches, so they stay level-triggered.
"""

from __future__ import annotations

import datetime as dt
from functools import partial
from typing import Any

import anyio
import structlog

from federation.admission.in_use_finalizer import RESOURCE_IN_USE_FINALIZER, in_use_finalizer_due
from federation.admission.orphans import being_deleted
from federation.admission.queue_metrics import Sample, finished_samples
from federation.admission.requeued import requeued_reason_of
from federation.api.labels import PREBUILT_WORKLOAD_LABEL, QUEUE_NAME_LABEL
from federation.api.workload import EVICTED_BY_CLUSTER_QUEUE_STOPPED
from federation.conditions import is_true
from federation.gc_freeze import freeze_after_first_sync, thaw_after_term
from federation.kube.api import KubeApi
from federation.kube.cache import WatchCache, unsynced
from federation.kube.finalizer_release import FinalizerRelease
from federation.kube.overlay import WriteOverlay
from federation.kube.recorder import EventRecorder
from federation.kube.refusal import RefusalReporter
from federation.kube.resources import (
    ADMISSION_CHECKS,
    CLUSTER_QUEUES,
    COHORTS,
    JOBS,
    LIMIT_RANGES,
    LOCAL_QUEUES,
    MULTIKUEUE_CLUSTERS,
    MULTIKUEUE_CONFIGS,
    NAMESPACES,
    PRIORITY_CLASSES,
    RESOURCE_FLAVORS,
    RUNTIME_CLASSES,
    SECRETS,
    WORKLOAD_PRIORITY_CLASSES,
    WORKLOADS,
)
from federation.kube.trigger import spec_changed
from federation.kube.workqueue import WorkQueue
from federation.obs.metrics import Metrics
from federation.workload_from_job import workload_name_for_job
from manager.admission_check_status import AdmissionCheckStatus
from manager.config import ManagerConfig
from manager.copy_cleanup import CopyCleaner
from manager.decisions.dashboard_view import WorkerInput, dashboard_state
from manager.decisions.federation_gauges import WorkerView, multikueue_cluster_samples, worker_samples
from manager.decisions.ledger import InFlightLedger
from manager.decisions.lifecycle import held_worker
from manager.decisions.local_routing import default_managed_namespace_selector
from manager.decisions.scheduling_inputs import (
    copy_admitted_first,
    edited_while_queued,
    job_copy_finished_first,
    needs_scheduling,
    newly_reserved,
    released,
)
from manager.decisions.visibility import QueueObjects
from manager.job_controller import JobController
from manager.local_queues_config import KEY as LOCAL_QUEUES_KEY
from manager.local_queues_config import LocalQueuesConfig
from manager.quota_automation import KEY as QUOTA_AUTOMATION_KEY
from manager.quota_automation import QuotaAutomation
from manager.remote_sync import RemoteSync, owner_job_name
from manager.reservation_holds import ReservationHolds
from manager.retention import RetentionSweeper
from manager.scheduler import GlobalScheduler, SchedulerCaches
from manager.workers import HEALTH_CHANGED, WorkerPool
from manager.workload_writes import REMOTE_SYNC

log = structlog.get_logger(__name__)


def _key(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]


class ManagerRuntime:
    def __init__(self, api: KubeApi, config: ManagerConfig, metrics: Metrics) -> None:
        self.api = api
        self.config = config
        self.metrics = metrics
        self.jobs = WatchCache(api, JOBS, label_selector=QUEUE_NAME_LABEL)
        self.job_view = WriteOverlay(self.jobs.store)
        self.workloads = WatchCache(api, WORKLOADS)
        self.workload_view = WriteOverlay(self.workloads.store)
        """The Workloads with the scheduler's and the remote sync's own writes laid over the cache."""
        self.cluster_queues = WatchCache(api, CLUSTER_QUEUES)
        self.local_queues = WatchCache(api, LOCAL_QUEUES)
        self.flavors = WatchCache(api, RESOURCE_FLAVORS)
        self.cohorts = WatchCache(api, COHORTS)
        self.priority_classes = WatchCache(api, WORKLOAD_PRIORITY_CLASSES)
        self.pod_priority_classes = WatchCache(api, PRIORITY_CLASSES)
        self.admission_checks = WatchCache(api, ADMISSION_CHECKS)
        self.multikueue_configs = WatchCache(api, MULTIKUEUE_CONFIGS)
        self.multikueue_clusters = WatchCache(api, MULTIKUEUE_CLUSTERS)
        self.namespaces = WatchCache(api, NAMESPACES)
        self.limit_ranges = WatchCache(api, LIMIT_RANGES)
        self.runtime_classes = WatchCache(api, RUNTIME_CLASSES)
        self.secrets = WatchCache(api, SECRETS, namespace=config.namespace)
        self.events = EventRecorder(api, controller="kfed.io/kfed-manager", instance=config.identity)
        self.ledger = InFlightLedger()
        self.pool = WorkerPool(
            config=config,
            manager_api=api,
            clusters=self.multikueue_clusters,
            secrets=self.secrets,
            on_remote_change=self._remote_changed,
            events=self.events,
            api_observer=metrics.remote_call_observer,
        )
        self.local_queues_config = LocalQueuesConfig(
            api=api,
            namespace=config.namespace,
            field_manager=config.field_manager,
            local_queues=self.local_queues,
            cluster_queues=self.cluster_queues,
            admission_checks=self.admission_checks,
            namespaces=self.namespaces,
            managed_namespace_selector=config.managed_jobs_namespace_selector
            or default_managed_namespace_selector(config.namespace),
            manage_jobs_without_queue_name=config.manage_jobs_without_queue_name,
        )
        self.local_queues_queue = WorkQueue(
            "local-queues-config",
            observer=RefusalReporter(
                events=self.events, component="kfed-manager", lookup=lambda _: None, action="Configure"
            ),
        )
        self.quota_automation = QuotaAutomation(
            api=api,
            field_manager=config.field_manager,
            cluster_queues=self.cluster_queues,
            local_queues=self.local_queues,
            admission_checks=self.admission_checks,
            multikueue_configs=self.multikueue_configs,
            pool=self.pool,
            events=self.events,
        )
        self.job_controller = JobController(
            api=api,
            config=config,
            jobs=self.job_view,
            workloads=self.workloads,
            priority_classes=self.priority_classes,
            pod_priority_classes=self.pod_priority_classes,
            events=self.events,
            runs_locally=self.local_queues_config.is_local,
            metrics=self.metrics,
        )
        self.copy_cleaner = CopyCleaner(pool=self.pool, workloads=self.workload_view, origin=config.origin)
        self.reservation_holds = ReservationHolds(
            seconds=config.reservation_hold,
            workloads=self.workload_view,
            on_hold=lambda key: self.sync_queue.add(key, urgent=True),  # its copy goes out now
        )
        self.remote_sync = RemoteSync(
            api=api,
            config=config,
            workloads=self.workload_view,
            jobs=self.job_view,
            admission_checks=self.admission_checks,
            cluster_queues=self.cluster_queues,
            local_queues=self.local_queues,
            pool=self.pool,
            ledger=self.ledger,
            cleaner=self.copy_cleaner,
            events=self.events,
            metrics=metrics,
            cohorts=self.cohorts,
            holds=self.reservation_holds,
        )
        self.retention = RetentionSweeper(
            api=api, policy=config.retention, workloads=self.workloads, jobs=self.jobs, events=self.events
        )
        self.finalizer_release = FinalizerRelease(
            api=api,
            cache=self.workloads,
            resource=WORKLOADS,
            finalizer=RESOURCE_IN_USE_FINALIZER,
            due=in_use_finalizer_due,
            field_manager="kfed-manager",
            events=self.events,
        )
        """Kueue's resource-in-use finalizer lifted from the Workloads Kueue left here (``federation.admission
        .in_use_finalizer``)."""
        self.admission_check_view = WriteOverlay(self.admission_checks.store)
        """The AdmissionChecks with kfed-manager's own writes laid over the cache: the scheduler writes their
        finalizer and the admission check controller their status, each at the resourceVersion the other made."""
        self.admission_checks.add_handler(self.admission_check_view.observe)
        self.scheduler = GlobalScheduler(
            api=api,
            config=config,
            caches=SchedulerCaches(
                workloads=self.workloads,
                cluster_queues=self.cluster_queues,
                local_queues=self.local_queues,
                flavors=self.flavors,
                cohorts=self.cohorts,
                namespaces=self.namespaces,
                limit_ranges=self.limit_ranges,
                runtime_classes=self.runtime_classes,
                admission_checks=self.admission_checks,
                multikueue_configs=self.multikueue_configs,
            ),
            workload_view=self.workload_view,
            workers=self.pool,
            ledger=self.ledger,
            metrics=metrics,
            events=self.events,
            holds=self.reservation_holds,
            admission_check_view=self.admission_check_view,
        )
        self.admission_check_status = AdmissionCheckStatus(
            api=api,
            field_manager=config.field_manager,
            admission_checks=self.admission_checks,
            multikueue_configs=self.multikueue_configs,
            workers=self.pool,
            events=self.events,
            view=self.admission_check_view,
        )
        # A call this cluster refuses (the chart's RBAC) is named on the Job or Workload, besides the queue's retry.
        self.job_queue = WorkQueue(
            "jobs",
            observer=RefusalReporter(
                events=self.events, component="kfed-manager", lookup=self.job_view.get, action="Reconcile"
            ),
        )
        self.sync_queue = WorkQueue(
            "remote-sync",
            observer=RefusalReporter(
                events=self.events, component="kfed-manager", lookup=self.workload_view.get, action="Sync"
            ),
            latest_answer_wins=True,  # each pass derives every deadline of its workload again
        )
        self._route_events()

    @property
    def caches(self) -> tuple[WatchCache, ...]:
        return (
            self.jobs,
            self.workloads,
            self.cluster_queues,
            self.local_queues,
            self.flavors,
            self.cohorts,
            self.priority_classes,
            self.pod_priority_classes,
            self.admission_checks,
            self.multikueue_configs,
            self.multikueue_clusters,
            self.namespaces,
            self.limit_ranges,
            self.runtime_classes,
            self.secrets,
        )

    def synced(self) -> tuple[bool, str]:
        waiting = unsynced(self.caches)
        return (not waiting, "waiting for caches: " + ", ".join(waiting) if waiting else "")

    def _route_events(self) -> None:
        # The views observe each event first (the handlers read them). An echo of the remote sync's own write brings
        # it nothing it has not seen: the pass that wrote looks again itself when its write calls for more
        # (``RemoteSync.reconcile``). The job controller reads the Jobs through the view, so the echo of a Job write
        # brings it nothing either; the scheduler's triggers below do not depend on echoes.
        def on_job(event: str, job: dict[str, Any], _old: Any) -> None:
            if self.job_view.observe_echo(event, job) == REMOTE_SYNC:
                return
            self.job_queue.add(_key(job))
            meta = job["metadata"]
            workload = f"{meta['namespace']}/{workload_name_for_job(meta['name'], meta['uid'])}"
            if self.workload_view.get(workload) is not None:  # else the sync has nothing of this Job's to look at
                self.sync_queue.add(workload)

        def on_workload(event: str, workload: dict[str, Any], old: Any) -> None:
            if self.workload_view.observe_echo(event, workload) != REMOTE_SYNC:
                self.sync_queue.add(_key(workload), urgent=newly_reserved(workload, old))
            if needs_scheduling(event, workload, old):
                self.scheduler.trigger()
            # Deleted: its Job needs a new Workload. Being deleted (a finalizer holds it): its Job is stopped.
            # Released: a queue its Job was relabelled with while it held quota can be taken now
            # (federation.workload_match). Edited while queued: back in line with its Job.
            if (
                event == "DELETED"
                or (being_deleted(workload) and not being_deleted(old))
                or released(workload, old)
                or edited_while_queued(event, workload, old)
            ):
                job = owner_job_name(workload)
                if job is not None:
                    self.job_queue.add(f"{workload['metadata']['namespace']}/{job}")
            elif old is not None and owner_job_name(workload) is None and (job := owner_job_name(old)) is not None:
                # its ownerReference was taken off: its Job, if it lives, gives it back (manager.job_controller)
                self.job_queue.add(f"{workload['metadata']['namespace']}/{job}")

        def on_priority_class(_event: str, _obj: dict[str, Any], _old: Any) -> None:
            for job in self.jobs.store:
                self.job_queue.add(_key(job))

        self.jobs.add_handler(on_job)
        self.workloads.add_handler(on_workload)
        self.priority_classes.add_handler(on_priority_class)
        self.pod_priority_classes.add_handler(on_priority_class)

        def on_queue(event: str, queue: dict[str, Any], old: Any) -> None:
            if not spec_changed(event, queue, old):  # our own status writes there change nothing
                return
            self.scheduler.trigger()
            # e.g. stopPolicy HoldAndDrain: the workloads the queue holds are looked at again, and so are those a
            # stopped ClusterQueue drained (their admission is gone; Requeued says why), for ClusterQueueRestarted
            name, namespace = queue["metadata"]["name"], queue["metadata"].get("namespace")
            for workload in self.workloads.store:
                admission = (workload.get("status") or {}).get("admission") or {}
                if (
                    namespace is None
                    and (
                        admission.get("clusterQueue") == name
                        or requeued_reason_of(workload) == EVICTED_BY_CLUSTER_QUEUE_STOPPED
                    )
                ) or (
                    namespace == workload["metadata"]["namespace"]
                    and (workload.get("spec") or {}).get("queueName") == name
                ):
                    self.sync_queue.add(_key(workload))

        for cache in (self.cluster_queues, self.local_queues):
            cache.add_handler(on_queue)
        for cache in (
            self.flavors,
            self.cohorts,
            self.admission_checks,
            self.multikueue_configs,
            self.multikueue_clusters,
            self.namespaces,
            self.limit_ranges,
            self.runtime_classes,
        ):
            cache.add_handler(lambda _e, _o, _old: self.scheduler.trigger())
        for cache in (self.admission_checks, self.multikueue_configs, self.multikueue_clusters):
            cache.add_handler(self.admission_check_status.trigger.pull)
        for cache in (self.local_queues, self.cluster_queues, self.admission_checks):
            cache.add_handler(self._local_queues_changed)
        for cache in (
            self.cluster_queues,
            self.local_queues,
            self.admission_checks,
            self.multikueue_configs,
            self.multikueue_clusters,
        ):
            cache.add_handler(self.quota_automation.changed)
        self.namespaces.add_handler(self._namespace_changed)

    def _local_queues_changed(self, event: str, obj: dict[str, Any], old: Any) -> None:
        if spec_changed(event, obj, old):
            self.local_queues_queue.add(LOCAL_QUEUES_KEY)

    def _namespace_changed(self, event: str, obj: dict[str, Any], old: Any) -> None:
        """A namespace's labels decide whether its Jobs without a queue-name label are kfed's."""
        if old is None or event != "MODIFIED" or obj["metadata"].get("labels") != old["metadata"].get("labels"):
            self.local_queues_queue.add(LOCAL_QUEUES_KEY)

    def _remote_changed(self, worker: str, kind: str, obj: dict[str, Any], deleted: bool) -> None:
        if kind in (HEALTH_CHANGED, "ClusterCapacity"):
            self.quota_automation.changed()
        if kind == HEALTH_CHANGED:
            conn = self.pool.connections.get(worker)
            if conn is not None:
                for copy in conn.workloads.store:
                    self._remote_changed(worker, "Workload", copy, False)
                for copy in conn.jobs.store:
                    self._remote_changed(worker, "Job", copy, False)
            for workload in self.workload_view:  # those whose copies are not there (yet, or any more)
                if held_worker(workload) == worker:
                    self.sync_queue.add(f"{workload['metadata']['namespace']}/{workload['metadata']['name']}")
            return
        if kind == "ClusterCapacity":
            conn = self.pool.connections.get(worker)
            report = conn.current if conn is not None else None
            if report is not None:
                self.ledger.report_arrived(worker, observed_at=report.observed_at)
            self.scheduler.trigger()
            return
        meta = obj["metadata"]
        if kind == "Workload":
            key = f"{meta['namespace']}/{meta['name']}"
        else:
            name = (meta.get("labels") or {}).get(PREBUILT_WORKLOAD_LABEL)
            if not name:
                return
            key = f"{meta['namespace']}/{name}"
        manager_workload = self.workload_view.get(key)
        if deleted and manager_workload is not None and is_true(manager_workload, "Finished"):
            return  # a finished workload's copy went, as the pass that finished it asked (it looks again itself)
        if kind == "Workload":
            self.sync_queue.add(key, urgent=copy_admitted_first(obj, manager_workload))
        else:
            self.sync_queue.add(key, urgent=job_copy_finished_first(obj, manager_workload))

    def gauges(self) -> list[Sample]:
        """Every gauge of this term, computed from its caches when Prometheus scrapes."""
        samples = self.scheduler.queue_gauges()
        samples.extend(
            multikueue_cluster_samples(
                self.cluster_queues.store,
                admission_checks={o["metadata"]["name"]: o for o in self.admission_checks.store},
                configs={o["metadata"]["name"]: o for o in self.multikueue_configs.store},
                clusters={o["metadata"]["name"]: o for o in self.multikueue_clusters.store},
            )
        )
        views = [
            WorkerView(conn.name, conn.connected, conn.report.observed_at if conn.report is not None else None)
            for conn in list(self.pool.connections.values())
        ]
        samples.extend(worker_samples(views, in_flight=len(self.ledger), now=dt.datetime.now(dt.UTC)))
        samples.extend(
            finished_samples(
                self.workloads.store,
                local_queues=self.local_queues.store,
                cluster_queues=[o["metadata"]["name"] for o in self.cluster_queues.store],
            )
        )
        return samples

    def dashboard_state(self) -> dict[str, Any]:
        """The dashboard's snapshot of this term's caches (``manager.decisions.dashboard_view``)."""
        now = dt.datetime.now(dt.UTC)
        names = sorted({o["metadata"]["name"] for o in self.multikueue_clusters.store} | set(self.pool.connections))
        workers = []
        for name in names:
            conn = self.pool.connections.get(name)
            report = next(iter(conn.capacity.store), None) if conn is not None else None
            workers.append(
                WorkerInput(
                    name=name,
                    connected=conn is not None and conn.connected,
                    problem=self.pool.unusable_reason(name, now),
                    report=report,
                )
            )
        return dashboard_state(
            workers=workers, cluster_queues=self.cluster_queues.store, workloads=self.workloads.store, now=now
        )

    def queue_objects(self) -> QueueObjects:
        """What Kueue's visibility API is answered from (``manager.visibility_server``): this term's caches."""
        return QueueObjects(self.workloads.store, self.local_queues.store, self.cluster_queues.store)

    def remotes_connected(self) -> tuple[bool, str]:
        """Readiness detail "remotes connected": never fails the probe (one degraded worker must not take the whole
        manager out of its Service), but says which workers are not connected and why."""
        names = sorted({o["metadata"]["name"] for o in self.multikueue_clusters.store})
        if not names:
            return True, "no MultiKueueClusters"
        now = dt.datetime.now(dt.UTC)
        down = [
            f"{name} ({self.pool.unusable_reason(name, now)})" for name in names if self.pool.unusable_reason(name, now)
        ]
        if not down:
            return True, f"{len(names)}/{len(names)} connected"
        return True, f"{len(names) - len(down)}/{len(names)} connected; degraded: {', '.join(down)}"

    async def run(self) -> None:
        """Start caches, wait for them, then run every controller until cancelled."""
        self.metrics.add_source(self.gauges)
        try:
            await self._run()
        finally:
            thaw_after_term("kfed-manager")
            self.metrics.remove_source(self.gauges)

    async def _run(self) -> None:
        async with anyio.create_task_group() as tg:
            for cache in self.caches:
                tg.start_soon(cache.run)
            for cache in self.caches:
                await cache.wait_synced()
            log.info("manager caches synced")
            freeze_after_first_sync("kfed-manager", self.caches)
            tg.start_soon(self.events.run)
            tg.start_soon(self.pool.run)
            # Keys are never reconciled concurrently with themselves; different keys are, up to `workers` at a time.
            tg.start_soon(partial(self.job_queue.run, self.job_controller.reconcile, workers=self.config.workers))
            tg.start_soon(partial(self.sync_queue.run, self.remote_sync.reconcile, workers=self.config.workers))
            tg.start_soon(self.scheduler.run)
            tg.start_soon(self.admission_check_status.run)
            self.local_queues_queue.add(LOCAL_QUEUES_KEY)
            tg.start_soon(partial(self.local_queues_queue.run, self.local_queues_config.reconcile, workers=1))
            self.quota_automation.queue.add(QUOTA_AUTOMATION_KEY)
            tg.start_soon(partial(self.quota_automation.queue.run, self.quota_automation.reconcile, workers=1))
            tg.start_soon(self.copy_cleaner.run)
            tg.start_soon(self._collect_garbage_periodically)
            tg.start_soon(self.retention.run)
            tg.start_soon(self.finalizer_release.run)

    async def _collect_garbage_periodically(self) -> None:
        while True:
            await anyio.sleep(self.config.gc_interval)
            try:
                deleted = await self.copy_cleaner.collect_garbage()
            except Exception as err:  # one failed sweep is retried at the next interval
                log.warning("garbage collection failed", error=str(err))
                continue
            if deleted:
                log.info("garbage collection removed remote objects", count=deleted)
