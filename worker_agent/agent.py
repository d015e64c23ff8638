"""The agent's controllers wired together: caches, reconciler, capacity publisher, event recorder.

``Agent.run`` is what the leader runs; cancelling it (shutdown or lost leadership) stops every task it started.
Our own status writes to ClusterQueues and LocalQueues do not wake anything: only their spec changes (a new
``metadata.generation``), additions and deletions matter to admission and capacity; nor do the Job status updates
that leave what the passes read of a Job as it was (``decisions.facts.job_change_matters``).
"""

from __future__ import annotations

from typing import Any

import anyio
import structlog

from federation.admission.api_workloads import ALL_RESOURCES, ResourceRules
from federation.admission.cycle import DEFAULT_CYCLE_CONFIG, CycleConfig
from federation.admission.in_use_finalizer import RESOURCE_IN_USE_FINALIZER, in_use_finalizer_due
from federation.admission.pods_ready import WaitForPodsReady
from federation.gc_freeze import freeze_after_first_sync
from federation.kube import resources as r
from federation.kube.api import KubeApi
from federation.kube.cache import unsynced
from federation.kube.finalizer_release import FinalizerRelease
from federation.kube.recorder import EventRecorder
from federation.kube.trigger import Trigger, spec_changed
from federation.obs.metrics import Metrics
from worker_agent.capacity_publisher import CapacityPublisher
from worker_agent.decisions.checks import autoscaled_flavors
from worker_agent.decisions.facts import job_change_matters
from worker_agent.decisions.foreign_admission import (
    ADMITTED_ELSEWHERE_REASON,
    admitted_elsewhere_message,
    newly_admitted_by,
)
from worker_agent.decisions.job_copies import DEFAULT_JOB_COPY_TIMEOUT_SECONDS
from worker_agent.provisioning import NOT_SERVED, Provisioning
from worker_agent.reconciler import Reconciler
from worker_agent.tas import DEFAULT_NODE_FAILURE_DELAY, Tas
from worker_agent.unschedulable import UnschedulablePods
from worker_agent.world import World

log = structlog.get_logger(__name__)

Obj = dict[str, Any]


