"""Topology-aware scheduling on the workers (issue 10): placement at admission, pinning by the ungater and the
real kube-scheduler binding inside the assigned domains; node failures of any number replaced inside the
required domain, or the workload evicted with NodeFailures and re-dispatched."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.queues import TAS_FLAVOR, TOPOLOGY, topology_object
from e2e.rig import node_faults
from e2e.rig.federation import MANAGER, Federation
from e2e.rig.nodes import BLOCK_LABEL, HOSTNAME_LABEL, RACK_LABEL
from e2e.scenarios.helpers import condition, get, items, wait_complete, worker_of, workload_of
from e2e.scenarios.tas_support import (
    NODE_FAILURE_DELAY,
    W2_QUEUE,
    all_running,
    bound_nodes,
    delete_job,
    domains,
    holds_for,
    live_pods,
    remote_workload,
    submit_tas,
    tas_federation,
)
from e2e.waiting import wait_for
from federation.quantity import parse_quantity
from manager.decisions.withdrawal import WITHDRAWN_FROM_ANNOTATION

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def tas() -> Iterator[Federation]:
    yield from tas_federation()


def _running(fed: Federation, job: str, count: int, timeout: float = 60) -> tuple[str, dict[str, str]]:
    """(worker, pod → node) once the Job's ``count`` pods run on its worker."""
    worker = wait_for(lambda: worker_of(fed, job), until=bool, timeout=timeout, what=f"{job} dispatched")
    assert worker is not None
    nodes = wait_for(
        lambda: all_running(fed, worker, job, count),
        until=lambda found: found is not None,
        timeout=timeout,
        what=f"{count} pods of {job} running on {worker}",
    )
    assert nodes is not None
    return worker, nodes


