import datetime as dt
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from federation.topology import PodSetRequest, TopologyRequest
from manager.decisions.dispatch import (
    Dispatch,
    DispatchPolicy,
    FlavorRoom,
    Headroom,
    NoWorker,
    WorkerCapacity,
    WorkerState,
    choose_worker,
    headroom,
    may_fit_more,
    refusal_key,
    refusal_message,
)
from manager.decisions.ledger import InFlightLedger

CPU = 1000  # milli-units per cpu


def worker(name: str, *, free_cpu: int, nominal_cpu: int = 8, borrowable: int = 0, **kw: object) -> WorkerState:
    capacity = WorkerCapacity(
        local_queues={("team-a", "lq"): "cq"},
        cluster_queues={
            "cq": [
                FlavorRoom(
                    name="default",
                    nominal={"cpu": nominal_cpu * CPU},
                    free={"cpu": free_cpu * CPU},
                    borrowable={"cpu": borrowable * CPU} if borrowable else {},
                )
            ]
        },
    )
    return WorkerState(name=name, usable=True, capacity=capacity, **kw)  # type: ignore[arg-type]


def choose(requests_cpu: int, workers: list[WorkerState]) -> Dispatch | NoWorker:
    return choose_worker(namespace="team-a", queue_name="lq", requests={"cpu": requests_cpu * CPU}, workers=workers)


def test_best_fit_prefers_the_tighter_worker() -> None:
    assert choose(2, [worker("big", free_cpu=8), worker("small", free_cpu=3)]) == Dispatch("small", "cq", False)


def test_a_full_worker_gets_nothing() -> None:
    assert choose(2, [worker("full", free_cpu=1), worker("roomy", free_cpu=4)]) == Dispatch("roomy", "cq", False)


def test_fitting_without_borrowing_beats_a_tighter_fit_by_borrowing() -> None:
    workers = [worker("borrow", free_cpu=1, borrowable=4), worker("nominal", free_cpu=6)]
    assert choose(2, workers) == Dispatch("nominal", "cq", False)
    assert choose(2, [worker("borrow", free_cpu=1, borrowable=4)]) == Dispatch("borrow", "cq", True)


def test_a_refusal_names_each_reason_once_after_the_workers_that_gave_it() -> None:
    full = "insufficient cpu in ClusterQueue cq: requested 1, free 0"
    refusals = [(f"worker-{i}", full) for i in range(1, 6)] + [("worker-6", "not connected")]
    assert refusal_message(refusals) == (
        f"no worker can take it: worker-1, worker-2, worker-3 and 2 more: {full}; worker-6: not connected"
    )
    assert refusal_message([("w1", "not connected")]) == "no worker can take it: w1: not connected"


def test_a_refusal_message_stays_short_whatever_the_number_of_workers() -> None:
    """A condition message holds at most 32,768 characters; one line per worker passed that at about 470 workers."""
    workers = [worker(f"worker-{i}", free_cpu=i % 12) for i in range(2000)]
    refused = choose(16, workers)
    assert isinstance(refused, NoWorker)
    assert len(refused.message) < 2000, len(refused.message)
    assert refused.message.startswith(
        "no worker can take it: worker-0, worker-12, worker-24 and 164 more: insufficient"
    )
    assert refused.message.endswith("; 664 more workers for other reasons"), refused.message[-200:]
    long_reason = "topology: " + "x" * 5000
    assert len(refusal_message([("w", long_reason)])) < 500


def test_config_order_breaks_ties() -> None:
    assert choose(1, [worker("w1", free_cpu=4), worker("w2", free_cpu=4)]).worker == "w1"  # type: ignore[union-attr]


def test_no_room_explains_every_worker() -> None:
    result = choose(5, [worker("w1", free_cpu=4), WorkerState("w2", usable=False, unusable_reason="not connected")])
    assert isinstance(result, NoWorker)
    assert "w1: insufficient cpu in ClusterQueue cq: requested 5, free 4" in result.message
    assert "w2: not connected" in result.message


def test_a_worker_whose_local_queue_feeds_a_missing_cluster_queue_says_so() -> None:
    dangling = WorkerState(
        name="w1", usable=True, capacity=WorkerCapacity(local_queues={("team-a", "lq"): "gone"}, cluster_queues={})
    )
    assert choose(1, [dangling]) == NoWorker(
        "no worker can take it: w1: its LocalQueue feeds ClusterQueue gone, which does not exist there"
    )


def test_a_request_above_a_workers_nominal_quota_says_so() -> None:
    """Not now (free quota) and not on its own quota ever (only by borrowing): the message tells them apart."""
    now = choose(5, [worker("w1", free_cpu=4, nominal_cpu=8)])
    never = choose(9, [worker("w1", free_cpu=4, nominal_cpu=8)])
    assert now == NoWorker("no worker can take it: w1: insufficient cpu in ClusterQueue cq: requested 5, free 4")
    assert never == NoWorker(
        "no worker can take it: w1: insufficient cpu in ClusterQueue cq: requested 9, free 4, more than its nominal "
        "quota of 8"
    )


