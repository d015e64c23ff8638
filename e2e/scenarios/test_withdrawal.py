"""A dispatch that cannot progress is taken back and dispatched again, with the reason on the manager (SCENARIOS
S7, F9): a foreign Job holding the name on a worker, copies deleted by someone on the worker, the manager
Workload deleted under a running Job. In every case the Job runs on at most one worker at a time and ends
Complete, and objects kfed did not create are never touched."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from e2e.queues import job_manifest
from e2e.rig.controllers import KFED_NAMESPACE
from e2e.rig.federation import MANAGER, Federation
from e2e.scenarios.helpers import (
    DISPATCH_TIMEOUT,
    WORKER_LOST_TIMEOUT,
    condition,
    get,
    is_true,
    items,
    remote_copies,
    running_on,
    submit,
    wait_complete,
    worker_of,
    workload_of,
)
from e2e.waiting import wait_for

pytestmark = pytest.mark.e2e

HOLD_FINALIZER = '{"metadata":{"finalizers":["example.com/hold"]}}'

EXCLUDED = "kfed.io/excluded-clusters"


def _events(fed: Federation, reason: str, name: str) -> list[dict[str, Any]]:
    return [
        e
        for e in items(fed, MANAGER, "events.events.k8s.io")
        if e.get("reason") == reason and name in (e.get("regarding") or {}).get("name", "")
    ]


def _noted(fed: Federation, reason: str, name: str, text: str) -> bool:
    """An Event with ``reason`` about ``name`` says ``text`` (the Requeued condition says BackoffFinished by then)."""
    return any(text in str(e.get("note")) for e in _events(fed, reason, name))


def _foreign_job(name: str) -> dict[str, Any]:
    manifest = job_manifest(name, namespace="default", cpu="1", seconds=600)
    manifest["metadata"]["labels"] = {"owner": "someone-else"}
    manifest["spec"]["suspend"] = True
    return manifest


def _complete_on_one_worker_at_a_time(fed: Federation, job: str, timeout: float = 120) -> None:
    """Wait for Complete while checking that live copies (not being deleted) are never on two workers at once.

    Two workers cannot be sampled atomically: a copy seen live on one worker just before kfed deletes it can
    appear next to the new dispatch seen a moment later on another. Once kfed has asked to delete a copy it is
    never live again, so a real overlap shows in two samples in a row, and only that fails the test."""
    deadline = time.monotonic() + timeout
    previous: dict[str, list[str]] = {}
    while True:
        copies = remote_copies(fed, job, live_only=True)
        assert not (len(copies) > 1 and len(previous) > 1), f"{job} has live copies on two workers: {copies}"
        previous = copies
        manager_job = get(fed, MANAGER, "job", job)
        if is_true(manager_job, "Complete"):
            return
        assert not is_true(manager_job, "Failed"), manager_job
        assert time.monotonic() < deadline, f"{job} not Complete after {timeout:.0f}s; last: {manager_job}"
        time.sleep(0.3)


def test_s7_f9_a_foreign_job_holding_the_name_is_never_touched_and_the_workload_goes_elsewhere(
    federation: Federation,
) -> None:
    before = {}
    for worker in federation.workers:
        federation.kubectl(worker, "create", "-f", "-", input=json.dumps(_foreign_job("f9-foreign")))
        before[worker] = get(federation, worker, "job", "f9-foreign")
    try:
        submit(federation, "f9-foreign", cpu="1", seconds=1)
        # Every worker holds a foreign Job of that name: the workload waits, saying why, with nothing of ours left.
        workload = wait_for(
            lambda: workload_of(federation, "f9-foreign"),
            until=lambda wl: (
                set(((wl or {}).get("metadata", {}).get("annotations") or {}).get(EXCLUDED, "").split(","))
                == set(federation.workers)
                and "did not create" in str((condition(wl, "QuotaReserved") or {}).get("message"))
            ),
            timeout=90,
            what="f9-foreign excluded from both workers and waiting with the reason",
        )
        assert workload is not None
        assert not is_true(workload, "QuotaReserved")
        assert _events(federation, "RemoteObjectConflict", workload["metadata"]["name"])
        wait_for(
            lambda: remote_copies(federation, "f9-foreign"),
            until=lambda c: all(kinds == ["job"] for kinds in c.values()),
            timeout=30,
            what="no Workload copy of ours left on any worker",
        )
        for worker in federation.workers:
            after = get(federation, worker, "job", "f9-foreign")
            assert after is not None, "the foreign Job was deleted"
            assert after["metadata"]["uid"] == before[worker]["metadata"]["uid"]  # type: ignore[index]
            assert after["metadata"]["labels"] == {"owner": "someone-else"}
            assert after["spec"]["suspend"] is True
        # The owner of worker-2's Job removes it, and the operator allows worker-2 again: the Job runs there.
        federation.kubectl("worker-2", "delete", "job", "f9-foreign", "--wait=true")
        federation.kubectl(
            MANAGER,
            "annotate",
            "--overwrite",
            "workloads.kueue.x-k8s.io",
            workload["metadata"]["name"],
            f"{EXCLUDED}=worker-1",
        )
        wait_complete(federation, "f9-foreign", timeout=90)
        assert worker_of(federation, "f9-foreign") in (None, "worker-2")
        foreign = get(federation, "worker-1", "job", "f9-foreign")
        assert foreign is not None
        assert foreign["metadata"]["uid"] == before["worker-1"]["metadata"]["uid"]  # type: ignore[index]
    finally:
        for worker in federation.workers:
            federation.kubectl(worker, "delete", "job", "f9-foreign", "--ignore-not-found", "--wait=false")


@pytest.mark.parametrize("kind", ["job", "workloads.kueue.x-k8s.io", "unlabelled job"])
def test_f9_a_copy_deleted_on_the_worker_while_running_is_requeued_and_runs_again(
    federation: Federation, kind: str
) -> None:
    """Deleted, or (``unlabelled job``) its origin label taken off, which hides it from kfed as if deleted: either
    way it must not run on next to the new dispatch, and the message names both possibilities."""
    name = {"job": "f9-job", "workloads.kueue.x-k8s.io": "f9-wl", "unlabelled job": "f9-unlabelled"}[kind]
    submit(federation, name, cpu="1", seconds=8)
    worker = running_on(federation, name)
    workload = workload_of(federation, name)
    assert workload is not None
    if kind == "unlabelled job":
        federation.kubectl(worker, "label", "job", name, "kueue.x-k8s.io/multikueue-origin-")
    else:
        target = name if kind == "job" else workload["metadata"]["name"]
        federation.kubectl(worker, "delete", kind, target, "--wait=false")
    _complete_on_one_worker_at_a_time(federation, name)
    requeued = condition(workload_of(federation, name), "Requeued")
    assert requeued is not None
    # Kueue: Requeued=False reason AdmissionCheck on release, then True reason BackoffFinished (no backoff here)
    assert (requeued["status"], requeued["reason"]) == ("True", "BackoffFinished")
    assert _noted(federation, "EvictedDueToAdmissionCheck", workload["metadata"]["name"], "was deleted")
    wait_for(  # Kueue: the Job it suspends for an eviction gets Stopped, with the eviction's message
        lambda: _noted(federation, "Stopped", name, "was deleted while the workload was admitted there"),
        until=bool,
        timeout=15,
        what=f"a Stopped Event on the Job {name}",
    )
    evictions = _events(federation, "EvictedDueToAdmissionCheck", workload["metadata"]["name"])
    assert {e.get("type") for e in evictions} == {"Normal"}, "Kueue records its EvictedDueTo… Events as Normal"
    # Kueue: the next reservation turns Evicted False, reason QuotaReserved, keeping what the eviction was
    evicted = condition(workload_of(federation, name), "Evicted")
    assert evicted is not None
    assert (evicted["status"], evicted["reason"]) == ("False", "QuotaReserved")
    assert evicted["message"].startswith(
        f"Previously: the {'Workload' if 'workload' in kind else 'Job'} copy in worker"
    )
    assert evicted["message"].endswith(
        "(or lost its kueue.x-k8s.io/multikueue-origin label, by which kfed finds its copies)"
    )
    wait_for(lambda: remote_copies(federation, name), until=lambda c: c == {}, timeout=30, what="copies removed")


def test_f9_a_running_job_whose_manager_workload_is_deleted_gets_a_new_one_and_completes(
    federation: Federation,
) -> None:
    submit(federation, "f9-mwl", cpu="1", seconds=8)
    running_on(federation, "f9-mwl")
    old = workload_of(federation, "f9-mwl")
    assert old is not None
    federation.kubectl(MANAGER, "delete", "workloads.kueue.x-k8s.io", old["metadata"]["name"], "--wait=false")
    new = wait_for(
        lambda: workload_of(federation, "f9-mwl"),
        until=lambda wl: wl is not None and wl["metadata"]["uid"] != old["metadata"]["uid"],
        timeout=60,
        what="a new Workload for f9-mwl",
    )
    assert new is not None
    _complete_on_one_worker_at_a_time(federation, "f9-mwl")
    assert is_true(workload_of(federation, "f9-mwl"), "Finished")
    job = get(federation, MANAGER, "job", "f9-mwl")
    assert job is not None
    wait_for(
        lambda: _noted(federation, "Stopped", "f9-mwl", "Missing Workload; unable to restore pod templates"),
        until=bool,
        timeout=15,
        what="Kueue's Stopped Event on f9-mwl",
    )
    wait_for(lambda: remote_copies(federation, "f9-mwl"), until=lambda c: c == {}, timeout=30, what="copies removed")


def test_a_running_jobs_workload_a_finalizer_holds_while_deleted_stops_the_job_until_it_goes(
    federation: Federation,
) -> None:
    """Someone put a finalizer on a running Job's Workload, then deleted the Workload: it stays, being deleted. As
    Kueue does for a Workload being deleted, the Job is stopped and its copies removed from the worker; once the
    Workload goes, a new one runs the Job to its end. Before, the Job ran on as if nothing had happened, and the
    Workload was kept for good by nobody's decision."""
    submit(federation, "held-wl", cpu="1", seconds=20)
    running_on(federation, "held-wl")
    old = workload_of(federation, "held-wl")
    assert old is not None
    name = old["metadata"]["name"]
    federation.kubectl(MANAGER, "patch", "workloads.kueue.x-k8s.io", name, "--type=merge", "-p", HOLD_FINALIZER)
    try:
        federation.kubectl(MANAGER, "delete", "workloads.kueue.x-k8s.io", name, "--wait=false")
        wait_for(
            lambda: get(federation, MANAGER, "job", "held-wl"),
            until=lambda j: j is not None and j["spec"].get("suspend") is True,
            timeout=30,
            what="the Job stopped while its Workload is being deleted",
        )
        wait_for(lambda: remote_copies(federation, "held-wl"), until=lambda c: c == {}, timeout=30, what="no copies")
        wait_for(
            lambda: _noted(federation, "Stopped", "held-wl", "Workload is deleted"),
            until=bool,
            timeout=15,
            what="Kueue's Stopped Event on held-wl",
        )
        still = workload_of(federation, "held-wl")
        assert still is not None
        assert still["metadata"]["uid"] == old["metadata"]["uid"], "no new one while it stays"
    finally:
        federation.kubectl(
            MANAGER,
            "patch",
            "workloads.kueue.x-k8s.io",
            name,
            "--type=json",
            "-p",
            '[{"op":"remove","path":"/metadata/finalizers"}]',
            check=False,
        )
    wait_for(
        lambda: workload_of(federation, "held-wl"),
        until=lambda wl: wl is not None and wl["metadata"]["uid"] != old["metadata"]["uid"],
        timeout=60,
        what="a new Workload once the old one is gone",
    )
    _complete_on_one_worker_at_a_time(federation, "held-wl")