def test_required_rack_lands_in_one_rack(tas: Federation) -> None:
    submit_tas(tas, "tas-rack", pods=6, cpu="4", required=RACK_LABEL, queue="tas-queue", seconds=30)
    try:
        worker, nodes = _running(tas, "tas-rack", 6)
        assert len(domains(tas, worker, list(nodes.values()), RACK_LABEL)) == 1, nodes
        wl = remote_workload(tas, worker, "tas-rack")
        assert wl is not None
        assignment = wl["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]
        assert assignment["levels"] == [HOSTNAME_LABEL]
        for pod in live_pods(tas, worker, "tas-rack"):
            assert pod["spec"]["nodeSelector"][HOSTNAME_LABEL] == pod["spec"]["nodeName"]
            assert not pod["spec"].get("schedulingGates")
        # Kueue M20: on the manager the pod set shows its topology request Ready once the worker assigned it.
        delayed = wait_for(
            lambda: [
                psa.get("delayedTopologyRequest")
                for psa in ((workload_of(tas, "tas-rack") or {}).get("status") or {})
                .get("admission", {})
                .get("podSetAssignments", [])
            ],
            until=lambda states: states == ["Ready"],
            timeout=30,
            what="delayedTopologyRequest Ready on the manager's Workload",
        )
        assert delayed == ["Ready"]
    finally:
        delete_job(tas, "tas-rack")


def test_preferred_spreads_only_when_no_rack_fits(tas: Federation) -> None:
    submit_tas(tas, "tas-pref-fits", pods=3, cpu="8", preferred=RACK_LABEL, seconds=30)
    submit_tas(tas, "tas-pref-spreads", pods=6, cpu="8", preferred=RACK_LABEL, seconds=30)
    try:
        worker, fits = _running(tas, "tas-pref-fits", 3)
        assert len(domains(tas, worker, list(fits.values()), RACK_LABEL)) == 1, fits
        worker, spread = _running(tas, "tas-pref-spreads", 6)
        assert len(domains(tas, worker, list(spread.values()), RACK_LABEL)) == 2, spread
        assert len(domains(tas, worker, list(spread.values()), BLOCK_LABEL)) == 1, spread
    finally:
        delete_job(tas, "tas-pref-fits")
        delete_job(tas, "tas-pref-spreads")


def test_implicit_tas_assigns_a_topology_to_a_job_without_annotations(tas: Federation) -> None:
    submit_tas(tas, "tas-implicit", pods=3, cpu="2", queue="tas-queue", seconds=30)
    try:
        worker, _ = _running(tas, "tas-implicit", 3)
        wl = remote_workload(tas, worker, "tas-implicit")
        assert wl is not None
        assignment = wl["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]
        assert assignment["levels"] == [HOSTNAME_LABEL]
        for pod in live_pods(tas, worker, "tas-implicit"):
            assert pod["metadata"]["labels"]["kueue.x-k8s.io/tas"] == "true"
            assert pod["spec"]["nodeSelector"][HOSTNAME_LABEL] == pod["spec"]["nodeName"]
    finally:
        delete_job(tas, "tas-implicit")


W2 = "worker-2"


def _moved(fed: Federation, job: str, count: int, *, away_from: set[str]) -> dict[str, str] | None:
    nodes = all_running(fed, W2, job, count)
    if nodes is None or set(nodes.values()) & away_from:
        return None
    return nodes


def _pod_states(fed: Federation, job: str) -> list[tuple[str, str, str, str, bool, bool]]:
    """Per pod: name, phase, node, pinned host, gated, deleting (what a timeout shows)."""
    return [
        (
            pod["metadata"]["name"],
            pod["status"].get("phase", ""),
            pod["spec"].get("nodeName", ""),
            (pod["spec"].get("nodeSelector") or {}).get(HOSTNAME_LABEL, ""),
            bool(pod["spec"].get("schedulingGates")),
            bool(pod["metadata"].get("deletionTimestamp")),
        )
        for pod in items(fed, W2, "pods", "-l", f"job-name={job}")
    ]


def _unhealthy(fed: Federation, job: str) -> list[str]:
    wl = remote_workload(fed, W2, job)
    return [item["name"] for item in ((wl or {}).get("status") or {}).get("unhealthyNodes") or ()]


def _start_in_w2(fed: Federation, job: str, count: int) -> dict[str, str]:
    worker, nodes = _running(fed, job, count)
    assert worker == W2
    return nodes


def _running_rack_job(fed: Federation, job: str) -> tuple[dict[str, str], set[str], str]:
    """A 4-pod Job requiring a rack, running on worker-2: its pods' nodes, its rack, and the node a test fails."""
    submit_tas(fed, job, pods=4, cpu="4", required=RACK_LABEL)
    before = _start_in_w2(fed, job, 4)
    return before, domains(fed, W2, list(before.values()), RACK_LABEL), sorted(before.values())[0]


def _assert_only_its_pods_moved(
    fed: Federation, job: str, before: dict[str, str], *, victim: str, rack: set[str], what: str
) -> None:
    """The pods of ``victim`` run elsewhere in the same rack, the others where they were, and the node is listed
    in the copy's ``unhealthyNodes``."""
    survivors = {pod: node for pod, node in before.items() if node != victim}
    after = wait_for(
        lambda: _moved(fed, job, len(before), away_from={victim}),
        until=lambda nodes: nodes is not None,
        timeout=60,
        what=f"the pods of {what} node {victim} replaced",
    )
    assert after is not None, _pod_states(fed, job)
    assert {pod: node for pod, node in after.items() if pod in survivors} == survivors, _conditions(fed, job)
    assert domains(fed, W2, list(after.values()), RACK_LABEL) == rack
    assert victim in _unhealthy(fed, job)


def test_a_node_deleted_under_a_running_tas_job_moves_only_its_pods_inside_the_required_rack(tas: Federation) -> None:
    job = "tas-node-deleted"
    victim = ""
    try:
        before, rack, victim = _running_rack_job(tas, job)
        node_faults.delete_node(tas, W2, victim)
        _assert_only_its_pods_moved(tas, job, before, victim=victim, rack=rack, what="deleted")
    finally:
        if victim:  # first: pods bound to a deleted node stay until it is back
            node_faults.restore_node(tas, W2, victim)
        delete_job(tas, job)


def test_a_node_drained_under_a_running_tas_job_moves_only_its_pods_inside_the_required_rack(tas: Federation) -> None:
    """``kubectl drain`` cordons the node and evicts the pods; the Job controller's replacements would be pinned to
    the cordoned node by the assignment and wait there until it is uncordoned (as in Kueue, for which a cordoned
    node is not a failed one). kfed-agent takes a cordoned node that lost the workload's pods for failed: only
    those pods move, inside the rack; a cordoned node whose pods still run there moves nothing."""
    job = "tas-node-drained"
    victim = ""
    try:
        before, rack, victim = _running_rack_job(tas, job)
        other = sorted(set(before.values()) - {victim})
        if other:  # cordoned alone, with its pods still running there: nothing moves
            tas.kubectl(W2, "cordon", other[0])
            holds_for(
                lambda: all_running(tas, W2, job, 4) or {},
                expected=before,
                seconds=3 * NODE_FAILURE_DELAY / 4,
                what=f"the pods on cordoned node {other[0]} left alone",
            )
            tas.kubectl(W2, "uncordon", other[0])
        tas.kubectl(W2, "drain", victim, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=60s")
        _assert_only_its_pods_moved(tas, job, before, victim=victim, rack=rack, what="drained")
    finally:
        if victim:
            tas.kubectl(W2, "uncordon", victim)
        delete_job(tas, job)


def test_a_node_cordoned_under_a_job_with_more_pods_to_come_takes_none_of_them(tas: Federation) -> None:
    """As Kueue (``TASReplaceNodeOnNodeTaints``): a cordoned node keeps the pods that run there, and once none does
    (its pod finished), it is replaced like a failed one, so the Job's next pods (more completions than parallelism)
    start elsewhere in the rack instead of waiting on it for good; the Job completes."""
    job = "tas-cordon-more"
    victim = ""
    try:
        submit_tas(tas, job, pods=4, completions=8, cpu="4", required=RACK_LABEL, seconds=6)
        before = _start_in_w2(tas, job, 4)
        victim = sorted(before.values())[0]
        tas.kubectl(W2, "cordon", victim)
        wait_for(
            lambda: _unhealthy(tas, job),
            until=lambda nodes: victim in nodes,
            timeout=60,
            what=f"cordoned node {victim} replaced once its pods finished",
        )
        done = wait_complete(tas, job, timeout=120)
        assert done["status"]["succeeded"] == 8, done["status"]
    finally:
        if victim:
            tas.kubectl(W2, "uncordon", victim)
        delete_job(tas, job)


def _conditions(fed: Federation, job: str) -> list[tuple[str, str, str, str]]:
    """The worker copy's conditions (type, status, reason, message): why pods were replaced, when they were."""
    wl = remote_workload(fed, W2, job) or {}
    return [
        (c.get("type", ""), c.get("status", ""), c.get("reason", ""), c.get("message", ""))
        for c in (wl.get("status") or {}).get("conditions") or ()
    ]


def test_a_node_not_ready_past_the_delay_moves_only_its_pods_and_leaves_unhealthy_nodes_when_it_recovers(
    tas: Federation,
) -> None:
    job = "tas-not-ready"
    submit_tas(tas, job, pods=4, cpu="4", required=RACK_LABEL)
    victim = ""
    try:
        before = _start_in_w2(tas, job, 4)
        rack = domains(tas, W2, list(before.values()), RACK_LABEL)
        victim = sorted(before.values())[0]
        survivors = {pod: node for pod, node in before.items() if node != victim}
        node_faults.make_not_ready(tas, W2, victim)
        after = wait_for(
            lambda: _moved(tas, job, 4, away_from={victim}),
            until=lambda nodes: nodes is not None,
            timeout=NODE_FAILURE_DELAY + 60,
            what=f"the pods of NotReady node {victim} replaced",
        )
        assert after is not None
        assert {pod: node for pod, node in after.items() if pod in survivors} == survivors
        assert domains(tas, W2, list(after.values()), RACK_LABEL) == rack
        assert node_faults.node_ready(tas, W2, victim) is False, f"the rig reported {victim} Ready again"
        assert victim in _unhealthy(tas, job)
        node_faults.make_ready(tas, W2, victim)
        wait_for(
            lambda: _unhealthy(tas, job),
            until=lambda names: victim not in names,
            timeout=30,
            what=f"{victim} to leave unhealthyNodes once Ready",
        )
    finally:
        if victim:
            node_faults.make_ready(tas, W2, victim)
        delete_job(tas, job)


def test_a_node_that_recovers_before_the_delay_moves_nothing(tas: Federation) -> None:
    job = "tas-blip"
    submit_tas(tas, job, pods=4, cpu="4", required=RACK_LABEL)
    victim = ""
    try:
        before = _start_in_w2(tas, job, 4)
        victim = sorted(before.values())[0]
        node_faults.make_not_ready(tas, W2, victim)
        node_faults.make_ready(tas, W2, victim)
        holds_for(
            lambda: (bound_nodes(live_pods(tas, W2, job)), _unhealthy(tas, job)),
            expected=(before, list[str]()),
            seconds=NODE_FAILURE_DELAY + 6,
            what=f"no pod moved after {victim} recovered within the delay",
        )
    finally:
        if victim:
            node_faults.make_ready(tas, W2, victim)
        delete_job(tas, job)


def test_three_nodes_fail_at_once_under_one_workload_and_all_their_pods_are_replaced(tas: Federation) -> None:
    """One pod per node (8 cpu each) and ``backoffLimit: 0``: the pods of failed nodes are disruptions, not failures
    of the Job -- it keeps running, counts no failed pod, and gets its replacements without the Job controller's
    failed-pod backoff (10 s * 2^(failures-1))."""
    job = "tas-three"
    submit_tas(tas, job, pods=4, cpu="8", required=BLOCK_LABEL, backoff_limit=0)
    victims: list[str] = []
    try:
        before = _start_in_w2(tas, job, 4)
        block = domains(tas, W2, list(before.values()), BLOCK_LABEL)
        victims = sorted(set(before.values()))[:3]
        survivors = {pod: node for pod, node in before.items() if node not in victims}
        node_faults.delete_node(tas, W2, *victims)
        after, _, _ = wait_for(
            lambda: (_moved(tas, job, 4, away_from=set(victims)), _pod_states(tas, job), _job_status(tas, job)),
            until=lambda seen: seen[0] is not None,
            timeout=60,
            what=f"the pods of deleted nodes {victims} replaced",
        )
        assert after is not None
        assert len(survivors) == 1
        assert {pod: node for pod, node in after.items() if pod in survivors} == survivors
        assert domains(tas, W2, list(after.values()), BLOCK_LABEL) == block
        assert set(victims) <= set(_unhealthy(tas, job))
        status = _job_status(tas, job)
        assert not status.get("failed"), status
        assert not [c for c in status.get("conditions") or () if c["type"] in ("Failed", "FailureTarget")], status
    finally:
        for victim in victims:
            node_faults.restore_node(tas, W2, victim)
        delete_job(tas, job)


def _job_status(fed: Federation, job: str) -> dict[str, Any]:
    found = get(fed, W2, "job", job)
    return dict((found or {}).get("status") or {})


def test_no_room_in_the_required_rack_evicts_with_node_failures_and_the_manager_dispatches_again(
    tas: Federation,
) -> None:
    job = "tas-no-room"
    submit_tas(tas, job, pods=8, cpu="4", required=RACK_LABEL)
    victim = ""
    try:
        before = _start_in_w2(tas, job, 8)
        victim = sorted(before.values())[0]
        node_faults.delete_node(tas, W2, victim)
        evicted = wait_for(
            lambda: condition(workload_of(tas, job), "Evicted") or condition(workload_of(tas, job), "Requeued"),
            until=lambda found: found is not None and "NodeFailures" in found.get("message", ""),
            timeout=60,
            what="the manager to see the NodeFailures eviction",
        )
        assert evicted is not None
        after = wait_for(
            lambda: _moved(tas, job, 8, away_from={victim}),
            until=lambda nodes: nodes is not None,
            timeout=180,
            what="the Job dispatched again and running away from the deleted node",
        )
        assert after is not None
        assert len(domains(tas, W2, list(after.values()), RACK_LABEL)) == 1
        assert not set(after) & set(before)
    finally:
        if victim:  # first: pods bound to a deleted node stay until it is back
            node_faults.restore_node(tas, W2, victim)
        delete_job(tas, job)


def test_an_untolerated_no_execute_taint_moves_pods_and_a_tolerated_one_does_not(tas: Federation) -> None:
    key = "example.com/maintenance"
    toleration = [{"key": key, "operator": "Exists", "effect": "NoExecute"}]
    submit_tas(tas, "tas-tolerates", pods=2, cpu="4", required=RACK_LABEL, tolerations=toleration)
    tainted: list[str] = []
    try:
        tolerating = _start_in_w2(tas, "tas-tolerates", 2)
        submit_tas(tas, "tas-intolerant", pods=2, cpu="4", required=RACK_LABEL)
        intolerant = _start_in_w2(tas, "tas-intolerant", 2)
        tainted = sorted(set(tolerating.values()) | set(intolerant.values()))
        rack = domains(tas, W2, list(intolerant.values()), RACK_LABEL)
        for node in tainted:
            node_faults.taint(tas, W2, node, key)
        after = wait_for(
            lambda: _moved(tas, "tas-intolerant", 2, away_from=set(tainted)),
            until=lambda nodes: nodes is not None,
            timeout=60,
            what="the intolerant Job's pods moved off the tainted nodes",
        )
        assert after is not None
        assert domains(tas, W2, list(after.values()), RACK_LABEL) == rack
        assert all_running(tas, W2, "tas-tolerates", 2) == tolerating
        assert _unhealthy(tas, "tas-tolerates") == []
    finally:
        for node in tainted:
            node_faults.untaint(tas, W2, node, key)
        delete_job(tas, "tas-tolerates")
        delete_job(tas, "tas-intolerant")


def test_a_recreated_topology_books_running_pods_again_no_double_booking(tas: Federation) -> None:
    submit_tas(tas, "tas-holder", pods=8, cpu="4", required=RACK_LABEL)
    try:
        holder = _start_in_w2(tas, "tas-holder", 8)
        tas.kubectl(W2, "delete", "topologies.kueue.x-k8s.io", TOPOLOGY)
        # meanwhile, as in Kueue, the worker's queues over its TAS flavor admit nothing, and say why
        inactive = wait_for(
            lambda: condition(get(tas, W2, "clusterqueue", W2_QUEUE, namespace=""), "Active"),
            until=lambda c: c is not None and c["reason"] == "TopologyNotFound",
            timeout=30,
            what=f"{W2}'s ClusterQueue {W2_QUEUE} inactive without its Topology",
        )
        assert inactive is not None
        assert inactive["message"] == (
            f'Can\'t admit new workloads: there is no Topology "{TOPOLOGY}" for TAS flavor "{TAS_FLAVOR}".'
        )
        tas.kubectl(W2, "create", "-f", "-", input=json.dumps(topology_object()))
        wait_for(
            lambda: condition(get(tas, W2, "clusterqueue", W2_QUEUE, namespace=""), "Active"),
            until=lambda c: c is not None and c["reason"] == "Ready",
            timeout=30,
            what=f"{W2}'s ClusterQueue {W2_QUEUE} active again with its Topology",
        )
        submit_tas(tas, "tas-newcomer", pods=8, cpu="4", required=RACK_LABEL)
        newcomer = _start_in_w2(tas, "tas-newcomer", 8)
        assert not set(newcomer.values()) & set(holder.values())
        assert len(domains(tas, W2, list(newcomer.values()), RACK_LABEL)) == 1
    finally:
        delete_job(tas, "tas-holder")
        delete_job(tas, "tas-newcomer")


def test_a_job_requiring_a_rack_goes_to_the_worker_that_has_one(tas: Federation) -> None:
    """worker-1's racks hold 2 pods of 8 cpu, worker-2's 4: a 3-pod rack Job goes to worker-2 at once (quota alone,
    packing large Jobs, would pick worker-1 first and wait out its dispatch timeout); a 5-pod one waits, saying
    what the roomiest rack of each worker holds."""
    submit_tas(tas, "tas-needs-rack", pods=3, cpu="8", queue="tas-queue", required=RACK_LABEL, seconds=20)
    submit_tas(tas, "tas-no-rack", pods=5, cpu="8", queue="tas-queue", required=RACK_LABEL, seconds=20)
    try:
        worker, _ = _running(tas, "tas-needs-rack", 3)
        assert worker == W2
        annotations = (workload_of(tas, "tas-needs-rack") or {})["metadata"].get("annotations") or {}
        assert not annotations.get(WITHDRAWN_FROM_ANNOTATION)
        waiting = wait_for(
            lambda: condition(workload_of(tas, "tas-no-rack"), "QuotaReserved"),
            until=lambda found: found is not None and "topology" in found.get("message", ""),
            timeout=30,
            what="the 5-pod rack Job to wait with a topology reason",
        )
        assert waiting is not None
        assert waiting["status"] == "False"
        assert "topology-rack domain holds at most 4 of 5 pods" in waiting["message"]
        assert worker_of(tas, "tas-no-rack") is None
    finally:
        delete_job(tas, "tas-needs-rack")
        delete_job(tas, "tas-no-rack")


def _summarized_cpu(fed: Federation, worker: str) -> int | None:
    """The free cpu (milli) of the TAS flavor's blocks in the worker's capacity report (None: no report yet)."""
    report = get(fed, worker, "clustercapacity", "local")
    entries = [t for t in ((report or {}).get("status") or {}).get("topologies") or () if t.get("name") == TAS_FLAVOR]
    if not entries:
        return None
    blocks = [d for d in entries[0].get("topologySummary") or () if len(d.get("levelValues") or ()) == 1]
    return sum(parse_quantity((d.get("free") or {}).get("cpu") or "0") for d in blocks)


def test_a_worker_whose_nodes_are_all_cordoned_gets_no_rack_job_and_is_used_again_once_uncordoned(
    tas: Federation,
) -> None:
    """As in Kueue, a cordoned node (``spec.unschedulable``) is no TAS capacity. worker-1, all cordoned for
    maintenance, reports no free cpu, and a rack Job that would otherwise be packed there (12 of its 32 cpu) goes to
    worker-2 at once. (Its report used to count the cordoned nodes: the Job went to worker-1, where no rack could
    take it, and waited there until the dispatch timeout.)"""
    nodes = [n["metadata"]["name"] for n in items(tas, "worker-1", "nodes")]
    try:
        tas.kubectl("worker-1", "cordon", *nodes)
        wait_for(
            lambda: _summarized_cpu(tas, "worker-1"),
            until=lambda cpu: cpu == 0,
            timeout=30,
            what="worker-1's capacity report to leave its cordoned nodes out",
        )
        submit_tas(tas, "tas-cordoned", pods=3, cpu="4", queue="tas-queue", required=RACK_LABEL, seconds=20)
        worker, nodes_used = _running(tas, "tas-cordoned", 3)
        assert worker == W2, nodes_used
        annotations = (workload_of(tas, "tas-cordoned") or {})["metadata"].get("annotations") or {}
        assert not annotations.get(WITHDRAWN_FROM_ANNOTATION), annotations
    finally:
        delete_job(tas, "tas-cordoned")
        tas.kubectl("worker-1", "uncordon", *nodes)
    free = wait_for(
        lambda: _summarized_cpu(tas, "worker-1"),
        until=lambda cpu: cpu == len(nodes) * 8000,
        timeout=30,
        what="worker-1's uncordoned nodes' cpu back in its capacity report",
    )
    assert free == len(nodes) * 8000


def test_a_rack_job_whose_runtime_class_overhead_outgrows_every_rack_waits_on_the_manager(tas: Federation) -> None:
    """Four pods of 7 cpu fit one of worker-2's racks; a RuntimeClass overhead of 2 cpu a pod (which Kueue charges
    and the worker's placement adds) makes them 9 cpu, and no rack holds them: the Job waits on the manager saying
    so, and no copy is sent (before, the manager checked the racks without the overhead, and the copy waited on
    worker-2, unplaceable, until the dispatch timeout)."""
    runtime_class = {
        "apiVersion": "node.k8s.io/v1",
        "kind": "RuntimeClass",
        "metadata": {"name": "kfed-test-rack-overhead"},
        "handler": "sandboxed",
        "overhead": {"podFixed": {"cpu": "2"}},
    }
    clusters = [MANAGER, *tas.workers]
    try:
        for cluster in clusters:
            tas.kubectl(cluster, "apply", "-f", "-", input=json.dumps(runtime_class))
        submit_tas(
            tas,
            "tas-rack-overhead",
            pods=4,
            cpu="7",
            queue="tas-queue",
            required=RACK_LABEL,
            seconds=20,
            runtime_class="kfed-test-rack-overhead",
        )
        waiting = wait_for(
            lambda: condition(workload_of(tas, "tas-rack-overhead"), "QuotaReserved"),
            until=lambda found: found is not None and "topology" in found.get("message", ""),
            timeout=30,
            what="the rack Job with a RuntimeClass overhead to wait with a topology reason",
        )
        assert waiting is not None
        assert waiting["status"] == "False"
        assert "of 4 pods" in waiting["message"], waiting["message"]
        assert worker_of(tas, "tas-rack-overhead") is None
    finally:
        delete_job(tas, "tas-rack-overhead")
        for cluster in clusters:
            tas.kubectl(cluster, "delete", "runtimeclass", "kfed-test-rack-overhead", "--wait=false", check=False)