def test_in_flight_quota_counts_until_a_later_report() -> None:
    ledger = InFlightLedger()
    ledger.record("ns/a", worker="w1", cluster_queue="cq", requests={"cpu": 3 * CPU})
    w1 = worker("w1", free_cpu=4, in_flight=ledger.in_flight("w1"))
    assert isinstance(choose(2, [w1]), NoWorker)
    t0 = dt.datetime(2026, 11, 21, 10, 0, tzinfo=dt.UTC)
    ledger.reserved("ns/a", at=t0)
    ledger.report_arrived("w1", observed_at=t0)  # computed in the same instant: may not include it yet
    assert "ns/a" in ledger
    ledger.report_arrived("w1", observed_at=t0 + dt.timedelta(seconds=1))
    assert "ns/a" not in ledger
    assert ledger.in_flight("w1") == {}


def test_reports_parse_into_rooms_and_routes() -> None:
    from manager.decisions.capacity_view import parse_report

    report = {
        "status": {
            "generation": 3,
            "observedTime": "2026-11-21T10:00:00.250000Z",
            "clusterQueues": [
                {
                    "name": "cq",
                    "flavors": [
                        {
                            "name": "default",
                            "resources": [{"name": "cpu", "nominal": "8", "usage": "6500m", "free": "1500m"}],
                        }
                    ],
                }
            ],
            "localQueues": [{"namespace": "team-a", "name": "lq", "clusterQueue": "cq"}],
        }
    }
    parsed = parse_report(report)
    assert parsed is not None
    assert parsed.generation == 3
    assert parsed.observed_at.microsecond == 250000
    assert parsed.capacity.local_queues == {("team-a", "lq"): "cq"}
    assert parsed.capacity.cluster_queues["cq"][0].free == {"cpu": 1500}
    assert parsed.flavors is None, "an agent that does not list its flavors gets the Job copy suspended"
    assert parse_report({"status": {}}) is None


def test_a_report_listing_its_flavors_gives_what_they_add_to_pods() -> None:
    from federation.pod_injection import FlavorInjection
    from manager.decisions.capacity_view import parse_report

    toleration = {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}
    status = {
        "observedTime": "2026-11-21T10:00:00Z",
        "flavors": [{"name": "gpu", "nodeLabels": {"pool": "gpu"}, "tolerations": [toleration]}, {"name": "plain"}],
    }
    parsed = parse_report({"status": status})
    assert parsed is not None
    assert parsed.flavors == {
        "gpu": FlavorInjection({"pool": "gpu"}, (toleration,)),
        "plain": FlavorInjection({}, ()),
    }
    empty = parse_report({"status": {**status, "flavors": []}})
    assert empty is not None
    assert empty.flavors == {}


def test_a_worker_the_workload_was_withdrawn_from_comes_last_but_is_still_used() -> None:
    workers = [worker("tight", free_cpu=3), worker("roomy", free_cpu=8)]
    best = choose_worker(namespace="team-a", queue_name="lq", requests={"cpu": 2 * CPU}, workers=workers)
    assert isinstance(best, Dispatch)
    assert best.worker == "tight"
    again = choose_worker(
        namespace="team-a", queue_name="lq", requests={"cpu": 2 * CPU}, workers=workers, avoid={"tight"}
    )
    assert isinstance(again, Dispatch)
    assert again.worker == "roomy"
    only = choose_worker(
        namespace="team-a", queue_name="lq", requests={"cpu": 2 * CPU}, workers=workers[:1], avoid={"tight"}
    )
    assert isinstance(only, Dispatch)
    assert only.worker == "tight"


def dispatch_burst(count: int, *, policy: DispatchPolicy) -> list[str]:
    """``count`` one-cpu workloads dispatched in one pass to two equal workers, the ledger counting each."""
    ledger = InFlightLedger()
    chosen = []
    for i in range(count):
        workers = [worker(n, free_cpu=16, nominal_cpu=16, in_flight=ledger.in_flight(n)) for n in ("w1", "w2")]
        result = choose_worker(
            namespace="team-a", queue_name="lq", requests={"cpu": CPU}, workers=workers, policy=policy
        )
        assert isinstance(result, Dispatch)
        ledger.record(f"ns/{i}", worker=result.worker, cluster_queue="cq", requests={"cpu": CPU})
        chosen.append(result.worker)
    return chosen


def test_balanced_spreads_a_burst_of_small_workloads_over_equally_good_workers() -> None:
    assert dispatch_burst(6, policy=DispatchPolicy.BALANCED) == ["w1", "w2"] * 3
    assert dispatch_burst(6, policy=DispatchPolicy.LEAST_ALLOCATED) == ["w1", "w2"] * 3


def test_best_fit_packs_the_same_burst_onto_the_first_worker() -> None:
    assert dispatch_burst(6, policy=DispatchPolicy.BEST_FIT) == ["w1"] * 6


