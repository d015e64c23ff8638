"""The global scheduler: the manager's queues drained through the shared admission core, one worker per admit.

Kueue's pipeline (heads → snapshot → nominate → admit → requeue) runs in ``federation.admission``; this module
builds its input from the manager's caches and vetoes every admission for which no worker has room (capacity
probing, ``manager.decisions.dispatch``), so quota is only reserved where it can be used. Triggered by any change
to queues, quotas, workloads or a worker's capacity report; bursts of triggers coalesce into one pass. A Workload
that did not fit is parked (``federation.admission.parking``) and left out of later passes until something that
could change its verdict happens, so a pass costs what changed, not the length of the backlog.
"""

from __future__ import annotations

import datetime as dt
import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import anyio
import anyio.abc
import structlog

from federation.admission.api_drain import EventSpec, WorkloadUpdate, drain, pending_update
from federation.admission.api_queue_status import (
    finalizer_changes,
    local_queue_status_patches,
    pending_by_cluster_queue,
    pending_by_local_queue,
    queue_status_patches,
)
from federation.admission.api_state import QuotaState, QuotaStateBuilder
from federation.admission.decisions import Admit, Preempt, Wait
from federation.admission.model import Workload
from federation.admission.parking import ParkingLot
from federation.admission.queue_metrics import (
    Sample,
    pods_ready_to_evicted,
    queue_samples,
    queued_since,
    workload_labels,
)
from federation.conditions import find_condition, is_true, parse_time
from federation.kube.api import KubeApi
from federation.kube.cache import SyncedCache
from federation.kube.errors import Conflict, KubeError
from federation.kube.overlay import WriteOverlay
from federation.kube.recorder import EventSink
from federation.kube.refusal import RefusalReporter, is_refusal
from federation.kube.resources import CLUSTER_QUEUES, LOCAL_QUEUES, WORKLOADS
from federation.kube.status_writes import write_finalizers, write_status_patches
from federation.kube.trigger import Trigger
from federation.merge_patch import apply_merge_patch
from federation.obs.metrics import Metrics
from federation.protocol import REASON_INADMISSIBLE, REASON_PENDING
from federation.topology.report import topology_requests
from manager.config import ManagerConfig
from manager.decisions.dispatch import Dispatch, NoWorker, WorkerState, choose_worker
from manager.decisions.ledger import InFlightLedger
from manager.decisions.pods_ready import BLOCK_ADMISSION_MESSAGE, REASON_WAITING_FOR_PODS_READY, admission_blocked
from manager.decisions.refusals import RefusalEnds, refusal_end
from manager.decisions.reservation import (
    assigned_flavors,
    multikueue_workers,
    reservation_update,
    tas_flavor_names,
    workload_checks,
)
from manager.decisions.withdrawal import exclusions, preemption_status, withdrawn_from
from manager.reservation_holds import HeldReservation, ReservationHolds
from manager.workers import WorkerAvailability

log = structlog.get_logger(__name__)

_COALESCE_SECONDS = 0.02
MIN_PASS_INTERVAL = 0.2
"""Seconds from the start of one pass to the start of the next, at least: passes do not wait for their writes, and
in a burst every new Workload triggers one (a pass over 1,000 Workloads takes ~20 ms)."""
QUEUE_STATUS_INTERVAL = 1.0
REFUSED_RETRY_SECONDS = 5.0
"""After a status write this cluster refused (403/401), the next pass is made this much later at the latest (an
earlier one, for other changes, decides the Workload again too)."""


def _key(raw: dict[str, Any]) -> str:
    meta = raw["metadata"]
    return f"{meta['namespace']}/{meta['name']}"


def _by_name(objects: Any) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects}


@dataclass(frozen=True, kw_only=True, slots=True)
class SchedulerCaches:
    """The manager cluster's objects a pass reads (the runtime's watch caches)."""

    workloads: SyncedCache
    cluster_queues: SyncedCache
    local_queues: SyncedCache
    flavors: SyncedCache
    cohorts: SyncedCache
    namespaces: SyncedCache
    admission_checks: SyncedCache
    multikueue_configs: SyncedCache


