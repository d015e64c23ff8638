"""The global scheduler: the manager's queues drained through the shared admission core, one worker per admit.

Kueue's pipeline (heads → snapshot → nominate → admit → requeue) runs in ``federation.admission``; this module
builds its input from the manager's caches and vetoes every admission for which no worker has room (capacity
probing, ``manager.decisions.dispatch``), so quota is only reserved where it can be used. Triggered by any change
to queues, quotas, workloads or a worker's capacity report; bursts of triggers coalesce into one pass. A Workload
that did not fit is parked (``federation.admission.parking``) and left out of later passes until something that
could change its verdict happens, so a pass costs what changed, not the length of the backlog. Workers' room only
shrinks while a pass decides, so a pass asks the workers once per shape of Workload none has room for
(``refusal_key``), not once per Workload of that shape.

A pass decides in memory and does not wait for its writes: the Workloads' status writes are sent after it by
``manager.verdict_writes`` (and the next pass decides on the Workloads as those in flight make them), the queues'
status by ``manager.queue_status_writes``.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import structlog

from federation.admission.api_drain import EventSpec, WorkloadUpdate, drain, pending_update, unadmitted_reason
from federation.admission.api_state import QuotaState, QuotaStateBuilder
from federation.admission.api_workloads import ResourceRules, workload_key
from federation.admission.check_problems import cluster_queue_check_problems, mark_inactive
from federation.admission.decisions import Admit, Decision, Preempt, Wait
from federation.admission.model import Workload
from federation.admission.parking import ParkingLot
from federation.admission.pods_ready import admission_blocked
from federation.admission.queue_metrics import Sample, queue_samples, queued_wait_seconds
from federation.conditions import is_true
from federation.kube.api import KubeApi
from federation.kube.cache import SyncedCache
from federation.kube.overlay import WriteOverlay
from federation.kube.recorder import EventSink
from federation.kube.trigger import Trigger
from federation.limit_ranges import resources_signature
from federation.obs.metrics import Metrics
from federation.podspec import Overheads
from manager.config import ManagerConfig
from manager.decisions.dispatch import (
    Dispatch,
    Headroom,
    NoWorker,
    WorkerState,
    choose_worker,
    headroom,
    may_fit_more,
    refusal_key,
)
from manager.decisions.dispatch_policy import DispatchChoice, queue_dispatch_choice
from manager.decisions.ledger import InFlightLedger
from manager.decisions.refusals import RefusalEnds, refusal_end
from manager.decisions.reservation import (
    assigned_flavors,
    multikueue_workers,
    reservation_update,
    tas_flavor_names,
    workload_checks,
)
from manager.decisions.withdrawal import exclusions, preemption_status, withdrawn_from
from manager.decisions.worker_requests import (
    AsRunThere,
    as_run_there,
    overheads_differ_somewhere,
    placement_requests,
)
from manager.queue_status_writes import QueueStatusWrites
from manager.reservation_holds import ReservationHolds
from manager.verdict_writes import VerdictWrites
from manager.worker_connection import WorkerAvailability

log = structlog.get_logger(__name__)

_COALESCE_SECONDS = 0.02
MIN_PASS_INTERVAL = 0.2
"""Seconds from the start of one pass to the start of the next, at least: passes do not wait for their writes, and
in a burst every new Workload triggers one (a pass over 1,000 Workloads takes ~20 ms)."""
DECIDE_SECONDS = 1.0
"""How long one pass decides (drains the admission cycles) before it stops between two cycles and leaves the
Workloads it did not reach to the next pass, started at once. While a pass decides it awaits nothing, so the process
renews no lease (the renew deadline is 10 s), answers no probe and reads no watch. ``make bench BENCH=schedpass``
(100,000 pending Workloads, 100 workers) on a 2-core machine: deciding them in one pass held the event loop 24 s; in
passes of this length that also let the loop run while they look at the Workloads (``_state``), 3.2 s at most, for
39 s in all instead of 24 (every pass looks at the queues again); with their writes made in batches too
(``VERDICTS_PER_STEP``), 1.35 s at most on a faster day (2.2 s without). A burst of 1,000 Jobs is decided in one
pass."""
VERDICTS_PER_STEP = 2000
"""Decisions turned into status writes, and writes sent, between two turns of the event loop: a pass that decided
tens of thousands of pending Workloads took another second for their writes."""


def _key(raw: dict[str, Any]) -> str:
    meta = raw["metadata"]
    return f"{meta['namespace']}/{meta['name']}"


def _listed(source: Callable[[], Iterable[dict[str, Any]]]) -> Iterator[dict[str, Any]]:
    """``source()``'s objects, listed when iterating begins: a build in steps that looks at every Workload goes on
    over its own list while the store changes; a build that looks only at the changed ones never lists them."""
    yield from list(source())


def _by_name(objects: Any) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects}


def _as_run_there(
    raw: dict[str, Any], admit: Admit, state: QuotaState, rules: ResourceRules, *, topology: bool
) -> AsRunThere:
    """How the workers judge the admitted ``raw`` Workload's pods by their namespace's LimitRanges: the admitted pod
    counts, the manager's RuntimeClass overheads and resource rules, and the resources the manager charged (when it
    ignores undeclared ones, and for ``pods``); ``topology``: some worker has a TAS summary."""
    assigned = admit.assignment.pod_set_assignments
    charged = {resource for psa in assigned for resource in psa.resource_usage}
    return as_run_there(
        raw,
        {psa.name: psa.count for psa in assigned},
        rules=rules,
        overheads=state.runtime_overheads,
        charged=charged if rules.ignore_undeclared else None,
        pods="pods" in charged,
        topology=topology,
    )


@dataclass(slots=True)
class _PassWorkers:
    """One list of workers as a pass sees it: their states, whether any has a TAS summary, and the refusal keys none
    of them had room for (room only shrinks while a pass decides, so such a refusal holds for the rest of it)."""

    states: list[WorkerState]
    summaries: bool
    limited: frozenset[tuple[str, str]] = frozenset()
    """(namespace, LocalQueue) whose namespace has LimitRanges on some of these workers."""
    overheads: frozenset[Overheads] = frozenset()
    """The RuntimeClass overheads these workers report (each distinct set once)."""
    refused: dict[tuple[object, ...], NoWorker] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True, slots=True)
class SchedulerCaches:
    """The manager cluster's objects a pass reads (the runtime's watch caches)."""

    workloads: SyncedCache
    cluster_queues: SyncedCache
    local_queues: SyncedCache
    flavors: SyncedCache
    cohorts: SyncedCache
    namespaces: SyncedCache
    limit_ranges: SyncedCache
    runtime_classes: SyncedCache
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
        admission_check_view: WriteOverlay | None = None,
        decide_seconds: float = DECIDE_SECONDS,
    ) -> None:
        """``workload_view``: the Workloads with this process's own writes laid over ``caches.workloads`` (shared
        with the remote sync); ``ledger``: the dispatches whose copies the workers' reports may not show yet;
        ``holds``: where reservations wait to be written with the worker's admission (``manager.reservation_holds``);
        ``admission_check_view``: the AdmissionChecks with this process's writes laid over ``caches.admission_checks``
        (shared with ``manager.admission_check_status``, so that its status write follows a finalizer write made here
        at the new resourceVersion, not into a 409); ``decide_seconds``: how long a pass decides before it leaves the
        rest to the next (:data:`DECIDE_SECONDS`).
        """
        self._config = config
        self._decide_seconds = decide_seconds
        self._caches = caches
        self._workload_view = workload_view
        self._pool = workers
        self._ledger = ledger
        self._metrics = metrics
        self._wakeup = Trigger()
        self.passes = 0
        self.cut_passes = 0
        """Passes that stopped deciding at ``decide_seconds`` and left Workloads to the next one."""
        self._state_builder = QuotaStateBuilder(rules=config.resource_rules, assigns_topology=False)
        self._requeue_wake_at: float | None = None
        """The epoch second a pass is already scheduled for, when a requeued workload's backoff ends."""
        self._task_group: anyio.abc.TaskGroup
        self._pass_workers: dict[tuple[tuple[str, ...], tuple[tuple[str, str], ...]], _PassWorkers] = {}
        self._worker_refusal_ends = RefusalEnds()
        """When refusals that kept a Workload from every worker end: a pass runs then, and the veto stamp changes."""
        self._headrooms: dict[str, Headroom] = {}
        """Each worker's headroom as the last pass saw it (``_room_growths``)."""
        self._room_grown = 0
        """The passes at which some worker's headroom may have grown (``may_fit_more``)."""
        self.last_state: QuotaState | None = None
        """The quota state of the last pass, with the keys it admitted and found inadmissible: the queue gauges are
        computed from it when Prometheus scrapes (``queue_gauges``), never during a pass."""
        self.last_admitted: frozenset[str] = frozenset()
        self._last_waiting: frozenset[str] = frozenset()
        self._last_decisions: list[Decision] = []
        self.parking = ParkingLot()
        """Pending Workloads that did not fit, left out of later passes until something that could change the
        answer happens (``federation.admission.parking``)."""
        self._writes = VerdictWrites(
            api=api,
            field_manager=config.field_manager,
            writers=config.workers,
            workload_view=workload_view,
            ledger=ledger,
            parking=self.parking,
            metrics=metrics,
            events=events,
            holds=holds,
            start_soon=self._start_soon,
            changed=self._workload_changed,
            trigger=self.trigger,
            wake_by=self._wake_by,
        )
        """The status writes of the passes: the next pass decides on the Workloads as those in flight make them."""
        self._queue_status = QueueStatusWrites(
            api=api,
            field_manager=config.field_manager,
            fair_sharing=config.cycle.fair_sharing,
            cluster_queues=caches.cluster_queues,
            local_queues=caches.local_queues,
            cohorts=caches.cohorts,
            admission_checks=caches.admission_checks,
            flavors=caches.flavors,
            admission_check_view=admission_check_view,
            start_soon=self._start_soon,
            trigger=self.trigger,
        )
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
        return len(self._writes)

    async def writes_answered(self) -> None:
        """Wait until every status write sent so far is answered."""
        await self._writes.answered()

    def _workloads(self) -> Iterable[dict[str, Any]]:
        view = self._workload_view
        writing = self._writes.in_flight
        if not writing:
            return view
        return (writing[key][1] if (key := _key(raw)) in writing else raw for raw in view)

    def trigger(self) -> None:
        self._wakeup.pull()

    def _start_soon(self, func: Any, *args: Any) -> None:
        self._task_group.start_soon(func, *args)

    def _wake_by(self, at: float) -> None:
        """A pass at epoch second ``at`` at the latest (none is started when one is already due by then)."""
        if self._requeue_wake_at is None or at < self._requeue_wake_at:
            self._requeue_wake_at = at
            self._task_group.start_soon(self._wake_at, at)

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
        writing = self._writes.in_flight.get(key)
        return cached if writing is None else writing[1]

    async def _state(self, now: dt.datetime) -> QuotaState:
        """The quota state from the caches. The event loop runs between batches of the Workloads looked at: every one
        (a new term's first pass: 5.7 s at 100,000 of them), or the changed ones (tens of thousands once a pass's
        verdicts are written). It looks at a list of its own (``_listed``) or at the changed ones as they were
        when the build began, so what changes meanwhile is the next pass's (``_changed``)."""
        caches = self._caches
        store = caches.workloads.store
        if self._classified_from != (store, store.relists):
            self._state_builder.look_at_all()  # a new term's store, or a relist whose events are still coming
            self._classified_from = (store, store.relists)
        changed, self._changed = self._changed, set()
        try:
            steps = self._state_builder.build_steps(
                flavors=caches.flavors.store,
                cluster_queues=caches.cluster_queues.store,
                cohorts=caches.cohorts.store,
                local_queues=caches.local_queues.store,
                namespaces=caches.namespaces.store,
                limit_ranges=caches.limit_ranges.store,
                runtime_classes=caches.runtime_classes.store,
                workloads=_listed(self._workloads),  # its own reservations count before the cache shows them
                now_seconds=now.timestamp(),
                changed=changed,
                lookup=self._workload,
            )
            while True:
                try:
                    next(steps)
                except StopIteration as built:
                    state: QuotaState = built.value
                    break
                await anyio.lowlevel.checkpoint()
        except BaseException:
            self._changed |= changed  # a pass that failed does not lose its changes: the next one looks at them
            raise
        for ignored in self._state_builder.ignored:
            log.warning("invalid quota object ignored", kind=ignored.kind, name=ignored.name, error=ignored.error)
        mark_inactive(state, cluster_queue_check_problems(caches.cluster_queues.store, caches.admission_checks.store))
        return state

    def _workers(self, names: list[str], now: dt.datetime, *, excluded: Mapping[str, str]) -> _PassWorkers:
        """The workers for one decision (``excluded``: worker → why this Workload may not go there); built once per
        pass for the same workers (their in-flight quota is the ledger's live view, so the pass's own dispatches
        count)."""
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
        found = _PassWorkers(
            states,
            any(w.capacity is not None and w.capacity.topologies for w in states),
            frozenset(route for w in states if w.capacity is not None for route in w.capacity.limit_ranges),
            frozenset(
                w.capacity.runtime_overheads
                for w in states
                if w.capacity is not None and w.capacity.runtime_overheads is not None
            ),
        )
        self._pass_workers[key] = found
        return found

    def _veto_stamp(self, now: dt.datetime, holding: list[dict[str, Any]]) -> tuple[object, ...]:
        """Everything a veto (no worker has room, no usable MultiKueue configuration, admission blocked until pods
        are ready, workers refused) depends on besides the Workload itself: a Workload parked by a veto wakes when
        this changes."""
        pool, caches = self._pool, self._caches
        names = sorted({*pool.connections, *pool.problems})
        workers = tuple((name, pool.unusable_reason(name, now)) for name in names)
        # a ClusterQueue by its spec's generation: the pass writes its status (pending counts) after most passes,
        # and no veto reads that status
        versions = tuple(
            (o["metadata"]["name"], o["metadata"].get("uid"), o["metadata"].get("generation"))
            for o in caches.cluster_queues.store
        ) + tuple(
            (kind, o["metadata"]["name"], o["metadata"].get("resourceVersion"))
            for kind, cache in (
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
        return (
            workers,
            self._room_growths(names),
            versions,
            holders,
            self._worker_refusal_ends.passed(now.timestamp()),
        )

    def _room_growths(self, names: list[str]) -> int:
        """Counts the passes at which some worker may have room it did not have at the pass before (a report of
        more room, or quota in flight there given back): a Workload no worker had room for wakes then. A report that
        repeats its figures (every agent's heartbeat) or shows less room (the admissions of what the manager sent,
        counted in flight until then) wakes none: at 100 workers their heartbeats alone would have the scheduler
        decide a backlog of them again three times a second."""
        grown = False
        for name in names:
            conn = self._pool.connections.get(name)
            current = conn.current if conn is not None else None
            if current is None:
                self._headrooms.pop(name, None)  # takes nothing now; its next report counts as growth
                continue
            now_room = headroom(current.capacity, self._ledger.in_flight(name))
            before = self._headrooms.get(name)
            grown = grown or before is None or may_fit_more(before, now_room)
            self._headrooms[name] = now_room
        self._room_grown += grown
        return self._room_grown

    @property
    def last_inadmissible(self) -> frozenset[str]:
        """The Workloads the last pass found inadmissible, parked ones included (computed when asked: at 100,000
        parked Workloads, a set of them per pass cost more than the pass)."""
        return self._last_waiting | frozenset(parked.workload.key for parked in self.parking.parked())

    def _last_reasons(self) -> dict[str, str]:
        """The QuotaReserved=False reason the last pass gave each Workload it kept pending (the state it decided from
        predates them; computed when asked, at scrape time, not in every pass)."""
        blocked = self.last_state.blocked if self.last_state is not None else ()
        reasons = {workload_key(b.raw): b.reason for b in blocked}
        reasons.update((d.workload.key, unadmitted_reason(d)) for d in self._last_decisions if not isinstance(d, Admit))
        return reasons

    def queue_gauges(self) -> list[Sample]:
        """Kueue's ClusterQueue and LocalQueue gauges as the last pass left them (read at scrape time)."""
        if self.last_state is None:
            return []
        return queue_samples(
            self.last_state,
            inadmissible=self.last_inadmissible,
            admitted=self.last_admitted,
            reasons=self._last_reasons(),
            fair_sharing=self._config.cycle.fair_sharing,
        )

    async def schedule_once(self) -> None:
        config, caches = self._config, self._caches
        now = dt.datetime.now(dt.UTC)
        started = time.perf_counter()
        self._pass_workers = {}
        state = await self._state(now)
        if state.next_requeue_at is not None:
            self._wake_by(state.next_requeue_at)
        raws: dict[str, dict[str, Any]] = {}
        indexed: set[str] = set()

        def raw_of(workload: Workload) -> dict[str, Any]:
            """The raw pending Workload, indexed per ClusterQueue on first use (most queues have no decision)."""
            if workload.cluster_queue not in indexed:
                indexed.add(workload.cluster_queue)
                raws.update((wl.key, raw) for wl, raw in state.pending.get(workload.cluster_queue, ()))
            return raws[workload.key]

        queues = _by_name(self._queue_status.cluster_queues)
        checks = _by_name(caches.admission_checks.store)
        configs = _by_name(caches.multikueue_configs.store)
        chosen: dict[str, tuple[Dispatch, list[str], list[str], frozenset[str]]] = {}

        ready_policy = config.wait_for_pods_ready
        holding = [raw for items in state.reserving.values() for raw in items]
        routes: dict[str, tuple[list[str], list[str], DispatchChoice] | str] = {}
        """Per ClusterQueue: its MultiKueue checks, their workers and the dispatch choice, or why it has none (the
        queue, checks and configurations a pass reads do not change during it)."""

        def route(cluster_queue: str) -> tuple[list[str], list[str], DispatchChoice] | str:
            found = routes.get(cluster_queue)
            if found is None:
                targets = multikueue_workers(queues[cluster_queue], admission_checks=checks, configs=configs)
                if isinstance(targets, str):
                    found = targets
                else:
                    choice = queue_dispatch_choice(
                        targets[0], admission_checks=checks, configs=configs, default=config.dispatch
                    )
                    found = (*targets, choice)
                routes[cluster_queue] = found
            return found

        def veto(admit: Admit) -> str | None:
            if ready_policy is not None and ready_policy.block_admission:
                blocked = admission_blocked(holding, admitted_in_pass=len(chosen))
                if blocked is not None:
                    return blocked
            queue = queues[admit.assignment.cluster_queue]
            targets = route(admit.assignment.cluster_queue)
            if isinstance(targets, str):
                return targets
            check_names, worker_names, choice = targets
            raw = raw_of(admit.workload)
            requests: dict[str, int] = {}
            for psa in admit.assignment.pod_set_assignments:
                for resource, amount in psa.resource_usage.items():
                    requests[resource] = requests.get(resource, 0) + amount
            usage = [(psa.name, psa.resource_usage) for psa in admit.assignment.pod_set_assignments]
            excluded = exclusions(raw, now=now)
            workers = self._workers(worker_names, now, excluded=excluded)
            # The pod sets' topology requests matter only against a worker's TAS summary: parsed only then, with
            # the admitted pod counts and the RuntimeClass's overhead (the worker's placement adds it too).
            namespace, queue_name = raw["metadata"]["namespace"], raw["spec"]["queueName"]
            counts = {psa.name: psa.count for psa in admit.assignment.pod_set_assignments}
            pod_sets = placement_requests(raw, counts, None, state.runtime_overheads) if workers.summaries else ()
            here = state.limit_ranges.get(namespace)
            # the requests differ from worker to worker only when a LimitRange is involved here or there, or a
            # worker's overhead for the pods' RuntimeClass is not the manager's
            judged = (
                (namespace, queue_name) in workers.limited
                or (here is not None and bool(here.default_limits or here.default_requests))
                or overheads_differ_somewhere(raw, state.runtime_overheads, workers.overheads)
            )
            # a backlog of one shape woken by a report of more room: one worker choice per shape once the room is
            # taken, not one per Workload
            placement = admit.workload.pod_sets
            shape = refusal_key(
                namespace=namespace,
                queue_name=queue_name,
                requests=requests,
                pod_sets=pod_sets,
                placement=placement,
                pod_set_usage=usage,
                pod_templates=resources_signature(raw) if judged else None,
            )
            result: Dispatch | NoWorker | None = workers.refused.get(shape)
            if result is None:
                result = choose_worker(
                    namespace=namespace,
                    queue_name=queue_name,
                    requests=requests,
                    workers=workers.states,
                    avoid=withdrawn_from(raw),
                    policy=choice.policy,
                    large_share=choice.large_share,
                    pod_sets=pod_sets,
                    placement=placement,
                    pod_set_usage=usage,
                    as_run_there=(
                        _as_run_there(raw, admit, state, config.resource_rules, topology=workers.summaries)
                        if judged
                        else None
                    ),
                )
            if isinstance(result, NoWorker):
                workers.refused[shape] = result
                if excluded:  # a refusal that holds excludes the workers that refused (``exclusions``)
                    self._worker_refusal_ends.note(refusal_end(raw, now=now))
                return result.message
            every_check = workload_checks(queue, flavors=assigned_flavors(admit.assignment))
            capacity = next((w.capacity for w in workers.states if w.name == result.worker), None)
            tas = tas_flavor_names(caches.flavors.store, capacity.topologies if capacity is not None else ())
            chosen[admit.workload.key] = (result, every_check, check_names, tas)
            self._ledger.record(
                admit.workload.key,
                worker=result.worker,
                cluster_queue=result.cluster_queue,
                requests=dict(result.requests) if judged else requests,
            )
            return None

        updates: list[WorkloadUpdate] = []
        for blocked in state.blocked:
            update = pending_update(
                blocked.raw, reason=blocked.reason, message=blocked.message, now=now, cluster_queue=None
            )
            if update is not None:
                updates.append(update)
        decide_until = time.perf_counter() + self._decide_seconds
        cut = False

        def stop() -> bool:
            nonlocal cut
            cut = time.perf_counter() >= decide_until
            return cut

        decisions = drain(
            state,
            now_seconds=now.timestamp(),
            veto=veto,
            config=config.cycle,
            parking=self.parking,
            workers=self._veto_stamp(now, holding),
            stop=stop,
        )
        if cut:  # the rest in the next pass, once the event loop has run what waited (leases, probes, watches)
            self.cut_passes += 1
            self.trigger()
            log.debug(
                "scheduling pass stopped deciding; the next one goes on",
                decided=len(decisions),
                pending=sum(len(items) for items in state.pending.values()),
                seconds=round(time.perf_counter() - started, 3),
            )
        ends = (self.parking.next_expiry(), self._worker_refusal_ends.next_end())
        expiry = min((at for at in ends if at is not None), default=None)
        if expiry is not None:
            self._wake_by(expiry)
        preempting: set[str] = set()
        holdable: set[str] = set()
        """Reservations no other admission check needs to see, for a kfed-agent worker: held back (see ``_hold``)."""
        for count, decision in enumerate(decisions, 1):
            if count % VERDICTS_PER_STEP == 0:
                await anyio.lowlevel.checkpoint()
            raw = raw_of(decision.workload)
            if isinstance(decision, Admit):
                dispatch, every_check, check_names, tas = chosen[decision.workload.key]
                waited = queued_wait_seconds(raw, now_seconds=now.timestamp())
                if set(every_check) <= set(check_names) and self._writes.may_hold(
                    decision.workload.key, dispatch.worker, worker_admits_first=self._runs_kfed_agent(dispatch.worker)
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
            reason = unadmitted_reason(decision)
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
        self._last_decisions = decisions
        for count, update in enumerate(updates, 1):
            if count % VERDICTS_PER_STEP == 0:
                await anyio.lowlevel.checkpoint()  # the first writes are sent meanwhile
            if update.key in self._writes.in_flight:
                self.parking.unpark(update.key)
                continue  # decided on the Workload as its write in flight makes it; looked at again once answered
            self._changed.add(update.key)
            self._writes.send(update, hold=update.key in holdable)
        admitted_in = {d.workload.cluster_queue for d in decisions if isinstance(d, Admit)}
        await self._queue_status.write(state, queues, admitted=set(admitted), admitted_in=admitted_in, now=now)

    def _runs_kfed_agent(self, worker: str) -> bool:
        """``worker`` publishes kfed-agent's capacity report: the remote sync waits for its admission of the copy
        before it sends the Job copy (a stock Kueue worker gets both at once)."""
        conn = self._pool.connections.get(worker)
        return conn is not None and conn.report is not None

    def _preempt(self, decision: Preempt, *, now: dt.datetime, already: set[str]) -> list[WorkloadUpdate]:
        """Evict the decision's victims that are not being evicted yet (one victim set per preemptor: while they give
        their quota back they stay the first candidates, so later passes pick the same set instead of more)."""
        updates = []
        for victim in decision.victims:
            raw = self._workload_view.get(victim.key)
            if raw is None or victim.key in already or is_true(raw, "Evicted"):
                continue
            already.add(victim.key)
            self._writes.preempting(victim.key, cluster_queue=decision.workload.cluster_queue, reason=victim.reason)
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