def test_least_allocated_prefers_the_roomier_worker_but_only_where_it_fits() -> None:
    workers = [worker("tight", free_cpu=3), worker("roomy", free_cpu=7), worker("full", free_cpu=0)]
    pick = choose_worker(
        namespace="team-a",
        queue_name="lq",
        requests={"cpu": CPU},
        workers=workers,
        policy=DispatchPolicy.LEAST_ALLOCATED,
    )
    assert pick == Dispatch("roomy", "cq", False)
    too_big = choose_worker(
        namespace="team-a",
        queue_name="lq",
        requests={"cpu": 8 * CPU},
        workers=workers,
        policy=DispatchPolicy.LEAST_ALLOCATED,
    )
    assert isinstance(too_big, NoWorker)


def test_balanced_keeps_best_fit_for_large_workloads() -> None:
    workers = [worker("big-hole", free_cpu=8), worker("small-hole", free_cpu=5)]
    small = choose_worker(namespace="team-a", queue_name="lq", requests={"cpu": CPU}, workers=workers)
    large = choose_worker(namespace="team-a", queue_name="lq", requests={"cpu": 4 * CPU}, workers=workers)
    assert small == Dispatch("big-hole", "cq", False)
    assert large == Dispatch("small-hole", "cq", False)
    # the threshold is the caller's: with a higher one, the same request spreads
    spread = choose_worker(
        namespace="team-a", queue_name="lq", requests={"cpu": 4 * CPU}, workers=workers, large_share=0.75
    )
    assert spread == Dispatch("big-hole", "cq", False)


def test_withdrawn_and_borrowing_workers_still_come_last_when_spreading() -> None:
    workers = [worker("withdrawn", free_cpu=8), worker("borrow", free_cpu=0, borrowable=4), worker("ok", free_cpu=2)]
    pick = choose_worker(
        namespace="team-a",
        queue_name="lq",
        requests={"cpu": CPU},
        workers=workers,
        avoid={"withdrawn"},
        policy=DispatchPolicy.LEAST_ALLOCATED,
    )
    assert pick == Dispatch("ok", "cq", False)


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["record", "forget", "reserved", "report"]),
            st.integers(0, 5),
            st.sampled_from(["w1", "w2"]),
            st.sampled_from(["cq-a", "cq-b"]),
            st.integers(1, 4000),
        ),
        max_size=40,
    )
)
def test_ledger_totals_always_equal_the_sum_of_its_entries(ops: list[tuple[str, int, str, str, int]]) -> None:
    ledger = InFlightLedger()
    t0 = dt.datetime(2026, 11, 21, 10, 0, tzinfo=dt.UTC)
    for step, (op, key, name, queue, cpu) in enumerate(ops):
        at = t0 + dt.timedelta(seconds=step)
        if op == "record":
            ledger.record(f"ns/{key}", worker=name, cluster_queue=queue, requests={"cpu": cpu, "memory": 2 * cpu})
        elif op == "forget":
            ledger.forget(f"ns/{key}")
        elif op == "reserved":
            ledger.reserved(f"ns/{key}", at=at)
        else:
            ledger.report_arrived(name, observed_at=at)
        for worker_name in ("w1", "w2"):
            expected: dict[str, dict[str, int]] = {}
            for entry in ledger._entries.values():
                if entry.worker == worker_name:
                    totals = expected.setdefault(entry.cluster_queue, {})
                    for resource, amount in entry.requests.items():
                        totals[resource] = totals.get(resource, 0) + amount
            assert ledger.in_flight(worker_name) == expected


def test_a_job_requiring_a_rack_goes_only_to_a_worker_whose_summary_has_a_rack_with_room() -> None:
    from federation.topology import PodSetRequest, TopologyRequest, summarize
    from federation.topology.report import summary_entry, summary_from_entry
    from federation.topology.tests.helpers import RACK, grid, snapshot_of

    def tas_worker(name: str, hosts_per_rack: int) -> WorkerState:
        summary = summary_from_entry(
            summary_entry("default", "topo", summarize(snapshot_of(grid(1, 2, hosts_per_rack))))
        )
        state = worker(name, free_cpu=64, nominal_cpu=64)
        assert state.capacity is not None
        capacity = WorkerCapacity(state.capacity.local_queues, state.capacity.cluster_queues, {"default": summary})
        return WorkerState(name=name, usable=True, capacity=capacity)

    rack_job = [PodSetRequest(count=3, requests={"cpu": 8 * CPU}, topology=TopologyRequest(required=RACK))]
    small, big = tas_worker("small-racks", 2), tas_worker("big-racks", 4)
    result = choose_worker(
        namespace="team-a", queue_name="lq", requests={"cpu": 24 * CPU}, workers=[small, big], pod_sets=rack_job
    )
    assert result == Dispatch("big-racks", "cq", False)
    refused = choose_worker(
        namespace="team-a", queue_name="lq", requests={"cpu": 24 * CPU}, workers=[small], pod_sets=rack_job
    )
    assert isinstance(refused, NoWorker)
    expected = "ResourceFlavor default: any cloud.provider.com/topology-rack domain holds at most 2 of 3 pods"
    assert f"small-racks: topology: {expected}" in refused.message


def _headroom(free_cpu: int, *, borrowable: int = 0, in_flight: int = 0, queues: int = 1) -> Headroom:
    capacity = worker("w", free_cpu=free_cpu, borrowable=borrowable).capacity
    assert capacity is not None
    if queues > 1:
        capacity = WorkerCapacity(
            local_queues={**capacity.local_queues, ("team-b", "lq"): "cq"},
            cluster_queues=capacity.cluster_queues,
        )
    return headroom(capacity, {"cq": {"cpu": in_flight * CPU}} if in_flight else {})


