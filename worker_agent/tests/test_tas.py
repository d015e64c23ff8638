"""The agent's pure TAS decisions: reading nodes and pods, ungating by count, judging failed nodes, repairing."""

from __future__ import annotations

import datetime as dt
from typing import Any

from federation.api.labels import HOSTNAME_LABEL
from federation.topology import (
    Placement,
    PodSetRequest,
    TopologyAssignment,
    TopologyRequest,
    decode_assignment,
    encode_placement,
    place,
)
from federation.topology.encoding import encode_domains
from federation.topology.model import Toleration
from federation.topology.tests.helpers import RACK, grid, snapshot_of
from worker_agent.decisions.tas_failures import (
    PodSetRepair,
    disruption_patch,
    dying_but_tracked,
    judge_node,
    plan_repair,
    untrack_patch,
)
from worker_agent.decisions.tas_objects import FlavorTopology, node_spec, pod_usage
from worker_agent.decisions.tas_ungate import PodView, plan_ungates
from worker_agent.tas_index import TopologyIndex

NOW = dt.datetime(2026, 1, 1, 0, 0, 30, tzinfo=dt.UTC)


def raw_node(name: str, *, ready: str = "True", since: str = "2026-01-01T00:00:00Z", taints: Any = None) -> Any:
    return {
        "metadata": {"name": name, "labels": {"type": "kwok", RACK: "r0", HOSTNAME_LABEL: name}},
        "spec": {"taints": taints or []},
        "status": {
            "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": ready, "lastTransitionTime": since}],
        },
    }


def test_node_and_pod_amounts_are_milli_units_and_whole_pods() -> None:
    spec = node_spec(raw_node("n1"))
    assert spec.allocatable == {"cpu": 8000, "memory": (32 << 30) * 1000, "pods": 110}
    pod = {"spec": {"nodeName": "n1", "containers": [{"resources": {"requests": {"cpu": "500m"}}}]}, "status": {}}
    assert pod_usage(pod) == ("n1", {"cpu": 500})
    assert pod_usage({**pod, "status": {"phase": "Succeeded"}}) is None
    assert pod_usage({"spec": {"containers": []}, "status": {}}) is None


def test_a_cordoned_node_has_nothing_free_in_the_index_and_its_room_back_uncordoned() -> None:
    node = raw_node("n1")
    assert not node_spec(node).unschedulable
    cordoned = {**node, "spec": {**node["spec"], "unschedulable": True}}
    assert node_spec(cordoned).unschedulable
    index = TopologyIndex()
    flavor = FlavorTopology(name="tas", topology="default", node_labels={"type": "kwok"}, tolerations=())
    index.configure([flavor], {"default": (RACK, HOSTNAME_LABEL)}, nodes=[node], pods=[])
    assert index.snapshots["tas"].node_free("n1")["cpu"] == 8000
    index.node_event("MODIFIED", cordoned)
    assert index.snapshots["tas"].node_names == ["n1"]  # still resolves for the assignments that use it
    assert index.snapshots["tas"].node_free("n1")["cpu"] == 0
    index.node_event("MODIFIED", node)
    assert index.snapshots["tas"].node_free("n1")["cpu"] == 8000


def test_ungater_never_pins_more_pods_to_a_domain_than_assigned() -> None:
    assignment = encode_domains([HOSTNAME_LABEL], [(("a",), 2), (("b",), 1)])
    pods = [
        PodView("ns/p0", gated=False, domain=("a",)),
        PodView("ns/p1", gated=True, domain=None),
        PodView("ns/p2", gated=True, domain=None),
        PodView("ns/p3", gated=True, domain=None),
    ]
    ungates = plan_ungates(assignment, pods)
    assert [(u.pod, dict(u.node_selector)) for u in ungates] == [
        ("ns/p1", {HOSTNAME_LABEL: "a"}),
        ("ns/p2", {HOSTNAME_LABEL: "b"}),
    ]


def test_ungater_puts_indexed_pods_on_their_rank_domain() -> None:
    assignment = encode_domains([HOSTNAME_LABEL], [(("a",), 1), (("b",), 1)])
    pods = [PodView("ns/x", gated=True, domain=None, index=1), PodView("ns/y", gated=True, domain=None, index=0)]
    assert {u.pod: u.node_selector[HOSTNAME_LABEL] for u in plan_ungates(assignment, pods)} == {
        "ns/x": "b",
        "ns/y": "a",
    }


