"""The manager's scheduling pass in memory at scale: 100 workers' capacity reports and 100,000 pending Workloads.

``GlobalScheduler.schedule_once`` runs unchanged on in-memory stores (what its watch caches hold) with an API that
answers every write at once, so what is timed is kfed's own work per pass: building the quota state, Kueue's
admission cycles, choosing a worker per admission from the parsed reports, and the status patches it computes.
Shape: ``WORKERS`` workers, each reporting one ClusterQueue with the quota of ``NODES`` nodes of 16 cpu;
``QUEUES`` manager ClusterQueues (quota ``ADMIT_PER_QUEUE`` one-cpu Workloads each) sharing ``PENDING`` pending
one-cpu Workloads. The first pass admits ``QUEUES * ADMIT_PER_QUEUE`` and marks the rest Pending (as the
scheduler runs it: passes that stop deciding after ``manager.scheduler.DECIDE_SECONDS``, each going on from the one
before, until one reaches every Workload); the later passes are the steady state of a long backlog (nothing
changed, nothing to write). Then the realistic steady state: ``FINISHES`` times, one admitted Workload finishes
(its ClusterQueue has room for one more) and a pass runs, which admits the next one of that queue and dispatches it.
Then ``HEARTBEATS`` times, one worker publishes its report again with the same figures (an agent's heartbeat) and a
pass runs. Last, ``GROWTHS`` times, one worker reports the room of one node more (a node added, or Jobs finished
there) and passes run until one is not cut short. Printed: seconds per pass (first, p50/p99 of the later ones,
p50/p99 of the passes after one Workload finished and after a heartbeat, the passes after each report of more
room), microseconds per dispatch decision (choosing a worker) in the first pass and after a finish, Python's full
(generation-2) garbage collections during the passes, the time kfed-manager's visibility server takes to answer one
ClusterQueue's and one LocalQueue's pending workloads from these stores, peak RSS.

Once the stores are filled (what the manager's caches hold at their first sync) the bench calls the very helper
kfed-manager calls there, ``federation.gc_freeze.freeze_after_first_sync``, so the figures are what ships.

Environment: ``KFED_SCHED_WORKERS`` (100), ``KFED_SCHED_NODES`` (1000), ``KFED_SCHED_PENDING`` (100000),
``KFED_SCHED_QUEUES`` (100), ``KFED_SCHED_ADMIT`` (100), ``KFED_SCHED_PASSES`` (5), ``KFED_SCHED_FINISHES`` (20),
``KFED_SCHED_HEARTBEATS`` (20), ``KFED_SCHED_GROWTHS`` (3), ``KFED_SCHED_GC_FREEZE`` (1; 0 leaves the collector
as it was before kfed froze the caches, for comparison). With ``KFED_SCHED_NODES=1 KFED_SCHED_ADMIT=1000
KFED_SCHED_FINISHES=0`` the workers' room runs out instead of the manager's quota: 1,600 dispatched and 98,400
Workloads no worker has room for (a finish frees manager quota only, so it dispatches nothing there; a report of
more room wakes them all).
"""

from __future__ import annotations

import datetime as dt
import gc
import logging
import os
import resource
import time
from dataclasses import dataclass, fields
from types import SimpleNamespace
from typing import Any, cast

import anyio
import anyio.lowlevel
import structlog

from e2e.bench.compare_bench import percentile
from e2e.queues import job_manifest, multikueue_check_objects
from e2e.rig.controllers import ADMISSION_CHECK, MULTIKUEUE_CONFIG
from federation.gc_freeze import freeze_after_first_sync
from federation.kube.api import KubeApi
from federation.kube.overlay import WriteOverlay
from federation.kube.resources import WORKLOADS
from federation.kube.store import Store
from federation.obs.metrics import Metrics
from federation.workload_from_job import Priority, workload_for_job
from manager import scheduler as scheduler_module
from manager.config import ManagerConfig
from manager.decisions.capacity_view import parse_report
from manager.decisions.ledger import InFlightLedger
from manager.decisions.visibility import DEFAULT_LIMIT, PendingRequest, pending_summary
from manager.scheduler import DECIDE_SECONDS, GlobalScheduler, SchedulerCaches

