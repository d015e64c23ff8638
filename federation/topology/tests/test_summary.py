import json

from federation.api.labels import HOSTNAME_LABEL
from federation.topology import CapacitySummary, PodSetRequest, summarize, summary_fits
from federation.topology.tests.helpers import BLOCK, RACK, grid, request, snapshot_of


def test_summary_has_whole_topology_blocks_and_racks_and_round_trips() -> None:
    snapshot = snapshot_of(grid(2, 3, 4))
    summary = summarize(snapshot)
    assert len(summary.domains) == 1 + 2 + 6
    whole = summary.domains[0]
    assert whole.values == ()
    assert whole.nodes == 24
    assert whole.free["cpu"] == 24 * 8000
    assert CapacitySummary.from_dict(json.loads(json.dumps(summary.to_dict()))) == summary


def test_feasibility_by_level() -> None:
    snapshot = snapshot_of(grid(2, 2, 2))  # 8 pods per host, 16 per rack, 32 per block
    summary = summarize(snapshot)
    assert summary_fits(summary, request(16, required=RACK)).fits
    assert not summary_fits(summary, request(17, required=RACK)).fits
    assert summary_fits(summary, request(32, required=BLOCK)).fits
    assert summary_fits(summary, request(64, preferred=RACK)).fits
    assert not summary_fits(summary, request(65, preferred=RACK)).fits
    assert summary_fits(summary, request(8, required=HOSTNAME_LABEL)).fits
    assert not summary_fits(summary, request(9, required=HOSTNAME_LABEL)).fits
    assert not summary_fits(summary, PodSetRequest(count=1, requests={"nvidia.com/gpu": 1})).fits
    assert summary_fits(summary, request(16, required=BLOCK, slice_level=HOSTNAME_LABEL, slice_size=8)).fits
    assert not summary_fits(summary, request(18, required=RACK, slice_level=HOSTNAME_LABEL, slice_size=6)).fits


def test_overcommitted_node_lends_nothing() -> None:
    snapshot = snapshot_of(grid(1, 1, 2))
    snapshot.bind_pod("hog", "b0-r0-h0", {"cpu": 12000})
    summary = summarize(snapshot)
    assert summary.domains[0].free["cpu"] == 8000
    assert summary_fits(summary, request(8, required=RACK)).fits


def test_a_cordoned_node_has_no_room_for_placements_or_the_summary_and_keeps_its_pods_usage() -> None:
    import dataclasses

    from federation.topology import Placement, place

    nodes = grid(1, 2, 1)  # two racks of one 8-cpu host each
    snapshot = snapshot_of(nodes)
    snapshot.bind_pod("running", "b0-r0-h0", {"cpu": 2000})
    cordoned = dataclasses.replace(nodes[1], unschedulable=True)
    snapshot.upsert_node(cordoned)
    summary = summarize(snapshot)
    assert summary.domains[0].free["cpu"] == 6000  # the cordoned rack's 8 cpu are no capacity, as in Kueue
    assert not summary_fits(summary, request(7, required=RACK)).fits
    placement = place(snapshot, request(6, required=RACK))
    assert isinstance(placement, Placement)
    assert {entry.values[1] for entry in placement.node_pods} == {"b0-r0"}
    assert snapshot.node_by_hostname("b0-r1-h0") is not None  # assignments that use it still resolve
    # A pod bound to a cordoned node keeps counting; uncordoned, the node has only the rest free.
    snapshot.bind_pod("late", "b0-r1-h0", {"cpu": 3000})
    assert summarize(snapshot).domains[0].free["cpu"] == 6000
    snapshot.upsert_node(nodes[1])
    assert summarize(snapshot).domains[0].free["cpu"] == 6000 + 5000
