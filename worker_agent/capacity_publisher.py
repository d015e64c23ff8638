"""Keeps ``ClusterCapacity/local`` current, and the local ClusterQueues' status with it.

Publishes within ``CAPACITY_DEBOUNCE_SECONDS`` of any change to quota objects or workloads (reports in a burst
at most every ``CAPACITY_MIN_INTERVAL_SECONDS``), and at least every ``CAPACITY_HEARTBEAT_SECONDS``; the local
queues' status follows the reports at most every ``QUEUE_STATUS_MIN_INTERVAL_SECONDS`` (finalizers at once: Kueue's
resource-in-use finalizer on the ClusterQueues, ResourceFlavors and AdmissionChecks, lifted from a deleted one once
nothing uses it), its
last change always written; each report bumps ``status.generation``. The manager drops an in-flight ledger
entry once a report's ``observedTime`` is later than the copy's ``QuotaReserved`` transition, so two rules keep
that comparison honest with second-precision condition times:

* the report is computed under the reconciler's lock, so every admission stamped before it is in the snapshot;
* ``observedTime`` is floored to the second, and when an admission happened in the report's own second another
  report follows just after the second ends (so the manager never waits a whole heartbeat for it).
"""

from __future__ import annotations

import datetime as dt
import math
import time
from collections.abc import Callable
from typing import Any

import anyio
import structlog

from federation.admission.api_queue_status import (
    cluster_queue_references,
    cohort_status_patches,
    finalizer_changes,
    in_use_changes,
    local_queue_status_patches,
    pending_by_cluster_queue,
    pending_by_local_queue,
    queue_status_patches,
)
from federation.admission.api_state import QuotaState
from federation.admission.queue_metrics import Sample, inadmissible_by_condition, queue_samples
from federation.api.capacity import CLUSTER_CAPACITY_NAME
from federation.conditions import format_time
from federation.kube import resources as r
from federation.kube.cache import WatchCache
from federation.kube.errors import AlreadyExists, Conflict, KubeError, NotFound
from federation.kube.overlay import WriteOverlay
from federation.kube.status_writes import write_finalizers, write_status_patches
from federation.kube.store import DELETED
from federation.kube.trigger import Trigger
from federation.obs.metrics import Metrics
from federation.protocol import (
    CAPACITY_DEBOUNCE_SECONDS,
    CAPACITY_HEARTBEAT_SECONDS,
    CAPACITY_MIN_INTERVAL_SECONDS,
    QUEUE_STATUS_MIN_INTERVAL_SECONDS,
)
from worker_agent.decisions.capacity import capacity_status
from worker_agent.world import World

log = structlog.get_logger(__name__)

Obj = dict[str, Any]
SECOND_BOUNDARY_MARGIN = 0.05