def test_headroom_grows_with_more_room_or_a_new_local_queue_and_not_with_the_same_or_less() -> None:
    before = _headroom(4, in_flight=2)
    assert not may_fit_more(before, _headroom(4, in_flight=2)), "a heartbeat: the same figures"
    assert not may_fit_more(before, _headroom(2)), "the admissions in flight now in the report"
    assert not may_fit_more(before, _headroom(3, in_flight=2)), "less room"
    assert may_fit_more(before, _headroom(4, in_flight=1)), "quota in flight given back"
    assert may_fit_more(before, _headroom(5, in_flight=2)), "more free quota"
    assert may_fit_more(before, _headroom(4, borrowable=1, in_flight=2)), "more to borrow"
    assert may_fit_more(before, _headroom(4, in_flight=2, queues=2)), "a LocalQueue it did not have"


@given(
    before=st.tuples(st.integers(0, 8), st.integers(0, 4), st.integers(0, 8)),
    after=st.tuples(st.integers(0, 8), st.integers(0, 4), st.integers(0, 8)),
    request=st.integers(1, 10),
)
def test_a_worker_whose_headroom_did_not_grow_refuses_what_it_refused_before(
    before: tuple[int, int, int], after: tuple[int, int, int], request: int
) -> None:
    def state(free: int, borrowable: int, sent: int) -> WorkerState:
        ledger = InFlightLedger()
        if sent:
            ledger.record("team-a/sent", worker="w", cluster_queue="cq", requests={"cpu": sent * CPU})
        return worker("w", free_cpu=free, borrowable=borrowable, in_flight=ledger.in_flight("w"))

    old, new = state(*before), state(*after)
    assert old.capacity is not None
    assert new.capacity is not None
    if isinstance(choose(request, [old]), NoWorker) and not may_fit_more(
        headroom(old.capacity, old.in_flight), headroom(new.capacity, new.in_flight)
    ):
        assert isinstance(choose(request, [new]), NoWorker)


def test_workloads_of_one_refusal_key_ask_the_same_of_the_workers() -> None:
    def key(cpu: int, *, queue: str = "lq", namespace: str = "team-a", **requests: int) -> tuple[object, ...]:
        return refusal_key(namespace=namespace, queue_name=queue, requests={"cpu": cpu * CPU, **requests})

    assert key(1) == key(1, memory=0), "a zero request asks nothing"
    assert key(1) != key(2)
    assert key(1) != key(1, memory=1)
    assert key(1) != key(1, queue="other"), "another LocalQueue may feed another worker ClusterQueue"
    assert key(1) != key(1, namespace="team-b")
    rack = PodSetRequest(count=2, requests={"cpu": CPU}, topology=TopologyRequest(required="rack"))
    block = PodSetRequest(count=2, requests={"cpu": CPU}, topology=TopologyRequest(required="block"))
    anywhere = PodSetRequest(count=2, requests={"cpu": CPU})
    by_pod_sets = {
        name: refusal_key(namespace="team-a", queue_name="lq", requests={"cpu": 2 * CPU}, pod_sets=pod_sets)
        for name, pod_sets in (("rack", [rack]), ("block", [block]), ("anywhere", [anywhere]), ("none", []))
    }
    assert by_pod_sets["rack"] != by_pod_sets["block"]
    assert by_pod_sets["anywhere"] == by_pod_sets["none"], "only pod sets asking for a topology meet the summaries"


@given(
    rooms=st.lists(st.tuples(st.integers(0, 8), st.integers(0, 4)), min_size=1, max_size=4),
    dispatched=st.lists(st.tuples(st.integers(0, 3), st.integers(1, 4)), max_size=6),
    request=st.integers(1, 10),
)
def test_a_refusal_stands_while_only_the_quota_in_flight_grows(
    rooms: list[tuple[int, int]], dispatched: list[tuple[int, int]], request: int
) -> None:
    """What lets a pass refuse a refusal key once: within a pass the workers' reports stay and each dispatch only
    adds to the quota in flight, so what no worker had room for, none has room for later in the pass."""
    ledger = InFlightLedger()

    def workers() -> list[WorkerState]:
        return [
            worker(f"w{i}", free_cpu=free, borrowable=borrowable, in_flight=ledger.in_flight(f"w{i}"))
            for i, (free, borrowable) in enumerate(rooms)
        ]

    refused = choose(request, workers())
    for index, (target, cpu) in enumerate(dispatched):
        ledger.record(
            f"team-a/d{index}", worker=f"w{target % len(rooms)}", cluster_queue="cq", requests={"cpu": cpu * CPU}
        )
        if isinstance(refused, NoWorker):
            assert isinstance(choose(request, workers()), NoWorker)