class Agent:
    def __init__(
        self,
        api: KubeApi,
        *,
        cluster: str,
        identity: str,
        metrics: Metrics,
        update_queue_status: bool = True,
        heartbeat: float | None = None,
        node_failure_delay: float = DEFAULT_NODE_FAILURE_DELAY,
        resource_rules: ResourceRules = ALL_RESOURCES,
        job_copy_timeout: float = DEFAULT_JOB_COPY_TIMEOUT_SECONDS,
        wait_for_pods_ready: WaitForPodsReady | None = None,
        cycle: CycleConfig = DEFAULT_CYCLE_CONFIG,
    ) -> None:
        """``cycle``: Kueue's scheduler-wide switches (``fairSharing``) for the local admission."""
        self.api = api
        self.cluster = cluster
        self.identity = identity
        self.metrics = metrics
        self.update_queue_status = update_queue_status
        self.heartbeat = heartbeat
        self.node_failure_delay = node_failure_delay
        self.resource_rules = resource_rules
        self.job_copy_timeout = job_copy_timeout
        self.wait_for_pods_ready = wait_for_pods_ready
        self.cycle = cycle
        self.tas: Tas | None = None
        self.provisioning: Provisioning | None = None
        self.world: World | None = None
        self.running = False

    def ready(self) -> tuple[bool, str]:
        if self.world is None:
            return True, "standby"
        missing = self.world.unsynced()
        if self.tas is not None:
            missing += unsynced(self.tas.caches())
            missing += self.tas.unsynced_cluster_watches()
        if self.provisioning is not None:
            missing += unsynced(self.provisioning.caches())
        return (not missing, "caches not synced: " + ", ".join(missing) if missing else "ok")

    async def run(self) -> None:
        world = World(self.api, resource_rules=self.resource_rules)
        self.world = world
        lock = anyio.Lock()
        events = EventRecorder(self.api, controller="kfed.io/kfed-agent", instance=self.identity)
        world.workloads.add_handler(_other_admitters_reported(events, cluster=self.cluster))
        publisher_options: dict[str, Any] = {} if self.heartbeat is None else {"heartbeat": self.heartbeat}
        tas_box: list[Tas] = []
        trigger = Trigger()
        served = await Provisioning.served_by(self.api)
        if not served:
            log.warning("agent.provisioning_requests_not_served", cluster=self.cluster, message=NOT_SERVED)
        provisioning = Provisioning(
            self.api,
            events=events,
            cluster=self.cluster,
            wake=lambda *_: trigger.pull(),
            admission_checks=world.admission_checks,
            served=served,
        )
        self.provisioning = provisioning
        publisher = CapacityPublisher(
            world,
            cluster=self.cluster,
            metrics=self.metrics,
            lock=lock,
            update_queue_status=self.update_queue_status,
            fair_sharing=self.cycle.fair_sharing,
            topologies=lambda: _reported_topologies(tas_box, world, provisioning),
            admission_checks=world.admission_checks,
            **publisher_options,
        )

        def wake_tas(*_: object) -> None:
            trigger.pull()
            publisher.trigger.pull()

        tas = Tas(
            self.api,
            flavors=world.flavors,
            topologies=world.topologies,
            events=events,
            metrics=self.metrics,
            cluster=self.cluster,
            wake=wake_tas,
            node_failure_delay=self.node_failure_delay,
        )
        tas_box.append(tas)
        self.tas = tas
        reconciler = Reconciler(
            world,
            cluster=self.cluster,
            events=events,
            metrics=self.metrics,
            lock=lock,
            on_admitted=publisher.admitted_at,
            on_released=publisher.trigger.pull,
            trigger=trigger,
            tas=tas,
            provisioning=provisioning,
            job_copy_timeout=self.job_copy_timeout,
            wait_for_pods_ready=self.wait_for_pods_ready,
            cycle=self.cycle,
        )

        def wake_on_spec(event_type: str, obj: Obj, old: Obj | None) -> None:
            if spec_changed(event_type, obj, old):
                reconciler.trigger.pull()
                publisher.trigger.pull()

        def wake_all(*_: object) -> None:
            reconciler.trigger.pull()
            publisher.trigger.pull()

        world.on_change(wake_on_spec, world.cluster_queues, world.local_queues)
        world.on_change(
            wake_all,
            world.workloads,
            world.flavors,
            world.cohorts,
            world.namespaces,
            world.limit_ranges,
            world.runtime_classes,
        )

        def wake_on_job(event_type: str, obj: Obj, old: Obj | None) -> None:
            if job_change_matters(event_type, obj, old):
                reconciler.trigger.pull()

        world.on_change(wake_on_job, world.jobs)

        def wake_job_pass(*_: object) -> None:  # a priority class a local Job waited for may be there now
            reconciler.trigger.pull()

        world.on_change(wake_job_pass, world.workload_priority_classes, world.pod_priority_classes)
        # Not among the caches readiness waits for: without it (an Events rule missing from a hand-edited role, its
        # watch retried and logged) admission goes on, only unschedulable pods go unreported.
        unschedulable = UnschedulablePods(self.api, world=world, cluster=self.cluster)
        # Kueue's finalizer, lifted from the Workloads Kueue left here (federation.admission.in_use_finalizer)
        finalizers = FinalizerRelease(
            api=self.api,
            cache=world.workloads,
            resource=r.WORKLOADS,
            finalizer=RESOURCE_IN_USE_FINALIZER,
            due=in_use_finalizer_due,
            field_manager="kfed-agent",
            events=events,
        )
        self.metrics.add_source(publisher.queue_gauges)
        try:
            async with anyio.create_task_group() as tg:
                for cache in (*world.caches(), *tas.caches(), *provisioning.caches()):
                    tg.start_soon(cache.run)
                tg.start_soon(events.run)
                for cache in (*world.caches(), *tas.caches(), *provisioning.caches()):
                    await cache.wait_synced()
                tg.start_soon(tas.run_cluster_watches)  # knows from the flavors whether TAS needs them
                await tas.wait_cluster_watches()
                tas.reconfigure()
                log.info("agent.synced", cluster=self.cluster, workloads=len(world.workloads.store))
                freeze_after_first_sync("kfed-agent", (*world.caches(), *tas.caches(), *provisioning.caches()))
                self.running = True
                tg.start_soon(reconciler.run)
                tg.start_soon(publisher.run)
                tg.start_soon(publisher.own_report.run)
                for cache in unschedulable.caches():
                    tg.start_soon(cache.run)
                tg.start_soon(unschedulable.run)
                tg.start_soon(finalizers.run)
        finally:
            self.metrics.remove_source(publisher.queue_gauges)
            self.running = False
            self.world = None
            self.tas = None
            self.provisioning = None
            log.info(
                "agent.stopped",
                cluster=self.cluster,
                api_writes=self.api.counter.writes(),
                api_calls={f"{verb} {res}": n for (verb, res), n in sorted(self.api.counter.snapshot().items())},
            )


def _reported_topologies(tas: list[Tas], world: World, provisioning: Provisioning) -> list[Obj]:
    """The TAS summaries for the capacity report, without the flavors a ProvisioningRequest check covers (their
    nodes appear when a workload asks: the manager judges them on quota alone)."""
    if not tas:
        return []
    entries = tas[0].summaries()
    skip = autoscaled_flavors(world.cluster_queues.store, provisioning.checks_by_name())
    return [entry for entry in entries if entry.get("name") not in skip]


def _other_admitters_reported(events: EventRecorder, *, cluster: str) -> Any:
    """A Workload-cache handler: a Workload another controller just admitted (Kueue left running on this cluster)
    gets a Warning Event and an error log line (``decisions.foreign_admission``)."""

    def handle(event_type: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        manager = newly_admitted_by(old, obj) if event_type == "MODIFIED" else None
        if manager is None:
            return
        meta = obj.get("metadata") or {}
        key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        message = admitted_elsewhere_message(manager, key)
        log.error(
            "agent.admitted_by_another_controller", cluster=cluster, workload=key, manager=manager, message=message
        )
        events.emit(obj, reason=ADMITTED_ELSEWHERE_REASON, note=message, action="Admit", event_type="Warning")

    return handle
