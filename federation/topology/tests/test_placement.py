from federation.api.labels import HOSTNAME_LABEL
from federation.topology import (
    Placement,
    PlacementFailure,
    PodSetRequest,
    Taint,
    Toleration,
    TopologyRequest,
    TopologySnapshot,
    place,
)
from federation.topology.tests.helpers import BLOCK, RACK, blocks_of, grid, node, racks_of, request, snapshot_of


def placed(snapshot: TopologySnapshot, req: PodSetRequest) -> Placement:
    result = place(snapshot, req)
    assert isinstance(result, Placement), result
    assert result.pod_count == req.count
    return result


def test_required_rack_picks_tightest_rack_that_fits() -> None:
    # Racks with room for 8 (b0-r0), 4 (b0-r1), 16 (b1-r0) pods of 1 cpu ... after some usage.
    snapshot = snapshot_of(grid(2, 2, 2))  # every host: 8 pods of 1000m
    snapshot.bind_pod("x1", "b0-r0-h0", {"cpu": 8000})
    snapshot.bind_pod("x2", "b0-r1-h0", {"cpu": 8000})
    snapshot.bind_pod("x3", "b0-r1-h1", {"cpu": 4000})
    result = placed(snapshot, request(4, required=RACK))
    assert racks_of(result) == {"b0-r1"}
    result = placed(snapshot, request(5, required=RACK))
    assert racks_of(result) == {"b0-r0"}


def test_required_fails_with_message_when_no_single_domain_fits() -> None:
    snapshot = snapshot_of(grid(1, 2, 2))
    result = place(snapshot, request(17, required=RACK))
    assert isinstance(result, PlacementFailure)
    assert "room for 16" in result.message


def test_required_block_uses_fewest_racks_then_tightest_last() -> None:
    snapshot = snapshot_of(grid(1, 3, 2))  # racks of 16 pods
    snapshot.bind_pod("x", "b0-r2-h0", {"cpu": 6000})  # b0-r2 has room for 10
    result = placed(snapshot, request(20, required=BLOCK))
    per_rack: dict[str, int] = {}
    for entry in result.node_pods:
        per_rack[entry.values[1]] = per_rack.get(entry.values[1], 0) + entry.count
    # 16 in the first roomiest rack, then the remaining 4 in the tightest rack that holds 4 (b0-r2, room 10).
    assert per_rack == {"b0-r0": 16, "b0-r2": 4}


def test_preferred_climbs_to_block_then_spreads_across_blocks() -> None:
    snapshot = snapshot_of(grid(2, 2, 2))  # racks 16, blocks 32
    assert len(racks_of(placed(snapshot, request(16, preferred=RACK)))) == 1
    climbed = placed(snapshot, request(20, preferred=RACK))
    assert len(blocks_of(climbed)) == 1
    spread = placed(snapshot, request(40, preferred=RACK))
    assert blocks_of(spread) == {"b0", "b1"}
    assert isinstance(place(snapshot, request(65, preferred=RACK)), PlacementFailure)


def test_unconstrained_fills_least_free_nodes_first() -> None:
    snapshot = snapshot_of(grid(1, 1, 3))
    snapshot.bind_pod("x", "b0-r0-h1", {"cpu": 6000})  # room 2
    snapshot.bind_pod("y", "b0-r0-h2", {"cpu": 3000})  # room 5
    result = placed(snapshot, request(4, unconstrained=True))
    assert [(entry.node, entry.count) for entry in result.node_pods] == [("b0-r0-h1", 2), ("b0-r0-h2", 2)]


def test_slices_each_within_one_rack_inside_the_required_block() -> None:
    snapshot = snapshot_of(grid(2, 3, 2, cpu=4000))  # racks of 8 pods
    snapshot.bind_pod("x", "b0-r0-h0", {"cpu": 2000})  # b0-r0 room 6: one slice of 4 only
    result = placed(snapshot, request(12, required=BLOCK, slice_level=RACK, slice_size=4))
    assert len(blocks_of(result)) == 1
    ranks = [entry.values[1] for entry in result.node_pods for _ in range(entry.count)]
    for start in range(0, 12, 4):
        assert len(set(ranks[start : start + 4])) == 1, ranks