def test_a_cluster_queue_its_agent_reports_inactive_gets_nothing_and_the_refusal_says_why() -> None:
    from manager.decisions.capacity_view import parse_report

    flavors = [{"name": "default", "resources": [{"name": "cpu", "nominal": "8", "usage": "0", "free": "8"}]}]

    def report(*, active: bool, reason: str | None = None) -> WorkerState:
        queue: dict[str, object] = {"name": "cq", "active": active, "flavors": flavors}
        if reason is not None:
            queue["inactiveReason"] = reason
        status = {
            "observedTime": "2026-11-21T10:00:00Z",
            "clusterQueues": [queue],
            "localQueues": [{"namespace": "team-a", "name": "lq", "clusterQueue": "cq"}],
        }
        parsed = parse_report({"status": status})
        assert parsed is not None
        return WorkerState(name="w1", usable=True, capacity=parsed.capacity)

    stopped = report(active=False, reason="ClusterQueue is stopped")
    assert choose(1, [stopped]) == NoWorker(
        "no worker can take it: w1: ClusterQueue cq is inactive: ClusterQueue is stopped"
    )
    unexplained = report(active=False)
    assert choose(1, [unexplained]) == NoWorker(
        "no worker can take it: w1: ClusterQueue cq is inactive: the worker's agent reports it inactive"
    )
    active = report(active=True)
    assert choose(1, [active]) == Dispatch("w1", "cq", False)
    assert stopped.capacity is not None
    assert active.capacity is not None
    assert may_fit_more(headroom(stopped.capacity, {}), headroom(active.capacity, {})), "restarted: look again"
    assert not may_fit_more(headroom(active.capacity, {}), headroom(stopped.capacity, {}))


def _reported_route(runtime_classes: list[dict[str, Any]] | None = None, **route_flags: object) -> WorkerState:
    """Worker w1 as its agent's report shows it: ClusterQueue cq with 8 cpu free, fed by LocalQueue team-a/lq whose
    route carries ``route_flags`` (``stopped``, ``namespaceNotSelected``, ``limitRange``); ``runtime_classes``: the
    report's ``runtimeClasses`` (None: an agent that does not report them)."""
    from manager.decisions.capacity_view import parse_report

    flavors = [{"name": "default", "resources": [{"name": "cpu", "nominal": "8", "usage": "0", "free": "8"}]}]
    status = {
        "observedTime": "2026-11-21T10:00:00Z",
        "clusterQueues": [{"name": "cq", "active": True, "flavors": flavors}],
        "localQueues": [{"namespace": "team-a", "name": "lq", "clusterQueue": "cq", **route_flags}],
    }
    if runtime_classes is not None:
        status["runtimeClasses"] = runtime_classes
    parsed = parse_report({"status": status})
    assert parsed is not None
    return WorkerState(name="w1", usable=True, capacity=parsed.capacity)


def test_a_local_queue_its_agent_reports_stopped_gets_nothing_until_it_runs_again() -> None:

    held, running = _reported_route(stopped=True), _reported_route()
    assert choose(1, [held]) == NoWorker("no worker can take it: w1: LocalQueue team-a/lq is stopped")
    assert choose(1, [running]) == Dispatch("w1", "cq", False)
    assert held.capacity is not None
    assert running.capacity is not None
    assert may_fit_more(headroom(held.capacity, {}), headroom(running.capacity, {})), "restarted: look again"
    assert not may_fit_more(headroom(running.capacity, {}), headroom(held.capacity, {}))


def test_a_local_queue_whose_cluster_queue_does_not_select_its_namespace_gets_nothing_until_it_does() -> None:

    excluded, selected = _reported_route(namespaceNotSelected=True), _reported_route()
    assert choose(1, [excluded]) == NoWorker(
        "no worker can take it: w1: ClusterQueue cq does not select namespace team-a (its namespaceSelector)"
    )
    assert choose(1, [selected]) == Dispatch("w1", "cq", False)
    assert excluded.capacity is not None
    assert selected.capacity is not None
    assert may_fit_more(headroom(excluded.capacity, {}), headroom(selected.capacity, {})), "selected now: look again"


