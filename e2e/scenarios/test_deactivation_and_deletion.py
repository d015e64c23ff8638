"""Deactivation survives restarts and deletion leaves nothing behind (issue: configuration, retention, clean
deactivation and deletion, item 3).

- A Workload deactivated by its user (``spec.active: false``) while running is withdrawn from its worker; with
  kfed-manager and the worker's kfed-agent both stopped and started again, it stays inactive: no quota, no copy, the
  Job suspended, while other Jobs run through the restarted federation.
- A Workload deactivated while it waits without quota is marked ``Evicted`` (reason ``Deactivated``) as Kueue marks
  it, with no eviction Event (nothing was admitted).
- A Job deleted on the manager while the worker running it does not answer (apiserver frozen): once the worker
  answers again, its remote Workload, remote Job and pods are all removed.
"""

from __future__ import annotations

import pytest

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


def _running_on(fed: Federation, job: str) -> str:
    worker = wait_for(
        lambda: worker_of(fed, job),
        until=lambda w: w is not None and bool(remote_copies(fed, job, live_only=True).get(w)),
        timeout=60,
        what=f"{job} running on a worker",
    )
    assert worker is not None
    return worker


def _inactive_and_withdrawn(fed: Federation, job: str) -> Obj:
    """Assert ``job``'s Workload is inactive, holds no quota and has no copy anywhere, and its Job is suspended."""
    workload = workload_of(fed, job)
    assert workload is not None, f"{job}'s Workload is gone"
    assert workload["spec"].get("active") is False, workload["spec"]
    assert not is_true(workload, "QuotaReserved"), workload["status"]
    assert not is_true(workload, "Admitted"), workload["status"]
    assert remote_copies(fed, job, live_only=True) == {}
    manager_job = get(fed, MANAGER, "job", job)
    assert manager_job is not None
    assert manager_job["spec"]["suspend"] is True
    return workload


def test_a_deactivated_workload_stays_inactive_across_manager_and_agent_restarts(federation: Federation) -> None:
    submit(federation, "deact-restart", cpu="1", seconds=120)
    worker = _running_on(federation, "deact-restart")
    workload = workload_of(federation, "deact-restart")
    assert workload is not None
    federation.kubectl(
        MANAGER,
        "patch",
        "workloads.kueue.x-k8s.io",
        workload["metadata"]["name"],
        "--type=merge",
        "-p",
        '{"spec":{"active":false}}',
    )
    wait_for(
        lambda: workload_of(federation, "deact-restart"),
        until=lambda wl: (
            wl is not None
            and not is_true(wl, "QuotaReserved")
            and is_true(wl, "Evicted")
            and remote_copies(federation, "deact-restart", live_only=True) == {}
        ),
        timeout=30,
        what="deact-restart withdrawn after its deactivation",
    )
    before = _inactive_and_withdrawn(federation, "deact-restart")

    # Stop both controllers together; each starts again when the block ends.
    with federation.stopped_controller("kfed-manager"), federation.stopped_controller(f"kfed-agent-{worker}"):
        pass

    # The restarted federation works (a new Job runs to completion through both controllers) ...
    submit(federation, "after-restart", cpu="1", seconds=2)
    wait_complete(federation, "after-restart", timeout=120)
    # ... and the deactivated Workload is exactly as it was: still inactive, nothing dispatched, no new Workload.
    after = _inactive_and_withdrawn(federation, "deact-restart")
    assert after["metadata"]["uid"] == before["metadata"]["uid"]
    evicted = condition(after, "Evicted")
    assert evicted is not None
    assert evicted["reason"] == "Deactivated"
    assert "deact-restart" not in {
        ref.get("name")
        for wl in items(federation, MANAGER, "workloads.kueue.x-k8s.io")
        if wl["metadata"]["uid"] != before["metadata"]["uid"]
        for ref in wl["metadata"].get("ownerReferences") or ()
    }, "a second Workload was made for the deactivated Job"


def test_a_job_deleted_while_its_worker_is_unreachable_leaves_nothing_behind_when_it_returns(
    federation: Federation,
) -> None:
    submit(federation, "deleted-away", cpu="1", seconds=120)
    worker = _running_on(federation, "deleted-away")
    workload = workload_of(federation, "deleted-away")
    assert workload is not None
    remote_name = workload["metadata"]["name"]
    wait_for(
        lambda: items(federation, worker, "pods", "-l", "job-name=deleted-away"),
        until=bool,
        timeout=60,
        what="deleted-away's pods on its worker",
    )

    with federation.paused(worker):
        federation.kubectl(MANAGER, "delete", "job", "deleted-away", "--wait=false")
        wait_for(
            lambda: (get(federation, MANAGER, "job", "deleted-away"), workload_of(federation, "deleted-away")),
            until=lambda pair: pair == (None, None),
            timeout=60,
            what="deleted-away's Job and Workload gone from the manager while its worker is frozen",
        )

    def leftovers() -> dict[str, int]:
        remote_workload = get(federation, worker, "workloads.kueue.x-k8s.io", remote_name)
        return {
            "workloads": int(remote_workload is not None),
            "jobs": int(get(federation, worker, "job", "deleted-away") is not None),
            "pods": len(items(federation, worker, "pods", "-l", "job-name=deleted-away")),
        }

    wait_for(
        leftovers,
        until=lambda left: sum(left.values()) == 0,
        timeout=90,
        what=f"deleted-away's remote Workload, Job and pods removed from {worker} after it answers again",
    )


def test_a_deactivated_workload_that_never_had_quota_is_marked_evicted(federation: Federation) -> None:
    submit(federation, "deact-pending", cpu="100000")  # more than every worker together: it waits
    name = wait_pending(federation, "deact-pending")["metadata"]["name"]
    federation.kubectl(
        MANAGER, "patch", "workloads.kueue.x-k8s.io", name, "--type=merge", "-p", '{"spec":{"active":false}}'
    )
    evicted = wait_for(
        lambda: condition(workload_of(federation, "deact-pending"), "Evicted"),
        until=lambda c: c is not None and c["status"] == "True",
        timeout=30,
        what="deact-pending's Workload to be marked Evicted",
    )
    assert evicted is not None
    assert (evicted["reason"], evicted["message"]) == ("Deactivated", "The workload is deactivated")
    events = items(federation, MANAGER, "events.events.k8s.io")
    assert not [e for e in events if e["regarding"]["name"] == name and e.get("reason", "").startswith("Evicted")]
    federation.kubectl(MANAGER, "delete", "job", "deact-pending", "--wait=false")