FLAVOR = "default-flavor"
ACTIVE = {"type": "Active", "status": "True", "reason": "Active"}
"""The condition kfed-manager gives the MultiKueue AdmissionCheck once its workers are connected."""
NAMESPACE = "team"


def _env(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


class _Api:
    """Answers every write at once with the whole written object, as the apiserver does; the write lands in the
    store of its kind, as its watch event would (the scheduler lays its own writes over its caches)."""

    def __init__(self, caches: dict[str, _Cache]) -> None:
        self.writes = 0
        self.caches = caches
        """Cache per resource plural (workloads, clusterqueues, localqueues)."""

    async def patch_status(self, resource: Any, name: str, body: dict[str, Any], **kw: Any) -> dict[str, Any]:
        return await self.patch(resource, name, body, **kw)

    async def patch(
        self, resource: Any, name: str, body: dict[str, Any], *, namespace: str | None = None, **_: Any
    ) -> dict[str, Any]:
        await anyio.lowlevel.checkpoint()  # a real write waits for its answer: the writer lets other tasks run
        self.writes += 1
        cache = self.caches.get(resource.plural)
        current = cache.store.get(f"{namespace}/{name}" if namespace else name) if cache is not None else None
        if cache is None or current is None:
            meta = {**body.get("metadata", {}), "name": name, "resourceVersion": "2"}
            if namespace:
                meta["namespace"] = namespace
            return {**body, "metadata": meta}
        status = {**(current.get("status") or {})}
        for field, value in (body.get("status") or {}).items():
            if value is None:
                status.pop(field, None)
            else:
                status[field] = value
        meta = {
            **current["metadata"],
            **{k: v for k, v in (body.get("metadata") or {}).items() if k != "resourceVersion"},
            "resourceVersion": str(int(current["metadata"].get("resourceVersion") or 1) + 1),
        }
        written = {**current, "metadata": meta, "status": status}
        cache.upsert(written)
        return written

    async def replace_status(self, resource: Any, body: dict[str, Any], **_: Any) -> dict[str, Any]:
        self.writes += 1
        return body


class _Pool:
    """Every worker connected, with the report it was given."""

    def __init__(self, connections: dict[str, Any]) -> None:
        self.connections = connections
        self.problems: dict[str, str] = {}

    def unusable_reason(self, name: str, now: dt.datetime) -> str:
        return ""


class _Events:
    def emit(self, *args: Any, **kwargs: Any) -> None:
        pass


class _Cache:
    """What a watch cache holds once it has synced, filled at once; :meth:`upsert` is a watch event (the handlers
    see it)."""

    def __init__(self, objects: list[dict[str, Any]]) -> None:
        self.store = Store()
        for obj in objects:
            self.store.upsert(obj)
        self.synced = True
        self._handlers: list[Any] = []

    def add_handler(self, handler: Any) -> None:
        self._handlers.append(handler)

    def upsert(self, obj: dict[str, Any]) -> None:
        old = self.store.upsert(obj)
        for handler in self._handlers:
            handler("MODIFIED" if old is not None else "ADDED", obj, old)


def capacity_report(worker: str, *, nodes: int, queues: int, now: dt.datetime) -> Any:
    """A worker's parsed report: one ClusterQueue ``cq`` with the room of ``nodes`` free nodes, fed by ``queues``
    LocalQueues, observed at ``now``."""
    cpu = 16 * nodes
    return parse_report(
        {
            "status": {
                "observedTime": now.isoformat().replace("+00:00", "Z"),
                "generation": 1,
                "clusterQueues": [
                    {
                        "name": "cq",
                        "flavors": [
                            {
                                "name": FLAVOR,
                                "resources": [
                                    {"name": "cpu", "nominal": str(cpu), "free": str(cpu)},
                                    {"name": "memory", "nominal": f"{64 * nodes}Gi", "free": f"{64 * nodes}Gi"},
                                ],
                            }
                        ],
                    }
                ],
                "localQueues": [
                    {"namespace": NAMESPACE, "name": f"lq-{q}", "clusterQueue": "cq"} for q in range(queues)
                ],
            }
        }
    )


@dataclass(frozen=True)
class Harness:
    """A scheduler on in-memory stores, and the parts a bench or a test drives directly."""

    scheduler: GlobalScheduler
    api: _Api
    caches: SchedulerCaches
    workloads: _Cache
    """The Workloads' store: its ``upsert`` is a watch event."""
    workload_view: WriteOverlay
    ledger: InFlightLedger
    connections: dict[str, Any]
    """Worker name → its connection: setting ``report`` and ``current`` on one is a report it published."""


def run_passes(scheduler: GlobalScheduler, count: int) -> None:
    """``count`` scheduling passes one after the other, each with its status writes answered (for tests)."""

    async def run() -> None:
        async with anyio.create_task_group() as tg:
            scheduler._task_group = tg
            for _ in range(count):
                await scheduler.schedule_once()
                await scheduler.writes_answered()
            tg.cancel_scope.cancel()

    anyio.run(run)


def recorded_workload_writes(api: Any) -> list[tuple[str, dict[str, Any]]]:
    """The Workload status writes ``api`` (a harness's) answers from now on, as (name, body), in order."""
    calls: list[tuple[str, dict[str, Any]]] = []
    write = api.patch_status

    async def recording(resource: Any, name: str, body: dict[str, Any], **kw: Any) -> dict[str, Any]:
        if resource is WORKLOADS:
            calls.append((name, body))
        written: dict[str, Any] = await write(resource, name, body, **kw)
        return written

    api.patch_status = recording
    return calls


def build(
    *, workers: int, nodes: int, pending: int, queues: int, admit: int, decide_seconds: float = DECIDE_SECONDS
) -> Harness:
    now = dt.datetime.now(dt.UTC)
    names = [f"worker-{i}" for i in range(1, workers + 1)]
    cluster_queues = [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": f"cq-{q}", "generation": 1, "resourceVersion": "1"},
            "spec": {
                "namespaceSelector": {},
                "admissionChecksStrategy": {"admissionChecks": [{"name": ADMISSION_CHECK}]},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory"],
                        "flavors": [
                            {
                                "name": FLAVOR,
                                "resources": [
                                    {"name": "cpu", "nominalQuota": str(admit)},
                                    {"name": "memory", "nominalQuota": f"{admit}Gi"},
                                ],
                            }
                        ],
                    }
                ],
            },
        }
        for q in range(queues)
    ]
    local_queues = [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": f"lq-{q}", "namespace": NAMESPACE, "resourceVersion": "1"},
            "spec": {"clusterQueue": f"cq-{q}"},
        }
        for q in range(queues)
    ]
    created = (now - dt.timedelta(minutes=5)).isoformat().replace("+00:00", "Z")
    workloads = []
    for i in range(pending):
        job = job_manifest(f"j-{i}", namespace=NAMESPACE, cpu="1", memory="1Gi", queue=f"lq-{i % queues}")
        job["metadata"].update(uid=f"uid-{i}", creationTimestamp=created)
        wl = workload_for_job(job, priority=Priority(None, 0))
        wl["metadata"].update(uid=f"wl-{i}", resourceVersion="1", generation=1, creationTimestamp=created)
        workloads.append(wl)
    connections = {
        name: SimpleNamespace(report=report, current=report, connected=True)
        for name in names
        if (report := capacity_report(name, nodes=nodes, queues=queues, now=now))
    }
    workload_cache = _Cache(workloads)
    workload_view = WriteOverlay(workload_cache.store)
    workload_cache.add_handler(workload_view.observe)  # as the manager's runtime does
    cluster_queue_cache, local_queue_cache = _Cache(cluster_queues), _Cache(local_queues)
    api = _Api(
        {
            "workloads": workload_cache,
            "clusterqueues": cluster_queue_cache,
            "localqueues": local_queue_cache,
        }
    )
    multikueue_config, check = multikueue_check_objects(MULTIKUEUE_CONFIG, names, check_name=ADMISSION_CHECK)
    caches = SchedulerCaches(
        flavors=_Cache(
            [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": FLAVOR}}]
        ),
        cluster_queues=cluster_queue_cache,
        cohorts=_Cache([]),
        local_queues=local_queue_cache,
        namespaces=_Cache([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}]),
        limit_ranges=_Cache([]),
        runtime_classes=_Cache([]),
        workloads=workload_cache,
        admission_checks=_Cache([{**check, "status": {"conditions": [ACTIVE]}}]),
        multikueue_configs=_Cache([multikueue_config]),
    )
    ledger = InFlightLedger()
    scheduler = GlobalScheduler(
        api=cast(KubeApi, api),  # answers the writes a pass makes, in memory
        config=ManagerConfig(),
        caches=caches,
        workload_view=workload_view,
        workers=_Pool(connections),
        ledger=ledger,
        metrics=Metrics(),
        events=_Events(),
        decide_seconds=decide_seconds,
    )
    return Harness(scheduler, api, caches, workload_cache, workload_view, ledger, connections)