def test_a_worker_whose_flavors_rule_out_the_pods_by_node_labels_or_taints_is_refused_with_the_reason() -> None:
    from federation.admission.model import NodeSelectorRequirement, PodSet, Toleration
    from manager.decisions.capacity_view import parse_report

    def report(name: str, pool: str, *, taint: bool = False) -> WorkerState:
        flavors = [{"name": "rf", "resources": [{"name": "cpu", "nominal": "8", "usage": "0", "free": "8"}]}]
        placement: dict[str, object] = {"name": "rf", "nodeLabels": {"pool": pool}}
        if taint:
            placement["nodeTaints"] = [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]
        status = {
            "observedTime": "2026-11-21T10:00:00Z",
            "clusterQueues": [{"name": "cq", "active": True, "flavors": flavors}],
            "localQueues": [{"namespace": "team-a", "name": "lq", "clusterQueue": "cq"}],
            "flavors": [placement],
        }
        parsed = parse_report({"status": status})
        assert parsed is not None
        return WorkerState(name=name, usable=True, capacity=parsed.capacity)

    def pick(*pod_sets: PodSet, workers: list[WorkerState]) -> Dispatch | NoWorker:
        return choose_worker(
            namespace="team-a", queue_name="lq", requests={"cpu": 1000}, workers=workers, placement=pod_sets
        )

    gpu, cpu = report("w1", "gpu"), report("w2", "cpu")
    wants_cpu = PodSet("main", 1, {"cpu": 1000}, node_selector={"pool": "cpu"})
    assert pick(wants_cpu, workers=[gpu, cpu]) == Dispatch("w2", "cq", False)
    assert pick(wants_cpu, workers=[gpu]) == NoWorker(
        "no worker can take it: w1: ClusterQueue cq: pod set main: flavor rf doesn't match node affinity"
    )
    affinity = PodSet(
        "main", 1, {"cpu": 1000}, required_affinity=((NodeSelectorRequirement("pool", "In", ("gpu", "tpu")),),)
    )
    assert pick(affinity, workers=[cpu, gpu]) == Dispatch("w1", "cq", False)
    other_key = PodSet("main", 1, {"cpu": 1000}, node_selector={"zone": "a"})  # a key no flavor sets: any flavor
    assert pick(other_key, workers=[gpu]) == Dispatch("w1", "cq", False)
    plain = PodSet("main", 1, {"cpu": 1000})
    assert pick(plain, workers=[gpu]) == Dispatch("w1", "cq", False)
    tainted = report("w3", "cpu", taint=True)
    assert pick(plain, workers=[tainted]) == NoWorker(
        "no worker can take it: w3: ClusterQueue cq: pod set main: untolerated taint dedicated=ml:NoSchedule in "
        "flavor rf"
    )
    tolerant = PodSet("main", 1, {"cpu": 1000}, tolerations=(Toleration(key="dedicated", operator="Exists"),))
    assert pick(tolerant, workers=[tainted]) == Dispatch("w3", "cq", False)
    key = {"namespace": "team-a", "queue_name": "lq", "requests": {"cpu": 1000}}
    assert refusal_key(**key, placement=(wants_cpu,)) != refusal_key(**key, placement=(other_key,))  # type: ignore[arg-type]
    assert refusal_key(**key, placement=(plain,)) != refusal_key(**key, placement=(tolerant,))  # type: ignore[arg-type]


def test_a_worker_whose_namespace_limit_range_would_refuse_the_pods_is_refused_with_the_reason() -> None:
    from federation.admission.api_workloads import ALL_RESOURCES
    from federation.limit_ranges import limit_range_entry, summarize
    from federation.tests.api_builders import workload
    from manager.decisions.worker_requests import as_run_there

    bounded = summarize([{"metadata": {"name": "lr"}, "spec": {"limits": [{"type": "Pod", "max": {"cpu": "1"}}]}}])
    assert bounded is not None
    limited, open_worker = _reported_route(limitRange=limit_range_entry(bounded)), _reported_route()
    assert limited.capacity is not None
    assert limited.capacity.limit_ranges == {("team-a", "lq"): bounded}
    raw = workload("big", cpu="2", namespace="team-a", queue="lq")
    check = as_run_there(raw, {"main": 1}, rules=ALL_RESOURCES)

    refused = choose_worker(
        namespace="team-a", queue_name="lq", requests={"cpu": 2 * CPU}, workers=[limited], as_run_there=check
    )
    assert refused == NoWorker(
        "no worker can take it: w1: namespace team-a: resources didn't satisfy LimitRange constraints: "
        'spec.podSets[0].template.spec: Invalid value: ["cpu"]: requests must not be above the limitRange max'
    )
    fits = choose_worker(
        namespace="team-a", queue_name="lq", requests={"cpu": 2 * CPU}, workers=[open_worker], as_run_there=check
    )
    assert fits == Dispatch("w1", "cq", False)
    assert open_worker.capacity is not None
    assert may_fit_more(headroom(limited.capacity, {}), headroom(open_worker.capacity, {})), "lifted: look again"
    assert not may_fit_more(headroom(limited.capacity, {}), headroom(limited.capacity, {}))


def test_each_worker_is_judged_by_the_requests_its_own_namespace_limit_ranges_give_the_pods() -> None:
    """The Job's containers ask for nothing: a worker whose namespace LimitRange defaults each to 4 cpu charges 4 cpu
    a pod (3 pods do not fit its 8 free cpu, 2 do, and 8 cpu go in flight there); a worker without one charges
    nothing; a default for a resource the worker's ClusterQueue lacks is named as the LimitRange's."""
    from federation.admission.api_workloads import ALL_RESOURCES
    from federation.limit_ranges import limit_range_entry, summarize
    from federation.tests.api_builders import workload
    from manager.decisions.worker_requests import as_run_there

    def limit_range(default_request: dict[str, str]) -> dict[str, dict[str, str]]:
        found = summarize(
            [
                {
                    "metadata": {"name": "lr"},
                    "spec": {"limits": [{"type": "Container", "defaultRequest": default_request}]},
                }
            ]
        )
        assert found is not None
        return limit_range_entry(found)

    four_cpu = _reported_route(limitRange=limit_range({"cpu": "4"}))
    scratch = _reported_route(limitRange=limit_range({"ephemeral-storage": "1Gi"}))
    plain = _reported_route()

    def pick(count: int, workers: list[WorkerState]) -> Dispatch | NoWorker:
        raw = workload("bare", count=count, namespace="team-a", queue="lq")
        raw["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"] = {}
        judge = as_run_there(raw, {"main": count}, rules=ALL_RESOURCES)
        return choose_worker(namespace="team-a", queue_name="lq", requests={}, workers=workers, as_run_there=judge)

    assert pick(3, [four_cpu]) == NoWorker(
        "no worker can take it: w1: insufficient cpu in ClusterQueue cq: requested 12, free 8, more than its nominal "
        "quota of 8 (the pods' requests with the LimitRange defaults of namespace team-a there)"
    )
    two = pick(2, [four_cpu])
    assert isinstance(two, Dispatch)
    assert dict(two.requests) == {"cpu": 8 * CPU}
    three_there = pick(3, [plain])
    assert isinstance(three_there, Dispatch)
    assert dict(three_there.requests) == {}
    assert pick(1, [scratch]) == NoWorker(
        "no worker can take it: w1: ClusterQueue cq has no quota for ephemeral-storage (the pods' requests with the "
        "LimitRange defaults of namespace team-a there)"
    )


