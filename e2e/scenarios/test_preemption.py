"""Preemption decided by the manager's global scheduler runs on the worker (issue: recovery, deliverable 4).

A ClusterQueue of 4 cpu with ``withinClusterQueue: LowerPriority``: a high-priority Job that needs the whole
queue evicts the running low-priority one from its worker — one victim, withdrawn and requeued — runs, and the
low-priority Job runs again afterwards. Both end Complete, and neither ever has copies on two workers.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from e2e.queues import job_manifest, named_queue_objects
from e2e.rig.federation import MANAGER, Federation
from e2e.scenarios.helpers import condition, get, is_true, items, wait_complete, workload_of
from e2e.waiting import wait_for

pytestmark = pytest.mark.e2e

QUEUE = "preempt-queue"


def _queues(*, manager: bool) -> list[dict[str, Any]]:
    objects = named_queue_objects(QUEUE, cpu="4", manager=manager, preemption={"withinClusterQueue": "LowerPriority"})
    if manager:
        for name, value in (("low", 10), ("high", 1000)):
            objects.append(
                {
                    "apiVersion": "kueue.x-k8s.io/v1beta2",
                    "kind": "WorkloadPriorityClass",
                    "metadata": {"name": f"preempt-{name}"},
                    "value": value,
                }
            )
    return objects


@pytest.fixture
def preempt_queue(federation: Federation) -> None:
    for cluster in (MANAGER, *federation.workers):
        objects = _queues(manager=cluster == MANAGER)
        federation.kubectl(
            cluster, "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
        )


def _submit(fed: Federation, name: str, priority: str, seconds: float) -> None:
    manifest = job_manifest(name, namespace="default", cpu="4", seconds=seconds, queue=QUEUE, memory="1Gi")
    manifest["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = f"preempt-{priority}"
    fed.kubectl(MANAGER, "create", "-f", "-", input=json.dumps(manifest))


def _when(workload: dict[str, Any] | None, kind: str) -> str:
    found = condition(workload, kind)
    assert found is not None, f"no {kind} condition"
    return str(found["lastTransitionTime"])  # RFC 3339 in UTC: ordered as text


def test_a_higher_priority_job_preempts_a_running_lower_one_on_its_worker(
    federation: Federation, preempt_queue: None
) -> None:
    _submit(federation, "pre-low", "low", seconds=12)
    wait_for(
        lambda: get(federation, MANAGER, "job", "pre-low"),
        until=lambda j: int(((j or {}).get("status") or {}).get("active", 0)) > 0,
        timeout=60,
        what="pre-low running",
    )
    _submit(federation, "pre-high", "high", seconds=2)
    low = wait_for(
        lambda: workload_of(federation, "pre-low"),
        until=lambda wl: is_true(wl, "Preempted"),
        timeout=60,
        what="pre-low preempted",
    )
    preempted = condition(low, "Preempted")
    assert preempted is not None
    assert preempted["reason"] == "InClusterQueue"
    wait_complete(federation, "pre-high", timeout=90)
    wait_complete(federation, "pre-low", timeout=120)
    high = workload_of(federation, "pre-high")
    low = workload_of(federation, "pre-low")
    assert condition(high, "Preempted") is None
    requeued = condition(low, "Requeued")
    assert requeued is not None
    assert requeued["reason"] == "Preempted"
    assert low is not None
    assert low["status"]["schedulingStats"]["evictions"] == [
        {"reason": "Preempted", "underlyingCause": "", "count": 1}
    ], "Kueue's per-Workload eviction count"
    assert "schedulingStats" not in (high or {}).get("status", {})
    # The order the manager wrote (its own timestamps; sampling two workers with kubectl cannot be atomic):
    # pre-low was requeued only after its copies were gone, pre-high reserved the quota only after that, and
    # pre-low reserved it again only once pre-high had finished.
    high_reserved = _when(high, "QuotaReserved")
    assert _when(low, "Requeued") <= high_reserved
    assert _when(high, "Finished") <= _when(low, "QuotaReserved")
    victims = [
        e
        for e in items(federation, MANAGER, "events.events.k8s.io")
        if e.get("reason") == "Preempted"
        and "pre-high" not in (e.get("regarding") or {}).get("name", "")
        and "preempted by" in e.get("note", "")
    ]
    assert len(victims) == 1, f"expected exactly one victim, got {[v['regarding']['name'] for v in victims]}"


def test_a_priority_change_reaches_the_workers_copy_and_decides_preemption(
    federation: Federation, preempt_queue: None
) -> None:
    """Relabelling a running Job ``preempt-high`` (Kueue M19) re-prioritizes its Workload and the copy on its worker;
    a later high-priority Job then finds no lower-priority victim and waits for it instead of preempting it."""
    _submit(federation, "prio-a", "low", seconds=15)
    running = wait_for(
        lambda: workload_of(federation, "prio-a"),
        until=lambda wl: is_true(wl, "Admitted"),
        timeout=60,
        what="prio-a admitted on a worker",
    )
    assert running is not None
    worker = running["status"]["clusterName"]
    federation.kubectl(MANAGER, "label", "job", "prio-a", "kueue.x-k8s.io/priority-class=preempt-high", "--overwrite")
    name = running["metadata"]["name"]
    copy = wait_for(
        lambda: get(federation, worker, "workloads.kueue.x-k8s.io", name),
        until=lambda wl: wl is not None and wl["spec"].get("priority") == 1000,
        timeout=30,
        what=f"the copy of {name} on {worker} to carry priority 1000",
    )
    assert copy is not None
    assert copy["spec"]["priorityClassRef"]["name"] == "preempt-high"
    remote_job = get(federation, worker, "job", "prio-a")
    assert remote_job is not None
    assert remote_job["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "preempt-high"
    manager_wl = workload_of(federation, "prio-a")
    assert manager_wl is not None
    assert manager_wl["spec"]["priority"] == 1000
    _submit(federation, "prio-b", "high", seconds=2)
    wait_complete(federation, "prio-a", timeout=90)
    wait_complete(federation, "prio-b", timeout=90)
    a, b = workload_of(federation, "prio-a"), workload_of(federation, "prio-b")
    assert condition(a, "Evicted") is None, condition(a, "Evicted")
    assert condition(a, "Preempted") is None
    assert _when(a, "Finished") <= _when(b, "QuotaReserved")


XQUEUE = "xpreempt"


def test_a_higher_priority_job_preempts_a_lower_one_running_on_another_worker_with_one_victim_set(
    federation: Federation,
) -> None:
    """The global ClusterQueue has 6 cpu. pre-x-low (4 cpu) can only go to worker-1 (worker-2 has no such queue
    yet); then worker-2 gets a 6-cpu queue and pre-x-high (6 cpu) arrives: the manager preempts pre-x-low on
    worker-1, waits until its quota is back, and sends pre-x-high to worker-2, the only worker it fits."""
    first, second = federation.workers[0], federation.workers[1]

    def apply(cluster: str, cpu: str) -> None:
        objects = named_queue_objects(
            XQUEUE, cpu=cpu, manager=cluster == MANAGER, preemption={"withinClusterQueue": "LowerPriority"}
        )
        federation.kubectl(
            cluster, "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
        )

    apply(MANAGER, "6")
    federation.kubectl(
        MANAGER,
        "apply",
        "-f",
        "-",
        input=json.dumps({"apiVersion": "v1", "kind": "List", "items": _queues(manager=True)[2:]}),
    )
    apply(first, "4")

    def submit_x(name: str, priority: str, cpu: str, seconds: float) -> None:
        manifest = job_manifest(name, namespace="default", cpu=cpu, seconds=seconds, queue=XQUEUE, memory="1Gi")
        manifest["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = f"preempt-{priority}"
        federation.kubectl(MANAGER, "create", "-f", "-", input=json.dumps(manifest))

    submit_x("pre-x-low", "low", "4", seconds=20)
    low = wait_for(
        lambda: workload_of(federation, "pre-x-low"),
        until=lambda wl: is_true(wl, "Admitted"),
        timeout=60,
        what="pre-x-low admitted",
    )
    assert low is not None
    assert low["status"]["clusterName"] == first
    apply(second, "6")
    submit_x("pre-x-high", "high", "6", seconds=2)
    wait_complete(federation, "pre-x-high", timeout=120)
    high = workload_of(federation, "pre-x-high")
    assert high is not None
    assert high["status"]["clusterName"] == second
    wait_complete(federation, "pre-x-low", timeout=120)
    low = workload_of(federation, "pre-x-low")
    assert low is not None
    preempted = condition(low, "Preempted")
    assert preempted is not None
    # Kueue: re-admitted, the victim's Preempted (reason InClusterQueue) turns False, reason QuotaReserved, keeping
    # what it was
    assert (preempted["status"], preempted["reason"]) == ("False", "QuotaReserved")
    high_job = get(federation, MANAGER, "job", "pre-x-high")
    assert high_job is not None
    assert preempted["message"] == (  # Kueue's words: the preemptor's uid and its Job's, the two queues' paths
        f"Previously: Preempted to accommodate a workload (UID: {high['metadata']['uid']}, "
        f"JobUID: {high_job['metadata']['uid']}) due to prioritization in the "
        f"ClusterQueue; preemptor path: /{high['status']['admission']['clusterQueue']}; "
        f"preemptee path: /{low['status']['admission']['clusterQueue']}"
    )
    assert _when(low, "Requeued") <= _when(high, "QuotaReserved"), "the preemptor reserved before the victim left"
    victims = [
        e
        for e in items(federation, MANAGER, "events.events.k8s.io")
        if e.get("reason") == "Preempted" and "pre-x-" in (e.get("regarding") or {}).get("name", "")
    ]
    assert [v["regarding"]["name"] for v in victims] == [low["metadata"]["name"]], "exactly one victim, once"
