"""A ClusterQueue with kfed's MultiKueue check and a second, external admission check (issue 8, item 6).

The second check belongs to another controller (``example.com/gate``): the test plays that controller by writing
the check's state on the Workload's status, as an external controller would.

The gate also holds a Job with its quota reserved before it runs, which is where a user's edits of a Job are
tested, as Kueue handles them: a waiting Job's Workload follows the Job (updated without quota, replaced with
quota); a waiting Job relabelled with another queue moves its Workload there.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest

from e2e.queues import CLUSTER_QUEUE, FLAVOR, LOCAL_QUEUE, job_manifest, workload_manifest
from e2e.rig.audit import created_names
from e2e.rig.controllers import ADMISSION_CHECK, MULTIKUEUE_CONFIG
from e2e.rig.federation import MANAGER, Federation
from e2e.scenarios.helpers import (
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

GATE = "e2e-gate"
GATED_CQ = "e2e-gated"
GATED_LQ = "e2e-gated"


def _apply(fed: Federation, cluster: str, *objects: dict[str, Any]) -> None:
    fed.kubectl(cluster, "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))


def _local_queue(cluster_queue: str) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": GATED_LQ, "namespace": "default"},
        "spec": {"clusterQueue": cluster_queue},
    }


@pytest.fixture(scope="module")
def gated_queue(federation: Federation) -> Iterator[str]:
    """Manager: ClusterQueue with checks [kfed's MultiKueue check, GATE]; workers: the LocalQueue of the same name."""
    gate = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "AdmissionCheck",
        "metadata": {"name": GATE},
        "spec": {"controllerName": "example.com/gate"},
    }
    cluster_queue = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": GATED_CQ},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory"],
                    "flavors": [
                        {
                            "name": FLAVOR,
                            "resources": [
                                {"name": "cpu", "nominalQuota": "8"},
                                {"name": "memory", "nominalQuota": "64Gi"},
                            ],
                        }
                    ],
                }
            ],
            "admissionChecksStrategy": {"admissionChecks": [{"name": ADMISSION_CHECK}, {"name": GATE}]},
        },
    }
    _apply(federation, MANAGER, gate, cluster_queue, _local_queue(GATED_CQ))
    _declare_active(federation, GATE)  # as its controller would: a check not Active keeps the queue from admitting
    for worker in federation.workers:
        _apply(federation, worker, _local_queue(CLUSTER_QUEUE))
    try:
        yield GATED_LQ
    finally:
        for cluster in (MANAGER, *federation.workers):
            federation.kubectl(cluster, "delete", "localqueue", GATED_LQ, "-n", "default", "--wait=false", check=False)
        federation.kubectl(MANAGER, "delete", "clusterqueue", GATED_CQ, "--wait=false", check=False)
        federation.kubectl(MANAGER, "delete", "admissioncheck", GATE, "--wait=false", check=False)