def _finish(cache: _Cache, key: str) -> None:
    """The Workload ``key`` finished: ``Finished=True`` lands in the cache, as its watch event would."""
    current = cache.store.get(key)
    assert current is not None, key
    status = {**(current.get("status") or {})}
    conditions = [c for c in status.get("conditions") or () if c.get("type") != "Finished"]
    stamp = dt.datetime.now(dt.UTC).isoformat().replace("+00:00", "Z")
    conditions.append(
        {"type": "Finished", "status": "True", "reason": "Succeeded", "message": "", "lastTransitionTime": stamp}
    )
    meta = {**current["metadata"], "resourceVersion": str(int(current["metadata"]["resourceVersion"]) + 1)}
    cache.upsert({**current, "metadata": meta, "status": {**status, "conditions": conditions}})


class _FullCollections:
    """Counts Python's full (generation-2) collections and the seconds they take, through ``gc.callbacks``."""

    def __init__(self) -> None:
        self.count = 0
        self.seconds = 0.0
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.count += 1
            self.seconds += time.perf_counter() - self._started


def _time_visibility(harness: Harness, rounds: int = 20) -> None:
    """Kueue's visibility API on the same stores (``manager.decisions.visibility``, what kfed-manager's visibility
    server runs per request on the event loop): the first 1000 pending workloads of one ClusterQueue and of one
    LocalQueue, among every Workload the stores hold."""
    caches = harness.caches
    for request in (
        PendingRequest("clusterqueues", "cq-0", "", DEFAULT_LIMIT, 0),
        PendingRequest("localqueues", "lq-0", NAMESPACE, DEFAULT_LIMIT, 0),
    ):
        seconds = []
        reply = None
        for _ in range(rounds):
            before = time.perf_counter()
            reply = pending_summary(
                request,
                workloads=caches.workloads.store,
                local_queues=caches.local_queues.store,
                cluster_queues=caches.cluster_queues.store,
            )
            seconds.append(time.perf_counter() - before)
        items = len(reply.body["items"]) if reply is not None else 0
        print(
            f"  visibility API, {request.resource}/{request.name}/pendingworkloads ({items} items of "
            f"{len(caches.workloads.store)} Workloads): p50 {1e3 * (percentile(seconds, 50) or 0):.0f} ms, "
            f"p99 {1e3 * (percentile(seconds, 99) or 0):.0f} ms"
        )


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    workers = _env("KFED_SCHED_WORKERS", 100)
    nodes = _env("KFED_SCHED_NODES", 1000)
    pending = _env("KFED_SCHED_PENDING", 100_000)
    queues = _env("KFED_SCHED_QUEUES", 100)
    admit = _env("KFED_SCHED_ADMIT", 100)
    passes = _env("KFED_SCHED_PASSES", 5)
    finishes = _env("KFED_SCHED_FINISHES", 20)
    heartbeats = _env("KFED_SCHED_HEARTBEATS", 20)
    growths = _env("KFED_SCHED_GROWTHS", 3)
    started = time.perf_counter()
    harness = build(workers=workers, nodes=nodes, pending=pending, queues=queues, admit=admit)
    scheduler, api, ledger = harness.scheduler, harness.api, harness.ledger
    print(
        f"{workers} workers x {nodes} nodes, {pending} pending Workloads in {queues} ClusterQueues "
        f"(built in {time.perf_counter() - started:.1f}s, RSS {_rss_mb():.0f} MB)"
    )
    if _env("KFED_SCHED_GC_FREEZE", 1):
        before = time.perf_counter()
        caches = [getattr(harness.caches, field.name) for field in fields(harness.caches)]
        freeze_after_first_sync("schedpass bench", caches)  # what kfed-manager does once its caches have synced
        print(f"  froze {gc.get_freeze_count()} objects out of the collector in {time.perf_counter() - before:.2f}s")
    else:
        print("  collector not frozen (KFED_SCHED_GC_FREEZE=0)")
    full_collections = _FullCollections()
    gc.callbacks.append(full_collections)
    times: list[float] = []
    writes: list[int] = []
    decision_times: list[float] = []
    choose = scheduler_module.__dict__["choose_worker"]

    def timed_choose(**kwargs: Any) -> Any:
        before = time.perf_counter()
        try:
            return choose(**kwargs)
        finally:
            decision_times.append(time.perf_counter() - before)

    scheduler_module.__dict__["choose_worker"] = timed_choose  # what the pass calls for each decision
    after_finish: list[float] = []
    finish_decisions: list[float] = []
    admitted_after_finish = 0
    cpu_seconds: list[float] = []
    """CPU seconds of this process per pass, in pass order: on a shared machine the wall times follow the load."""
    dispatched: list[int] = []
    first_pass_decisions: list[float] = []
    after_heartbeat: list[float] = []
    heartbeat_decisions = 0
    after_growth: list[tuple[float, float, int, int, int]] = []
    """Per report of more room: seconds and CPU-s until the passes it started stop being cut short, those passes,
    worker choices, dispatches."""

    first_slices: list[float] = []
    """The passes that decided the backlog: each stops after ``DECIDE_SECONDS`` and the next goes on."""
    loop_hold = 0.0
    """The longest the event loop kept a 5 ms timer waiting past its time while the backlog was decided: what a
    lease renewal, a probe or a watch would have waited."""

    async def ticker() -> None:
        nonlocal loop_hold
        while True:
            before = time.perf_counter()
            await anyio.sleep(0.005)
            loop_hold = max(loop_hold, time.perf_counter() - before - 0.005)

    async def timed_pass() -> float:
        before, cpu_before = time.perf_counter(), time.process_time()
        await scheduler.schedule_once()
        await scheduler.writes_answered()  # its writes go on after the pass; here they are answered at once
        cpu_seconds.append(time.process_time() - cpu_before)
        return time.perf_counter() - before

    async def run() -> None:
        nonlocal admitted_after_finish, heartbeat_decisions
        async with anyio.create_task_group() as tg:
            scheduler._task_group = tg
            async with anyio.create_task_group() as ticking:
                ticking.start_soon(ticker)
                while True:  # deciding the backlog, as the scheduler's loop runs them: until a pass is not cut short
                    cut = scheduler.cut_passes
                    first_slices.append(await timed_pass())
                    if scheduler.cut_passes == cut:
                        break
                ticking.cancel_scope.cancel()
            times.append(sum(first_slices))
            writes.append(api.writes)
            dispatched.append(len(ledger))
            first_cpu_seconds = sum(cpu_seconds)
            cpu_seconds[:] = [first_cpu_seconds]
            for _ in range(passes - 1):
                times.append(await timed_pass())
                writes.append(api.writes)
                dispatched.append(len(ledger))
            first_pass_decisions.extend(decision_times)
            cache = harness.workloads
            held = [key for key in ledger._entries]
            for index in range(finishes):
                _finish(cache, held[(index * 7919) % len(held)])
                first_decision = len(decision_times)
                in_flight = len(ledger)
                after_finish.append(await timed_pass())
                finish_decisions.extend(decision_times[first_decision:])
                admitted_after_finish += len(ledger) - in_flight
            names = sorted(harness.connections)
            for index in range(heartbeats):
                name = names[index % len(names)]
                later = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=30 * (index + 1))
                report = capacity_report(name, nodes=nodes, queues=queues, now=later)
                harness.connections[name].report = harness.connections[name].current = report
                first_decision = len(decision_times)
                after_heartbeat.append(await timed_pass())
                heartbeat_decisions += len(decision_times) - first_decision
            grown = dict.fromkeys(names, nodes)
            for index in range(growths):
                name = names[index % len(names)]
                grown[name] += 1  # a node more: a report with the room of one node more than before
                later = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=30 * (heartbeats + index + 1))
                report = capacity_report(name, nodes=grown[name], queues=queues, now=later)
                harness.connections[name].report = harness.connections[name].current = report
                first_decision, in_flight, first_cpu = len(decision_times), len(ledger), len(cpu_seconds)
                seconds, slices = 0.0, 0
                while True:  # the backlog it wakes is decided in passes cut short, as the scheduler's loop runs them
                    cut = scheduler.cut_passes
                    seconds += await timed_pass()
                    slices += 1
                    if scheduler.cut_passes == cut:
                        break
                cpu = sum(cpu_seconds[first_cpu:])
                del cpu_seconds[first_cpu:]
                choices = len(decision_times) - first_decision
                after_growth.append((seconds, cpu, slices, choices, len(ledger) - in_flight))
            tg.cancel_scope.cancel()

    try:
        anyio.run(run)
    finally:
        scheduler_module.__dict__["choose_worker"] = choose
        gc.callbacks.remove(full_collections)
    decisions = dispatched[0]
    writes_first = writes[0]
    first, rest = times[0], times[1:]
    first_cpu, rest_cpu = cpu_seconds[0], cpu_seconds[1 : len(times)]
    finish_cpu = cpu_seconds[len(times) : len(times) + len(after_finish)]
    heartbeat_cpu = cpu_seconds[len(times) + len(after_finish) : len(times) + len(after_finish) + len(after_heartbeat)]
    print(
        f"  first pass {first:.2f}s ({first_cpu:.2f} CPU-s): {decisions} dispatch decisions, "
        f"{writes_first} status writes computed, in {len(first_slices)} passes that stop deciding after "
        f"{DECIDE_SECONDS}s; meanwhile other tasks waited at most {loop_hold:.2f}s for the event loop"
    )
    if decisions:
        print(f"    {1e6 * first / decisions:.0f} us per dispatch decision (whole pass / decisions)")
    if first_pass_decisions:
        p50, p99 = percentile(first_pass_decisions, 50) or 0.0, percentile(first_pass_decisions, 99) or 0.0
        print(
            f"    choosing a worker: p50 {1e6 * p50:.0f} us, p99 {1e6 * p99:.0f} us per decision "
            f"({len(first_pass_decisions)} decisions over {workers} workers)"
        )
    if rest:
        print(
            f"  later passes (backlog, nothing new): p50 {percentile(rest, 50):.2f}s, p99 {percentile(rest, 99):.2f}s"
            f" (CPU-s p50 {percentile(rest_cpu, 50):.2f}, p99 {percentile(rest_cpu, 99):.2f})"
        )
    if after_finish:
        print(
            f"  pass after one Workload finished (steady state): p50 {percentile(after_finish, 50):.3f}s, "
            f"p99 {percentile(after_finish, 99):.3f}s over {len(after_finish)} finishes, "
            f"{admitted_after_finish} dispatched (CPU-s p50 {percentile(finish_cpu, 50):.3f}, "
            f"p99 {percentile(finish_cpu, 99):.3f})"
        )
    if finish_decisions:
        p50, p99 = percentile(finish_decisions, 50) or 0.0, percentile(finish_decisions, 99) or 0.0
        print(f"    choosing a worker after a finish: p50 {1e6 * p50:.0f} us, p99 {1e6 * p99:.0f} us per decision")
    if after_heartbeat:
        print(
            f"  pass after one worker's heartbeat (a report with the same figures): p50 "
            f"{percentile(after_heartbeat, 50):.3f}s, p99 {percentile(after_heartbeat, 99):.3f}s over "
            f"{len(after_heartbeat)} heartbeats, {heartbeat_decisions} worker choices (CPU-s p50 "
            f"{percentile(heartbeat_cpu, 50):.3f}, p99 {percentile(heartbeat_cpu, 99):.3f})"
        )
    for seconds, cpu, slices, choices, sent in after_growth:
        print(
            f"  passes after one worker reported room for one node more: {seconds:.3f}s ({cpu:.3f} CPU-s) in "
            f"{slices} passes, {choices} worker choices, {sent} dispatched"
        )
    print(
        f"  full garbage collections during the passes: {full_collections.count}, "
        f"{full_collections.seconds:.2f}s in all (thresholds {gc.get_threshold()})"
    )
    _time_visibility(harness)
    print(f"  peak RSS {_rss_mb():.0f} MB")
    if admitted_after_finish < len(after_finish):
        # each finish frees the quota of exactly one Workload of a queue with a backlog: a pass that dispatched
        # nothing timed a scheduler that did not see the finish (or did not see its queues), not the steady state
        raise SystemExit(
            f"schedpass: {len(after_finish)} Workloads finished but only {admitted_after_finish} were dispatched after"
        )
