"""Walking-skeleton scenarios on a real local federation (SCENARIOS.md S1, S3, S4, S5, I2).

Each test submits plain batch/v1 Jobs with kubectl on the manager and watches what kfed makes of them.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from e2e.queues import FLAVOR, job_manifest, named_queue_objects, routed_queue_objects
from e2e.rig.audit import calls
from e2e.rig.federation import MANAGER, Federation
from e2e.scenarios.helpers import (
    Obj,
    condition,
    get,
    is_true,
    items,
    remote_copies,
    submit,
    wait_complete,
    wait_pending,
    worker_of,
    workload_of,
)
from e2e.waiting import wait_for

pytestmark = pytest.mark.e2e


def _worker_probe(fed: Federation, job: str) -> Callable[[], str | None]:
    return lambda: worker_of(fed, job)


def test_s1_job_runs_on_one_worker_and_its_final_status_comes_back(federation: Federation) -> None:
    submit(federation, "s1", cpu="2", parallelism=2, seconds=3)
    wait_for(lambda: worker_of(federation, "s1"), until=bool, timeout=60, what="s1 to be admitted on a worker")
    worker = worker_of(federation, "s1")
    assert worker in federation.workers
    copies = remote_copies(federation, "s1")
    assert list(copies) in ([worker], []), f"copies on more than the chosen worker: {copies}"
    job = wait_complete(federation, "s1")
    status = job["status"]
    assert isinstance(status, dict)
    assert status["succeeded"] == 2
    assert status.get("completionTime")
    assert status.get("startTime")
    assert items(federation, MANAGER, "pods", "-l", "job-name=s1") == [], "the manager cluster must not run pods"
    wl = workload_of(federation, "s1")
    assert is_true(wl, "Finished")
    # Kueue's jobframework name: "job-<name>-" and 5 hex digits of SHA-1("Job\nbatch\n<name>\n<uid>").
    digest = hashlib.sha1(f"Job\nbatch\ns1\n{job['metadata']['uid']}".encode(), usedforsecurity=False).hexdigest()
    assert wl is not None
    assert wl["metadata"]["name"] == f"job-s1-{digest[:5]}"
    wait_for(
        lambda: remote_copies(federation, "s1"),
        until=lambda c: c == {},
        timeout=30,
        what="remote copies of s1 to be deleted after the final sync",
    )


def test_the_job_copy_comes_started_once_the_agent_admitted_its_workload_copy(federation: Federation) -> None:
    """kfed-agent workers list their flavors in their report, so the manager sends the Workload copy alone and the
    Job copy only after the agent admitted it: already started (never suspended, so the worker's Job controller
    writes no Suspended condition) and owned by the Workload copy, which takes it along when deleted."""
    submit(federation, "started", cpu="1", seconds=4)
    wait_for(lambda: worker_of(federation, "started"), until=bool, timeout=60, what="started admitted on a worker")
    worker = worker_of(federation, "started")
    assert worker is not None
    wl = workload_of(federation, "started")
    assert wl is not None
    name = wl["metadata"]["name"]
    copy = wait_for(
        lambda: get(federation, worker, "workloads.kueue.x-k8s.io", name),
        until=lambda c: c is not None and is_true(c, "QuotaReserved"),
        timeout=30,
        what="the Workload copy admitted by the agent",
    )
    job = wait_for(
        lambda: get(federation, worker, "job", "started"),
        until=lambda j: j is not None and bool((j.get("status") or {}).get("startTime")),
        timeout=30,
        what="the Job copy running",
    )
    assert copy is not None
    assert job is not None
    reserved = condition(copy, "QuotaReserved")
    assert reserved is not None
    assert job["metadata"]["creationTimestamp"] >= reserved["lastTransitionTime"], "created before the admission"
    assert job["spec"]["suspend"] is False
    assert [c["type"] for c in job["status"].get("conditions") or () if c["type"] == "Suspended"] == [], (
        "the Job copy was suspended at some point"
    )
    assert job["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "name": name,
            "uid": copy["metadata"]["uid"],
        }
    ]
    wait_complete(federation, "started")
    wait_for(
        lambda: remote_copies(federation, "started"),
        until=lambda c: c == {},
        timeout=30,
        what="both copies deleted after the final sync (the Job by the garbage collector, with its Workload copy)",
    )


def test_the_reservation_and_the_admission_take_one_status_write_and_the_job_copy_comes_after_it(
    federation: Federation,
) -> None:
    """A kfed-agent worker admits the copy within the reservation hold: kfed-manager records the reservation and the
    admission in one Workload status write, still records Kueue's two Events, and creates the Job copy only after
    that write (per both clusters' audit logs). The shared federation runs with waitForPodsReady, so the status is
    written three times in all: reserved and admitted, PodsReady, Finished."""
    submit(federation, "onewrite", cpu="1", seconds=2)
    wait_complete(federation, "onewrite")
    wait_for(
        lambda: remote_copies(federation, "onewrite"),
        until=lambda c: c == {},
        timeout=30,
        what="onewrite's copies deleted after the final sync",
    )
    wl = workload_of(federation, "onewrite")
    assert wl is not None
    for kind in ("QuotaReserved", "Admitted", "PodsReady", "Finished"):
        assert is_true(wl, kind), wl["status"]
        # as Kueue writes every Workload condition; a dashboard compares it with metadata.generation
        assert (condition(wl, kind) or {}).get("observedGeneration") == wl["metadata"]["generation"], kind
    assert wl["status"]["clusterName"] in federation.workers
    assert not wl["status"].get("nominatedClusterNames")
    reserved, admitted = condition(wl, "QuotaReserved"), condition(wl, "Admitted")
    assert reserved is not None
    assert admitted is not None
    assert reserved["lastTransitionTime"] <= admitted["lastTransitionTime"]
    key = f"default/{wl['metadata']['name']}"
    with federation.clusters[MANAGER].audit_log.open(encoding="utf-8", errors="replace") as log:
        writes = [
            c
            for c in calls(log)
            if c.client == "kfed-manager" and c.resource == "workloads/status" and c.key == key and c.accepted
        ]
    assert len(writes) == 3, [(c.verb, c.at) for c in writes]
    worker = wl["status"]["clusterName"]
    with federation.clusters[worker].audit_log.open(encoding="utf-8", errors="replace") as log:
        job_creates = [
            c
            for c in calls(log)
            if (c.client, c.verb, c.resource, c.key) == ("kfed-manager", "create", "jobs", "default/onewrite")
        ]
    assert len(job_creates) == 1, job_creates
    assert job_creates[0].accepted, job_creates
    assert writes[0].at is not None
    assert job_creates[0].at is not None
    before_start = [c for c in writes if c.at is not None and c.at <= job_creates[0].at]
    assert len(before_start) == 1, "the Job copy must start after one write recording reservation and admission"
    regarding = f"involvedObject.name={wl['metadata']['name']}"
    reasons = [e.get("reason") for e in items(federation, MANAGER, "events", "--field-selector", regarding)]
    assert reasons.count("QuotaReserved") == 1, reasons
    assert reasons.count("Admitted") == 1, reasons


def test_the_pods_on_the_worker_carry_kueues_queue_and_pod_set_labels(federation: Federation) -> None:
    """Kueue labels the pods of a Job it starts with their LocalQueue and ClusterQueue (AssignQueueLabelsForPods, on
    by default) and pod set, and a MultiKueue worker's as such: dashboards that aggregate pod usage by queue keep
    working when the worker runs kfed-agent."""
    submit(federation, "labelled", cpu="1", seconds=8)
    pods = wait_for(
        lambda: [
            pod
            for worker in federation.workers
            for pod in items(federation, worker, "pods", "-l", "batch.kubernetes.io/job-name=labelled")
        ],
        until=bool,
        timeout=60,
        what="the labelled Job's pod on a worker",
    )
    labels = pods[0]["metadata"]["labels"]
    assert {k: v for k, v in labels.items() if k.startswith("kueue.x-k8s.io/")} == {
        "kueue.x-k8s.io/podset": "main",
        "kueue.x-k8s.io/local-queue-name": "user-queue",
        "kueue.x-k8s.io/cluster-queue-name": "cluster-queue",
        "kueue.x-k8s.io/multikueue-worker-workload-pod": "true",
    }
    workload = workload_of(federation, "labelled")
    assert workload is not None
    assert pods[0]["metadata"]["annotations"]["kueue.x-k8s.io/workload"] == workload["metadata"]["name"]
    wait_complete(federation, "labelled")


def test_s3_workloads_go_where_they_fit_and_a_full_worker_gets_none(federation: Federation) -> None:
    # 40 cpu only fits worker-2 (64 cpu); then worker-2 has 24 free, so 32 cpu only fits worker-1 (32 cpu).
    submit(federation, "s3-big", cpu="8", parallelism=5, seconds=40)
    wait_for(lambda: worker_of(federation, "s3-big"), until=bool, timeout=60, what="s3-big admitted")
    assert worker_of(federation, "s3-big") == "worker-2"
    submit(federation, "s3-fill", cpu="8", parallelism=4, seconds=40)  # 32 cpu: fills worker-1 exactly
    wait_for(lambda: worker_of(federation, "s3-fill"), until=bool, timeout=60, what="s3-fill admitted")
    assert worker_of(federation, "s3-fill") == "worker-1"
    for i in range(3):
        submit(federation, f"s3-small-{i}", cpu="4", seconds=3)
    for small in (f"s3-small-{i}" for i in range(3)):
        wait_for(_worker_probe(federation, small), until=bool, timeout=60, what=f"{small} admitted")
        assert worker_of(federation, small) == "worker-2", "worker-1 is full and must get nothing"
    for name in ("s3-big", "s3-fill"):
        federation.kubectl(MANAGER, "delete", "job", name, "--wait=false")
    for i in range(3):
        wait_complete(federation, f"s3-small-{i}")


def test_a_burst_of_small_jobs_spreads_over_workers_that_fit_equally_well(federation: Federation) -> None:
    # Best fit alone packed every one-cpu Job onto worker-1 (31/32 left beats 63/64), leaving worker-2 idle.
    names = [f"spread-{i}" for i in range(6)]
    federation.kubectl(
        MANAGER,
        "create",
        "-f",
        "-",
        input=json.dumps(
            {
                "apiVersion": "v1",
                "kind": "List",
                "items": [job_manifest(n, namespace="default", cpu="1", seconds=3) for n in names],
            }
        ),
    )
    chosen = {}
    for name in names:
        chosen[name] = wait_for(_worker_probe(federation, name), until=bool, timeout=60, what=f"{name} admitted")
    assert set(chosen.values()) == {"worker-1", "worker-2"}, chosen
    for name in names:
        wait_complete(federation, name)
    # The agents record no Normal Events on the copies (nobody reads them there; the manager records the steps).
    worker_events = [
        (worker, e.get("reason"), (e.get("regarding") or {}).get("name"))
        for worker in federation.workers
        for e in items(federation, worker, "events.events.k8s.io")
        if e.get("reportingController") == "kfed.io/kfed-agent"
        and e.get("type") == "Normal"
        and "spread-" in str((e.get("regarding") or {}).get("name"))
    ]
    assert worker_events == []


POLICY_QUEUE = "policy"


def _apply(fed: Federation, cluster: str, objects: list[dict[str, Any]]) -> None:
    fed.kubectl(cluster, "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))


def _policy_check(fed: Federation) -> Obj:
    return condition(get(fed, MANAGER, "admissionchecks.kueue.x-k8s.io", POLICY_QUEUE), "Active") or {}


def _submit_to_policy_queue(fed: Federation, names: list[str]) -> dict[str, str | None]:
    jobs = [job_manifest(n, namespace="default", cpu="1", seconds=3, queue=POLICY_QUEUE) for n in names]
    fed.kubectl(MANAGER, "create", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": jobs}))
    return {n: wait_for(_worker_probe(fed, n), until=bool, timeout=60, what=f"{n} admitted") for n in names}


def _reports_policy_queue_active(report: dict[str, Any] | None) -> bool:
    status = (report or {}).get("status") or {}
    routed = any(q.get("name") == POLICY_QUEUE and not q.get("stopped") for q in status.get("localQueues") or ())
    active = any(q.get("name") == POLICY_QUEUE and q.get("active") for q in status.get("clusterQueues") or ())
    return routed and active


@pytest.fixture
def policy_queue(federation: Federation) -> Iterator[None]:
    """A MultiKueueConfig, AdmissionCheck, ClusterQueue and LocalQueue ``policy`` on the manager over both workers,
    whose own ClusterQueues ``policy`` hold 8 cpu (worker-1) and 16 cpu (worker-2): quota no other test uses, so
    where a Job goes depends only on the dispatch policy. The config starts with an unreadable policy annotation."""
    sizes = {"worker-1": "8", "worker-2": "16"}
    for worker in federation.workers:
        _apply(federation, worker, named_queue_objects(POLICY_QUEUE, cpu=sizes[worker], manager=False))
    for worker in federation.workers:  # both reports carry the new queue, active, before a Job is sent
        wait_for(
            functools.partial(get, federation, worker, "clustercapacity", "local", namespace=""),
            until=_reports_policy_queue_active,
            timeout=30,
            what=f"{worker}'s capacity report to show its ClusterQueue {POLICY_QUEUE} active",
        )
    manager_objects = routed_queue_objects(POLICY_QUEUE, list(federation.workers), cpu="32")
    manager_objects[0]["metadata"]["annotations"] = {"kfed.io/dispatch-policy": "Packed"}
    _apply(federation, MANAGER, manager_objects)
    try:
        yield
    finally:
        federation.kubectl(MANAGER, "delete", "jobs", "-l", f"kueue.x-k8s.io/queue-name={POLICY_QUEUE}", "--wait=false")
        # gone before the next test applies them again (one still terminating would swallow that apply)
        for kind, name in [(o["kind"].lower(), o["metadata"]["name"]) for o in reversed(manager_objects)]:
            federation.kubectl(MANAGER, "delete", kind, name, "-n", "default", "--timeout=60s", "--ignore-not-found")
        for worker in federation.workers:
            for kind in ("localqueue", "clusterqueue"):
                federation.kubectl(
                    worker, "delete", kind, POLICY_QUEUE, "-n", "default", "--timeout=60s", "--ignore-not-found"
                )


def test_a_multikueue_config_annotation_sets_its_dispatch_policy_and_a_bad_one_is_named(
    federation: Federation, policy_queue: None
) -> None:
    """The rig's kfed-manager runs the default policy, Balanced, which sends a small Job to the least allocated
    worker; ``kfed.io/dispatch-policy: BestFit`` on a MultiKueueConfig packs its queues' Jobs instead. A value kfed
    cannot read is not applied: the check stays active and says why in its message, a Warning Event on the config
    and kfed-manager's log, and Jobs keep flowing with the manager's policy."""
    bad = wait_for(
        lambda: _policy_check(federation),
        until=lambda c: c.get("reason") == "InvalidDispatchPolicy",
        timeout=30,
        what="the MultiKueue AdmissionCheck to name the unreadable annotation",
    )
    assert bad["status"] == "True", "an unreadable annotation must not stop dispatching"
    assert "kfed.io/dispatch-policy='Packed' is not one of BestFit, LeastAllocated, Balanced" in bad["message"]
    events = wait_for(
        lambda: [
            e
            for e in items(federation, MANAGER, "events.events.k8s.io")
            if (e.get("regarding") or {}).get("kind") == "MultiKueueConfig"
            and (e.get("regarding") or {}).get("name") == POLICY_QUEUE
            and e.get("reason") == "InvalidDispatchPolicy"
        ],
        until=bool,
        timeout=30,
        what="a Warning Event on the MultiKueueConfig",
    )
    assert events[0]["type"] == "Warning"
    assert "kfed-manager's own dispatch policy applies instead" in events[0]["note"]
    # Balanced: one cpu leaves 15/16 of worker-2's quota free and 7/8 of worker-1's: the least allocated wins
    assert _submit_to_policy_queue(federation, ["policy-balanced"]) == {"policy-balanced": "worker-2"}
    wait_complete(federation, "policy-balanced")

    federation.kubectl(
        MANAGER, "annotate", "multikueueconfig", POLICY_QUEUE, "--overwrite", "kfed.io/dispatch-policy=BestFit"
    )
    wait_for(
        lambda: _policy_check(federation),
        until=lambda c: c.get("reason") == "Active",
        timeout=30,
        what="the AdmissionCheck to be plainly active once the annotation reads",
    )
    names = [f"policy-packed-{i}" for i in range(6)]
    chosen = _submit_to_policy_queue(federation, names)
    assert set(chosen.values()) == {"worker-1"}, f"BestFit packs the Jobs onto the fuller worker: {chosen}"
    for name in names:
        wait_complete(federation, name)


def _local_queue_usage(fed: Federation, cluster: str, field: str) -> list[Obj] | None:
    queue = get(fed, cluster, "localqueues.kueue.x-k8s.io", POLICY_QUEUE)
    return ((queue or {}).get("status") or {}).get(field)


def test_local_queues_show_what_their_workloads_hold_of_each_flavor(federation: Federation, policy_queue: None) -> None:
    """Kueue's LocalQueue ``flavorsReservation``/``flavorsUsage``: the ClusterQueue's flavors with the totals this
    LocalQueue's workloads hold, on the manager (global quota) and on the worker that runs them (its own)."""
    holding = [{"name": FLAVOR, "resources": [{"name": "cpu", "total": "3"}, {"name": "memory", "total": "2Gi"}]}]
    idle = [{"name": FLAVOR, "resources": [{"name": "cpu", "total": "0"}, {"name": "memory", "total": "0"}]}]
    jobs = [job_manifest("lq-usage", namespace="default", cpu="3", memory="2Gi", seconds=600, queue=POLICY_QUEUE)]
    federation.kubectl(
        MANAGER, "create", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": jobs})
    )
    worker = wait_for(_worker_probe(federation, "lq-usage"), until=bool, timeout=60, what="lq-usage admitted")
    assert worker is not None
    for cluster in (MANAGER, worker):
        for field in ("flavorsReservation", "flavorsUsage"):
            wait_for(
                functools.partial(_local_queue_usage, federation, cluster, field),
                until=lambda usage: usage == holding,
                timeout=30,
                what=f"{cluster}'s LocalQueue {POLICY_QUEUE} to show 3 cpu and 2Gi in {field}",
            )
    federation.kubectl(MANAGER, "delete", "job", "lq-usage", "--wait=false")
    for cluster in (MANAGER, worker):
        wait_for(
            functools.partial(_local_queue_usage, federation, cluster, "flavorsReservation"),
            until=lambda usage: usage == idle,
            timeout=30,
            what=f"{cluster}'s LocalQueue {POLICY_QUEUE} to hold nothing once the Job is deleted",
        )


def test_s4_a_workload_that_fits_nowhere_waits_with_a_reason_until_capacity_appears(federation: Federation) -> None:
    submit(federation, "s4-blocker", cpu="8", parallelism=5, seconds=300)  # 40 of worker-2's 64 cpu
    wait_for(lambda: worker_of(federation, "s4-blocker"), until=bool, timeout=60, what="s4-blocker admitted")
    submit(federation, "s4-wide", cpu="8", parallelism=5, seconds=3)  # 40 cpu: worker-1 has 32, worker-2 24
    wl = wait_for(
        lambda: workload_of(federation, "s4-wide"),
        until=lambda w: condition(w, "QuotaReserved") is not None,
        timeout=60,
        what="s4-wide to get a pending condition",
    )
    pending = condition(wl, "QuotaReserved")
    assert pending is not None
    assert pending["status"] == "False"
    assert "worker-1" in pending["message"], pending
    assert "worker-2" in pending["message"], pending
    assert "insufficient cpu" in pending["message"], pending
    assert remote_copies(federation, "s4-wide") == {}
    federation.kubectl(MANAGER, "delete", "job", "s4-blocker", "--wait=false")
    wait_complete(federation, "s4-wide", timeout=120)


def test_s5_deleting_the_manager_job_removes_the_remote_workload_job_and_pods(federation: Federation) -> None:
    submit(federation, "s5", cpu="2", parallelism=2, seconds=300)
    wait_for(
        lambda: get(federation, MANAGER, "job", "s5"),
        until=lambda j: bool(((j or {}).get("status") or {}).get("active")),
        timeout=60,
        what="s5 running (mirrored active pods)",
    )
    worker = worker_of(federation, "s5")
    assert worker is not None
    assert items(federation, worker, "pods", "-l", "job-name=s5")
    federation.kubectl(MANAGER, "delete", "job", "s5", "--cascade=background", "--wait=false")
    wait_for(
        lambda: (
            get(federation, worker, "job", "s5"),
            items(federation, worker, "pods", "-l", "job-name=s5"),
            items(federation, worker, "workloads.kueue.x-k8s.io"),
        ),
        until=lambda seen: (
            seen[0] is None
            and seen[1] == []
            and not any(
                (w["metadata"].get("labels") or {})
                .get("kueue.x-k8s.io/prebuilt-workload-name", "")
                .startswith("job-s5-")
                or w["metadata"]["name"].startswith("job-s5-")
                for w in seen[2]
            )
        ),
        timeout=60,
        what="the remote Job, its pods and the Workload copy to be deleted",
    )


def test_a_job_for_a_missing_local_queue_waits_with_a_condition_saying_so(federation: Federation) -> None:
    submit(federation, "i2", cpu="1", queue="no-such-queue")
    wl = wait_for(
        lambda: workload_of(federation, "i2"),
        until=lambda w: condition(w, "QuotaReserved") is not None,
        timeout=60,
        what="the Workload of i2 to get a pending condition",
    )
    pending = condition(wl, "QuotaReserved")
    assert pending is not None
    assert pending["status"] == "False"
    assert pending["reason"] == "Misconfigured", "Kueue v0.20's reason"
    assert pending["message"] == "LocalQueue no-such-queue doesn't exist"
    assert remote_copies(federation, "i2") == {}
    federation.kubectl(MANAGER, "delete", "job", "i2", "--wait=false")


def test_a_waiting_job_its_user_unsuspends_is_suspended_again_with_kueues_event(federation: Federation) -> None:
    """A Job runs only once its Workload is admitted: one its user unsuspends while it waits is suspended again,
    with Kueue's Event (``Stopped``, "Not admitted by cluster queue"), and keeps its place in the queue. Before, it
    stayed unsuspended and looked started to every script that reads ``spec.suspend``."""
    submit(federation, "unsuspended", cpu="1000")  # more than the ClusterQueue's quota: it stays queued
    wl = wait_pending(federation, "unsuspended")
    federation.kubectl(MANAGER, "patch", "job", "unsuspended", "--type", "merge", "-p", '{"spec":{"suspend":false}}')
    wait_for(
        lambda: get(federation, MANAGER, "job", "unsuspended"),
        until=lambda j: j is not None and j["spec"].get("suspend") is True,
        timeout=30,
        what="the unsuspended Job suspended again",
    )
    wait_for(
        lambda: [
            e
            for e in items(federation, MANAGER, "events.events.k8s.io")
            if e.get("reason") == "Stopped"
            and (e.get("regarding") or {}).get("name") == "unsuspended"
            and e.get("note") == "Not admitted by cluster queue"
        ],
        until=bool,
        timeout=30,
        what="a Stopped Event on the Job",
    )
    after = workload_of(federation, "unsuspended")
    assert after is not None
    assert after["metadata"]["uid"] == wl["metadata"]["uid"]
    assert not is_true(after, "QuotaReserved")
    federation.kubectl(MANAGER, "delete", "job", "unsuspended", "--wait=false")


def test_a_queued_workload_edited_by_hand_is_brought_back_in_line_with_its_job(federation: Federation) -> None:
    """The Job says what its Workload asks for: a queued Workload whose pod count someone edits is put back at once
    (Event UpdatedWorkload), as Kueue does; before, it kept asking for the edited count until kfed-manager
    restarted."""
    submit(federation, "hand-edited", cpu="1000")  # more than the ClusterQueue's quota: it stays queued
    wl = wait_pending(federation, "hand-edited")
    name = wl["metadata"]["name"]
    edit = json.dumps([{"op": "replace", "path": "/spec/podSets/0/count", "value": 3}])
    federation.kubectl(MANAGER, "patch", "workloads.kueue.x-k8s.io", name, "--type", "json", "-p", edit)
    back = wait_for(
        lambda: workload_of(federation, "hand-edited"),
        until=lambda w: w is not None and int(w["metadata"]["generation"]) > int(wl["metadata"]["generation"]) + 1,
        timeout=30,
        what="the edited Workload put back in line with its Job",
    )
    assert back is not None
    assert back["metadata"]["uid"] == wl["metadata"]["uid"]
    assert back["spec"]["podSets"][0]["count"] == 1
    wait_for(  # the Event is sent off the reconcile path: it may trail the Workload's update
        lambda: [
            e
            for e in items(federation, MANAGER, "events.events.k8s.io")
            if e.get("reason") == "UpdatedWorkload" and name in str(e.get("note"))
        ],
        until=bool,
        timeout=30,
        what="an UpdatedWorkload Event naming the edited Workload",
    )
    federation.kubectl(MANAGER, "delete", "job", "hand-edited", "--wait=false")