def test_a_worker_charges_pods_and_leaves_out_what_the_manager_ignores_as_the_manager_does() -> None:
    from federation.admission.api_workloads import ResourceRules
    from federation.limit_ranges import summarize
    from federation.tests.api_builders import workload
    from manager.decisions.worker_requests import as_run_there

    limits = summarize(
        [
            {
                "metadata": {"name": "lr"},
                "spec": {"limits": [{"type": "Container", "defaultRequest": {"cpu": "1", "example.com/gpu": "1"}}]},
            }
        ]
    )
    raw = workload("bare", count=4, namespace="team-a", queue="lq")
    raw["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"] = {}
    judge = as_run_there(
        raw, {"main": 3}, rules=ResourceRules(ignore_undeclared=True), charged={"cpu", "pods"}, pods=True
    )
    there = judge(limits, None)
    assert not isinstance(there, str)
    assert there.requests == (("cpu", 3 * CPU), ("pods", 3 * CPU))
    assert there.usage == (("main", (("cpu", 3 * CPU), ("pods", 3 * CPU))),)
    assert judge(limits, None) is there, "one judgement per LimitRange summary"


def test_a_workers_tas_summary_is_checked_with_the_pods_its_namespace_limit_ranges_make() -> None:
    """Three pods that ask for nothing and require one rack of 16 cpu: where the worker's LimitRange gives each
    6 cpu, no rack holds them, and the worker gets no copy (its placement would hold it); without it, they fit."""
    import dataclasses

    from federation.admission.api_workloads import ALL_RESOURCES
    from federation.limit_ranges import summarize
    from federation.tests.api_builders import workload
    from federation.topology import summarize as summarize_topology
    from federation.topology.report import summary_entry, summary_from_entry
    from federation.topology.tests.helpers import RACK, grid, snapshot_of
    from manager.decisions.worker_requests import as_run_there

    limits = summarize(
        [{"metadata": {"name": "lr"}, "spec": {"limits": [{"type": "Container", "defaultRequest": {"cpu": "6"}}]}}]
    )
    assert limits is not None
    summary = summary_from_entry(summary_entry("default", "topo", summarize_topology(snapshot_of(grid(1, 2, 2)))))
    state = worker("w1", free_cpu=64, nominal_cpu=64)
    assert state.capacity is not None
    plain = dataclasses.replace(state.capacity, topologies={"default": summary})
    defaulted = dataclasses.replace(plain, limit_ranges={("team-a", "lq"): limits})
    raw = workload("racked", count=3, namespace="team-a", queue="lq")
    template = raw["spec"]["podSets"][0]["template"]
    template["spec"]["containers"][0]["resources"] = {}
    template["metadata"] = {"annotations": {"kueue.x-k8s.io/podset-required-topology": RACK}}

    def pick(capacity: WorkerCapacity) -> Dispatch | NoWorker:
        judge = as_run_there(raw, {"main": 3}, rules=ALL_RESOURCES, topology=True)
        return choose_worker(
            namespace="team-a",
            queue_name="lq",
            requests={},
            workers=[WorkerState(name="w1", usable=True, capacity=capacity)],
            as_run_there=judge,
        )

    assert pick(plain) == Dispatch("w1", "cq", False)
    refused = pick(defaulted)
    assert isinstance(refused, NoWorker)
    assert "domain holds at most 2 of 3 pods" in refused.message, refused.message