def test_a_running_job_scaled_by_its_user_is_stopped_and_runs_again_at_its_new_size(
    federation: Federation,
) -> None:
    """Kueue's rule: a running Job whose pod count no longer matches its admitted Workload loses the Workload
    (Event DeletedWorkload) and is queued again at its new size; it never runs on two workers at once."""
    manifest = job_manifest("rescaled", namespace="default", cpu="1", seconds=10)
    manifest["spec"]["completions"] = 3  # one pod at a time, three in all
    federation.kubectl(MANAGER, "create", "-f", "-", input=json.dumps(manifest))
    running_on(federation, "rescaled")
    old = workload_of(federation, "rescaled")
    assert old is not None
    federation.kubectl(MANAGER, "patch", "job", "rescaled", "--type", "merge", "-p", '{"spec":{"parallelism":2}}')
    new = wait_for(
        lambda: workload_of(federation, "rescaled"),
        until=lambda wl: wl is not None and wl["metadata"]["uid"] != old["metadata"]["uid"],
        timeout=60,
        what="a new Workload for the rescaled Job",
    )
    assert new is not None
    assert new["spec"]["podSets"][0]["count"] == 2, "queued again at its new size"
    assert _noted(federation, "DeletedWorkload", "rescaled", "Deleted not matching Workload")
    wait_for(
        lambda: _noted(federation, "Stopped", "rescaled", "No matching Workload; restoring pod templates"),
        until=bool,
        timeout=15,
        what="Kueue's Stopped Event on rescaled",
    )
    _complete_on_one_worker_at_a_time(federation, "rescaled")
    done = workload_of(federation, "rescaled")
    assert done is not None
    assert done["metadata"]["uid"] == new["metadata"]["uid"], "replaced once, not again"
    assert done["status"]["admission"]["podSetAssignments"][0]["count"] == 2
    wait_for(lambda: remote_copies(federation, "rescaled"), until=lambda c: c == {}, timeout=30, what="copies removed")


