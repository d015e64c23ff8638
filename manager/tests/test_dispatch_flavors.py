"""Dispatch against a worker ClusterQueue with several flavors: the check follows the worker's flavor assignment."""

from collections.abc import Mapping, Sequence

from federation.admission.model import PodSet, ResourceFlavorSpec
from manager.decisions.dispatch import (
    Dispatch,
    FlavorRoom,
    NoWorker,
    WorkerCapacity,
    WorkerState,
    choose_worker,
    refusal_key,
)

CPU = 1000
GI = 1024**3 * 1000


def flavor(name: str, *, cpu: int, memory: int | None = None, borrowable_cpu: int = 0) -> FlavorRoom:
    amounts = {"cpu": cpu * CPU} | ({"memory": memory * GI} if memory is not None else {})
    return FlavorRoom(
        name=name,
        nominal=dict(amounts),
        free=dict(amounts),
        borrowable={"cpu": borrowable_cpu * CPU} if borrowable_cpu else {},
    )


def worker(name: str, flavors: Sequence[FlavorRoom], **capacity: object) -> WorkerState:
    return WorkerState(
        name=name,
        usable=True,
        capacity=WorkerCapacity(
            local_queues={("ns", "lq"): "cq"},
            cluster_queues={"cq": list(flavors)},
            **capacity,  # type: ignore[arg-type]
        ),
    )


def choose(
    workers: Sequence[WorkerState],
    usage: Sequence[tuple[str, Mapping[str, int]]],
    placement: Sequence[PodSet] = (),
) -> Dispatch | NoWorker:
    requests: dict[str, int] = {}
    for _, amounts in usage:
        for resource, amount in amounts.items():
            requests[resource] = requests.get(resource, 0) + amount
    return choose_worker(
        namespace="ns",
        queue_name="lq",
        requests=requests,
        workers=workers,
        placement=placement,
        pod_set_usage=usage,
    )


SPLIT = [flavor("cpu-rich", cpu=4, memory=1), flavor("memory-rich", cpu=1, memory=16)]


def test_a_group_whose_flavors_each_lack_one_resource_takes_no_workload_needing_both_and_says_so() -> None:
    refused = choose([worker("w1", SPLIT)], [("main", {"cpu": 2 * CPU, "memory": 2 * GI})])
    assert isinstance(refused, NoWorker)
    assert refused.message == (
        "no worker can take it: w1: ClusterQueue cq: no one flavor has room for pod set main's 2 cpu, 2Gi memory "
        "together (cpu-rich has 4 cpu, 1Gi memory; memory-rich has 1 cpu, 16Gi memory)"
    )
    fits = choose([worker("w1", SPLIT), worker("w2", [flavor("both", cpu=4, memory=4)])], [("main", {"cpu": 2 * CPU})])
    assert fits == Dispatch("w1", "cq", False), "what one flavor of the group holds still goes there"


def test_two_pod_sets_may_take_two_flavors_but_not_more_than_one_flavor_holds() -> None:
    two = [flavor("a", cpu=4), flavor("b", cpu=4)]
    usage = [("driver", {"cpu": 3 * CPU}), ("workers", {"cpu": 3 * CPU})]
    assert choose([worker("w1", two)], usage) == Dispatch("w1", "cq", False)
    too_big = choose([worker("w1", two)], [("main", {"cpu": 6 * CPU})])
    assert isinstance(too_big, NoWorker)
    assert too_big.message == (
        "no worker can take it: w1: insufficient cpu in ClusterQueue cq: requested 6, free 4"
        ", more than its nominal quota of 4"
    )


def test_one_flavor_reads_as_before_the_whole_request_against_its_room() -> None:
    one = [flavor("only", cpu=4)]
    refused = choose([worker("w1", one)], [("driver", {"cpu": 3 * CPU}), ("workers", {"cpu": 2 * CPU})])
    assert isinstance(refused, NoWorker)
    assert refused.message == (
        "no worker can take it: w1: insufficient cpu in ClusterQueue cq: requested 5, free 4"
        ", more than its nominal quota of 4"
    )


def test_a_flavor_that_fits_without_borrowing_is_taken_before_an_earlier_one_that_must_borrow() -> None:
    flavors = [flavor("first", cpu=1, borrowable_cpu=8), flavor("second", cpu=4)]
    assert choose([worker("w1", flavors)], [("main", {"cpu": 2 * CPU})]) == Dispatch("w1", "cq", False)
    assert choose([worker("w1", flavors)], [("main", {"cpu": 6 * CPU})]) == Dispatch("w1", "cq", True)


def test_a_pod_set_takes_only_a_flavor_its_nodes_allow_even_when_another_has_room() -> None:
    pool = {"pool": "a"}
    flavors = [flavor("pool-a", cpu=1), flavor("pool-b", cpu=8)]
    nodes = {
        "pool-a": ResourceFlavorSpec("pool-a", node_labels=pool),
        "pool-b": ResourceFlavorSpec("pool-b", node_labels={"pool": "b"}),
    }
    pinned = PodSet(name="main", count=1, requests={"cpu": 2 * CPU}, node_selector=pool)
    pinned_b = PodSet(name="main", count=1, requests={"cpu": 2 * CPU}, node_selector={"pool": "b"})
    target = [worker("w1", flavors, flavor_nodes=nodes)]
    refused = choose(target, [("main", {"cpu": 2 * CPU})], placement=[pinned])
    assert isinstance(refused, NoWorker)
    assert refused.message == (
        "no worker can take it: w1: insufficient cpu in ClusterQueue cq: requested 2, free 1"
        ", more than its nominal quota of 1"
    )
    assert choose(target, [("main", {"cpu": 2 * CPU})], placement=[pinned_b]) == Dispatch("w1", "cq", False)


def test_the_refusal_key_tells_apart_workloads_split_differently_over_pod_sets() -> None:
    whole = refusal_key(namespace="ns", queue_name="lq", requests={"cpu": 6 * CPU})
    split = refusal_key(
        namespace="ns",
        queue_name="lq",
        requests={"cpu": 6 * CPU},
        pod_set_usage=[("a", {"cpu": 3 * CPU}), ("b", {"cpu": 3 * CPU})],
    )
    assert whole != split
    assert whole == refusal_key(
        namespace="ns", queue_name="lq", requests={"cpu": 6 * CPU}, pod_set_usage=[("main", {"cpu": 6 * CPU})]
    ), "one pod set is keyed by its requests alone"


def test_a_pod_set_whose_nodes_rule_out_every_flavor_of_one_group_is_refused_for_that() -> None:
    cpu = [flavor("cpu-a", cpu=8)]
    gpus = FlavorRoom(name="gpu-b", nominal={"nvidia.com/gpu": 8 * CPU}, free={"nvidia.com/gpu": 8 * CPU})
    nodes = {"cpu-a": ResourceFlavorSpec("cpu-a"), "gpu-b": ResourceFlavorSpec("gpu-b", node_labels={"pool": "b"})}
    pinned = PodSet(name="main", count=1, requests={}, node_selector={"pool": "a"})
    refused = choose(
        [worker("w1", [*cpu, gpus], flavor_nodes=nodes)],
        [("main", {"cpu": CPU, "nvidia.com/gpu": CPU})],
        placement=[pinned],
    )
    assert isinstance(refused, NoWorker)
    assert refused.message == (
        "no worker can take it: w1: ClusterQueue cq: pod set main: no flavor with its nvidia.com/gpu can take it by "
        "its nodes"
    )