def test_a_workers_tas_summary_is_checked_with_the_runtime_class_overhead_of_the_pods() -> None:
    """Three pods of 4 cpu that require one rack of 16 cpu fit (12); with a RuntimeClass whose overhead adds 2 cpu
    to each pod (Kueue charges it, and the worker's placement adds it) they need 18, and the worker gets no copy."""
    import dataclasses

    from federation.podspec import runtime_overheads
    from federation.tests.api_builders import workload
    from federation.topology import summarize as summarize_topology
    from federation.topology.model import PodSetRequest
    from federation.topology.report import summary_entry, summary_from_entry
    from federation.topology.tests.helpers import RACK, grid, snapshot_of
    from manager.decisions.worker_requests import placement_requests

    summary = summary_from_entry(summary_entry("default", "topo", summarize_topology(snapshot_of(grid(1, 2, 2)))))
    state = worker("w1", free_cpu=64, nominal_cpu=64)
    assert state.capacity is not None
    capacity = dataclasses.replace(state.capacity, topologies={"default": summary})
    overheads = runtime_overheads(
        [{"metadata": {"name": "sandboxed"}, "handler": "h", "overhead": {"podFixed": {"cpu": "2"}}}]
    )
    raw = workload("racked", count=3, cpu="4", namespace="team-a", queue="lq")
    template = raw["spec"]["podSets"][0]["template"]
    template["metadata"] = {"annotations": {"kueue.x-k8s.io/podset-required-topology": RACK}}

    def pick(pod_sets: list[PodSetRequest]) -> Dispatch | NoWorker:
        return choose_worker(
            namespace="team-a",
            queue_name="lq",
            requests={"cpu": 12 * CPU},
            workers=[WorkerState(name="w1", usable=True, capacity=capacity)],
            pod_sets=pod_sets,
        )

    assert pick(placement_requests(raw, {"main": 3}, None, overheads)) == Dispatch("w1", "cq", False)
    template["spec"]["runtimeClassName"] = "sandboxed"
    refused = pick(placement_requests(raw, {"main": 3}, None, overheads))
    assert isinstance(refused, NoWorker)
    assert "domain holds at most 2 of 3 pods" in refused.message, refused.message
    assert pick(placement_requests(raw, {"main": 2}, None, overheads)) == Dispatch("w1", "cq", False), (
        "the admitted count of pods, not the spec's"
    )


def test_each_worker_is_judged_by_its_own_runtime_class_overheads() -> None:
    """The pods name RuntimeClass sandboxed, whose overhead on the manager is 1 cpu a pod: a worker that reports 3 cpu
    for it charges 4 cpu a pod (3 pods do not fit its 8 free cpu), one that reports none charges the 1 cpu the
    containers ask, one whose overhead is a resource its ClusterQueue lacks is named with that resource, and one that
    does not report its RuntimeClasses is judged by the manager's."""
    from federation.admission.api_workloads import ALL_RESOURCES
    from federation.podspec import runtime_overheads
    from federation.tests.api_builders import workload
    from manager.decisions.worker_requests import as_run_there, overheads_differ_somewhere

    here = runtime_overheads([{"metadata": {"name": "sandboxed"}, "overhead": {"podFixed": {"cpu": "1"}}}])
    heavy = _reported_route([{"name": "sandboxed", "overhead": {"cpu": "3"}}])
    bare = _reported_route([])
    scratch = _reported_route([{"name": "sandboxed", "overhead": {"ephemeral-storage": "1Gi"}}])
    silent = _reported_route()
    assert heavy.capacity is not None
    assert bare.capacity is not None
    assert silent.capacity is not None
    assert heavy.capacity.runtime_overheads == (("sandboxed", (("cpu", "3"),)),)
    assert bare.capacity.runtime_overheads == ()
    assert silent.capacity.runtime_overheads is None
    raw = workload("sandboxed", count=3, namespace="team-a", queue="lq")
    raw["spec"]["podSets"][0]["template"]["spec"]["runtimeClassName"] = "sandboxed"
    judge = as_run_there(raw, {"main": 3}, rules=ALL_RESOURCES, overheads=here)

    def pick(w: WorkerState) -> Dispatch | NoWorker:
        return choose_worker(
            namespace="team-a", queue_name="lq", requests={"cpu": 6 * CPU}, workers=[w], as_run_there=judge
        )

    assert pick(heavy) == NoWorker(
        "no worker can take it: w1: insufficient cpu in ClusterQueue cq: requested 12, free 8, more than its nominal "
        "quota of 8 (the pods' requests with the overhead of RuntimeClass sandboxed there)"
    )
    there = pick(bare)
    assert isinstance(there, Dispatch)
    assert dict(there.requests) == {"cpu": 3 * CPU}, "no overhead there: the containers' 1 cpu a pod"
    assert pick(scratch) == NoWorker(
        "no worker can take it: w1: ClusterQueue cq has no quota for ephemeral-storage (the pods' requests with the "
        "overhead of RuntimeClass sandboxed there)"
    )
    judged_as_here = pick(silent)
    assert isinstance(judged_as_here, Dispatch)
    assert dict(judged_as_here.requests) == {"cpu": 6 * CPU}, "the manager's overhead, 1 cpu a pod"
    reported = {heavy.capacity.runtime_overheads, silent.capacity.runtime_overheads}
    assert overheads_differ_somewhere(raw, here, reported)
    assert not overheads_differ_somewhere(raw, here, {None, (("sandboxed", (("cpu", "1000m"),)),)}), "same amount"
    plain = workload("plain", namespace="team-a", queue="lq")
    assert not overheads_differ_somewhere(plain, here, reported), "pods that name no RuntimeClass"
    assert may_fit_more(headroom(heavy.capacity, {}), headroom(bare.capacity, {})), "the overhead went: look again"