def test_a_cordoned_node_fails_only_once_pods_assigned_to_it_are_not_on_it() -> None:
    from worker_agent.decisions.tas_failures import missing_pods, node_healthy, running_pods

    node = raw_node("n")
    cordoned = {**node, "spec": {**node["spec"], "unschedulable": True}}

    def pod(name: str, *, phase: str = "Running", deleting: bool = False, on: str = "n") -> Any:
        meta: dict[str, Any] = {"name": name}
        if deleting:
            meta["deletionTimestamp"] = "2026-01-01T00:00:20Z"
        return {"metadata": meta, "spec": {"nodeName": on}, "status": {"phase": phase}}

    # Running there, or finished there: nothing is missing, and cordoning alone moves nothing.
    assert missing_pods(2, "n", [pod("a"), pod("b", phase="Succeeded")]) == 0
    assert judge_node(cordoned, now=NOW, delay=30, tolerations=(), pods_terminating=False, pods_missing=0).failed == ""
    # Drained: one evicted (being deleted), one failed, a replacement pinned there but not bound.
    drained = [pod("a", deleting=True), pod("b", phase="Failed"), pod("c", phase="Pending", on="")]
    assert missing_pods(2, "n", drained) == 2
    verdict = judge_node(cordoned, now=NOW, delay=30, tolerations=(), pods_terminating=True, pods_missing=2)
    assert verdict.failed == "cordoned, and 2 of the workload's pods assigned to it are not on it (drained)"
    # Kueue's rule: cordoned, and no pod of the workload runs there any more -- the one there finished and the
    # next one (more completions than parallelism) is pinned there, not bound: it would wait for good.
    after = [pod("a", phase="Succeeded"), pod("c", phase="Pending", on="")]
    assert missing_pods(1, "n", after) == 0
    assert running_pods("n", after) == 0
    verdict = judge_node(cordoned, now=NOW, delay=30, tolerations=(), pods_terminating=False, pods_running=0)
    assert verdict.failed == "cordoned, and no pod of the workload runs on it (its next pods could not start there)"
    assert running_pods("n", [pod("a"), pod("b", phase="Succeeded")]) == 1
    assert not judge_node(cordoned, now=NOW, delay=30, tolerations=(), pods_terminating=False, pods_running=1).failed
    # An untolerated NoSchedule taint counts the same; one the pods tolerate does not; an untainted node never.
    taint = [{"key": "k", "value": "v", "effect": "NoSchedule"}]
    tainted = raw_node("n", taints=taint)
    verdict = judge_node(tainted, now=NOW, delay=30, tolerations=(), pods_terminating=False, pods_running=0)
    assert verdict.failed.startswith("untolerated taint k=v:NoSchedule, and no pod of the workload runs on it")
    tolerated = (Toleration(key="k", operator="Exists"),)
    assert not judge_node(
        tainted, now=NOW, delay=30, tolerations=tolerated, pods_terminating=False, pods_running=0
    ).failed
    assert not judge_node(node, now=NOW, delay=30, tolerations=(), pods_terminating=False, pods_running=0).failed
    assert not node_healthy(tainted, tolerations=())
    # An uncordoned node with pods missing (being created, say) is not failed for that.
    assert judge_node(node, now=NOW, delay=30, tolerations=(), pods_terminating=False, pods_missing=2).failed == ""
    # A cordoned node is not a recovered one; uncordoned, it is.
    assert not node_healthy(cordoned, tolerations=())
    assert node_healthy(node, tolerations=())


def test_a_node_fails_when_deleted_not_ready_past_the_delay_or_tainted() -> None:
    assert judge_node(None, now=NOW, delay=30, tolerations=(), pods_terminating=False).failed == "node deleted"
    young = judge_node(raw_node("n", ready="False"), now=NOW, delay=40, tolerations=(), pods_terminating=False)
    assert young.failed == ""
    assert young.recheck_at == dt.datetime(2026, 1, 1, 0, 0, 40, tzinfo=dt.UTC)
    old = judge_node(raw_node("n", ready="False"), now=NOW, delay=30, tolerations=(), pods_terminating=False)
    assert old.failed.startswith("NotReady for 30s")
    terminating = judge_node(raw_node("n", ready="False"), now=NOW, delay=40, tolerations=(), pods_terminating=True)
    assert terminating.failed == "NotReady with the workload's pods terminating"
    taint = [{"key": "k", "value": "v", "effect": "NoExecute"}]
    assert judge_node(raw_node("n", taints=taint), now=NOW, delay=30, tolerations=(), pods_terminating=False).failed
    tolerated = (Toleration(key="k", operator="Exists"),)
    verdict = judge_node(raw_node("n", taints=taint), now=NOW, delay=30, tolerations=tolerated, pods_terminating=False)
    assert verdict.failed == ""
    not_ready_taint = [{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}]
    verdict = judge_node(
        raw_node("n", taints=not_ready_taint), now=NOW, delay=30, tolerations=(), pods_terminating=False
    )
    assert verdict.failed == ""


