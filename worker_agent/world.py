"""What the agent knows about its cluster: one watch cache per kind it reads, plus the writes it just made.

``World.local_state()`` turns the caches into the pure snapshot the decisions need. Quota objects are parsed once
per resourceVersion (they change rarely); Workloads and Jobs stay raw dicts. A malformed ResourceFlavor or Cohort
is left out with a log line (its ClusterQueues then report the missing flavor); a malformed ClusterQueue becomes
inactive with the parse error as its reason.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import structlog

from federation.admission import model as core
from federation.admission.api_quotas import FlavorInfo, QueueInfo, cohort_spec, flavor_info, queue_info
from federation.admission.api_state import QuotaState, build_quota_state, local_queue_info
from federation.api.labels import PREBUILT_WORKLOAD_LABEL
from federation.kube import resources as r
from federation.kube.api import KubeApi
from federation.kube.cache import Handler, WatchCache
from worker_agent.overlay import WriteOverlay

log = structlog.get_logger(__name__)

Obj = dict[str, Any]
T = TypeVar("T")


class _Parsed:
    """Parse results keyed by object key and resourceVersion."""

    def __init__(self) -> None:
        self._memo: dict[str, tuple[str, object]] = {}

    def get(self, obj: Obj, parse: Callable[[Obj], T]) -> T:
        meta = obj.get("metadata") or {}
        key, version = str(meta.get("name", "")), str(meta.get("resourceVersion", ""))
        found = self._memo.get(key)
        if found is not None and found[0] == version:
            return found[1]  # type: ignore[return-value]
        value = parse(obj)
        self._memo[key] = (version, value)
        return value


class World:
    def __init__(self, api: KubeApi) -> None:
        self.api = api
        self.workloads = WatchCache(api, r.WORKLOADS)
        self.jobs = WatchCache(api, r.JOBS, label_selector=PREBUILT_WORKLOAD_LABEL)
        self.cluster_queues = WatchCache(api, r.CLUSTER_QUEUES)
        self.local_queues = WatchCache(api, r.LOCAL_QUEUES)
        self.flavors = WatchCache(api, r.RESOURCE_FLAVORS)
        self.cohorts = WatchCache(api, r.COHORTS)
        self.namespaces = WatchCache(api, r.NAMESPACES)
        self.workload_writes = WriteOverlay()
        self.job_writes = WriteOverlay()
        self.workloads.add_handler(self.workload_writes.observe)
        self.jobs.add_handler(self.job_writes.observe)
        self._flavors = _Parsed()
        self._queues = _Parsed()
        self._cohorts = _Parsed()
        self._bad: set[tuple[str, str]] = set()

    def caches(self) -> tuple[WatchCache, ...]:
        return (
            self.workloads,
            self.jobs,
            self.cluster_queues,
            self.local_queues,
            self.flavors,
            self.cohorts,
            self.namespaces,
        )

    def on_change(self, handler: Handler, *caches: WatchCache) -> None:
        for cache in caches or self.caches():
            cache.add_handler(handler)

    @property
    def synced(self) -> bool:
        return all(cache.synced for cache in self.caches())

    def unsynced(self) -> list[str]:
        return [cache.resource.label for cache in self.caches() if not cache.synced]

    # -- reads ------------------------------------------------------------------------------------------------

    def workload(self, namespace: str, name: str) -> Obj | None:
        key = f"{namespace}/{name}"
        return self.workload_writes.get(key, self.workloads.store.get(key))

    def all_workloads(self) -> Iterator[Obj]:
        for obj in self.workloads.store:
            yield self.workload_writes.view(obj)

    def all_jobs(self) -> Iterator[Obj]:
        for obj in self.jobs.store:
            yield self.job_writes.view(obj)

    def flavor_infos(self) -> dict[str, FlavorInfo]:
        infos: dict[str, FlavorInfo] = {}
        for obj in self.flavors.store:
            info = self._safe(obj, "ResourceFlavor", lambda o: self._flavors.get(o, flavor_info))
            if info is not None:
                infos[info.spec.name] = info
        return infos

    def queue_infos(self) -> dict[str, QueueInfo]:
        infos = (self._queues.get(obj, queue_info) for obj in self.cluster_queues.store)
        return {info.name: info for info in infos}

    def cohort_specs(self) -> list[core.CohortSpec]:
        specs = (self._safe(obj, "Cohort", lambda o: self._cohorts.get(o, cohort_spec)) for obj in self.cohorts.store)
        return [spec for spec in specs if spec is not None]

    def _safe(self, obj: Obj, kind: str, parse: Callable[[Obj], T]) -> T | None:
        try:
            return parse(obj)
        except ValueError as exc:
            meta = obj.get("metadata") or {}
            marker = (kind, str(meta.get("name", "")) + "@" + str(meta.get("resourceVersion", "")))
            if marker not in self._bad:
                self._bad.add(marker)
                log.warning("agent.object_ignored", kind=kind, name=meta.get("name"), error=str(exc)[:300])
            return None

    def local_state(self) -> QuotaState:
        labels = {
            str((ns.get("metadata") or {}).get("name", "")): dict((ns.get("metadata") or {}).get("labels") or {})
            for ns in self.namespaces.store
        }
        return build_quota_state(
            flavors=self.flavor_infos(),
            queues=self.queue_infos(),
            cohorts=self.cohort_specs(),
            local_queues=[local_queue_info(lq) for lq in self.local_queues.store],
            namespace_labels=labels,
            workloads=self.all_workloads(),
        )