def test_f9_a_job_copy_scaled_on_its_worker_is_taken_back_and_runs_again_at_its_managers_size(
    federation: Federation,
) -> None:
    """Someone raises the parallelism of the Job copy on the worker: its pods would outrun the quota the copy holds
    there. As Kueue finishes such a prebuilt Workload out of sync, the agent evicts the copy (``OutOfSync``, the
    counts in the message), the manager takes it back and sends the Job again as the manager Job says."""
    manifest = job_manifest("copy-scaled", namespace="default", cpu="1", seconds=6)
    manifest["spec"]["completions"] = 3  # one pod at a time, three in all
    federation.kubectl(MANAGER, "create", "-f", "-", input=json.dumps(manifest))
    worker = running_on(federation, "copy-scaled")
    workload = workload_of(federation, "copy-scaled")
    assert workload is not None
    name = workload["metadata"]["name"]
    federation.kubectl(worker, "patch", "job", "copy-scaled", "--type", "merge", "-p", '{"spec":{"parallelism":3}}')
    wait_for(
        lambda: _noted(federation, "EvictedDueToAdmissionCheck", name, "OutOfSync: the Job copy runs 3 pods at once"),
        until=bool,
        timeout=30,
        what="the scaled copy evicted out of sync, the counts on the manager",
    )
    _complete_on_one_worker_at_a_time(federation, "copy-scaled")
    done = workload_of(federation, "copy-scaled")
    assert done is not None
    assert done["metadata"]["uid"] == workload["metadata"]["uid"], "the manager Workload is kept, only its copy goes"
    assert done["status"]["admission"]["podSetAssignments"][0]["count"] == 1
    job = get(federation, MANAGER, "job", "copy-scaled")
    assert job is not None
    assert (job["spec"]["parallelism"], job["status"]["succeeded"]) == (1, 3)
    wait_for(
        lambda: remote_copies(federation, "copy-scaled"), until=lambda c: c == {}, timeout=30, what="copies removed"
    )