def test_slice_count_must_divide() -> None:
    snapshot = snapshot_of(grid(1, 1, 2))
    result = place(snapshot, request(6, required=BLOCK, slice_level=RACK, slice_size=4))
    assert isinstance(result, PlacementFailure)


def test_selector_and_taints_filter_nodes() -> None:
    nodes = [
        node("a", "b0", "r0", extra_labels={"pool": "gpu"}),
        node("b", "b0", "r0", taints=(Taint("dedicated", "NoSchedule", "x"),), extra_labels={"pool": "gpu"}),
        node("c", "b0", "r0"),
    ]
    snapshot = snapshot_of(nodes)
    selected = PodSetRequest(count=8, requests={"cpu": 1000}, node_selector={"pool": "gpu"})
    assert [entry.node for entry in placed(snapshot, selected).node_pods] == ["a"]
    assert isinstance(
        place(snapshot, PodSetRequest(count=9, requests={"cpu": 1000}, node_selector={"pool": "gpu"})), PlacementFailure
    )
    tolerant = PodSetRequest(
        count=16,
        requests={"cpu": 1000},
        node_selector={"pool": "gpu"},
        tolerations=(Toleration(key="dedicated", operator="Exists"),),
    )
    assert {entry.node for entry in placed(snapshot, tolerant).node_pods} == {"a", "b"}


def test_extended_resources_and_pod_slots_limit_fit() -> None:
    snapshot = snapshot_of([node("g", "b0", "r0", gpu=8, pods=3), node("c", "b0", "r0")])
    gpu = PodSetRequest(count=2, requests={"nvidia.com/gpu": 4})
    assert [entry.node for entry in placed(snapshot, gpu).node_pods] == ["g"]
    assert isinstance(place(snapshot, PodSetRequest(count=3, requests={"nvidia.com/gpu": 3})), PlacementFailure)
    # pods allocatable 3 on g: only 3 pods of anything fit there.
    tiny = PodSetRequest(count=3, requests={"cpu": 1}, node_selector={HOSTNAME_LABEL: "g"})
    placed(snapshot, tiny)
    assert isinstance(
        place(snapshot, PodSetRequest(count=4, requests={"cpu": 1}, node_selector={HOSTNAME_LABEL: "g"})),
        PlacementFailure,
    )


def test_assumed_usage_prevents_double_booking_within_a_cycle() -> None:
    snapshot = snapshot_of(grid(1, 2, 1))  # two racks of 8
    first = request(8, required=RACK)
    one = placed(snapshot, first)
    snapshot.assume_placement("wl-1", one, first)
    two = placed(snapshot, first)
    assert racks_of(one) != racks_of(two)
    snapshot.assume_placement("wl-2", two, first)
    assert isinstance(place(snapshot, first), PlacementFailure)
    snapshot.forget("wl-1")
    assert racks_of(placed(snapshot, first)) == racks_of(one)


def test_topology_without_hostname_level_still_checks_per_node() -> None:
    snapshot = snapshot_of(grid(1, 1, 2, cpu=3000), levels=(BLOCK, RACK))
    # two nodes with 3 cpus each: 3 pods of 2 cpu do not fit though the rack has 6 cpus.
    assert isinstance(place(snapshot, request(3, cpu=2000, required=RACK)), PlacementFailure)
    result = placed(snapshot, request(2, cpu=2000, required=RACK))
    assert result.levels == (BLOCK, RACK)


def test_unknown_level_and_missing_labels() -> None:
    snapshot = TopologySnapshot(LEVELS_WITH_ZONE)
    snapshot.upsert_node(node("lonely", "b0", "r0"))  # no zone label: not part of the topology
    assert snapshot.node_names == []
    assert isinstance(place(snapshot, request(1, required="nope")), PlacementFailure)
    assert isinstance(
        place(snapshot, PodSetRequest(count=1, requests={}, topology=TopologyRequest())), PlacementFailure
    )


LEVELS_WITH_ZONE = ("zone", BLOCK, RACK, HOSTNAME_LABEL)
