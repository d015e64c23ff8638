"""Hypothesis properties of placement, replacement, encoding, incremental updates and summaries."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from federation.api.labels import HOSTNAME_LABEL
from federation.topology import (
    NodeSpec,
    Placement,
    PodSetRequest,
    Replacement,
    Taint,
    Toleration,
    TopologyAssignment,
    TopologyRequest,
    TopologySnapshot,
    decode_assignment,
    encode_placement,
    place,
    replace_failed_nodes,
    summarize,
    summary_fits,
)
from federation.topology.encoding import encode_domains
from federation.topology.taints import selector_matches, taints_tolerated
from federation.topology.tests.helpers import BLOCK, LEVELS, RACK

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def nodes(draw: st.DrawFn) -> list[NodeSpec]:
    specs = []
    for b in range(draw(st.integers(1, 3))):
        for r in range(draw(st.integers(1, 3))):
            for h in range(draw(st.integers(1, 4))):
                name = f"b{b}-r{r}-h{h}"
                allocatable = {"cpu": draw(st.sampled_from([1000, 2000, 4000, 8000])), "pods": draw(st.integers(1, 8))}
                if draw(st.booleans()):
                    allocatable["nvidia.com/gpu"] = 4
                taints = (Taint("dedicated", "NoSchedule", "x"),) if draw(st.integers(0, 5)) == 0 else ()
                labels = {BLOCK: f"b{b}", RACK: f"b{b}-r{r}", HOSTNAME_LABEL: name}
                if draw(st.booleans()):
                    labels["pool"] = "a"
                specs.append(NodeSpec(name=name, labels=labels, allocatable=allocatable, taints=taints))
    return specs


@st.composite
def requests(draw: st.DrawFn) -> PodSetRequest:
    mode = draw(st.sampled_from(["required", "preferred", "unconstrained"]))
    level = draw(st.sampled_from(LEVELS))
    slice_level, slice_size = None, None
    count = draw(st.integers(1, 16))
    if mode != "unconstrained" and draw(st.booleans()):
        slice_level = draw(st.sampled_from(LEVELS[LEVELS.index(level) :]))
        slice_size = draw(st.sampled_from([size for size in (1, 2, 3, 4) if count % size == 0]))
    topology = TopologyRequest(
        required=level if mode == "required" else None,
        preferred=level if mode == "preferred" else None,
        unconstrained=mode == "unconstrained",
        slice_level=slice_level,
        slice_size=slice_size,
    )
    requested = {"cpu": draw(st.sampled_from([250, 500, 1000, 2000]))}
    if draw(st.integers(0, 3)) == 0:
        requested["nvidia.com/gpu"] = draw(st.integers(1, 2))
    return PodSetRequest(
        count=count,
        requests=requested,
        topology=topology,
        node_selector={"pool": "a"} if draw(st.integers(0, 3)) == 0 else {},
        tolerations=(Toleration(key="dedicated", operator="Exists"),) if draw(st.booleans()) else (),
    )


@st.composite
def loaded_snapshots(draw: st.DrawFn) -> TopologySnapshot:
    specs = draw(nodes())
    snapshot = TopologySnapshot(LEVELS)
    for spec in specs:
        snapshot.upsert_node(spec)
    for index in range(draw(st.integers(0, 6))):
        target = draw(st.sampled_from(specs))
        snapshot.bind_pod(f"pre-{index}", target.name, {"cpu": draw(st.sampled_from([500, 1000, 3000]))})
    return snapshot


def check_valid(snapshot: TopologySnapshot, req: PodSetRequest, placement: Placement) -> None:
    per_pod = req.per_pod_usage()
    assert placement.pod_count == req.count
    for node_name, pods in placement.pods_per_node().items():
        state = snapshot.node(node_name)
        assert state is not None
        assert selector_matches(req.node_selector, state.spec.labels)
        assert taints_tolerated(state.spec.taints, req.tolerations)
        for resource, amount in per_pod.items():
            assert pods * amount <= state.free.get(resource, 0), (node_name, resource)
    topology = req.topology
    if topology.required is not None:
        depth = LEVELS.index(topology.required)
        assert len({entry.values[: depth + 1] for entry in placement.node_pods}) == 1
    if topology.slice_level is not None and topology.slice_size:
        depth = LEVELS.index(topology.slice_level)
        ranks = [entry.values[: depth + 1] for entry in placement.node_pods for _ in range(entry.count)]
        for start in range(0, len(ranks), topology.slice_size):
            assert len(set(ranks[start : start + topology.slice_size])) == 1


@FAST
@given(loaded_snapshots(), requests())
def test_placements_are_valid_and_summary_never_rejects_them(snapshot: TopologySnapshot, req: PodSetRequest) -> None:
    result = place(snapshot, req)
    if isinstance(result, Placement):
        check_valid(snapshot, req, result)
        verdict = summary_fits(summarize(snapshot), req)
        assert verdict.fits, verdict.message
        assert decode_assignment(encode_placement(result)) == [
            ((entry.values[-1],), entry.count) for entry in result.node_pods
        ]


@FAST
@given(loaded_snapshots(), st.lists(requests(), min_size=2, max_size=5))
def test_assumed_placements_never_overcommit(snapshot: TopologySnapshot, reqs: list[PodSetRequest]) -> None:
    touched: set[tuple[str, str]] = set()
    for index, req in enumerate(reqs):
        result = place(snapshot, req)
        if isinstance(result, Placement):
            check_valid(snapshot, req, result)
            snapshot.assume_placement(f"wl-{index}", result, req)
            touched.update((node, resource) for node in result.pods_per_node() for resource in req.per_pod_usage())
    for node, resource in touched:
        assert snapshot.node_free(node)[resource] >= 0, (node, resource)


@FAST
@given(loaded_snapshots(), requests(), st.data())
def test_replacement_moves_only_affected_pods(
    snapshot: TopologySnapshot, req: PodSetRequest, data: st.DataObject
) -> None:
    original = place(snapshot, req)
    if not isinstance(original, Placement):
        return
    snapshot.assume_placement("wl", original, req)
    used = sorted(original.pods_per_node())
    failed = data.draw(st.lists(st.sampled_from(used), unique=True, max_size=len(used)))
    result = replace_failed_nodes(snapshot, req, encode_placement(original), failed)
    if not isinstance(result, Replacement):
        return
    old = [entry.node for entry in original.node_pods for _ in range(entry.count)]
    moved = {move.rank for move in result.moves}
    assert moved == {rank for rank, host in enumerate(old) if host in failed}
    for rank, host in enumerate(result.rank_hosts):
        assert (host == old[rank]) == (rank not in moved)
        assert host not in failed
    assert result.placement.pod_count == req.count
    per_pod = req.per_pod_usage()
    for node_name, pods in result.added.pods_per_node().items():
        state = snapshot.node(node_name)
        assert state is not None
        for resource, amount in per_pod.items():
            assert pods * amount <= state.free.get(resource, 0)
    topology = req.topology
    if topology.required is not None:
        depth = LEVELS.index(topology.required)
        assert len({entry.values[: depth + 1] for entry in result.placement.node_pods}) <= 1 or len(failed) == len(used)
    if topology.slice_level is not None and topology.slice_size:
        depth = LEVELS.index(topology.slice_level)
        by_host = {entry.values[-1]: entry.values for entry in result.placement.node_pods}
        ranks = [by_host[host][: depth + 1] for host in result.rank_hosts]
        for start in range(0, len(ranks), topology.slice_size):
            assert len(set(ranks[start : start + topology.slice_size])) == 1


label_values = st.text(alphabet="abc-12.", min_size=1, max_size=8)


@FAST
@given(st.lists(st.tuples(st.tuples(label_values, label_values), st.integers(1, 5)), min_size=1, max_size=30))
def test_encoding_round_trips(domains: list[tuple[tuple[str, str], int]]) -> None:
    assignment = encode_domains([BLOCK, RACK], domains)
    again = TopologyAssignment.from_dict(json.loads(json.dumps(assignment.to_dict())))
    assert decode_assignment(again) == domains


@FAST
@given(nodes(), st.data())
def test_incremental_updates_equal_a_rebuild(specs: list[NodeSpec], data: st.DataObject) -> None:
    live = TopologySnapshot(LEVELS)
    current: dict[str, NodeSpec] = {}
    pods: dict[str, tuple[str, dict[str, int]]] = {}
    probe = PodSetRequest(count=1, requests={"cpu": 500}, topology=TopologyRequest(unconstrained=True))
    for spec in specs:
        live.upsert_node(spec)
        current[spec.name] = spec
    for step in range(data.draw(st.integers(1, 25))):
        action = data.draw(st.sampled_from(["bind", "finish", "resize", "taint", "remove", "readd", "place"]))
        name = data.draw(st.sampled_from([spec.name for spec in specs]))
        if action == "bind":
            usage = {"cpu": data.draw(st.sampled_from([250, 1000, 4000]))}
            pods[f"p{step}"] = (name, usage)
            live.bind_pod(f"p{step}", name, usage)
        elif action == "finish" and pods:
            key = data.draw(st.sampled_from(sorted(pods)))
            del pods[key]
            live.finish_pod(key)
        elif action in {"resize", "taint"} and name in current:
            old = current[name]
            if action == "resize":
                changed = NodeSpec(old.name, old.labels, {**old.allocatable, "cpu": 3000}, old.taints)
            else:
                changed = NodeSpec(old.name, old.labels, old.allocatable, (Taint("dedicated", "NoSchedule", "y"),))
            current[name] = changed
            live.upsert_node(changed)
        elif action == "remove":
            current.pop(name, None)
            live.remove_node(name)
        elif action == "readd":
            spec = next(spec for spec in specs if spec.name == name)
            current[name] = spec
            live.upsert_node(spec)
        else:
            place(live, probe)
    rebuilt = TopologySnapshot(LEVELS)
    for spec in current.values():
        rebuilt.upsert_node(spec)
    for key, (node_name, usage) in pods.items():
        rebuilt.bind_pod(key, node_name, usage)
    assert live.fingerprint() == rebuilt.fingerprint()
    for count in (1, 3, 7):
        for topology in (TopologyRequest(required=RACK), TopologyRequest(unconstrained=True)):
            req = PodSetRequest(count=count, requests={"cpu": 500}, topology=topology)
            assert place(live, req) == place(rebuilt, req)
    assert summarize(live) == summarize(rebuilt)