def _workload(
    assignment: dict[str, Any], unhealthy: list[str] | None = None, annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    status: dict[str, Any] = {
        "admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "topologyAssignment": assignment}]},
        "conditions": [],
    }
    if unhealthy:
        status["unhealthyNodes"] = [{"name": name} for name in unhealthy]
    return {"metadata": {"name": "w", "namespace": "ns", "annotations": annotations or {}}, "status": status}


def test_three_failed_nodes_are_replaced_at_once_inside_the_required_rack() -> None:
    snapshot = snapshot_of(grid(1, 2, 8))
    request = PodSetRequest(count=10, requests={"cpu": 4000}, topology=TopologyRequest(required=RACK))
    placement = place(snapshot, request)
    assert isinstance(placement, Placement)
    snapshot.assume_placement("w", placement, request)
    assignment = encode_placement(placement)
    used = sorted(placement.pods_per_node())
    assert len(used) == 5
    failed = used[:3]
    repair = plan_repair(
        _workload(assignment.to_dict()),
        [PodSetRepair("main", request, snapshot, assignment, {name: "node deleted" for name in failed})],
        recovered=set(),
        pods_on_failed=["ns/p"],
        now=NOW,
    )
    assert repair is not None
    assert not repair.evicted
    assert repair.moved_pods == 6
    assert [n["name"] for n in repair.status["unhealthyNodes"]] == failed
    new = repair.status["admission"]["podSetAssignments"][0]["topologyAssignment"]
    hosts = [values[0] for values, _ in decode_assignment(TopologyAssignment.from_dict(new))]
    assert not set(hosts) & set(failed)
    assert set(used[3:]) <= set(hosts)
    assert {host.split("-h")[0] for host in hosts} == {used[0].split("-h")[0]}


def test_no_room_in_the_required_rack_evicts_with_node_failures_and_recovery_clears_unhealthy_nodes() -> None:
    snapshot = snapshot_of(grid(1, 2, 2))
    request = PodSetRequest(count=4, requests={"cpu": 4000}, topology=TopologyRequest(required=RACK))
    placement = place(snapshot, request)
    assert isinstance(placement, Placement)
    snapshot.assume_placement("w", placement, request)
    assignment = encode_placement(placement)
    failed = sorted(placement.pods_per_node())[0]
    repair = plan_repair(
        _workload(assignment.to_dict()),
        [PodSetRepair("main", request, snapshot, assignment, {failed: "node deleted"})],
        recovered=set(),
        pods_on_failed=[],
        now=NOW,
    )
    assert repair is not None
    assert repair.evicted
    evicted = repair.status["conditions"][0]
    assert (evicted["type"], evicted["status"], evicted["reason"]) == ("Evicted", "True", "NodeFailures")
    assert evicted["message"].startswith(
        f"Workload was evicted as there was no replacement for unhealthy node(s): {failed}; {failed} (node deleted): "
    ), evicted["message"]
    assert repair.status["schedulingStats"]["evictions"] == [
        {"reason": "NodeFailures", "underlyingCause": "", "count": 1}
    ]
    assert repair.status["unhealthyNodes"] is None, "Kueue's eviction clears them; the message names the node"
    cleared = plan_repair(
        _workload(assignment.to_dict(), unhealthy=["gone"]),
        [PodSetRepair("main", request, snapshot, assignment, {})],
        recovered={"gone"},
        pods_on_failed=[],
        now=NOW,
    )
    assert cleared is not None
    assert cleared.status == {"unhealthyNodes": None}


def test_topology_index_rebuilds_from_nodes_and_pods_when_its_topology_is_recreated() -> None:
    flavor = FlavorTopology("tas", "topo", {"type": "kwok"}, ())
    nodes = [raw_node("n1"), raw_node("n2")]
    pod = {
        "metadata": {"namespace": "ns", "name": "p"},
        "spec": {"nodeName": "n1", "containers": [{"resources": {"requests": {"cpu": "2"}}}]},
        "status": {},
    }
    index = TopologyIndex()
    index.configure([flavor], {"topo": (RACK, HOSTNAME_LABEL)}, nodes=nodes, pods=[pod])
    assert index.snapshots["tas"].node_free("n1")["cpu"] == 6000
    index.configure([flavor], {}, nodes=nodes, pods=[pod])
    assert "tas" not in index.snapshots
    index.configure([flavor], {"topo": (RACK, HOSTNAME_LABEL)}, nodes=nodes, pods=[pod])
    assert index.snapshots["tas"].node_free("n1")["cpu"] == 6000
    index.pod_event("DELETED", pod)
    assert index.snapshots["tas"].node_free("n1")["cpu"] == 8000


def test_the_eviction_threshold_annotation_caps_how_many_failed_nodes_are_replaced_at_once() -> None:
    """Kueue v0.20's per-Workload cap: three nodes failed at once are replaced under a cap of 3 or without one, and
    evict the workload with NodeFailures under a cap of 2 (room or not); an invalid value is no cap."""
    key = "kueue.x-k8s.io/tas-unhealthy-nodes-eviction-threshold"
    snapshot = snapshot_of(grid(1, 2, 8))
    request = PodSetRequest(count=10, requests={"cpu": 4000}, topology=TopologyRequest(required=RACK))
    placement = place(snapshot, request)
    assert isinstance(placement, Placement)
    snapshot.assume_placement("w", placement, request)
    assignment = encode_placement(placement)
    failed = {name: "node deleted" for name in sorted(placement.pods_per_node())[:3]}

    def repair(annotations: dict[str, str]) -> Any:
        return plan_repair(
            _workload(assignment.to_dict(), annotations=annotations),
            [PodSetRepair("main", request, snapshot, assignment, failed)],
            recovered=set(),
            pods_on_failed=["ns/p"],
            now=NOW,
        )

    for unlimited in ({}, {key: "3"}, {key: "8"}, {key: "0"}, {key: "lots"}):
        replaced = repair(unlimited)
        assert replaced is not None, unlimited
        assert not replaced.evicted, unlimited
        assert replaced.moved_pods == 6, unlimited
    capped = repair({key: "2"})
    assert capped is not None
    assert capped.evicted
    assert capped.delete_pods == ("ns/p",)
    evicted = capped.status["conditions"][0]
    assert (evicted["type"], evicted["status"], evicted["reason"]) == ("Evicted", "True", "NodeFailures")
    assert evicted["message"].startswith(
        "Workload eviction triggered due to multiple TAS assigned node failures, including: "
    ), "Kueue's words first"
    assert f"3 nodes failed at once, more than the 2 allowed by {key}" in evicted["message"]
    assert "admission" not in capped.status


def test_pods_on_failed_nodes_lose_the_jobs_tracking_finalizer_also_when_another_controller_deletes_them() -> None:
    """kfed retires live pods itself (DisruptionTarget, finalizer dropped, deleted); pods the taint manager or PodGC
    is already deleting, or that failed there, only lose the finalizer -- unless they succeeded or are untracked."""
    tracked = ["batch.kubernetes.io/job-tracking", "example.com/keep"]

    def pod(name: str, *, phase: str = "Running", deleting: bool = False, finalizers: Any = tracked) -> Any:
        meta: dict[str, Any] = {"name": name, "namespace": "ns", "finalizers": finalizers}
        if deleting:
            meta["deletionTimestamp"] = "2026-01-01T00:00:29Z"
        return {"metadata": meta, "status": {"phase": phase}}

    pods = [
        pod("live"),
        pod("evicted", deleting=True),
        pod("failed", phase="Failed"),
        pod("done", phase="Succeeded", deleting=True),
        pod("counted", deleting=True, finalizers=["example.com/keep"]),
    ]
    assert [p["metadata"]["name"] for p in dying_but_tracked(pods)] == ["evicted", "failed"]
    assert untrack_patch(pods[0]) == {"metadata": {"$deleteFromPrimitiveList/finalizers": [tracked[0]]}}
    assert untrack_patch(pods[4]) is None
    patch = disruption_patch(pods[0], node="n1", why="node deleted", now=NOW)
    assert patch is not None
    [condition] = patch["status"]["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == ("DisruptionTarget", "True", "NodeFailures")
    assert "n1" in condition["message"]
    assert disruption_patch({"status": {"conditions": [condition]}}, node="n1", why="x", now=NOW) is None