def _declare_active(fed: Federation, check: str) -> None:
    """Write ``Active=True`` on the AdmissionCheck ``check``, as its controller does once it runs (Kueue keeps a
    ClusterQueue that names a check not Active from admitting)."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    active = {"type": "Active", "status": "True", "reason": "Active", "message": "e2e", "lastTransitionTime": now}
    patch = json.dumps({"status": {"conditions": [active]}})
    fed.kubectl(MANAGER, "patch", "admissioncheck", check, "--subresource=status", "--type=merge", "-p", patch)


def _checks(workload: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in ((workload or {}).get("status") or {}).get("admissionChecks") or ()}


def _set_gate(fed: Federation, job: str, *, state: str, message: str) -> None:
    current = workload_of(fed, job)
    assert current is not None
    index = [c["name"] for c in current["status"]["admissionChecks"]].index(GATE)
    patch = [
        {"op": "test", "path": f"/status/admissionChecks/{index}/name", "value": GATE},
        {"op": "replace", "path": f"/status/admissionChecks/{index}/state", "value": state},
        {"op": "replace", "path": f"/status/admissionChecks/{index}/message", "value": message},
    ]
    fed.kubectl(
        MANAGER,
        "patch",
        "workloads.kueue.x-k8s.io",
        current["metadata"]["name"],
        "-n",
        "default",
        "--subresource=status",
        "--type=json",
        "-p",
        json.dumps(patch),
    )


def test_the_job_starts_on_a_worker_only_when_the_other_admission_check_is_ready(
    federation: Federation, gated_queue: str
) -> None:
    submit(federation, "ac-gated", cpu="1", seconds=2, queue=gated_queue)
    workload = wait_for(
        lambda: workload_of(federation, "ac-gated"),
        until=lambda w: is_true(w, "QuotaReserved"),
        timeout=60,
        what="ac-gated to get its quota reservation",
    )
    assert workload is not None
    checks = _checks(workload)
    assert set(checks) == {ADMISSION_CHECK, GATE}, "every check of the ClusterQueue is listed on the Workload"
    assert checks[GATE]["state"] == "Pending"
    assert checks[ADMISSION_CHECK]["state"] == "Pending"
    assert GATE in wait_for(
        lambda: _checks(workload_of(federation, "ac-gated"))[ADMISSION_CHECK]["message"],
        until=lambda message: GATE in message,
        timeout=15,
        what="the MultiKueue check's message to name the check it waits for",
    )

    # While the gate is Pending nothing may reach a worker (sampled over a bounded window after the reservation).
    deadline = time.monotonic() + 8
    while time.monotonic() < deadline:
        for worker in federation.workers:
            assert get(federation, worker, "job", "ac-gated") is None, f"the Job was sent to {worker}"
            name = workload["metadata"]["name"]
            assert get(federation, worker, "workloads.kueue.x-k8s.io", name) is None, f"a copy was sent to {worker}"
        job = get(federation, MANAGER, "job", "ac-gated")
        assert job is not None
        assert job["spec"]["suspend"] is True, "the manager Job was started"
        current = workload_of(federation, "ac-gated")
        assert not is_true(current, "Admitted")
        time.sleep(0.5)

    _set_gate(federation, "ac-gated", state="Ready", message="the gate is open")  # as the external controller would
    job = wait_for(
        lambda: get(federation, MANAGER, "job", "ac-gated"),
        until=lambda j: is_true(j, "Complete") or is_true(j, "Failed"),
        timeout=90,
        what="ac-gated to finish on the manager",
    )
    assert is_true(job, "Complete"), (job or {}).get("status")
    done = workload_of(federation, "ac-gated")
    assert is_true(done, "Admitted")
    assert {name: c["state"] for name, c in _checks(done).items()} == {ADMISSION_CHECK: "Ready", GATE: "Ready"}
    assert _checks(done)[GATE]["message"] == "the gate is open", "kfed never writes another controller's check"


def test_a_rejected_check_deactivates_the_workload_before_anything_is_sent(
    federation: Federation, gated_queue: str
) -> None:
    submit(federation, "ac-rejected", cpu="1", seconds=2, queue=gated_queue)
    wait_for(
        lambda: workload_of(federation, "ac-rejected"),
        until=lambda w: is_true(w, "QuotaReserved"),
        timeout=60,
        what="ac-rejected to get its quota reservation",
    )
    _set_gate(federation, "ac-rejected", state="Rejected", message="no budget left")
    workload = wait_for(
        lambda: workload_of(federation, "ac-rejected"),
        until=lambda w: (w or {}).get("spec", {}).get("active") is False and not is_true(w, "QuotaReserved"),
        timeout=30,
        what="ac-rejected to be deactivated and to release its quota",
    )
    assert workload is not None
    evicted = condition(workload, "Evicted")
    assert evicted is not None
    assert (evicted["status"], evicted["reason"]) == ("True", "DeactivatedDueToAdmissionCheck")
    assert GATE in evicted["message"]
    assert not ((workload or {}).get("status") or {}).get("admission")
    assert remote_copies(federation, "ac-rejected") == {}
    events = wait_for(
        lambda: [
            e
            for e in items(federation, MANAGER, "events.events.k8s.io")
            if e.get("reason") == "AdmissionCheckRejected" and e["regarding"]["name"] == workload["metadata"]["name"]
        ],
        until=bool,
        timeout=30,
        what="an AdmissionCheckRejected event on the Workload",
    )
    assert "no budget left" in events[0]["note"]
    job = get(federation, MANAGER, "job", "ac-rejected")
    assert job is not None
    assert job["spec"]["suspend"] is True
    federation.kubectl(MANAGER, "delete", "job", "ac-rejected", "--wait=false")


def test_a_retry_check_releases_the_reservation_and_the_workload_is_queued_again(
    federation: Federation, gated_queue: str
) -> None:
    submit(federation, "ac-retry", cpu="1", seconds=2, queue=gated_queue)
    wait_for(
        lambda: workload_of(federation, "ac-retry"),
        until=lambda w: is_true(w, "QuotaReserved"),
        timeout=60,
        what="ac-retry to get its quota reservation",
    )
    _set_gate(federation, "ac-retry", state="Retry", message="try again later")
    workload = wait_for(
        lambda: workload_of(federation, "ac-retry"),
        until=lambda w: (
            (condition(w, "Requeued") or {}).get("reason") == "BackoffFinished"
            and is_true(w, "QuotaReserved")
            and _checks(w).get(GATE, {}).get("state") == "Pending"
        ),
        timeout=30,
        what="ac-retry to be requeued by the Retry check and to get a new reservation with the check Pending",
    )
    assert workload is not None
    name = workload["metadata"]["name"]
    events = wait_for(
        lambda: [
            e
            for e in items(federation, MANAGER, "events.events.k8s.io")
            if e.get("reason") == "EvictedDueToAdmissionCheck" and e["regarding"]["name"] == name
        ],
        until=bool,
        timeout=30,
        what="an EvictedDueToAdmissionCheck event on the Workload",
    )
    assert GATE in events[0]["note"]
    assert remote_copies(federation, "ac-retry") == {}, "nothing may reach a worker while the check is not Ready"
    _set_gate(federation, "ac-retry", state="Ready", message="the gate is open")
    job = wait_for(
        lambda: get(federation, MANAGER, "job", "ac-retry"),
        until=lambda j: is_true(j, "Complete") or is_true(j, "Failed"),
        timeout=90,
        what="ac-retry to finish on the manager",
    )
    assert is_true(job, "Complete"), (job or {}).get("status")


def test_a_check_that_asks_to_retry_after_dispatch_withdraws_the_running_job_and_requeues_it(
    federation: Federation, gated_queue: str
) -> None:
    submit(federation, "ac-late", cpu="1", seconds=120, queue=gated_queue)
    wait_for(
        lambda: workload_of(federation, "ac-late"),
        until=lambda w: is_true(w, "QuotaReserved"),
        timeout=60,
        what="ac-late to get its quota reservation",
    )
    _set_gate(federation, "ac-late", state="Ready", message="the gate is open")
    wait_for(
        lambda: get(federation, MANAGER, "job", "ac-late"),
        until=lambda j: bool(((j or {}).get("status") or {}).get("active")),
        timeout=60,
        what="ac-late running (mirrored active pod)",
    )
    worker = worker_of(federation, "ac-late")
    assert worker is not None
    _set_gate(federation, "ac-late", state="Retry", message="the budget was revised")
    wait_for(
        lambda: (get(federation, worker, "job", "ac-late"), workload_of(federation, "ac-late")),
        until=lambda seen: (
            seen[0] is None
            and (condition(seen[1], "Requeued") or {}).get("reason") == "BackoffFinished"
            and _checks(seen[1]).get(GATE, {}).get("state") == "Pending"
        ),
        timeout=60,
        what="the remote Job withdrawn and ac-late requeued with the check Pending again",
    )
    job = get(federation, MANAGER, "job", "ac-late")
    assert job is not None
    assert job["spec"]["suspend"] is True, "the manager Job is stopped while the workload waits again"
    assert remote_copies(federation, "ac-late") == {}
    federation.kubectl(MANAGER, "delete", "job", "ac-late", "--wait=false")


def _job_events(fed: Federation, job: str, reason: str) -> list[dict[str, Any]]:
    return [
        e
        for e in items(fed, MANAGER, "events.events.k8s.io")
        if e.get("reason") == reason and e["regarding"]["kind"] == "Job" and e["regarding"]["name"] == job
    ]


def _scale(fed: Federation, job: str, parallelism: int) -> None:
    fed.kubectl(
        MANAGER,
        "patch",
        "job",
        job,
        "-n",
        "default",
        "--type=merge",
        "-p",
        f'{{"spec":{{"parallelism":{parallelism}}}}}',
    )


def test_a_suspended_jobs_edit_reaches_its_workload_with_and_without_quota(
    federation: Federation, gated_queue: str
) -> None:
    # 10 pods of 1 cpu cannot fit the gated ClusterQueue's 8: the Workload waits without quota.
    submit(federation, "ac-edited", cpu="1", parallelism=10, seconds=1, queue=gated_queue)
    first = wait_pending(federation, "ac-edited")
    assert first["spec"]["podSets"][0]["count"] == 10

    _scale(federation, "ac-edited", 2)  # without quota: the Workload is updated in place, then fits
    updated = wait_for(
        lambda: workload_of(federation, "ac-edited"),
        until=lambda w: w is not None and w["spec"]["podSets"][0]["count"] == 2 and is_true(w, "QuotaReserved"),
        timeout=30,
        what="ac-edited's Workload to follow the Job to 2 pods and get its quota",
    )
    assert updated is not None
    assert updated["metadata"]["uid"] == first["metadata"]["uid"], "a Workload without quota is updated, not replaced"
    assert updated["status"]["admission"]["podSetAssignments"][0]["count"] == 2
    assert wait_for(
        lambda: _job_events(federation, "ac-edited", "UpdatedWorkload"), until=bool, timeout=30, what="UpdatedWorkload"
    )[0]["note"].startswith("Updated not matching Workload for suspended job")

    _scale(federation, "ac-edited", 3)  # with quota (the gate holds it): replaced, and queued anew
    replaced = wait_for(
        lambda: workload_of(federation, "ac-edited"),
        until=lambda w: (
            w is not None
            and w["metadata"]["uid"] != first["metadata"]["uid"]
            and w["spec"]["podSets"][0]["count"] == 3
            and is_true(w, "QuotaReserved")
        ),
        timeout=60,
        what="ac-edited's Workload to be replaced by one of 3 pods holding quota",
    )
    assert replaced is not None
    assert replaced["status"]["admission"]["podSetAssignments"][0]["count"] == 3
    assert wait_for(
        lambda: _job_events(federation, "ac-edited", "DeletedWorkload"), until=bool, timeout=30, what="DeletedWorkload"
    )[0]["note"].startswith("Deleted not matching Workload")

    _set_gate(federation, "ac-edited", state="Ready", message="the gate is open")
    job = wait_complete(federation, "ac-edited", timeout=120)
    assert job["status"].get("succeeded") == 10


def test_a_waiting_job_relabelled_with_another_queue_moves_its_workload_there(
    federation: Federation, gated_queue: str
) -> None:
    # 10 pods of 1 cpu cannot fit the gated ClusterQueue: the Workload waits there without quota.
    submit(federation, "ac-moved", cpu="1", parallelism=10, seconds=1, queue=gated_queue)
    first = wait_pending(federation, "ac-moved")
    assert first["spec"]["queueName"] == gated_queue
    federation.kubectl(
        MANAGER, "label", "job", "ac-moved", "-n", "default", f"kueue.x-k8s.io/queue-name={LOCAL_QUEUE}", "--overwrite"
    )
    moved = wait_for(
        lambda: workload_of(federation, "ac-moved"),
        until=lambda w: w is not None and w["spec"]["queueName"] == LOCAL_QUEUE,
        timeout=30,
        what="ac-moved's Workload to follow its Job to the other LocalQueue",
    )
    assert moved is not None
    assert moved["metadata"]["uid"] == first["metadata"]["uid"]
    done = wait_complete(federation, "ac-moved", timeout=120)  # the other queue has room and no gate
    assert done["status"].get("succeeded") == 10
    final = workload_of(federation, "ac-moved")
    assert final is not None
    assert final["status"]["admission"]["clusterQueue"] != GATED_CQ


def _workload(name: str, *, owner: dict[str, Any] | None = None) -> dict[str, Any]:
    """A Workload made by hand in the MultiKueue LocalQueue (one pod of 1 cpu), owned by ``owner`` if given."""
    return workload_manifest(name, queue=LOCAL_QUEUE, owner=owner)


def _rejected_events(fed: Federation, workload: str) -> list[dict[str, Any]]:
    return [
        e
        for e in items(fed, MANAGER, "events.events.k8s.io")
        if e.get("reason") == "AdmissionCheckRejected" and e["regarding"]["name"] == workload
    ]


def test_a_workload_whose_job_multikueue_cannot_run_is_rejected_deactivated_and_never_sent(
    federation: Federation,
) -> None:
    """As Kueue's MultiKueue does: a Workload with no owner, or owned by a Job that another controller manages, gets
    the MultiKueue check Rejected with Kueue's message, is deactivated and evicted (its quota released, an
    AdmissionCheckRejected Event), and no copy of it ever reaches a worker. Before, its copy went out without a Job
    copy, the worker evicted it 60 s later (JobCopyMissing), the manager sent it again, and so on."""
    other = job_manifest("ac-other-controller", namespace="default", cpu="1", seconds=1)
    other["spec"]["managedBy"] = "example.com/other"  # left alone by kfed (and by the cluster's Job controller)
    created = json.loads(federation.kubectl(MANAGER, "create", "-f", "-", "-o", "json", input=json.dumps(other)).stdout)
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": created["metadata"]["name"]}
    owner["uid"] = created["metadata"]["uid"]
    cases = {
        "ac-no-owner": (None, "No multikueue adapter found"),
        "ac-other-controller": (
            owner,
            'The owner is not managed by Kueue: Expecting spec.managedBy to be "kueue.x-k8s.io/multikueue" '
            'not "example.com/other"',
        ),
    }
    items_ = {"apiVersion": "v1", "kind": "List", "items": [_workload(n, owner=o) for n, (o, _) in cases.items()]}
    federation.kubectl(MANAGER, "create", "-f", "-", input=json.dumps(items_))
    try:
        for name, (_, message) in cases.items():
            workload = wait_for(
                partial(get, federation, MANAGER, "workloads.kueue.x-k8s.io", name),
                until=lambda w: (
                    w is not None and condition(w, "Evicted") is not None and not is_true(w, "QuotaReserved")
                ),
                timeout=60,
                what=f"{name} to be evicted and its quota released",
            )
            assert workload is not None
            assert workload["spec"]["active"] is False
            # Rejected, then (the quota released) reset to Pending as Kueue resets checks after an eviction
            (check,) = [c for c in workload["status"]["admissionChecks"] if c["name"] == ADMISSION_CHECK]
            assert (check["state"], check["message"]) == (
                "Pending",
                "Reset to Pending after eviction. Previously: Rejected",
            )
            evicted = condition(workload, "Evicted")
            assert evicted is not None
            assert (evicted["status"], evicted["reason"]) == ("True", "DeactivatedDueToAdmissionCheck")
            events = wait_for(
                partial(_rejected_events, federation, name),
                until=bool,
                timeout=30,
                what=f"an AdmissionCheckRejected event on {name}",
            )
            assert events[0]["note"] == (  # Kueue v0.19's words
                f'Deactivated due to AdmissionCheck in Rejected state: "{ADMISSION_CHECK}" ({message})'
            )
            for worker in federation.workers:
                sent = created_names(federation.clusters[worker].audit_log, resource="workloads", client="kfed-manager")
                assert f"default/{name}" not in sent, f"{name} was sent to {worker}"
    finally:
        federation.kubectl(
            MANAGER, "delete", "workloads.kueue.x-k8s.io", *cases, "--ignore-not-found", "--wait=false", check=False
        )
        federation.kubectl(MANAGER, "delete", "job", "ac-other-controller", "--ignore-not-found", check=False)


def test_a_cluster_queue_naming_a_missing_admission_check_says_it_cannot_admit_until_the_check_exists(
    federation: Federation,
) -> None:
    """Kueue's ClusterQueue status: ``Active=False`` reason ``AdmissionCheckNotFound`` while a check it references
    does not exist, ``Ready`` once it does. Before, kfed said ``Ready`` while no Workload of the queue could go."""
    missing = "e2e-missing-check"
    queue = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "e2e-missing-check-cq"},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": FLAVOR, "resources": [{"name": "cpu", "nominalQuota": "1"}]}],
                }
            ],
            "admissionChecksStrategy": {"admissionChecks": [{"name": ADMISSION_CHECK}, {"name": missing}]},
        },
    }
    check = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "AdmissionCheck",
        "metadata": {"name": missing},
        "spec": {"controllerName": "example.com/gate"},
    }
    try:
        _apply(federation, MANAGER, queue)
        active = wait_for(
            lambda: condition(get(federation, MANAGER, "clusterqueue", "e2e-missing-check-cq"), "Active"),
            until=lambda c: c is not None and c["reason"] == "AdmissionCheckNotFound",
            timeout=30,
            what="the ClusterQueue inactive for its missing check",
        )
        assert active is not None
        assert active["status"] == "False"
        assert missing in active["message"]
        _apply(federation, MANAGER, check)
        inactive = wait_for(
            lambda: condition(get(federation, MANAGER, "clusterqueue", "e2e-missing-check-cq"), "Active"),
            until=lambda c: c is not None and c["reason"] == "AdmissionCheckInactive",
            timeout=30,
            what="the ClusterQueue inactive while the check's controller has not said it is Active",
        )
        assert inactive is not None
        assert inactive["message"] == f"Can't admit new workloads: references inactive AdmissionCheck(s): {missing}."
        _declare_active(federation, missing)
        wait_for(
            lambda: condition(get(federation, MANAGER, "clusterqueue", "e2e-missing-check-cq"), "Active"),
            until=lambda c: c is not None and (c["status"], c["reason"]) == ("True", "Ready"),
            timeout=30,
            what="the ClusterQueue active once the check exists and is Active",
        )
    finally:
        federation.kubectl(MANAGER, "delete", "clusterqueue", "e2e-missing-check-cq", "--wait=false", check=False)
        federation.kubectl(MANAGER, "delete", "admissioncheck", missing, "--wait=false", check=False)


def test_a_cluster_queue_with_two_multikueue_checks_is_inactive_as_in_kueue_until_one_is_left(
    federation: Federation,
) -> None:
    """Kueue refuses to dispatch for a ClusterQueue with two MultiKueue checks (``MultipleMultiKueueAdmissionChecks``);
    kfed sent its Workloads to the workers of both configurations as if they were one."""
    second, queue = "e2e-second-multikueue", "e2e-two-multikueue"
    check = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "AdmissionCheck",
        "metadata": {"name": second},
        "spec": {
            "controllerName": "kueue.x-k8s.io/multikueue",
            "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": MULTIKUEUE_CONFIG},
        },
    }

    def cluster_queue(*checks: str) -> dict[str, Any]:
        quota = [{"name": "cpu", "nominalQuota": "8"}, {"name": "memory", "nominalQuota": "64Gi"}]
        return {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": queue},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {"coveredResources": ["cpu", "memory"], "flavors": [{"name": FLAVOR, "resources": quota}]}
                ],
                "admissionChecksStrategy": {"admissionChecks": [{"name": name} for name in checks]},
            },
        }

    local_queue = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": queue, "namespace": "default"},
        "spec": {"clusterQueue": queue},
    }

    def active() -> dict[str, Any] | None:
        return condition(get(federation, MANAGER, "clusterqueue", queue), "Active")

    try:
        _apply(federation, MANAGER, check, cluster_queue(ADMISSION_CHECK, second), local_queue)
        for worker in federation.workers:
            _apply(federation, worker, {**local_queue, "spec": {"clusterQueue": CLUSTER_QUEUE}})
        inactive = wait_for(
            active,
            until=lambda c: c is not None and c["reason"] == "MultipleMultiKueueAdmissionChecks",
            timeout=30,
            what="the ClusterQueue inactive for its two MultiKueue checks",
        )
        assert inactive is not None
        assert inactive["status"] == "False"
        assert inactive["message"] == (
            "Can't admit new workloads: Cannot use multiple MultiKueue AdmissionChecks on the same ClusterQueue, "
            f"found: {second},{ADMISSION_CHECK}."
        )
        submit(federation, "two-multikueue", cpu="1", seconds=1, queue=queue)
        waiting = wait_for(
            lambda: condition(workload_of(federation, "two-multikueue"), "QuotaReserved"),
            until=lambda c: c is not None and "Cannot use multiple MultiKueue" in str(c.get("message")),
            timeout=30,
            what="the Job's Workload to wait, saying why",
        )
        assert waiting is not None
        assert waiting["status"] == "False"
        assert remote_copies(federation, "two-multikueue") == {}
        _apply(federation, MANAGER, cluster_queue(ADMISSION_CHECK))
        wait_for(
            active,
            until=lambda c: c is not None and (c["status"], c["reason"]) == ("True", "Ready"),
            timeout=30,
            what="the ClusterQueue active with one MultiKueue check",
        )
        wait_complete(federation, "two-multikueue", timeout=60)
    finally:
        federation.kubectl(MANAGER, "delete", "job", "two-multikueue", "--ignore-not-found", check=False)
        for cluster in (MANAGER, *federation.workers):
            federation.kubectl(cluster, "delete", "localqueue", queue, "-n", "default", "--wait=false", check=False)
        federation.kubectl(MANAGER, "delete", "clusterqueue", queue, "--wait=false", check=False)
        federation.kubectl(MANAGER, "delete", "admissioncheck", second, "--wait=false", check=False)
