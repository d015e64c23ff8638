"""What the agent knows about its cluster: one watch cache per kind it reads, plus the writes it just made.

``World.local_state()`` turns the caches into the pure snapshot the decisions need (through the shared
``QuotaStateBuilder``, which parses quota objects once per resourceVersion and classifies again only the Workloads
that changed since the last build); Workloads and Jobs stay raw dicts. ``workload_changes`` and ``job_changes`` note
every key whose freshest copy changed, for the state builder and the indexes (``worker_agent.indexes``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TypeVar

import structlog

from federation.admission.api_quotas import FlavorInfo
from federation.admission.api_state import QuotaState, QuotaStateBuilder
from federation.admission.api_workloads import ALL_RESOURCES, ResourceRules
from federation.admission.check_problems import (
    cluster_queue_check_problems,
    mark_inactive,
    merged,
    topology_problems,
)
from federation.kube import resources as r
from federation.kube.api import KubeApi, object_key
from federation.kube.cache import Handler, WatchCache, unsynced
from worker_agent.indexes import ChangedKeys, JobIndex, KeySource, Lookup, StoreGeneration, WorkloadIndex
from worker_agent.overlay import RecentWrites

log = structlog.get_logger(__name__)

Obj = dict[str, Any]
T = TypeVar("T")


class World:
    def __init__(self, api: KubeApi, *, resource_rules: ResourceRules = ALL_RESOURCES) -> None:
        self.api = api
        self.workloads = WatchCache(api, r.WORKLOADS)
        # every Job: a stock Kueue MultiKueue manager names the prebuilt Workload in an annotation, which no selector
        # can match (Jobs that name none are skipped where they are read)
        self.jobs = WatchCache(api, r.JOBS)
        self.cluster_queues = WatchCache(api, r.CLUSTER_QUEUES)
        self.local_queues = WatchCache(api, r.LOCAL_QUEUES)
        self.flavors = WatchCache(api, r.RESOURCE_FLAVORS)
        self.cohorts = WatchCache(api, r.COHORTS)
        self.namespaces = WatchCache(api, r.NAMESPACES)
        self.limit_ranges = WatchCache(api, r.LIMIT_RANGES)
        self.runtime_classes = WatchCache(api, r.RUNTIME_CLASSES)
        # a ClusterQueue naming a check that is missing or not Active admits nothing (``admission.check_problems``)
        self.admission_checks = WatchCache(api, r.ADMISSION_CHECKS)
        # ... and one with a TAS flavor whose Topology is missing (the TAS placement reads them too)
        self.topologies = WatchCache(api, r.TOPOLOGIES)
        # the priority of a Job queued on this worker itself (``decisions.local_jobs``)
        self.workload_priority_classes = WatchCache(api, r.WORKLOAD_PRIORITY_CLASSES)
        self.pod_priority_classes = WatchCache(api, r.PRIORITY_CLASSES)
        self.workload_changes = ChangedKeys()
        self.job_changes = ChangedKeys()
        """The keys whose freshest copy changed (a watch event, not one that only echoes the agent's own write, or one
        of the agent's writes), for the indexes and the state builder."""
        self.workload_writes = RecentWrites(on_change=self._workload_shown)
        self.job_writes = RecentWrites(on_change=self.job_changes.mark)
        self.workloads_shown = 0
        """Counts the changes of what the Workloads show (a watch event, or one of the agent's writes), not counting
        the events that only echo a write shown already: ``admission_stamp`` uses it."""
        self.workloads.add_handler(self._workload_event)
        self.jobs.add_handler(self._job_event)
        self._state_builder = QuotaStateBuilder(rules=resource_rules)
        self._state_changes = self.workload_changes.reader()
        """The Workloads changed since the last ``local_state``: only those are classified again."""
        self._state_generation = StoreGeneration(lambda: (self.workloads.store, self.workloads.store.relists))

    def caches(self) -> tuple[WatchCache, ...]:
        return (
            self.workloads,
            self.jobs,
            self.cluster_queues,
            self.local_queues,
            self.flavors,
            self.cohorts,
            self.namespaces,
            self.limit_ranges,
            self.runtime_classes,
            self.admission_checks,
            self.topologies,
            self.workload_priority_classes,
            self.pod_priority_classes,
        )

    def on_change(self, handler: Handler, *caches: WatchCache) -> None:
        for cache in caches or self.caches():
            cache.add_handler(handler)

    @property
    def synced(self) -> bool:
        return all(cache.synced for cache in self.caches())

    def unsynced(self) -> list[str]:
        return unsynced(self.caches())

    def _workload_shown(self, key: str) -> None:
        self.workloads_shown += 1
        self.workload_changes.mark(key)

    def _workload_event(self, event_type: str, obj: Obj, old: Obj | None) -> None:
        if not self.workload_writes.echoes(event_type, obj):
            self._workload_shown(object_key(obj))
        self.workload_writes.observe(event_type, obj, old)

    def _job_event(self, event_type: str, obj: Obj, old: Obj | None) -> None:
        if not self.job_writes.echoes(event_type, obj):
            self.job_changes.mark(object_key(obj))
        self.job_writes.observe(event_type, obj, old)

    def workload_index(self) -> WorkloadIndex:
        """A new index of the Workloads' facts (``worker_agent.indexes``), told of every change from now on."""
        return WorkloadIndex(_source(self.workloads, self.workload_writes, self.workload_changes, self.workload_by_key))

    def job_index(self) -> JobIndex:
        """A new index of the Workloads the Jobs name (``worker_agent.indexes``), told of every change from now on."""
        return JobIndex(_source(self.jobs, self.job_writes, self.job_changes, self.job_by_key))

    # -- reads ------------------------------------------------------------------------------------------------

    def workload(self, namespace: str, name: str) -> Obj | None:
        return self.workload_by_key(f"{namespace}/{name}")

    def workload_by_key(self, key: str) -> Obj | None:
        return self.workload_writes.get(key, self.workloads.store.get(key))

    def job_by_key(self, key: str) -> Obj | None:
        return self.job_writes.get(key, self.jobs.store.get(key))

    def all_workloads(self) -> Iterator[Obj]:
        writes = self.workload_writes
        for key, obj in self.workloads.store.items():
            yield writes.view_keyed(key, obj)

    def all_jobs(self) -> Iterator[Obj]:
        writes = self.job_writes
        for key, obj in self.jobs.store.items():
            yield writes.view_keyed(key, obj)

    def workload_items(self) -> Iterator[tuple[str, Obj]]:
        """``(namespace/name, freshest copy)`` of every Workload."""
        writes = self.workload_writes
        for key, obj in self.workloads.store.items():
            yield key, writes.view_keyed(key, obj)

    def job_items(self) -> Iterator[tuple[str, Obj]]:
        """``(namespace/name, freshest copy)`` of every Job."""
        writes = self.job_writes
        for key, obj in self.jobs.store.items():
            yield key, writes.view_keyed(key, obj)

    def admission_stamp(self) -> tuple[int, ...]:
        """Changes whenever something local admission reads changes: every cache but the Jobs' (``Store.version``;
        for the Workloads ``workloads_shown``, which also counts the agent's own writes and not their echoes): the
        reconciler skips an admission pass whose inputs are as they were
        when the last one found nothing to do (most passes in a burst follow a Job's status change)."""
        return (
            self.workloads_shown,
            self.cluster_queues.store.version,
            self.local_queues.store.version,
            self.flavors.store.version,
            self.cohorts.store.version,
            self.namespaces.store.version,
            self.limit_ranges.store.version,
            self.runtime_classes.store.version,
            self.admission_checks.store.version,
            self.topologies.store.version,
        )

    def flavor_infos(self) -> dict[str, FlavorInfo]:
        return self._state_builder.flavor_infos(self.flavors.store)

    def local_state(self, *, now_seconds: float | None = None) -> QuotaState:
        """``now_seconds``: keep workloads whose requeue backoff (``status.requeueState.requeueAt``) is ahead out."""
        changed = self._state_changes.take()
        if self._state_generation.moved() or changed is None:
            self._state_builder.look_at_all()  # the first build, a new store, or a relist whose events are coming
        try:
            state = self._state_builder.build(
                flavors=self.flavors.store,
                cluster_queues=self.cluster_queues.store,
                cohorts=self.cohorts.store,
                local_queues=self.local_queues.store,
                namespaces=self.namespaces.store,
                limit_ranges=self.limit_ranges.store,
                runtime_classes=self.runtime_classes.store,
                workloads=self.all_workloads(),
                now_seconds=now_seconds,
                changed=changed or (),
                lookup=self.workload_by_key,
            )
        except BaseException:
            self._state_builder.look_at_all()  # the changes taken are not lost: the next build looks at everything
            raise
        for ignored in self._state_builder.ignored:
            log.warning("agent.object_ignored", kind=ignored.kind, name=ignored.name, error=ignored.error)
        mark_inactive(
            state,
            merged(
                cluster_queue_check_problems(self.cluster_queues.store, self.admission_checks.store),
                topology_problems(self.cluster_queues.store, self.flavors.store, self.topologies.store),
            ),
        )
        return state


def _source(cache: WatchCache, writes: RecentWrites, changes: ChangedKeys, lookup: Lookup) -> KeySource:
    """What an index of ``cache``'s kind reads: a new reader of ``changes``, and every key of the cache and overlay."""
    return KeySource(
        changes=changes.reader(),
        lookup=lookup,
        keys=lambda: [*cache.store.keys(), *writes.keys()],
        generation=lambda: (cache.store, cache.store.relists),
    )
