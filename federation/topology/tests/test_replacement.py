from federation.topology import (
    Placement,
    PodSetRequest,
    Replacement,
    ReplacementImpossible,
    TopologySnapshot,
    encode_placement,
    place,
    replace_failed_nodes,
)
from federation.topology.tests.helpers import BLOCK, RACK, grid, request, snapshot_of


def admitted(snapshot: TopologySnapshot, req: PodSetRequest) -> Placement:
    result = place(snapshot, req)
    assert isinstance(result, Placement), result
    snapshot.assume_placement("wl", result, req)
    return result


def test_several_failed_nodes_are_replaced_inside_the_required_rack() -> None:
    snapshot = snapshot_of(grid(1, 2, 6, cpu=4000))  # racks of 24 pods
    req = request(12, required=RACK)
    original = admitted(snapshot, req)
    rack = original.node_pods[0].values[1]
    failed = [entry.node for entry in original.node_pods[:2]]
    result = replace_failed_nodes(snapshot, req, encode_placement(original), failed)
    assert isinstance(result, Replacement), result
    assert {entry.values[1] for entry in result.placement.node_pods} == {rack}
    assert not {entry.node for entry in result.placement.node_pods} & set(failed)
    assert len(result.moves) == 8
    old = [entry.node for entry in original.node_pods for _ in range(entry.count)]
    for rank, host in enumerate(result.rank_hosts):
        if old[rank] not in failed:
            assert host == old[rank]
    assert result.placement.pod_count == 12


def test_replacement_impossible_when_required_rack_is_full() -> None:
    snapshot = snapshot_of(grid(1, 2, 2, cpu=4000))  # racks of 8
    req = request(8, required=RACK)
    original = admitted(snapshot, req)
    result = replace_failed_nodes(snapshot, req, encode_placement(original), [original.node_pods[0].node])
    assert isinstance(result, ReplacementImpossible)
    assert result.reason == "NodeFailures"


def test_deleted_node_counts_as_failed_and_nothing_failed_changes_nothing() -> None:
    snapshot = snapshot_of(grid(1, 1, 4, cpu=4000))
    req = request(4, required=RACK)
    original = admitted(snapshot, req)
    assignment = encode_placement(original)
    unchanged = replace_failed_nodes(snapshot, req, assignment, [])
    assert isinstance(unchanged, Replacement)
    assert unchanged.moves == ()
    snapshot.remove_node(original.node_pods[0].node)
    repaired = replace_failed_nodes(snapshot, req, assignment, [])
    assert isinstance(repaired, Replacement)
    assert len(repaired.moves) == 4


def test_slices_are_repaired_inside_their_own_rack() -> None:
    snapshot = snapshot_of(grid(1, 2, 8, cpu=2000))  # hosts of 2 pods, racks of 16
    snapshot.bind_pod("x", "b0-r0-h0", {"cpu": 2000})
    snapshot.bind_pod("y", "b0-r0-h1", {"cpu": 2000})  # b0-r0: room for 12 = 3 slices of 4
    req = request(24, required=BLOCK, slice_level=RACK, slice_size=4)
    original = admitted(snapshot, req)
    ranks_rack = [entry.values[1] for entry in original.node_pods for _ in range(entry.count)]
    assert ranks_rack.count("b0-r0") == 8
    assert ranks_rack.count("b0-r1") == 16
    in_r0 = [entry.node for entry in original.node_pods if entry.values[1] == "b0-r0"]
    result = replace_failed_nodes(snapshot, req, encode_placement(original), in_r0[:2])
    assert isinstance(result, Replacement), result
    assert len(result.moves) == 4
    for move in result.moves:
        new_node = snapshot.node_by_hostname(move.to_host)
        assert new_node is not None
        assert new_node.domain.values[1] == ranks_rack[move.rank]
    # b0-r1 is full: losing a node there cannot be repaired, though b0-r0 has room.
    in_r1 = [entry.node for entry in original.node_pods if entry.values[1] == "b0-r1"]
    assert isinstance(replace_failed_nodes(snapshot, req, encode_placement(original), in_r1[:1]), ReplacementImpossible)


def test_preferred_and_unconstrained_replacement_can_leave_the_domain() -> None:
    snapshot = snapshot_of(grid(2, 1, 2, cpu=2000))  # hosts of 2, racks (=blocks) of 4
    for mode in ({"preferred": RACK}, {"unconstrained": True}):
        fresh = snapshot_of(grid(2, 1, 2, cpu=2000))
        req = request(4, **mode)
        original = admitted(fresh, req)
        result = replace_failed_nodes(fresh, req, encode_placement(original), [original.node_pods[0].node])
        assert isinstance(result, Replacement), (mode, result)
        assert result.placement.pod_count == 4
    del snapshot