class CapacityPublisher:
    def __init__(
        self,
        world: World,
        *,
        cluster: str,
        metrics: Metrics,
        lock: anyio.Lock,
        debounce: float = CAPACITY_DEBOUNCE_SECONDS,
        heartbeat: float = CAPACITY_HEARTBEAT_SECONDS,
        min_interval: float = CAPACITY_MIN_INTERVAL_SECONDS,
        queue_status_interval: float = QUEUE_STATUS_MIN_INTERVAL_SECONDS,
        update_queue_status: bool = True,
        fair_sharing: bool = False,
        clock: Callable[[], float] = time.time,
        topologies: Callable[[], list[Obj]] = list,
        admission_checks: WatchCache | None = None,
    ) -> None:
        self.world = world
        self.api = world.api
        self.metrics = metrics
        self.lock = lock
        self.debounce = debounce
        self.heartbeat = heartbeat
        self.min_interval = min_interval
        self.queue_status_interval = queue_status_interval
        self._last_report = -math.inf
        self._queue_status_written = -math.inf
        self._queue_status_owed = False
        """A queue-status change was held back by the interval: the run loop wakes to write it."""
        self.update_queue_status = update_queue_status
        self.fair_sharing = fair_sharing
        """Kueue's ``fairSharing`` on: the ClusterQueues' and Cohorts' status carries their weighted share."""
        self.clock = clock
        self.topologies = topologies
        self.trigger = Trigger()
        self.generation = 0
        self.published = 0
        self._current: Obj | None = None
        self._last_admission = 0.0
        self._reported: tuple[Obj, float] | None = None
        self.last_state: QuotaState | None = None
        """The quota state of the newest report: the queue gauges are computed from it at scrape time."""
        """Content of the last report and the newest admission it covered."""
        self._log = log.bind(cluster=cluster)
        self._cluster_queue_view = WriteOverlay(world.cluster_queues.store)
        self._local_queue_view = WriteOverlay(world.local_queues.store)
        """The queues with this publisher's own status and finalizer writes the caches do not show yet: on a busy
        apiserver the watch can lag more than the status interval, and a write at the old resourceVersion is a 409
        Conflict (the same as kfed-manager's scheduler)."""
        world.cluster_queues.add_handler(self._cluster_queue_view.observe)
        self._flavor_view = WriteOverlay(world.flavors.store)
        world.flavors.add_handler(self._flavor_view.observe)
        self._check_view: WriteOverlay | None = None
        """The AdmissionChecks (read by the provisioning controller) with this publisher's finalizer writes."""
        if admission_checks is not None:
            self._check_view = WriteOverlay(admission_checks.store)
            admission_checks.add_handler(self._check_view.observe)
            admission_checks.add_handler(lambda *_: self.trigger.pull())  # a deleted check's finalizer goes
        world.local_queues.add_handler(self._local_queue_view.observe)
        self._cohort_view = WriteOverlay(world.cohorts.store)
        world.cohorts.add_handler(self._cohort_view.observe)
        self.own_report = WatchCache(
            world.api, r.CLUSTER_CAPACITIES, field_selector=f"metadata.name={CLUSTER_CAPACITY_NAME}"
        )
        """The report object itself: one deleted (by hand, or with its CRD reinstalled) is made again at once, not at
        the next heartbeat, so the manager does not see the worker go without a report meanwhile."""
        self.own_report.add_handler(self._on_report_change)

    def _on_report_change(self, event_type: str, obj: Obj, old: Obj | None) -> None:
        if event_type == DELETED:
            self._log.warning("capacity.report_deleted", why="deleted by someone else; written again at once")
            self._reported = None  # the next report is written whatever it holds
            self.trigger.pull()

    def admitted_at(self, when: float) -> None:
        """Called by the reconciler after each admission (``when`` is its QuotaReserved transition time)."""
        self._last_admission = max(self._last_admission, when)

    async def run(self) -> None:
        await self._ensure_object()
        next_heartbeat = time.monotonic()
        follow_up: float | None = None
        while True:
            deadline = next_heartbeat if follow_up is None else min(next_heartbeat, follow_up)
            if self._queue_status_owed:
                deadline = min(deadline, self._queue_status_written + self.queue_status_interval)
            with anyio.move_on_after(max(0.0, deadline - time.monotonic())):
                await self.trigger.wait()
                await anyio.sleep(self.debounce)
            await anyio.sleep(max(0.0, self._last_report + self.min_interval - time.monotonic()))
            heartbeat_due = time.monotonic() >= next_heartbeat
            try:
                follow_up_due = follow_up is not None and time.monotonic() >= follow_up
                observed = await self.publish(force=heartbeat_due or follow_up_due)
            except Exception:  # keep reporting: a failed report makes the worker stale for the manager
                self._log.exception("capacity.publish_failed")
                await anyio.sleep(1.0)
                continue
            if observed is None:
                continue
            next_heartbeat = time.monotonic() + self.heartbeat
            follow_up = None
            if self._last_admission >= observed:  # an admission in the report's own second: report again after it
                follow_up = time.monotonic() + (observed + 1 - self.clock()) + SECOND_BOUNDARY_MARGIN

    async def _ensure_object(self) -> None:
        while self._current is None:
            try:
                self._current = await self.api.get(r.CLUSTER_CAPACITIES, CLUSTER_CAPACITY_NAME)
            except NotFound:
                try:
                    self._current = await self.api.create(
                        r.CLUSTER_CAPACITIES,
                        {"metadata": {"name": CLUSTER_CAPACITY_NAME, "labels": {"app.kubernetes.io/part-of": "kfed"}}},
                        field_manager="kfed-agent",
                    )
                    self._log.info("capacity.created")
                except AlreadyExists:
                    continue
                except KubeError as exc:
                    self._log.warning("capacity.create_failed", error=str(exc)[:300])
                    await anyio.sleep(2.0)
            except KubeError as exc:
                self._log.warning("capacity.read_failed", error=str(exc)[:300])
                await anyio.sleep(2.0)
        self.generation = int(((self._current.get("status") or {}).get("generation")) or 0)

    async def publish(self, *, force: bool = True) -> float | None:
        """Compute and write one report; returns its observedTime (whole epoch seconds), or None when skipped.

        Without ``force`` a report identical to the last one, with no admission since, is not written.
        """
        async with self.lock:
            state = self.world.local_state()
            flavors = self.world.flavor_infos()
            topologies = self.topologies()
            observed = float(math.floor(self.clock()))
            admissions_seen = self._last_admission
        self.last_state = state
        pending = pending_by_cluster_queue(state, set())
        status = capacity_status(state, pending_counts=pending, flavors=flavors, topologies=topologies)
        if not force and self._reported == (status, admissions_seen):
            if self.update_queue_status:  # e.g. a ClusterQueue being deleted: its finalizer and Active condition
                await self._write_queue_status(state, pending)
            return None
        await self._write_report(status, observed)
        self._last_report = time.monotonic()
        self._reported = (status, admissions_seen)
        if self.update_queue_status:
            await self._write_queue_status(state, pending)
        return observed

    async def _write_report(self, status: Obj, observed: float) -> None:
        for _attempt in range(3):
            assert self._current is not None
            body = {
                "metadata": {"resourceVersion": (self._current.get("metadata") or {}).get("resourceVersion")},
                "status": {
                    "generation": self.generation + 1,
                    "observedTime": format_time(dt.datetime.fromtimestamp(observed, dt.UTC)),
                    "topologies": None,  # a merge patch keeps what it does not name: the last TAS flavor gone
                    **status,
                },
            }
            try:
                self._current = await self.api.patch_status(
                    r.CLUSTER_CAPACITIES, CLUSTER_CAPACITY_NAME, body, field_manager="kfed-agent"
                )
            except (Conflict, NotFound):
                self._current = None
                await self._ensure_object()  # someone else wrote or deleted it: re-read, never go backwards
                continue
            self.generation += 1
            self.published += 1
            self._log.debug("capacity.published", generation=self.generation)
            return
        raise KubeError("ClusterCapacity kept changing under the agent; will retry")

    def queue_gauges(self) -> list[Sample]:
        """Kueue's ClusterQueue and LocalQueue gauges from the state of the last report (read at scrape time)."""
        state = self.last_state
        if state is None:
            return []
        return queue_samples(state, inadmissible=inadmissible_by_condition(state))

    async def _write_queue_status(self, state: QuotaState, pending: dict[str, int]) -> None:
        """Finalizers at once; the status patches only when the interval since the last ones has passed."""
        now = dt.datetime.now(dt.UTC)
        queues = {str(q["metadata"]["name"]): q for q in self._cluster_queue_view}
        local_queues = {f"{q['metadata']['namespace']}/{q['metadata']['name']}": q for q in self._local_queue_view}
        written, updated = await write_finalizers(
            self.api,
            r.CLUSTER_QUEUES,
            finalizer_changes(state, queues),
            current=queues,
            field_manager="kfed-agent",
            overlay=self._cluster_queue_view,
        )
        queues.update(updated)  # the status below is written at the resourceVersion the finalizers made
        named_flavors, named_checks = cluster_queue_references(queues.values())
        in_use = [(r.RESOURCE_FLAVORS, self._flavor_view, named_flavors)]
        if self._check_view is not None:
            in_use.append((r.ADMISSION_CHECKS, self._check_view, named_checks))
        for resource, view, named in in_use:
            objects = {str(o["metadata"]["name"]): o for o in view}
            in_use_written, _ = await write_finalizers(
                self.api,
                resource,
                in_use_changes(objects, named),
                current=objects,
                field_manager="kfed-agent",
                overlay=view,
            )
            written &= in_use_written
        if time.monotonic() < self._queue_status_written + self.queue_status_interval:
            self._queue_status_owed = True
            if not written:
                self.trigger.pull()
            return
        self._queue_status_written = time.monotonic()
        self._queue_status_owed = False
        written &= await write_status_patches(
            self.api,
            r.CLUSTER_QUEUES,
            queue_status_patches(state, queues, pending=pending, now=now, fair_sharing=self.fair_sharing),
            current=queues,
            field_manager="kfed-agent",
            overlay=self._cluster_queue_view,
        )
        lq_patches = local_queue_status_patches(
            state, local_queues, pending=pending_by_local_queue(state, set()), now=now
        )
        written &= await write_status_patches(
            self.api,
            r.LOCAL_QUEUES,
            lq_patches,
            current=local_queues,
            field_manager="kfed-agent",
            overlay=self._local_queue_view,
        )
        cohorts = {str(c["metadata"]["name"]): c for c in self._cohort_view}
        written &= await write_status_patches(
            self.api,
            r.COHORTS,
            cohort_status_patches(state, cohorts, fair_sharing=self.fair_sharing),
            current=cohorts,
            field_manager="kfed-agent",
            overlay=self._cohort_view,
        )
        if not written:
            self.trigger.pull()