def _withdrawn_from(fed: Federation, job: str) -> set[str]:
    wl = workload_of(fed, job) or {}
    text = ((wl.get("metadata") or {}).get("annotations") or {}).get("kfed.io/withdrawn-from", "")
    return {name for name in text.split(",") if name}


def test_f9_a_worker_that_does_not_admit_in_time_is_withdrawn_and_the_job_runs_elsewhere(
    federation: Federation,
) -> None:
    """Both agents frozen: the copy sits unadmitted past the dispatch timeout on whichever worker got it; it is
    withdrawn and sent to the other worker, where it runs once that agent is back. Meanwhile the reservation, held
    back for the agent's admission, is written on its own once the hold runs out (``--reservation-hold``, 2 s)."""
    with federation.paused_controller("kfed-agent-worker-1"), federation.paused_controller("kfed-agent-worker-2"):
        submit(federation, "f9-timeout", cpu="1", seconds=1)
        wait_for(
            lambda: workload_of(federation, "f9-timeout"),
            until=lambda wl: (
                wl is not None
                and is_true(wl, "QuotaReserved")
                and bool((wl.get("status") or {}).get("nominatedClusterNames"))
            ),
            timeout=DISPATCH_TIMEOUT / 2,
            what="f9-timeout's reservation written on its own once the hold ran out (no agent admits the copy)",
        )
        first = wait_for(
            lambda: _withdrawn_from(federation, "f9-timeout"),
            until=bool,
            timeout=DISPATCH_TIMEOUT + 40,
            what="f9-timeout withdrawn after the dispatch timeout",
        )
    assert len(first) == 1
    _complete_on_one_worker_at_a_time(federation, "f9-timeout")
    ran_on = [w for w in federation.workers if w not in first]
    assert _noted(federation, "EvictedDueToAdmissionCheck", "f9-timeout", "dispatch timeout")
    assert worker_of(federation, "f9-timeout") in (None, *ran_on)


