"""ClusterQueue ``stopPolicy: HoldAndDrain`` on the manager drains what it admitted from the workers, and the
Jobs run again once the queue is started (issue: recovery, deliverable 4). The Workload's conditions say so in
Kueue's words: ``Evicted``/``Requeued=False`` reason ``ClusterQueueStopped`` while stopped, then ``Requeued=True``
reason ``ClusterQueueRestarted``."""

from __future__ import annotations

import json

import pytest

from e2e.queues import job_manifest, named_queue_objects
from e2e.rig.federation import MANAGER, Federation
from e2e.scenarios.helpers import condition, get, is_true, remote_copies, wait_complete, workload_of
from e2e.waiting import wait_for

pytestmark = pytest.mark.e2e

QUEUE = "drain-queue"


def _stop_policy(fed: Federation, policy: str) -> None:
    patch = json.dumps({"spec": {"stopPolicy": policy}})
    fed.kubectl(MANAGER, "patch", "clusterqueue", QUEUE, "--type=merge", "-p", patch)


def test_hold_and_drain_withdraws_running_jobs_and_starting_the_queue_runs_them_again(
    federation: Federation,
) -> None:
    for cluster in (MANAGER, *federation.workers):
        items = named_queue_objects(QUEUE, cpu="4", manager=cluster == MANAGER)
        federation.kubectl(
            cluster, "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
        )
    # long enough to be seen running: the manager mirrors a running Job's status within 5 s of its start
    manifest = job_manifest("drain", namespace="default", cpu="1", seconds=20, queue=QUEUE)
    federation.kubectl(MANAGER, "create", "-f", "-", input=json.dumps(manifest))
    wait_for(
        lambda: get(federation, MANAGER, "job", "drain"),
        until=lambda j: int(((j or {}).get("status") or {}).get("active", 0)) > 0,
        timeout=60,
        what="drain running",
    )
    _stop_policy(federation, "HoldAndDrain")
    try:
        drained = wait_for(
            lambda: workload_of(federation, "drain"),
            until=lambda wl: is_true(wl, "Evicted") and not is_true(wl, "QuotaReserved"),
            timeout=30,
            what="drain evicted and its quota released",
        )
        evicted = condition(drained, "Evicted")
        assert evicted is not None
        assert (evicted["reason"], evicted["message"]) == ("ClusterQueueStopped", "The ClusterQueue is stopped")
        requeued = condition(drained, "Requeued")
        assert requeued is not None
        assert (requeued["status"], requeued["reason"]) == ("False", "ClusterQueueStopped")
        assert remote_copies(federation, "drain", live_only=True) == {}
        job = get(federation, MANAGER, "job", "drain")
        assert job is not None
        assert job["spec"]["suspend"] is True
    finally:
        _stop_policy(federation, "None")
    restarted = wait_for(
        lambda: condition(workload_of(federation, "drain"), "Requeued") or {},
        until=lambda c: (c.get("status"), c.get("reason")) == ("True", "ClusterQueueRestarted"),
        timeout=30,
        what="Requeued=True reason ClusterQueueRestarted once the queue is started",
    )
    assert restarted["message"] == "The ClusterQueue was restarted after being stopped"
    wait_complete(federation, "drain", timeout=90)