class GlobalScheduler:
    def __init__(
        self,
        *,
        api: KubeApi,
        config: ManagerConfig,
        caches: SchedulerCaches,
        workload_view: WriteOverlay,
        workers: WorkerAvailability,
        ledger: InFlightLedger,
        metrics: Metrics,
        events: EventSink,
        holds: ReservationHolds | None = None,
    ) -> None:
        """``workload_view``: the Workloads with this process's own writes laid over ``caches.workloads`` (shared
        with the remote sync); ``ledger``: the dispatches whose copies the workers' reports may not show yet;
        ``holds``: where reservations wait to be written with the worker's admission (``manager.reservation_holds``).
        """
        self._api = api
        self._config = config
        self._caches = caches
        self._workload_view = workload_view
        self._pool = workers
        self._ledger = ledger
        self._metrics = metrics
        self._events = events
        self._holds = holds
        self._write_alone: set[str] = set()
        """Workloads whose held reservation's write failed other than by a Conflict: not held again until one of
        their reservations is written (a write that failed once with another's patch is not tried that way again)."""
        self._refusals = RefusalReporter(
            events=events, component="kfed-manager", lookup=workload_view.get, action="Schedule"
        )
        self._wakeup = Trigger()
        self.passes = 0
        self._state_builder = QuotaStateBuilder(rules=config.resource_rules)
        self._queue_status_written_at = -QUEUE_STATUS_INTERVAL
        self._cluster_queue_view = WriteOverlay(caches.cluster_queues.store)
        self._local_queue_view = WriteOverlay(caches.local_queues.store)
        """The queues with this scheduler's status writes the caches do not show yet: on a busy apiserver the watch
        can lag more than the status interval, and a write at the old resourceVersion is a 409 Conflict."""
        caches.cluster_queues.add_handler(self._cluster_queue_view.observe)
        caches.local_queues.add_handler(self._local_queue_view.observe)
        self._queue_status_deferred = False
        self._requeue_wake_at: float | None = None
        """The epoch second a pass is already scheduled for, when a requeued workload's backoff ends."""
        self._task_group: anyio.abc.TaskGroup
        self._pass_workers: dict[tuple[tuple[str, ...], tuple[tuple[str, str], ...]], list[WorkerState]] = {}
        self._worker_refusal_ends = RefusalEnds()
        """When refusals that kept a Workload from every worker end: a pass runs then, and the veto stamp changes."""
        self._preemptors: dict[str, tuple[str, str]] = {}
        """victim key -> (preempting ClusterQueue, Kueue's preemption reason), counted once the eviction is written."""
        self.last_state: QuotaState | None = None
        """The quota state of the last pass, with the keys it admitted and found inadmissible: the queue gauges are
        computed from it when Prometheus scrapes (``queue_gauges``), never during a pass."""
        self.last_admitted: frozenset[str] = frozenset()
        self._last_waiting: frozenset[str] = frozenset()
        self._writing: dict[str, tuple[WorkloadUpdate, dict[str, Any]]] = {}
        """Status writes sent and not answered yet: key -> (the update, the Workload as it will be). Passes do not wait
        for their writes (each waits on a busy apiserver: new Workloads waited a whole batch of writes for the next
        pass); the next pass decides on the Workloads as these writes make them, and leaves them alone until the
        answer is in (a refused write is decided again)."""
        self._write_queue: deque[WorkloadUpdate] = deque()
        """Status writes not sent yet, sent in order by at most ``config.workers`` writer tasks: one task per write
        (and a limiter) cost more than the pass itself when a pass decided 100,000 Workloads."""
        self._writers = 0
        self._lq_counts: dict[str, tuple[list[Any], dict[str, int]]] = {}
        self.parking = ParkingLot()
        """Pending Workloads that did not fit, left out of later passes until something that could change the
        answer happens (``federation.admission.parking``)."""
        self._answered: anyio.Event | None = None
        self._changed: set[str] = set()
        """Workload keys whose object changed since the last pass's quota state (cache events, writes laid over the
        cache, status writes sent or answered): only these are classified again (``ClassificationMemo``)."""
        self._classified_from: tuple[object, int] | None = None
        """The Workload store (identity, relists) the last quota state was built from: any other means a full look."""
        caches.workloads.add_handler(self._workload_event)
        workload_view.add_listener(self._workload_changed)

    def _workload_event(self, _event: str, obj: dict[str, Any], _old: dict[str, Any] | None) -> None:
        self._changed.add(_key(obj))

    def _workload_changed(self, key: str) -> None:
        self._changed.add(key)  # not a bound ``set.add``: each pass takes the set and starts a new one

    @property
    def writing(self) -> int:
        """Status writes in flight."""
        return len(self._writing)

    async def writes_answered(self) -> None:
        """Wait until every status write sent so far is answered."""
        while self._writing:
            self._answered = anyio.Event()
            await self._answered.wait()

    def _workloads(self) -> Iterable[dict[str, Any]]:
        view = self._workload_view
        if not self._writing:
            return view
        writing = self._writing
        return (writing[key][1] if (key := _key(raw)) in writing else raw for raw in view)

    def trigger(self) -> None:
        self._wakeup.pull()

    async def _trigger_after(self, delay: float) -> None:
        await anyio.sleep(delay)
        self._queue_status_deferred = False
        self.trigger()

    async def _wake_at(self, at: float) -> None:
        await anyio.sleep(max(0.0, at - time.time()) + 0.05)
        if self._requeue_wake_at == at:
            self._requeue_wake_at = None
        self.trigger()

    async def run(self) -> None:
        async with anyio.create_task_group() as tg:
            self._task_group = tg
            await self._loop()

    async def _loop(self) -> None:
        last = -MIN_PASS_INTERVAL
        while True:
            await self._wakeup.wait()
            # let a burst of events land before reading the caches
            await anyio.sleep(max(_COALESCE_SECONDS, last + MIN_PASS_INTERVAL - time.monotonic()))
            last = time.monotonic()
            try:
                await self.schedule_once()
            except Exception as err:  # a failed pass is retried on the next trigger or after a pause
                log.exception("scheduling pass failed", error=str(err))
                await anyio.sleep(1)
                self.trigger()

    def _workload(self, key: str) -> dict[str, Any] | None:
        """One Workload as :meth:`_workloads` shows it."""
        cached = self._workload_view.get_listed(key)
        if cached is None:
            return None
        writing = self._writing.get(key)
        return cached if writing is None else writing[1]

    def _state(self, now: dt.datetime) -> QuotaState:
        caches = self._caches
        store = caches.workloads.store
        if self._classified_from != (store, store.relists):
            self._state_builder.look_at_all()  # a new term's store, or a relist whose events are still coming
            self._classified_from = (store, store.relists)
        changed, self._changed = self._changed, set()
        try:
            state = self._state_builder.build(
                flavors=caches.flavors.store,
                cluster_queues=caches.cluster_queues.store,
                cohorts=caches.cohorts.store,
                local_queues=caches.local_queues.store,
                namespaces=caches.namespaces.store,
                workloads=self._workloads(),  # its own reservations count before the cache shows them
                now_seconds=now.timestamp(),
                changed=changed,
                lookup=self._workload,
            )
        except BaseException:
            self._changed |= changed  # a pass that failed does not lose its changes: the next one looks at them
            raise
        for ignored in self._state_builder.ignored:
            log.warning("invalid quota object ignored", kind=ignored.kind, name=ignored.name, error=ignored.error)
        return state

    def _workers(self, names: list[str], now: dt.datetime, *, excluded: Mapping[str, str]) -> list[WorkerState]:
        """The workers' states for one decision (``excluded``: worker → why this Workload may not go there); built
        once per pass for the same workers (their in-flight quota is the ledger's live view, so the pass's own
        dispatches count)."""
        key = (tuple(names), tuple(sorted(excluded.items())))
        cached = self._pass_workers.get(key)
        if cached is not None:
            return cached
        states = []
        for name in names:
            conn = self._pool.connections.get(name)
            reason = excluded.get(name) or self._pool.unusable_reason(name, now)
            states.append(
                WorkerState(
                    name=name,
                    usable=not reason,
                    unusable_reason=reason,
                    capacity=current.capacity if conn is not None and (current := conn.current) is not None else None,
                    in_flight=self._ledger.in_flight(name),
                )
            )
        self._pass_workers[key] = states
        return states

    def _veto_stamp(self, now: dt.datetime, holding: list[dict[str, Any]]) -> tuple[object, ...]:
        """Everything a veto (no worker has room, no usable MultiKueue configuration, admission blocked until pods
        are ready, workers refused) depends on besides the Workload itself: a Workload parked by a veto wakes when
        this changes."""
        pool, caches = self._pool, self._caches
        names = sorted({*pool.connections, *pool.problems})
        workers = tuple(
            (
                name,
                (conn := pool.connections.get(name)) is not None and conn.current,
                pool.unusable_reason(name, now),
            )
            for name in names
        )
        versions = tuple(
            (kind, o["metadata"]["name"], o["metadata"].get("resourceVersion"))
            for kind, cache in (
                ("ClusterQueue", caches.cluster_queues),
                ("AdmissionCheck", caches.admission_checks),
                ("MultiKueueConfig", caches.multikueue_configs),
                ("ResourceFlavor", caches.flavors),
            )
            for o in cache.store
        )
        ready = self._config.wait_for_pods_ready
        holders = (
            tuple((_key(raw), raw["metadata"].get("resourceVersion")) for raw in holding)
            if ready is not None and ready.block_admission
            else ()
        )
        return (workers, versions, self._ledger.releases, holders, self._worker_refusal_ends.passed(now.timestamp()))

    @property
    def last_inadmissible(self) -> frozenset[str]:
        """The Workloads the last pass found inadmissible, parked ones included (computed when asked: at 100,000
        parked Workloads, a set of them per pass cost more than the pass)."""
        return self._last_waiting | frozenset(parked.workload.key for parked in self.parking.parked())

    def queue_gauges(self) -> list[Sample]:
        """Kueue's ClusterQueue and LocalQueue gauges as the last pass left them (read at scrape time)."""
        if self.last_state is None:
            return []
        return queue_samples(
            self.last_state,
            inadmissible=self.last_inadmissible,
            admitted=self.last_admitted,
            fair_sharing=self._config.cycle.fair_sharing,
        )

    async def schedule_once(self) -> None:
        config, caches = self._config, self._caches
        now = dt.datetime.now(dt.UTC)
        started = time.perf_counter()
        self._pass_workers = {}
        state = self._state(now)
        at = state.next_requeue_at
        if at is not None and (self._requeue_wake_at is None or at < self._requeue_wake_at):
            self._requeue_wake_at = at
            self._task_group.start_soon(self._wake_at, at)
        raws: dict[str, dict[str, Any]] = {}
        indexed: set[str] = set()

        def raw_of(workload: Workload) -> dict[str, Any]:
            """The raw pending Workload, indexed per ClusterQueue on first use (most queues have no decision)."""
            if workload.cluster_queue not in indexed:
                indexed.add(workload.cluster_queue)
                raws.update((wl.key, raw) for wl, raw in state.pending.get(workload.cluster_queue, ()))
            return raws[workload.key]

        queues = _by_name(self._cluster_queue_view)
        checks = _by_name(caches.admission_checks.store)
        configs = _by_name(caches.multikueue_configs.store)
        chosen: dict[str, tuple[Dispatch, list[str], list[str], frozenset[str]]] = {}

        ready_policy = config.wait_for_pods_ready
        holding = [raw for items in state.reserving.values() for raw in items]

        def veto(admit: Admit) -> str | None:
            if ready_policy is not None and ready_policy.block_admission:
                blocked = admission_blocked(holding, admitted_in_pass=len(chosen))
                if blocked is not None:
                    return blocked
            queue = queues[admit.assignment.cluster_queue]
            targets = multikueue_workers(queue, admission_checks=checks, configs=configs)
            if isinstance(targets, str):
                return targets
            check_names, worker_names = targets
            raw = raw_of(admit.workload)
            requests: dict[str, int] = {}
            for psa in admit.assignment.pod_set_assignments:
                for resource, amount in psa.resource_usage.items():
                    requests[resource] = requests.get(resource, 0) + amount
            excluded = exclusions(raw, now=now)
            workers = self._workers(worker_names, now, excluded=excluded)
            # The pod sets' topology requests matter only against a worker's TAS summary: parsed only then.
            summaries = any(w.capacity is not None and w.capacity.topologies for w in workers)
            result = choose_worker(
                namespace=raw["metadata"]["namespace"],
                queue_name=raw["spec"]["queueName"],
                requests=requests,
                workers=workers,
                avoid=withdrawn_from(raw),
                policy=config.dispatch_policy,
                large_share=config.dispatch_large_share,
                pod_sets=topology_requests(raw) if summaries else (),
            )
            if isinstance(result, NoWorker):
                self._worker_refusal_ends.note(refusal_end(raw, now=now))
                return result.message
            every_check = workload_checks(queue, flavors=assigned_flavors(admit.assignment))
            capacity = next((w.capacity for w in workers if w.name == result.worker), None)
            tas = tas_flavor_names(caches.flavors.store, capacity.topologies if capacity is not None else ())
            chosen[admit.workload.key] = (result, every_check, check_names, tas)
            self._ledger.record(
                admit.workload.key, worker=result.worker, cluster_queue=result.cluster_queue, requests=requests
            )
            return None

        updates: list[WorkloadUpdate] = []
        for blocked in state.blocked:
            update = pending_update(
                blocked.raw, reason=blocked.reason, message=blocked.message, now=now, cluster_queue=None
            )
            if update is not None:
                updates.append(update)
        decisions = drain(
            state,
            now_seconds=now.timestamp(),
            veto=veto,
            config=config.cycle,
            parking=self.parking,
            workers=self._veto_stamp(now, holding),
        )
        ends = (self.parking.next_expiry(), self._worker_refusal_ends.next_end())
        expiry = min((at for at in ends if at is not None), default=None)
        if expiry is not None and (self._requeue_wake_at is None or expiry < self._requeue_wake_at):
            self._requeue_wake_at = expiry
            self._task_group.start_soon(self._wake_at, expiry)
        preempting: set[str] = set()
        holdable: set[str] = set()
        """Reservations no other admission check needs to see, for a kfed-agent worker: held back (see ``_hold``)."""
        for decision in decisions:
            raw = raw_of(decision.workload)
            if isinstance(decision, Admit):
                dispatch, every_check, check_names, tas = chosen[decision.workload.key]
                waited = max(0.0, now.timestamp() - decision.workload.creation_time)
                if (
                    set(every_check) <= set(check_names)
                    and self._admits_first(dispatch.worker)
                    and decision.workload.key not in self._write_alone
                ):
                    holdable.add(decision.workload.key)
                updates.append(
                    reservation_update(
                        raw,
                        decision.assignment,
                        worker=dispatch.worker,
                        checks=every_check,
                        multikueue_checks=check_names,
                        now=now,
                        waited_seconds=waited,
                        tas_flavors=tas,
                    )
                )
                continue
            reason = (
                REASON_INADMISSIBLE if isinstance(decision, Wait) and decision.reason == "Inactive" else REASON_PENDING
            )
            if decision.message == BLOCK_ADMISSION_MESSAGE:
                reason = REASON_WAITING_FOR_PODS_READY
            message = decision.message
            if isinstance(decision, Preempt):
                updates.extend(self._preempt(decision, now=now, already=preempting))
            update = pending_update(
                raw, reason=reason, message=message, now=now, cluster_queue=decision.workload.cluster_queue
            )
            if update is not None:
                updates.append(update)
        self.passes += 1
        admitted = frozenset(d.workload.key for d in decisions if isinstance(d, Admit))
        if state.pending:  # Kueue counts an attempt per cycle that had heads to try
            self._metrics.admission_attempt(admitted=bool(admitted), seconds=time.perf_counter() - started)
        self.last_state, self.last_admitted = state, admitted
        # a workload waiting for its preemptions stays active in Kueue (requeued at once); one that cannot fit is parked
        self._last_waiting = frozenset(d.workload.key for d in decisions if isinstance(d, Wait))
        for update in updates:
            if update.key in self._writing:
                self.parking.unpark(update.key)
                continue  # decided on the Workload as its write in flight makes it; looked at again once answered
            self._changed.add(update.key)
            shown = {**update.raw, "status": apply_merge_patch(update.raw.get("status") or {}, update.status)}
            self._writing[update.key] = (update, shown)
            if update.key in holdable and update.outcome == "reserved":
                self._hold(update, shown)
            else:
                self._queue_write(update)
        admitted_in = {d.workload.cluster_queue for d in decisions if isinstance(d, Admit)}
        await self._write_queue_status(state, queues, admitted=set(admitted), admitted_in=admitted_in, now=now)

    async def _write_queue_status(
        self,
        state: QuotaState,
        queues: dict[str, dict[str, Any]],
        *,
        admitted: set[str],
        admitted_in: set[str],
        now: dt.datetime,
    ) -> None:
        """Kueue's ClusterQueue and LocalQueue status (counts, usage, Active), written only on change and at most
        once per ``QUEUE_STATUS_INTERVAL`` seconds: they are aggregates, and a busy queue would otherwise cost a write
        per scheduling pass. A skipped write is made by a pass scheduled for when the interval is over."""
        api, field_manager = self._api, self._config.field_manager
        wait = self._queue_status_written_at + QUEUE_STATUS_INTERVAL - time.monotonic()
        if wait > 0:
            if not self._queue_status_deferred:
                self._queue_status_deferred = True
                self._task_group.start_soon(self._trigger_after, wait)
            return
        self._queue_status_written_at = time.monotonic()
        pending = pending_by_cluster_queue(state, admitted)
        finalized, updated = await write_finalizers(
            api,
            CLUSTER_QUEUES,
            finalizer_changes(state, queues),
            current=queues,
            field_manager=field_manager,
            overlay=self._cluster_queue_view,
        )
        queues = {**queues, **updated}  # the status below is written at the resourceVersion the finalizers made
        written = await write_status_patches(
            api,
            CLUSTER_QUEUES,
            queue_status_patches(state, queues, pending=pending, now=now, fair_sharing=self._config.cycle.fair_sharing),
            current=queues,
            field_manager=field_manager,
            overlay=self._cluster_queue_view,
        )
        written &= finalized
        local_queues = {f"{q['metadata']['namespace']}/{q['metadata']['name']}": q for q in self._local_queue_view}
        lq_patches = local_queue_status_patches(
            state,
            local_queues,
            pending=pending_by_local_queue(state, admitted, memo=self._lq_counts, admitted_in=admitted_in),
            now=now,
        )
        written &= await write_status_patches(
            api,
            LOCAL_QUEUES,
            lq_patches,
            current=local_queues,
            field_manager=field_manager,
            overlay=self._local_queue_view,
        )
        if not written:
            self.trigger()

    def _preempt(self, decision: Preempt, *, now: dt.datetime, already: set[str]) -> list[WorkloadUpdate]:
        """Evict the decision's victims that are not being evicted yet (one victim set per preemptor: while they give
        their quota back they stay the first candidates, so later passes pick the same set instead of more)."""
        updates = []
        for victim in decision.victims:
            raw = self._workload_view.get(victim.key)
            if raw is None or victim.key in already or is_true(raw, "Evicted"):
                continue
            already.add(victim.key)
            self._preemptors[victim.key] = (decision.workload.cluster_queue, victim.reason)
            status = preemption_status(raw, preemption_reason=victim.reason, message=victim.message, now=now)
            note = f"{victim.message}; preempted by {decision.workload.key}"
            updates.append(
                WorkloadUpdate(
                    victim.key,
                    raw,
                    status,
                    "preempted",
                    victim.cluster_queue,
                    victim.message,
                    (EventSpec("Preempted", note, "Normal"),),
                )
            )
        return updates

    def _queue_write(self, update: WorkloadUpdate) -> None:
        self._write_queue.append(update)
        if self._writers < self._config.workers:
            self._writers += 1
            self._task_group.start_soon(self._send_writes)

    def _admits_first(self, worker: str) -> bool:
        """A hold is worth it: reservations are held, and ``worker`` runs kfed-agent, whose admission of the copy
        the remote sync waits for before it sends the Job copy (a stock Kueue worker gets both at once)."""
        conn = self._pool.connections.get(worker)
        return self._holds is not None and self._holds.seconds > 0 and conn is not None and conn.report is not None

    def _hold(self, update: WorkloadUpdate, shown: dict[str, Any]) -> None:
        """Hold the reservation back: the remote sync sends the Workload copy at once, and the Workload's next status
        write (normally Admitted, once the worker admitted the copy) records both; if none comes within the hold,
        the reservation is written on its own."""
        assert self._holds is not None
        held = HeldReservation(
            status=update.status, before=update.raw, shown=shown, settle=partial(self._settle_held, update)
        )
        self._holds.hold(update.key, held)
        self._task_group.start_soon(self._hold_runs_out, update, held)

    async def _hold_runs_out(self, update: WorkloadUpdate, held: HeldReservation) -> None:
        assert self._holds is not None
        await anyio.sleep(self._holds.seconds)
        if self._holds.take_if(update.key, held):
            self._queue_write(update)

    def _settle_held(self, update: WorkloadUpdate, written: dict[str, Any] | None, err: BaseException | None) -> None:
        """The write that carried a held reservation was answered (the remote sync's, with its own patch)."""
        try:
            if written is not None:
                self._after_write(update, written)
            else:
                if not isinstance(err, Conflict):  # refused or invalid: its next reservation is written on its own
                    self._write_alone.add(update.key)
                self._after_refusal(update, err)
        finally:
            self._answered_for(update)

    def _answered_for(self, update: WorkloadUpdate) -> None:
        if self._writing.get(update.key, (None,))[0] is update:
            del self._writing[update.key]
            self._changed.add(update.key)
        if self._answered is not None:
            self._answered.set()

    async def _send_writes(self) -> None:
        """One writer: sends queued status writes until none is left."""
        try:
            while self._write_queue:
                update = self._write_queue.popleft()
                try:
                    await self._write(update)
                finally:
                    if self._holds is not None:
                        self._holds.sent(update.key)
                    self._answered_for(update)
        finally:
            self._writers -= 1

    async def _write(self, update: WorkloadUpdate) -> None:
        meta = update.raw["metadata"]
        try:
            written = await self._api.patch_status(
                WORKLOADS,
                meta["name"],
                {"metadata": {"resourceVersion": meta["resourceVersion"]}, "status": update.status},
                namespace=meta["namespace"],
                field_manager=self._config.field_manager,
            )
        except (Conflict, KubeError) as err:
            self._after_refusal(update, err)
            return
        self._after_write(update, written)

    def _after_refusal(self, update: WorkloadUpdate, err: BaseException | None) -> None:
        self.parking.unpark(update.key)  # its verdict is not written: decided again on the next pass
        self._ledger.forget(update.key)
        self._preemptors.pop(update.key, None)
        shown = self._writing.get(update.key, (None, None))[1]
        if shown is not None:
            self._workload_view.unshow(shown)  # a held reservation was shown: the cache is the truth again
        if isinstance(err, KubeError) and is_refusal(err):
            # RBAC: named on the Workload once; decided again, at the latest after a pause
            self._refusals.refused(update.key, err, retry_in=REFUSED_RETRY_SECONDS, regarding=update.raw)
            at = time.time() + REFUSED_RETRY_SECONDS
            if self._requeue_wake_at is None or at < self._requeue_wake_at:
                self._requeue_wake_at = at
                self._task_group.start_soon(self._wake_at, at)
            return
        log.info("workload status write failed; will decide again", workload=update.key, error=str(err))
        self.trigger()

    def _after_write(self, update: WorkloadUpdate, written: dict[str, Any]) -> None:
        self._refusals.succeeded(update.key)
        self._workload_view.wrote(update.raw, written)  # the next pass sees it even before the cache does
        namespace, local_queue, priority_class = workload_labels(update.raw)
        if update.outcome == "preempted":
            self._metrics.evicted(
                cluster_queue=update.cluster_queue or "",
                namespace=namespace,
                local_queue=local_queue,
                priority_class=priority_class,
                reason="Preempted",
                pods_ready_for=pods_ready_to_evicted(update.raw, now=dt.datetime.now(dt.UTC)),
            )
            preemptor = self._preemptors.pop(update.key, None)
            if preemptor is not None:
                self._metrics.preempted(preempting_cluster_queue=preemptor[0], reason=preemptor[1])
            log.info("workload preempted", workload=update.key, queue=update.cluster_queue, message=update.message)
        if update.outcome == "reserved":
            self._write_alone.discard(update.key)
            # from the reservation's own time: a held one is written later than it was decided
            reserved = find_condition({"status": update.status}, "QuotaReserved") or {}
            at = parse_time(str(reserved["lastTransitionTime"])) if reserved.get("lastTransitionTime") else None
            self._metrics.quota_reserved(
                cluster_queue=update.cluster_queue or "",
                namespace=namespace,
                local_queue=local_queue,
                priority_class=priority_class,
                waited=((at or dt.datetime.now(dt.UTC)) - parse_time(queued_since(update.raw))).total_seconds(),
            )
            log.info(
                "quota reserved and worker nominated",
                workload=update.key,
                queue=update.cluster_queue,
                cluster=update.status["nominatedClusterNames"][0],
            )
        for event in update.events:
            self._events.emit(
                update.raw, reason=event.reason, note=event.message, action="Schedule", event_type=event.event_type
            )