def test_f5_an_eviction_on_the_worker_requeues_and_the_job_runs_again_preferring_another_worker(
    federation: Federation,
) -> None:
    submit(federation, "f5-evict", cpu="1", seconds=8)
    worker = running_on(federation, "f5-evict")
    workload = workload_of(federation, "f5-evict")
    assert workload is not None
    evicted = {
        "type": "Evicted",
        "status": "True",
        "reason": "Preempted",
        "message": "Preempted to accommodate a higher priority workload",
        "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    # What a worker's Kueue does when it preempts the copy there.
    federation.kubectl(
        worker,
        "patch",
        "workloads.kueue.x-k8s.io",
        workload["metadata"]["name"],
        "--subresource=status",
        "--type=json",
        "-p",
        json.dumps([{"op": "add", "path": "/status/conditions/-", "value": evicted}]),
    )
    wait_for(
        lambda: _withdrawn_from(federation, "f5-evict"),
        until=lambda found: found == {worker},
        timeout=30,
        what=f"f5-evict withdrawn from {worker}",
    )
    _complete_on_one_worker_at_a_time(federation, "f5-evict")
    assert _noted(federation, "EvictedDueToAdmissionCheck", "f5-evict", f'evicted in worker cluster "{worker}"')
    assert _noted(federation, "EvictedDueToAdmissionCheck", "f5-evict", "Preempted")
    other = next(w for w in federation.workers if w != worker)
    assert worker_of(federation, "f5-evict") in (None, other)


def test_f2_a_brief_blip_of_the_worker_evicts_nothing(federation: Federation) -> None:
    submit(federation, "f2-blip", cpu="1", seconds=8)
    worker = running_on(federation, "f2-blip")
    with federation.paused(worker):
        # Well short of the worker-lost timeout: the manager notices (Active=False) but keeps the workload there.
        wait_for(
            lambda: condition(get(federation, MANAGER, "multikueuecluster", worker, namespace="kfed-system"), "Active"),
            until=lambda c: c is not None and c["status"] == "False",
            timeout=WORKER_LOST_TIMEOUT / 2,
            what=f"{worker} Active=False",
        )
    _complete_on_one_worker_at_a_time(federation, "f2-blip")
    assert worker_of(federation, "f2-blip") == worker
    assert condition(workload_of(federation, "f2-blip"), "Requeued") is None


def test_f1_a_worker_lost_past_the_timeout_has_its_workload_requeued_elsewhere_and_its_copies_collected(
    federation: Federation,
) -> None:
    submit(federation, "f1-lost", cpu="1", seconds=6)
    worker = running_on(federation, "f1-lost")
    other = next(w for w in federation.workers if w != worker)
    with federation.paused(worker):
        requeued = wait_for(
            lambda: condition(workload_of(federation, "f1-lost"), "Requeued"),
            until=lambda c: c is not None and c["status"] == "True",
            timeout=WORKER_LOST_TIMEOUT + 30,
            what="f1-lost requeued after the worker-lost timeout",
        )
        assert requeued is not None
        assert _noted(federation, "EvictedDueToAdmissionCheck", "f1-lost", "worker-lost timeout")
        # While it waited, its Workload and Job said what for, and until when.
        told = _events(federation, "WorkerUnreachable", "f1-lost")
        assert {e["regarding"]["kind"] for e in told} == {"Workload", "Job"}, told
        assert all(f'worker cluster "{worker}" has not answered since' in e["note"] for e in told), told
        wait_for(
            lambda: worker_of(federation, "f1-lost"),
            until=lambda w: w == other,
            timeout=60,
            what=f"f1-lost dispatched to {other}",
        )
    # Back: its stale copies there are deleted; the Job completes where it was sent again.
    wait_for(
        lambda: remote_copies(federation, "f1-lost").get(worker),
        until=lambda kinds: not kinds,
        timeout=30,
        what=f"stale copies of f1-lost removed from {worker}",
    )
    wait_complete(federation, "f1-lost", timeout=90)


@pytest.mark.parametrize("change", ["deleted", "unusable-kubeconfig", "other-server"])
def test_a_workload_on_a_worker_kfed_drops_says_why_and_is_requeued_past_the_timeout(
    federation: Federation, change: str
) -> None:
    """Deleting a worker's MultiKueueCluster, or pointing it at a kubeconfig that cannot be used, drops kfed's
    connection to that worker: no watch of it will bring its Workloads back, yet each must say what it waits for and
    be requeued past the worker-lost timeout, like a worker that stopped answering (Kueue leaves it admitted there,
    waiting). So does pointing it at a kubeconfig of another API server (here the manager's): the copies are not
    seen there, but they were not deleted, they run on out of reach. Before, that workload was sent again at once,
    as if its copies had been deleted, and ran on two clusters."""
    job = f"dropped-{change[:8]}"
    submit(federation, job, cpu="1", seconds=6)
    worker = running_on(federation, job)
    other = next(w for w in federation.workers if w != worker)
    cluster = get(federation, MANAGER, "multikueuecluster", worker)
    assert cluster is not None
    kept = {
        "apiVersion": cluster["apiVersion"],
        "kind": cluster["kind"],
        "metadata": {k: v for k, v in cluster["metadata"].items() if k in ("name", "labels", "annotations")},
        "spec": cluster["spec"],
    }
    if change == "deleted":
        federation.kubectl(MANAGER, "delete", "multikueuecluster", worker)
        problem = f"(no MultiKueueCluster {worker})"
    elif change == "unusable-kubeconfig":
        source = {"kubeConfig": {"locationType": "Secret", "location": f"{job}-no-such-secret"}}
        patch = json.dumps({"spec": {"clusterSource": source}})
        federation.kubectl(MANAGER, "patch", "multikueuecluster", worker, "--type=merge", "-p", patch)
        problem = f"(BadKubeConfig: Secret {KFED_NAMESPACE}/{job}-no-such-secret not found"
    else:
        federation.kubectl(
            MANAGER,
            "-n",
            KFED_NAMESPACE,
            "create",
            "secret",
            "generic",
            f"{job}-kubeconfig",
            f"--from-file=kubeconfig={federation.kubeconfig(MANAGER)}",
        )
        source = {"kubeConfig": {"locationType": "Secret", "location": f"{job}-kubeconfig"}}
        patch = json.dumps({"spec": {"clusterSource": source}})
        federation.kubectl(MANAGER, "patch", "multikueuecluster", worker, "--type=merge", "-p", patch)
        now, was = federation.clusters[MANAGER].server, federation.clusters[worker].server
        problem = f"(its kubeconfig now reaches {now}, not {was}, where the workload's copies were sent)"
    try:
        told = wait_for(
            lambda: _events(federation, "WorkerUnreachable", job),
            until=lambda events: {e["regarding"]["kind"] for e in events} == {"Workload", "Job"},
            timeout=30,
            what=f"{job}'s Workload and Job told why its worker cannot be used",
        )
        says = (f'worker cluster "{worker}" cannot be used since', problem)
        assert all(all(part in e["note"] for part in says) for e in told), told
        wait_for(
            lambda: condition(workload_of(federation, job), "Requeued"),
            until=lambda c: c is not None and c["status"] == "True",
            timeout=WORKER_LOST_TIMEOUT + 30,
            what=f"{job} requeued after the worker-lost timeout",
        )
        assert _noted(federation, "EvictedDueToAdmissionCheck", job, "worker-lost timeout")
        wait_for(
            lambda: worker_of(federation, job),
            until=lambda w: w == other,
            timeout=60,
            what=f"{job} dispatched to {other}",
        )
    finally:
        federation.kubectl(MANAGER, "apply", "-f", "-", input=json.dumps(kept))
        federation.kubectl(
            MANAGER, "-n", KFED_NAMESPACE, "delete", "secret", f"{job}-kubeconfig", "--ignore-not-found", check=False
        )
        wait_for(
            lambda: condition(get(federation, MANAGER, "multikueuecluster", worker), "Active"),
            until=lambda c: c is not None and c["status"] == "True",
            timeout=60,
            what=f"{worker}'s MultiKueueCluster active again",
        )
    # Back: its copies there, which ran on unseen, are deleted; the Job completes where it was sent again.
    wait_for(
        lambda: remote_copies(federation, job).get(worker),
        until=lambda kinds: not kinds,
        timeout=30,
        what=f"stale copies of {job} removed from {worker}",
    )
    wait_complete(federation, job, timeout=90)


def _set_active(fed: Federation, workload: str, *, active: bool) -> None:
    patch = json.dumps({"spec": {"active": active}})
    fed.kubectl(MANAGER, "patch", "workloads.kueue.x-k8s.io", workload, "--type=merge", "-p", patch)


def test_a_withdrawn_copy_a_finalizer_holds_is_named_and_given_up_on_after_the_worker_lost_timeout(
    federation: Federation,
) -> None:
    """Someone put a finalizer on a running Job copy; then its Workload is deactivated. The copy's pods go, but the
    Job copy stays, being deleted. kfed-manager waits for it, as for any withdrawal. It names the finalizer on the
    Workload and the Job within seconds (Warning Event ``CopiesNotDeleted``), then gives up after the worker-lost
    timeout: the quota is released and the manager Job suspended. Before, the withdrawal waited for good without a
    word, the Workload held its quota and the manager Job showed a pod running."""
    submit(federation, "held-copy", cpu="1", seconds=600)
    worker = running_on(federation, "held-copy")
    federation.kubectl(worker, "patch", "job", "held-copy", "--type=merge", "-p", HOLD_FINALIZER)
    try:
        workload = workload_of(federation, "held-copy")
        assert workload is not None
        name = workload["metadata"]["name"]
        federation.kubectl(
            MANAGER, "patch", "workloads.kueue.x-k8s.io", name, "--type=merge", "-p", '{"spec":{"active":false}}'
        )

        def notes() -> list[str]:
            return [
                str(e.get("note"))
                for e in items(federation, MANAGER, "events.events.k8s.io")
                if e.get("reason") == "CopiesNotDeleted" and (e.get("regarding") or {}).get("name") == name
            ]

        waiting = wait_for(notes, until=bool, timeout=30, what="the held copy named on the Workload")
        assert "finalizers example.com/hold hold it" in waiting[0], waiting
        assert f'in worker cluster "{worker}"' in waiting[0], waiting
        released = wait_for(
            lambda: workload_of(federation, "held-copy"),
            until=lambda wl: wl is not None and not is_true(wl, "QuotaReserved"),
            timeout=WORKER_LOST_TIMEOUT + 30,
            what="the quota released once the worker-lost timeout passed",
        )
        assert is_true(released, "Evicted")
        assert any("requeued without waiting for them" in note for note in notes()), notes()
        job = get(federation, MANAGER, "job", "held-copy")
        assert job is not None
        assert job["spec"]["suspend"] is True
        assert not (job.get("status") or {}).get("active")
    finally:
        federation.kubectl(
            worker,
            "patch",
            "job",
            "held-copy",
            "--type=json",
            "-p",
            '[{"op":"remove","path":"/metadata/finalizers"}]',
            check=False,
        )
    wait_for(
        lambda: get(federation, worker, "job", "held-copy"),
        until=lambda j: j is None,
        timeout=30,
        what="the copy gone once its finalizer is",
    )
    federation.kubectl(MANAGER, "delete", "job", "held-copy", "--wait=false")


def test_deactivating_a_running_workload_withdraws_it_and_reactivating_runs_it_again(federation: Federation) -> None:
    submit(federation, "deact", cpu="1", seconds=6)
    running_on(federation, "deact")
    workload = workload_of(federation, "deact")
    assert workload is not None
    name = workload["metadata"]["name"]
    federation.kubectl(
        MANAGER, "patch", "workloads.kueue.x-k8s.io", name, "--type=merge", "-p", '{"spec":{"active":false}}'
    )
    off = wait_for(
        lambda: workload_of(federation, "deact"),
        until=lambda wl: not is_true(wl, "QuotaReserved") and is_true(wl, "Evicted"),
        timeout=30,
        what="deact withdrawn and its quota released",
    )
    evicted = condition(off, "Evicted")
    assert evicted is not None
    assert evicted["reason"] == "Deactivated"
    requeued = condition(off, "Requeued")  # Kueue: released, not queued again until reactivated
    assert requeued is not None
    assert (requeued["status"], requeued["reason"], requeued["message"]) == ("False", "Deactivated", evicted["message"])
    assert remote_copies(federation, "deact", live_only=True) == {}
    job = get(federation, MANAGER, "job", "deact")
    assert job is not None
    assert job["spec"]["suspend"] is True
    federation.kubectl(
        MANAGER, "patch", "workloads.kueue.x-k8s.io", name, "--type=merge", "-p", '{"spec":{"active":true}}'
    )
    reactivated = wait_for(
        lambda: condition(workload_of(federation, "deact"), "Requeued"),
        until=lambda c: c is not None and c["status"] == "True",
        timeout=30,
        what="deact requeued once reactivated",
    )
    assert reactivated is not None
    assert (reactivated["reason"], reactivated["message"]) == ("Reactivated", "The workload was reactivated")
    _complete_on_one_worker_at_a_time(federation, "deact")


@pytest.mark.parametrize("taken", ["copy", "workload"])
def test_a_job_taken_back_after_some_pods_succeeded_runs_again_and_ends_complete(
    federation: Federation, taken: str
) -> None:
    """The apiserver never lets a Job's ``succeeded`` count go down: a manager Job stopped after a pod succeeded
    keeps its count, runs again from the start on its new copy, and ends Complete with the copy's count. Before,
    the stop's status write was refused for good and the Job stayed stopped (its copy deleted) or never ended (its
    Workload deleted)."""
    name = f"partly-done-{taken}"
    manifest = job_manifest(name, namespace="default", cpu="1", seconds=4)
    manifest["spec"]["completions"] = 4  # one pod at a time, four in all
    federation.kubectl(MANAGER, "create", "-f", "-", input=json.dumps(manifest))
    wait_for(
        lambda: get(federation, MANAGER, "job", name),
        until=lambda j: int(((j or {}).get("status") or {}).get("succeeded", 0)) >= 1,
        timeout=90,
        what=f"{name} with a pod succeeded",
    )
    first = workload_of(federation, name)
    assert first is not None
    if taken == "copy":
        worker = worker_of(federation, name)
        assert worker is not None
        federation.kubectl(worker, "delete", "job", name, "--wait=false")
    else:
        federation.kubectl(MANAGER, "delete", "workloads.kueue.x-k8s.io", first["metadata"]["name"], "--wait=false")
    _complete_on_one_worker_at_a_time(federation, name, timeout=180)
    job = get(federation, MANAGER, "job", name)
    assert job is not None
    assert job["status"]["succeeded"] == 4
    done = workload_of(federation, name)
    assert done is not None
    assert is_true(done, "Finished")
    if taken == "copy":
        assert is_true(done, "Requeued")
        assert done["metadata"]["uid"] == first["metadata"]["uid"]
    else:
        assert done["metadata"]["uid"] != first["metadata"]["uid"]
    assert not _events(federation, "SyncFailed", name), "no status write of the Job was refused"
    wait_for(lambda: remote_copies(federation, name), until=lambda c: c == {}, timeout=30, what="copies removed")
